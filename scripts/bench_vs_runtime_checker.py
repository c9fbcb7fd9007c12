"""Static (mypy + spmd plugin) vs runtime (PyPI ``spmd-types==0.3.1``) checking.

One small tensor-parallel MLP (column- then row-parallel linear on ``tp``,
SP off) is written twice with the same lines: typed for our checker, and in
``spmd_types``' API (``assert_type`` on the inputs, its collectives) for its
runtime checker, which must execute the forward and backward under a fake
process group (its inputs are typed I on dp too: it needs every mesh axis).
Each bug of :data:`BUGS` is injected into both; the last one
sits in a branch the run does not take.

Measured, side by side:

* which bugs each tool reports;
* time to the error: the runtime checker's whole process (python, torch,
  fake process group, the checked run) and its checked run alone; ours as a
  warm mypy run and as a dmypy recheck after the edit that injects the bug.

    python scripts/bench_vs_runtime_checker.py [--repeat 3]

``spmd-types`` is installed with ``pip install --no-deps --target`` into a
directory of its own (under the temp dir, on first use), not into the venv.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNTIME_CHECKER = "spmd-types==0.3.1"
TARGET = Path(tempfile.gettempdir()) / "spmd_types_0.3.1"

# The model's lines; a bug replaces one of them.
LINES = {
    "entry": "h = spmd.convert(x, tp, src=I, dst=R)",
    "hidden": "a = F.gelu(h @ w1.T)",
    "partial": "y = spmd.reinterpret(a @ w2.T, tp, src=V, dst=P)",
    "exit": "out = spmd.all_reduce(y, tp, src=P, dst=I) + b2",
    "loss": "loss = (out * out).sum()",
}
BUGS = {
    "missing copy_to (I used as R)": ("entry", "h = x"),
    "P * P": ("exit", "out = spmd.all_reduce(y * y, tp, src=P, dst=I) + b2"),
    "nonlinear op on P": ("exit", "out = spmd.all_reduce(F.gelu(y), tp, src=P, dst=I) + b2"),
    "bias added before the reduction": ("exit", "out = spmd.all_reduce(y + spmd.convert(b2, tp, src=I, dst=R), tp, src=P, dst=I)"),
    "replicate loss (all_reduce dst=R)": ("exit", "out = spmd.all_reduce(y, tp, src=P, dst=R) + spmd.convert(b2, tp, src=I, dst=R)"),
    "bias before the reduction, in an untaken branch": (
        "exit",
        "out = spmd.all_reduce(y + spmd.convert(b2, tp, src=I, dst=R), tp, src=P, dst=I) if bias_first else spmd.all_reduce(y, tp, src=P, dst=I) + b2",
    ),
}

TYPED = '''import torch
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import tp


def train_step(x: Tensor[I@tp], w1: Tensor[S(0)@tp], w2: Tensor[S(1)@tp], b2: Tensor[I@tp], bias_first: bool) -> None:
{body}
    loss.backward()
'''

RUNTIME = '''import sys
import time

start = time.perf_counter()
sys.path.insert(0, {target!r})
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.testing._internal.distributed.fake_pg import FakeStore

import spmd_types as spmd
import spmd_types.checker
from spmd_types import I, P, R, V

dist.init_process_group("fake", rank=0, world_size=4, store=FakeStore())
mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
tp, dp = mesh.get_group("tp"), mesh.get_group("dp")
x, w1, w2, b2 = (torch.randn(*s, requires_grad=True) for s in ((4, 6), (4, 6), (6, 4), (6,)))
bias_first = False
checked = time.perf_counter()
try:
    with spmd.set_current_mesh(mesh), spmd_types.checker.typecheck(local=True):
        spmd.assert_type(x, {{tp: I, dp: I}})
        spmd.assert_type(w1, {{tp: V, dp: I}})
        spmd.assert_type(w2, {{tp: V, dp: I}})
        spmd.assert_type(b2, {{tp: I, dp: I}})
{body}
        loss.backward()
    verdict = "clean"
except spmd.SpmdTypeError as err:
    verdict = "ERROR " + str(err).splitlines()[0]
end = time.perf_counter()
print(f"RESULT {{end - checked:.4f}} {{end - start:.4f}} {{verdict}}")
'''


def model_body(bug: str | None, indent: str) -> str:
    lines = dict(LINES)
    if bug is not None:
        key, line = BUGS[bug]
        lines[key] = line
    return "\n".join(indent + line for line in lines.values())


def ensure_runtime_checker() -> None:
    if not (TARGET / "spmd_types").is_dir():
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(TARGET), RUNTIME_CHECKER], check=True)


# --------------------------------------------------------------------------
# The runtime checker
# --------------------------------------------------------------------------


def run_runtime_checker(bug: str | None, directory: Path) -> tuple[float, float, str]:
    """(checked run s, whole process s, verdict) of spmd_types on the model."""
    script = directory / "runtime_model.py"
    script.write_text(RUNTIME.format(target=str(TARGET), body=model_body(bug, " " * 8)))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=directory)
    whole = time.perf_counter() - start
    match = re.search(r"^RESULT (\S+) \S+ (.*)$", proc.stdout, re.M)
    if match is None:
        raise SystemExit(f"the runtime checker's run failed:\n{proc.stdout}{proc.stderr[-3000:]}")
    return float(match[1]), whole, match[2]


# --------------------------------------------------------------------------
# Ours
# --------------------------------------------------------------------------


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def write_typed(directory: Path, bug: str | None) -> Path:
    path = directory / "typed_model.py"
    path.write_text(TYPED.format(body=model_body(bug, " " * 4)))
    return path


def mypy(directory: Path, path: Path) -> tuple[float, str]:
    """A mypy run on the typed model: seconds and its spmd error codes."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(directory / "mypy.ini"), "--cache-dir", str(directory / ".cache"), str(path)],
        capture_output=True, text=True, cwd=directory, env=_env(),
    )
    return time.perf_counter() - start, _codes(proc.stdout)


