"""The runtime benchmark scripts stay runnable: each at a tiny size, its table printed (no timing is asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
RATIO = r"\d+\.\d{3}"
STEADY_MALLOC = "glibc malloc: mmap threshold fixed at 256 MiB"
"""What the scripts report having done first on this (glibc) machine: ``scripts/steady_malloc.py``."""


def _run(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / script), *args], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_bench_step_prints_both_ratios_and_equal_gradients() -> None:
    out = _run("bench_step.py", "--blocks", "1", "--steps-per-block", "1")
    for sp in ("off", "on"):
        row = re.search(rf"^\| 2 dp x 2 tp, SP {sp} \|.*\| ({RATIO}) \|.*\| ({RATIO}) \| (\S+) \|$", out, re.M)
        assert row is not None, out
        assert float(row.group(3)) == 0.0, f"typed and raw gradients differ: {row.group(0)}"


def test_bench_step_runs_rank_0_alone_on_the_fake_backend() -> None:
    out = _run("bench_step.py", "--fake", "--blocks", "1", "--steps-per-block", "1")
    assert "rank 0 alone on the fake process group" in out.splitlines()[0], out
    assert STEADY_MALLOC in out.splitlines()[0], out
    for sp in ("off", "on"):
        assert re.search(rf"^\| 2 dp x 2 tp, SP {sp} \|.*\| ({RATIO}) \|.*\| ({RATIO}) \| \S+ \|$", out, re.M), out


COLLECTIVES = ("all_reduce", "all_reduce_", "all_gather", "reduce_scatter", "all_to_all", "uneven all_to_all")
LAYERS = ("its src and dst made beforehand", "its site, made beforehand", "its group call")


def _layers_of(op: str) -> tuple[str, ...]:
    """The uneven exchange's src and dst (V) are made once either way: it has no such row."""
    return LAYERS[1:] if op.startswith("uneven") else LAYERS


def test_bench_collectives_prints_wall_and_cpu_ratios() -> None:
    out = _run("bench_collectives.py", "--rounds", "1", "--max-size", "1024", "--control", "--layers")
    assert STEADY_MALLOC in out.splitlines()[0], out
    layers = [f"{op}: {layer}" for op in COLLECTIVES for layer in _layers_of(op)]
    for op in (*COLLECTIVES, *layers, "control: raw all_reduce_ vs itself"):
        assert re.search(rf"^\| {op} \| 1 KiB \|.*\| {RATIO} \|.*\| {RATIO} \|$", out, re.M), out


def test_bench_collectives_times_layers_on_real_ranks_only() -> None:
    done = subprocess.run([sys.executable, str(SCRIPTS / "bench_collectives.py"), "--simulated", "--layers"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and "--layers times the group calls of real ranks" in done.stderr, done.stderr


def test_bench_collectives_runs_in_the_simulated_world() -> None:
    out = _run("bench_collectives.py", "--simulated", "--rounds", "1", "--max-size", "1024")
    assert out.startswith("simulated world of 4 ranks, cpu tensors;"), out
    for op in COLLECTIVES:
        assert re.search(rf"^\| {op} \| 1 KiB \|.*\| {RATIO} \|.*\| {RATIO} \|$", out, re.M), out


def test_bench_call_overhead_prints_every_call() -> None:
    out = _run("bench_call_overhead.py", "--calls", "5", "--rounds", "1")
    rows = [line for line in out.splitlines() if re.match(r"^\| \w+\(.*\) \| [\d.]+ \| [\d.]+ \| [+-][\d.]+ \|$", line)]
    assert len(rows) == 8, out
