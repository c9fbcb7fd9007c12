"""torchtitan 0.3.0 as installed, checked with the plugin: its models, its loss and its distributed helpers.

torchtitan writes its SPMD types for spmd_types, the runtime checker
(``spmd.assert_type(x, {"tp": spmd.R})``, ``register_autograd_function``
with ``typecheck_forward``, ``local_map``, ``redistribute``, ...), and
keeps most of its layouts as data.  The installed package is copied
(checked in place, site-packages would become a source root), nothing in
it is edited, and one strict mypy run with the plugin and the documented
config (``torchtitan/mypy.ini``) checks the modules below: llama3 and the
decoder blocks it is built from, the MoE models, the loss, and the
distributed helpers they call.  The test pins

* no SPMD finding on the code as shipped: no ``spmd-*`` error but strict
  mode's own kinds, and no mypy error about an SPMD type;
* the coverage (docs/third_party.md#torchtitan-030): per part, the
  tensor-valued expressions and how many have a known SPMD type, and every
  place a typed value becomes unknown, by module, function and kind;
* each of torchtitan's real bugs the static types can see, re-introduced
  into a copy of its module beside a fixed copy: exactly what the bug adds.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from spmd_mypy.migrate.thirdparty import installed_dir
from tests.third_party.checked_copy import function_at, module_path

HERE = Path(__file__).with_name("torchtitan")
CONFIG = HERE / "mypy.ini"
MEASURE = HERE / "measure.py"
PROJECT = Path(__file__).resolve().parents[2]

COMMON = "torchtitan.models.common"
# The parts the coverage is reported for, each the modules it is written in.
PARTS = {
    "llama3": [
        "torchtitan.models.llama3",
        *(f"torchtitan.models.llama3.{name}" for name in
          ("config_registry", "model", "parallelize", "sharding", "state_dict_adapter")),
        *(f"{COMMON}.{name}" for name in
          ("attention", "decoder", "decoder_sharding", "dist_gemm", "embedding", "feed_forward", "linear",
           "nn_modules", "param_init", "rope")),
    ],
    "moe": [f"{COMMON}.moe", f"{COMMON}.token_dispatcher", f"{COMMON}.moe_sharding",
            "torchtitan.models.gpt_oss.moe", "torchtitan.models.deepseek_v3.model"],
    "loss": ["torchtitan.components.loss"],
    "distributed": [f"torchtitan.distributed.{name}" for name in ("linear", "spmd_types", "parallel_dims")],
}
MODULES = [module for modules in PARTS.values() for module in modules]
PART_OF = {module: part for part, modules in PARTS.items() for module in modules}

# Strict mode's own kinds: where a typed value becomes unknown (the coverage's places and its neighbours).
STRICT_CODES = {"spmd-untyped-boundary", "spmd-unmodelled", "spmd-missing-axis", "spmd-untyped-collective"}
_SPMD_TYPE = re.compile(r"Tensor\[[^\]]*@")


@dataclass(frozen=True)
class Diagnostic:
    path: str
    line: int
    severity: str
    code: str
    message: str

    @property
    def about_spmd(self) -> bool:
        """An ``spmd-*`` code, or mypy's own error (``arg-type``, ``return-value``, ...) about an SPMD type."""
        return self.code.startswith("spmd") or bool(_SPMD_TYPE.search(self.message))


@dataclass(frozen=True)
class Measured:
    root: Path
    files: dict[str, str]
    """Path under ``root`` -> module."""
    diagnostics: list[Diagnostic]
    coverage: dict[str, Any]
    """``spmd-coverage --json``'s document."""


def module_file(module: str) -> str:
    """The module's file under a root holding the package (a package's is its ``__init__.py``)."""
    path = module_path(Path(), module)
    package = installed_dir("torchtitan").parent / path.with_suffix("")
    return str(path.with_suffix("") / "__init__.py" if package.is_dir() else path)


def copy_installed(root: Path) -> None:
    """The installed package, unchanged, under ``root/torchtitan``."""
    shutil.copytree(installed_dir("torchtitan"), root / "torchtitan", ignore=shutil.ignore_patterns("__pycache__"))


