#!/usr/bin/env bash
# The main job: type-check the shipped examples (the clean models, then the
# bug gallery bug by bug), then train the typed GPT and the typed mixture of
# experts on 4 local gloo ranks each, and run the torch parallelize_module plan
# example on 4 more.
# Each step is a function run by `step`, which numbers it, times it and
# adds it to the summary at the end; a new step is one more `step` line.
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
CONFIG=examples/mypy.ini  # the recommended config, plus the GPT's two configurations (a plain run checks the first)
TYPED=(examples/gpt examples/moe examples/ring_attention examples/train_mlp.py examples/global_mlp.py examples/vocab_parallel_softmax.py)
PLAN=examples/dtensor_plan  # a llama block and its torch parallelize_module plan: plain torch, no SPMD types
# spmd-check keeps a cache per configuration; the single-configuration runs (coverage, the gallery) share
# the first configuration's, the one a plain run checks, so torch is analysed once
FIRST_CACHE=.mypy_cache/configurations/sp

SUMMARY=()
CURRENT=""
now_us() { echo "${EPOCHREALTIME/./}"; }  # microseconds, no external tool
seconds_since() {  # seconds_since START_US: the time since START_US, as 12.3
    local tenths=$((($(now_us) - $1) / 100000))
    echo "$((tenths / 10)).$((tenths % 10))"
}
step() {  # step TITLE COMMAND...: run one numbered step and time it
    CURRENT="$1"
    shift
    echo
    echo "== $((${#SUMMARY[@]} + 1)). $CURRENT"
    local start
    start=$(now_us)
    "$@"
    local took
    took=$(seconds_since "$start")
    echo "(step $((${#SUMMARY[@]} + 1)): $took s)"
    SUMMARY+=("$(printf '%7s s  %s' "$took" "$CURRENT")")
    CURRENT=""
}
summary() {
    echo
    echo "== Summary"
    printf '%s\n' "${SUMMARY[@]}"
    if [ -n "$CURRENT" ]; then
        echo "FAILED at step $((${#SUMMARY[@]} + 1)): $CURRENT"
    else
        echo "all ${#SUMMARY[@]} steps passed"
    fi
}
trap summary EXIT

typed_models_check_clean() {
    if [ ! -d "$FIRST_CACHE" ]; then
        echo "(no mypy cache yet: the first check analyses torch, about 20 s; the other configuration starts from its cache)"
    fi
    # every configuration of examples/mypy.ini: the GPT's layers with sequence parallelism on and off
    spmd-check --config-file "$CONFIG" "${TYPED[@]}"
    echo "...and how much of them has known SPMD types (docs/checker.md#coverage-where-do-types-die)"
    spmd-coverage --config-file "$CONFIG" --cache-dir "$FIRST_CACHE" --top 3 "${TYPED[@]}"
}

bug_gallery() {
    python scripts/check_gallery.py --config-file "$CONFIG" --cache-dir "$FIRST_CACHE" examples/bugs
}

train_gpt() {
    python examples/gpt/train.py
}

train_moe() {
    python examples/moe/train_moe.py --steps 2
}

plan_example() {
    # no run-time flag: a plain run (the first configuration) checks it, from that configuration's cache
    mypy --config-file "$CONFIG" --cache-dir "$FIRST_CACHE" "$PLAN"
    python "$PLAN/run_plan.py"
}

step "The typed models check clean in every configuration (sequence parallelism on and off)" typed_models_check_clean
step "The bug gallery (docs/bugs.md): each bug reported at its line, each fixed twin clean" bug_gallery
step "Train the typed GPT on 4 gloo ranks (2 dp x 2 tp) against a single-process reference" train_gpt
step "Train the typed mixture of experts on 4 gloo ranks (2 ep x 2 tp) against a single-process reference" train_moe
step "The parallelize_module plan example (a llama block) checks clean and matches a single-process reference on 4 gloo ranks" plan_example
