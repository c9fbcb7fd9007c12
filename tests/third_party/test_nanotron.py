"""nanotron 0.4's tensor parallelism, checked as its authors wrote it, typed at its boundaries only.

The installed package's ``parallel/tensor_parallel/`` and ``distributed.py``
are copied, and ``nanotron/annotations.patch`` (ours) types the signatures
of its autograd Functions, its public functions and its layers
(docs/porting.md#7-hand-written-autograd-functions-nanotron): no Function
body changes.  Beside the copy, each bug below is one module, a copy of the
annotated one with the bug re-introduced.  ``spmd-check`` runs mypy with the
plugin once over all of them, in nanotron's two modes, and the test pins

* the annotated upstream: no SPMD finding, neither an ``spmd-*`` code nor a
  mypy error about an SPMD type (mypy's own errors about nanotron stay, as
  without the plugin);
* each bug: exactly the findings it causes, where they are, with their code
  and axis.
"""

from __future__ import annotations

import ast
import configparser
import io
import json
import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from spmd_mypy.migrate.thirdparty import installed_dir, mypy_config
from tests.third_party.checked_copy import function_at

ANNOTATIONS = Path(__file__).with_name("nanotron") / "annotations.patch"
TENSOR_PARALLEL = "nanotron/parallel/tensor_parallel"
UPSTREAM = [f"{TENSOR_PARALLEL}/{name}.py" for name in ("distributed_differentiable_primitives", "functional", "nn", "enum")]
UPSTREAM.append("nanotron/distributed.py")

SETTINGS = {
    # nanotron.distributed's wrappers, the collectives its Functions call, are torch's.
    "collectives": "nanotron.distributed.all_gather_into_tensor: torch.distributed.all_gather_into_tensor, "
                   "nanotron.distributed.reduce_scatter_tensor: torch.distributed.reduce_scatter_tensor",
    # The two modes; the row-parallel layer refuses asynchronous communication with ALL_REDUCE.
    "configurations": "\nall_reduce: tp_mode = TensorParallelLinearMode.ALL_REDUCE, async_communication = false"
                      "\nreduce_scatter: tp_mode = TensorParallelLinearMode.REDUCE_SCATTER",
}
BOTH = "all_reduce, reduce_scatter"


@dataclass(frozen=True)
class Bug:
    """A bug re-introduced into a copy of one annotated module: ``edits`` are (its text, the buggy text)."""

    module: str
    edits: tuple[tuple[str, str], ...]
    found: tuple[tuple[str, str, str, str], ...]
    """What the checker reports: (function, code, configurations, a fragment of the message)."""


BUGS = {
    # The copy into the tensor-parallel region dropped: the column-parallel weight's
    # gradient is right, the input's lacks the other ranks' terms.
    "missing_identity": Bug(
        "functional",
        (("        input = differentiable_identity(input, group=group)\n", "        pass\n"),),
        (("column_linear", "spmd-invariant-mix", "all_reduce", "linear mixes Invariant with Varying on axis tp"),),
    ),
    # The copy's backward without its all-reduce: each rank keeps its own part of the input's gradient.
    "backward_without_all_reduce": Bug(
        "distributed_differentiable_primitives",
        (("        return DifferentiableAllReduceSum.apply(grad_output, group), None\n",
          "        return grad_output, None\n"),),
        (("DifferentiableIdentity.backward", "return-value", BOTH,
          'got "tuple[Tensor[P@tp], None]", expected "tuple[Tensor[I@tp], None]"'),),
    ),
    # Every rank holds the whole bias (upstream gives it to rank 0 only) and linear adds it before
    # the reduction: the output carries tp times the bias.
    "bias_before_reduction": Bug(
        "functional",
        (("    bias: Optional[Tensor[V@tp]],  # rank 0's bias, None on the others: one part of the sum\n",
          "    bias: Optional[Tensor[I@tp]],  # the whole bias, on every rank\n"),),
        (("row_linear", "spmd-invariant-mix", BOTH, "linear mixes Invariant with Varying on axis tp (V@tp, I@tp)"),
         # The asynchronous Function declares rank 0's bias.
         ("row_linear", "arg-type", "reduce_scatter",
          'Argument 3 to "apply" of "_RowLinearAsyncCommunication" has incompatible type "Tensor[I@tp] | None"; '
          'expected "Tensor[V@tp] | None"')),
    ),
    # Rank 0's bias moved after the reduction: only rank 0's output has it.  With REDUCE_SCATTER it
    # meets rank 0's slice of the sequence, which is as wrong and not found: declared V (a value of
    # each rank's own), the bias cannot say that only their sum is meant.
    "bias_after_reduction": Bug(
        "functional",
        (("    out = F.linear(input, weight, bias)\n", "    out = F.linear(input, weight)\n"),
         ("\n    return out\n", "\n    if bias is not None:\n        out = out + bias\n    return out\n")),
        (("row_linear", "spmd-invariant-mix", "all_reduce", "add mixes Invariant with Varying on axis tp"),),
    ),
    # The modes' reductions swapped in the row-parallel linear: each mode returns the other's layout.
    "swapped_mode": Bug(
        "functional",
        (("        out = differentiable_all_reduce_sum(out, group=group)\n"
          "    elif tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:\n"
          "        out = differentiable_reduce_scatter_sum(out, group=group)\n",
          "        out = differentiable_reduce_scatter_sum(out, group=group)\n"
          "    elif tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:\n"
          "        out = differentiable_all_reduce_sum(out, group=group)\n"),),
        (("row_linear", "return-value", "all_reduce", 'expected "Tensor[I@tp]"'),
         ("row_linear", "return-value", "reduce_scatter", 'got "Tensor[I@tp]", expected "Tensor[S(0)@tp]"')),
    ),
}