def measure(root: Path, files: dict[str, str], cache: Path) -> Measured:
    """One strict run of the plugin over ``files`` (``measure.py``): the diagnostics and the coverage."""
    shutil.copyfile(CONFIG, root / "mypy.ini")
    report = root / "report.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(MEASURE), "--config-file", "mypy.ini", "--cache-dir", str(cache),
                           "--json", str(report), *files], cwd=root, capture_output=True, text=True, env=env)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "Traceback" not in output and "INTERNAL ERROR" not in output, output[-4000:]
    data = json.loads(report.read_text())
    diagnostics = [Diagnostic(d["path"], d["line"], d["severity"], d["code"] or "", d["message"])
                   for d in data["diagnostics"]]
    return Measured(root, files, diagnostics, data["coverage"])


@dataclass(frozen=True)
class Bug:
    """One of torchtitan's bugs re-introduced into a copy of ``module``: ``edits`` are (upstream's text, the
    buggy text).  Its fixed twin is the module as shipped, checked beside it."""

    module: str
    edits: tuple[tuple[str, str], ...]
    found: tuple[tuple[str, str, str], ...]
    """What the checker reports: (function, code, a fragment of the message)."""


LOSS = "torchtitan.components.loss"
LOSS_BACKWARD = "_LossParallelCrossEntropy.backward"

BUGS = {
    # The vocab-parallel loss declared the same on every rank (R) instead of I: its backward would then
    # receive a pending sum over tp (P) where it scales each rank's logits gradient by the whole loss's.
    "loss_declared_replicated": Bug(
        LOSS,
        (("        output_type[tp_group] = spmd.I\n", "        output_type[tp_group] = spmd.R\n"),),
        ((LOSS_BACKWARD, "spmd-partial-affine",
          "where adds a Partial to a non-Partial operand on axis tp_group (P@tp_group + scalar)"),
         (LOSS_BACKWARD, "return-value",
          'got "tuple[Tensor[P@tp_group] | Tensor[Any], None, None, None, None]", '
          'expected "tuple[Tensor[V@tp_group], None, None, None, None]"')),
    ),
    # The logits asserted whole on every rank (R) instead of their vocab shard S(-1): the logits' gradient
    # must then be a pending sum (P), while the backward computes each rank's own vocab slice of it.
    "logits_declared_replicated": Bug(
        LOSS,
        (("        spmd.assert_type(logits, {tp_group: spmd.S(logits.dim() - 1)})\n",
          "        spmd.assert_type(logits, {tp_group: spmd.R})\n"),),
        ((LOSS_BACKWARD, "return-value",
          'got "tuple[Tensor[I@tp_group], None, None, None, None]", '
          'expected "tuple[Tensor[P@tp_group], None, None, None, None]"'),),
    ),
}


def patched(module: str, edits: tuple[tuple[str, str], ...]) -> str:
    code = (installed_dir("torchtitan").parent / module_file(module)).read_text()
    for upstream, changed in edits:
        assert code.count(upstream) == 1, f"{upstream!r} is not in {module} once"
        code = code.replace(upstream, changed)
    return code


def bug_module(name: str) -> str:
    """The module a bug's copy is checked as: beside its original (torchtitan imports absolutely)."""
    return f"{BUGS[name].module}_{name}"


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory, kept_dir: Callable[[str], Path]) -> Measured:
    root = tmp_path_factory.mktemp("torchtitan")
    copy_installed(root)
    files = {module_file(module): module for module in MODULES}
    for name, bug in BUGS.items():
        path = module_file(bug_module(name))
        (root / path).write_text(patched(bug.module, bug.edits))
        files[path] = bug_module(name)
    return measure(root, files, kept_dir("torchtitan-mypy"))


def test_the_checked_modules_are_the_installed_ones(checked: Measured) -> None:
    """No source change: what is checked is torchtitan as installed, byte for byte."""
    installed = installed_dir("torchtitan").parent
    for module in MODULES:
        assert (checked.root / module_file(module)).read_bytes() == (installed / module_file(module)).read_bytes()