def _codes(output: str) -> str:
    return ",".join(sorted(set(re.findall(r"\[(spmd[\w-]*)\]", output)))) or "clean"


def dmypy_recheck(directory: Path, bug: str, repeat: int) -> float:
    """Median seconds of a dmypy check after the edit that injects ``bug`` into the clean model."""
    dmypy = [sys.executable, "-m", "mypy.dmypy", "--status-file", str(directory / ".dmypy.json")]
    subprocess.run([*dmypy, "start", "--", "--config-file", str(directory / "mypy.ini")], cwd=directory, env=_env(), check=True, capture_output=True)
    try:
        times = []
        for _ in range(repeat):
            path = write_typed(directory, None)
            subprocess.run([*dmypy, "check", str(path)], cwd=directory, env=_env(), capture_output=True)
            write_typed(directory, bug)
            start = time.perf_counter()
            subprocess.run([*dmypy, "check", str(path)], cwd=directory, env=_env(), capture_output=True)
            times.append(time.perf_counter() - start)
        return statistics.median(times)
    finally:
        subprocess.run([*dmypy, "stop"], cwd=directory, env=_env(), capture_output=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    ensure_runtime_checker()
    directory = Path(tempfile.mkdtemp(prefix="spmd_vs_"))
    (directory / "mypy.ini").write_text("[mypy]\nplugins = spmd_mypy\npython_version = 3.11\n")
    mypy(directory, write_typed(directory, None))  # fills the cache (torch)
    print(f"{'bug':<50} {'ours (mypy+plugin)':<34} {'warm s':>7} {'dmypy s':>8} | {'spmd-types 0.3.1 (runtime)':<60} {'run s':>6} {'process s':>9}")
    for bug in [None, *BUGS]:
        warm = statistics.median(mypy(directory, write_typed(directory, bug))[0] for _ in range(args.repeat))
        _, ours = mypy(directory, write_typed(directory, bug))
        recheck = dmypy_recheck(directory, bug, args.repeat) if bug else float("nan")
        runs = [run_runtime_checker(bug, directory) for _ in range(args.repeat)]
        run_s, whole_s, verdict = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), runs[0][2]
        print(f"{bug or '(clean model)':<50} {ours:<34} {warm:7.2f} {recheck:8.2f} | {verdict[:60]:<60} {run_s:6.3f} {whole_s:9.2f}", flush=True)
    shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
