#!/usr/bin/env bash
# The main job: type-check the shipped examples (a clean model, then the bug
# gallery's diagnostics), then train the typed example on 4 local gloo ranks.
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
set -o pipefail
CONFIG=examples/mypy.ini

echo "== 1. The typed models check clean"
mypy --config-file "$CONFIG" examples/train_mlp.py examples/gpt

echo
echo "== 2. The bug gallery: each bug is reported at its line, each fixed twin is clean"
python -m scripts.show_bug_gallery "$CONFIG"

echo
echo "== 3. Train the typed GPT on 4 gloo ranks (2 dp x 2 tp) against a single-process reference"
python examples/gpt/train.py
