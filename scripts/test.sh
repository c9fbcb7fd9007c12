#!/usr/bin/env bash
# The whole test suite, on a fresh machine or a warm one.
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
exec python -m pytest "$@"