_SPMD_TYPE = re.compile(r"Tensor\[[^\]]*@")


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    code: str
    message: str
    configurations: str

    @property
    def about_spmd(self) -> bool:
        """An ``spmd-*`` code, or mypy's own error (``return-value``, ``arg-type``, ...) about an SPMD type."""
        return self.code.startswith("spmd") or bool(_SPMD_TYPE.search(self.message))


def copy_upstream(root: Path) -> None:
    """nanotron's tensor-parallel modules copied from the installed package, as the package ``nanotron``."""
    installed = installed_dir("nanotron")
    for module in UPSTREAM:
        target = root / module
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((installed.parent / module).read_text())
    # Empty package markers, so that mypy names the copies nanotron.* (nanotron's own import modules
    # that are not copied).
    for package in ("nanotron", "nanotron/parallel"):
        (root / package / "__init__.py").write_text("")
    # The ceiling keeps git from taking ``root`` for a directory of a repository above it.
    subprocess.run(["git", "apply", str(ANNOTATIONS)], cwd=root, check=True,
                   env={**os.environ, "GIT_CEILING_DIRECTORIES": str(root.parent)})


def write_bug(root: Path, name: str, bug: Bug) -> Path:
    code = (root / TENSOR_PARALLEL / f"{bug.module}.py").read_text()
    for upstream, buggy in bug.edits:
        assert code.count(upstream) == 1, f"{name}: {upstream!r} is not in {bug.module} once"
        code = code.replace(upstream, buggy)
    path = root / "bugs" / f"{name}.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(code)
    return path


def spmd_check(root: Path, files: list[Path], cache: Path) -> list[Finding]:
    """``spmd-check`` over ``files`` (under ``root``) with :data:`SETTINGS`: the errors, each once."""
    config = configparser.ConfigParser()
    config.read_string(mypy_config(root, ["nanotron"]))
    config["spmd_mypy"] = SETTINGS
    text = io.StringIO()
    config.write(text)
    (root / "mypy.ini").write_text(text.getvalue())
    command = [sys.executable, "-m", "spmd_mypy.configurations.cli", "--config-file", "mypy.ini", "--cache-dir",
               str(cache), "-O", "json", *(str(f.relative_to(root)) for f in files)]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True)
    assert done.returncode in (0, 1) and "Traceback" not in done.stdout + done.stderr, done.stdout[-3000:] + done.stderr
    reports = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return [Finding(r["file"], r["line"], r["code"] or "", r["message"], ", ".join(r["configurations"]))
            for r in reports if r["severity"] == "error"]


@pytest.fixture(scope="module")
def checked(tmp_path_factory, kept_dir):
    root = tmp_path_factory.mktemp("nanotron")
    copy_upstream(root)
    bugs = {name: write_bug(root, name, bug) for name, bug in BUGS.items()}
    files = [root / module for module in UPSTREAM] + list(bugs.values())
    return root, bugs, spmd_check(root, files, kept_dir("nanotron-mypy"))


def test_nanotron_is_checked(checked):
    """mypy's own errors about nanotron (not about SPMD types) show that the modules were checked."""
    findings = checked[2]
    assert any(f.path.endswith("functional.py") and f.code == "no-redef" for f in findings), findings


def function_bodies(source: str) -> dict[str, str]:
    """Each function's body, by its dotted name, as its syntax tree prints (without positions)."""
    found: dict[str, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found[prefix + child.name] = ast.dump(ast.Module(body=child.body, type_ignores=[]))

    visit(ast.parse(source), "")
    return found


def test_the_annotations_change_no_body(checked):
    root = checked[0]
    for module in UPSTREAM:
        upstream = (installed_dir("nanotron").parent / module).read_text()
        assert function_bodies((root / module).read_text()) == function_bodies(upstream), module


def test_the_annotated_upstream_has_no_spmd_finding(checked):
    findings = checked[2]
    assert [f for f in findings if f.path.startswith("nanotron/") and f.about_spmd] == []


def spmd_findings(findings: list[Finding], root: Path, module: Path) -> Counter[tuple[str, str, str, str]]:
    """The SPMD findings in ``module``: (function, code, configurations, message), without line numbers."""
    tree = ast.parse(module.read_text())
    return Counter((function_at(tree, f.line), f.code, f.configurations, f.message) for f in findings
                   if root / f.path == module and f.about_spmd)


@pytest.mark.parametrize("name", BUGS)
def test_each_bug_is_reported(checked, name: str) -> None:
    """What the bug adds to the findings of the module it is re-introduced into (none: the test above)."""
    root, bugs, findings = checked
    upstream = spmd_findings(findings, root, root / TENSOR_PARALLEL / f"{BUGS[name].module}.py")
    added = list((spmd_findings(findings, root, bugs[name]) - upstream).elements())
    expected = BUGS[name].found
    matches = [[a for a in added if a[:3] == e[:3] and e[3] in a[3]] for e in expected]
    assert len(added) == len(expected) and all(len(m) == 1 for m in matches), added