def test_every_module_is_checked(checked: Measured) -> None:
    """mypy's own errors about torchtitan show its bodies were checked, and the coverage counts each module."""
    dispatcher = module_file(f"{COMMON}.token_dispatcher")
    assert any(d.path == dispatcher and d.code == "override" for d in checked.diagnostics)
    assert {m["module"] for m in checked.coverage["modules"]} >= set(MODULES)


def test_no_spmd_finding_on_torchtitan_as_shipped(checked: Measured) -> None:
    """Strict mode's places are pinned below; nothing else about SPMD types is reported."""
    found = [d for d in checked.diagnostics if d.severity == "error" and checked.files.get(d.path) in MODULES
             and d.about_spmd and d.code not in STRICT_CODES]
    assert found == []


def figures_by_part(coverage: dict[str, Any]) -> dict[str, tuple[int, int, int, int]]:
    """Per part: tensor-valued expressions, those with a known SPMD type, the functions holding any such
    expression and those holding one with a known type."""
    totals = {part: (0, 0, 0, 0) for part in PARTS}
    for module in coverage["modules"]:
        part = PART_OF.get(module["module"])
        if part is None:
            continue
        functions = [f for f in module["functions"] if f["expressions"]]
        expressions, known, counted, typed = totals[part]
        totals[part] = (expressions + module["expressions"], known + module["known"], counted + len(functions),
                        typed + sum(1 for f in functions if f["known"]))
    return totals


def places(coverage: dict[str, Any]) -> Counter[tuple[str, str, str, str | None]]:
    """The places in upstream's modules where a typed value becomes unknown: (module, function, kind, the
    callee or op the message names first)."""
    found: Counter[tuple[str, str, str, str | None]] = Counter()
    for place in coverage["places"]:
        if place["module"] in PART_OF:
            named = re.search(r"`([^`]+)`", place["message"])
            found[(place["module"], place["function"] or "", place["kind"], named and named.group(1))] += 1
    return found


# docs/third_party.md#torchtitan-030 (What is typed): per part, (tensor-valued expressions, those with a
# known SPMD type, functions with tensor-valued expressions, those with a known one).
EXPECTED_FIGURES = {"llama3": (594, 38, 47, 9), "moe": (372, 10, 33, 4), "loss": (263, 66, 19, 9),
                    "distributed": (125, 93, 13, 10)}

RETURNS_PLAIN = "return typed plain torch.Tensor"
UNCHECKED_LAYOUT = "layout the checker cannot follow"
# docs/third_party.md#torchtitan-030 (Where types die): the places strict mode reports, (module, function,
# kind, what the message names first).  Most types die where none enter: at the blocks' forward parameters,
# whose layouts are data (ShardingConfig) that no annotation states.
EXPECTED_PLACES = Counter({
    # The loss's I@tp (P@dp, P@cp, I@tp after its assert_type) leaves through plain torch.Tensor returns.
    (LOSS, "cross_entropy_loss", RETURNS_PLAIN, "cross_entropy_loss"): 2,
    (LOSS, "_cross_entropy_via_local_map._local_cross_entropy", RETURNS_PLAIN, "_local_cross_entropy"): 1,
    (LOSS, "BaseLoss.__call__", RETURNS_PLAIN, "__call__"): 1,
    (LOSS, "CrossEntropyLoss.__call__", RETURNS_PLAIN, "__call__"): 1,
    (LOSS, "compute_logprobs", RETURNS_PLAIN, "compute_logprobs"): 2,
    # The fused QKV's local_map body hands its asserted qkv to an unannotated nested function.
    (f"{COMMON}.attention", "FusedQKVLinear.forward", "unannotated parameter", "_split"): 1,
    # The varlen offsets, asserted V@dp, stored in a dataclass of plain tensors.
    (f"{COMMON}.attention", "create_varlen_metadata_for_document", "parameter typed plain torch.Tensor",
     "VarlenMetadata"): 1,
    (LOSS, "ChunkedLossWrapper.__call__", RETURNS_PLAIN, "__call__"): 1,
    # DTensor local_map regions whose placements are computed (pred.placements), not written out.
    (LOSS, "_cross_entropy_via_local_map", "untyped boundary", None): 1,
    (LOSS, "ChunkedLossWrapper.__call__._chunk", "untyped boundary", None): 1,
    (f"{COMMON}.attention", "FusedQKVLinear.forward", "untyped boundary", None): 1,
    # The token counts, declared V by the relabels in a loop over axes, passed to plain-tensor helpers.
    (f"{COMMON}.moe", "GroupedExperts.forward", "parameter typed plain torch.Tensor", "_grouped_mm"): 3,
    ("torchtitan.models.gpt_oss.moe", "GptOssGroupedExperts.forward", "parameter typed plain torch.Tensor",
     "_grouped_mm"): 2,
    (f"{COMMON}.token_dispatcher", "AllToAllTokenDispatcher.dispatch", "parameter typed plain torch.Tensor",
     "_token_count_exchange"): 1,
    (f"{COMMON}.token_dispatcher", "AllToAllTokenDispatcher.dispatch", "parameter typed plain torch.Tensor",
     "_sync_token_count_exchange"): 1,
    # Layouts the setters attach that no evaluated forward checks: the embedding's (Embedding.forward not
    # followed), the inner attention's local_map (its config's class unknown), the routed experts' region
    # (RoutedExperts.forward's result not known: combine's deterministic_scatter_add is not followed).
    (f"{COMMON}.decoder_sharding", "set_decoder_sharding_config", UNCHECKED_LAYOUT, None): 1,
    (f"{COMMON}.decoder_sharding", "set_gqa_inner_attention_local_map", UNCHECKED_LAYOUT, None): 1,
    (f"{COMMON}.moe_sharding", "", UNCHECKED_LAYOUT, None): 1,
    # A typecheck_forward whose types a run-time value chooses (spmd_mesh_size("ep") > 1): not read.
    ("torchtitan.models.gpt_oss.moe", "", "untyped boundary", "ScaleBiasForward.typecheck_forward"): 1,
})


