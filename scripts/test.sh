#!/usr/bin/env bash
# The whole test suite, on a fresh machine or a warm one.
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
# Both cores: the mypy runs and the gloo worlds share nothing but lock-guarded caches.
exec python -m pytest -n 2 "$@"
