#!/usr/bin/env bash
# The main job: type-check the shipped examples (the clean models, then the
# bug gallery's diagnostics), then train the typed GPT on 4 local gloo ranks.
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
CONFIG=spmd_mypy/recommended.ini

echo "== 1. The typed models check clean"
TYPED=(examples/gpt examples/train_mlp.py examples/global_mlp.py examples/vocab_parallel_softmax.py)
mypy --config-file "$CONFIG" "${TYPED[@]}"
echo "...and how much of them has known SPMD types (docs/checker.md#coverage-where-do-types-die)"
spmd-coverage --config-file "$CONFIG" --top 3 "${TYPED[@]}"

echo
echo "== 2. The bug gallery (docs/bugs.md): every bug is reported..."
if mypy --config-file "$CONFIG" examples/bugs/*_bug.py; then
    echo "expected the checker to report the gallery's bugs" >&2
    exit 1
fi
echo "...and every fixed twin checks clean"
mypy --config-file "$CONFIG" examples/bugs/*_fixed.py

echo
echo "== 3. Train the typed GPT on 4 gloo ranks (2 dp x 2 tp) against a single-process reference"
python examples/gpt/train.py