def test_coverage_by_part(checked: Measured) -> None:
    """docs/third_party.md#torchtitan-030: how much of each part has known SPMD types."""
    assert figures_by_part(checked.coverage) == EXPECTED_FIGURES


def test_where_typed_values_become_unknown(checked: Measured) -> None:
    assert places(checked.coverage) == EXPECTED_PLACES


def spmd_findings(measured: Measured, module: str) -> Counter[tuple[str, str, str]]:
    """The SPMD findings in ``module`` but strict mode's own: (function, code, message)."""
    path = module_file(module)
    tree = ast.parse((measured.root / path).read_text())
    return Counter((function_at(tree, d.line), d.code, d.message) for d in measured.diagnostics
                   if d.path == path and d.severity == "error" and d.about_spmd and d.code not in STRICT_CODES)


@pytest.mark.parametrize("name", BUGS)
def test_each_bug_is_reported(checked: Measured, name: str) -> None:
    """Exactly what the bug causes, where its fixed twin (the module as shipped) has no finding."""
    bug = BUGS[name]
    assert spmd_findings(checked, bug.module) == Counter()
    found = list(spmd_findings(checked, bug_module(name)).elements())
    matches = [[f for f in found if f[:2] == expected[:2] and expected[2] in f[2]] for expected in bug.found]
    assert len(found) == len(bug.found) and all(len(m) == 1 for m in matches), found


DOCUMENTED_PARTS = {"llama3": "llama3", "moe": "MoE", "loss": "loss", "distributed": "distributed"}


def test_the_documented_coverage_is_the_pinned_one() -> None:
    """docs/third_party.md's torchtitan tables state the figures and the number of places pinned here."""
    page = (PROJECT / "docs" / "third_party.md").read_text()
    section = page[page.index("## torchtitan 0.3.0"):]
    rows = {line.split(" ", 2)[1]: line for line in section.splitlines() if line.startswith("| ")}
    for part, (expressions, known, functions, typed) in EXPECTED_FIGURES.items():
        assert (f"| {expressions} | {known} ({100 * known / expressions:.1f}%) | {typed} of {functions} |"
                in rows[DOCUMENTED_PARTS[part]])
    assert f"strict mode reports ({sum(EXPECTED_PLACES.values())}, each pinned by the test)" in " ".join(section.split())
