"""megatron-core 0.16.1's mixture of experts, typed by the shipped overlay and checked as installed.

The installed modules of ``megatron.core.transformer.moe`` (the all-to-all
token dispatcher, the top-k router and its load-balancing loss, the
experts, the shared experts, the layer, and the permutation and loss
helpers of ``moe_utils``) are copied, annotated with the shipped overlay
(``spmd_mypy/overlays/megatron_core.toml``) and migrated, and one strict
mypy run with the plugin (``measure.py``: diagnostics and coverage from the
same run) checks them in the sequence-parallel configuration MoE trains in.
The test pins, as docs/third_party.md#mixture-of-experts states them:

* every SPMD diagnostic but strict mode's own kinds, each with its verdict
  (a true finding, or a false positive and its cause);
* every place a typed value becomes unknown (strict mode), per function and kind;
* the coverage: per module, the tensor-valued expressions and how many have
  a known SPMD type.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Callable

import pytest

from spmd_mypy.migrate.overlay import load_overlays, shipped_overlays
from spmd_mypy.migrate.thirdparty import mypy_config
from tests.third_party.checked_copy import function_at, installed_source, write_checked
from tests.third_party.test_torchtitan import MEASURE, PROJECT, STRICT_CODES, Diagnostic, Measured

MOE = "megatron.core.transformer.moe"
DISPATCHER = f"{MOE}.token_dispatcher"
ROUTER = f"{MOE}.router"
EXPERTS = f"{MOE}.experts"
SHARED = f"{MOE}.shared_experts"
LAYER = f"{MOE}.moe_layer"
UTILS = f"{MOE}.moe_utils"
MODULES = [DISPATCHER, ROUTER, EXPERTS, SHARED, LAYER, UTILS]
# Checked beside them for their types only: MLP.forward (the shared experts' base class) and apply_module
# (MoELayer.route's call of the router).
SUPPORT = ["megatron.core.transformer.mlp", "megatron.core.typed_torch"]

# MoE trains with sequence parallelism where tp > 1 (MoELayer.forward refuses otherwise): mlp.py's types,
# chosen by the flag, are its; the MoE overlay's are written for it.
CONFIGURATIONS = "sp: sequence_parallel = true"
# The classes MoELayer's sub-modules are at run time: the router and experts its spec builds without
# Transformer Engine (get_moe_module_spec: TopKRouter, SequentialMLP), the dispatcher of
# moe_token_dispatcher_type="alltoall" (one of three built under an if), the shared experts.
SUBMODULES = {
    f"{LAYER}.MoELayer.router": f"{ROUTER}.TopKRouter",
    f"{LAYER}.MoELayer.token_dispatcher": f"{DISPATCHER}.MoEAlltoAllTokenDispatcher",
    f"{LAYER}.MoELayer.experts": f"{EXPERTS}.SequentialMLP",
    f"{LAYER}.MoELayer.shared_experts": f"{SHARED}.SharedExpertMLP",
}


def measure(root: Path, files: dict[str, str], cache: Path) -> Measured:
    """One strict run of the plugin over ``files`` (``measure.py``): the diagnostics and the coverage."""
    modules = "\n".join(f"{owner}: {cls}" for owner, cls in SUBMODULES.items())
    (root / "mypy.ini").write_text(mypy_config(root, ["megatron"], CONFIGURATIONS, modules, strict=True))
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


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory, kept_dir: Callable[[str], Path]) -> Measured:
    root = tmp_path_factory.mktemp("megatron_moe")
    overlays = load_overlays(list(shipped_overlays().values()))
    files = {str(write_checked(root, module, installed_source(module), overlays).relative_to(root)): module
             for module in MODULES + SUPPORT}
    return measure(root, files, kept_dir("megatron-moe-mypy"))


def per_function(measured: Measured, wanted: Callable[[Diagnostic], bool]) -> Counter[tuple[str, str, str, str]]:
    """The ``wanted`` errors in the MoE modules: (module, function, code, message), one per line."""
    trees = {path: ast.parse((measured.root / path).read_text()) for path, module in measured.files.items()
             if module in MODULES}
    lines = {(d.path, d.line, d.code, d.message) for d in measured.diagnostics
             if d.severity == "error" and d.path in trees and wanted(d)}
    return Counter((measured.files[path], function_at(trees[path], line), code, message)
                   for path, line, code, message in lines)


def test_every_module_is_checked(checked: Measured) -> None:
    """mypy's own errors about upstream's code show the bodies were checked; the coverage counts each module."""
    assert {checked.files[d.path] for d in checked.diagnostics if d.code in ("union-attr", "assignment")} >= {
        DISPATCHER, LAYER, SHARED}
    assert {m["module"] for m in checked.coverage["modules"]} >= set(MODULES)


def strict_site(d: Diagnostic) -> bool:
    return d.code in STRICT_CODES


def findings(measured: Measured) -> Counter[tuple[str, str, str, str]]:
    """Every SPMD diagnostic but strict mode's own kinds: ``spmd-*`` errors and mypy's errors about an SPMD type."""
    return per_function(measured, lambda d: d.about_spmd and not strict_site(d))


def unknown_places(measured: Measured) -> Counter[tuple[str, str, str, str | None, str | None]]:
    """Strict mode's places, one per line: (module, function, code, what takes or returns the value, the kind)."""
    places: Counter[tuple[str, str, str, str | None, str | None]] = Counter()
    for (module, function, code, message), count in per_function(measured, strict_site).items():
        named = re.match(r"`([\w.]+)`", message)
        kind = re.search(r"lost at (.*)$", message)
        places[(module, function, code, named and named.group(1), kind and kind.group(1))] += count
    return places


NO_GATE = 'Incompatible types in assignment (expression has type "None", variable has type "Tensor[R@tp]")'
SET_LATER = 'Incompatible types in assignment (expression has type "Tensor[R@tp]", variable has type "None")'
SORTED_PROBS = (
    'Incompatible return value type (got "tuple[Tensor[V@ep, R@tp] | Any | Tensor[Any], Tensor[Any], '
    'Tensor[V@ep, R@tp] | Any | Tensor[Any] | None]", expected '
    '"tuple[Tensor[V@ep, R@tp], Tensor[V@ep, R@tp], Tensor[V@ep, R@tp]]")')
DEEPEP = "_DeepepManager.get_permuted_hidden_states_by_experts"

# docs/third_party.md#mixture-of-experts: every SPMD diagnostic but strict mode's places, with its verdict.
# (module, function, code, message) -> count.  No SPMD finding, true or false: the dispatcher's exchanges,
# gathers and reductions, the router's and the losses' bodies agree with their types.
EXPECTED_FINDINGS = Counter({
    # Not SPMD findings: mypy's own errors about upstream's code, which name SPMD types because the values are
    # typed now.  dispatch_postprocess returns the probabilities sort_chunks_by_idxs annotates Optional (the
    # rows it skips gathering with tp = 1, `if self.tp_size > 1:`, are R@tp by docs/spec.md#axes-of-size-1).
    (DISPATCHER, "MoEAlltoAllTokenDispatcher.dispatch_postprocess", "return-value", SORTED_PROBS): 1,
    # gate_weight is None without the shared-expert gate (never read then); gate_score and cached_fc1_input are
    # attributes first set to None in __init__.
    (SHARED, "SharedExpertMLP.__init__", "assignment", NO_GATE): 1,
    (SHARED, "SharedExpertMLP.pre_forward_comm", "assignment", SET_LATER): 2,
    # upstream's annotations: permute's probs result is Optional, and the method returns a pair, annotated Tensor.
    (DISPATCHER, DEEPEP, "union-attr", 'Item "None" of "Tensor[V@ep, V@tp] | None" has no attribute "to"'): 1,
    (DISPATCHER, DEEPEP, "return-value", 'Incompatible return value type (got "tuple[Tensor[V@ep, V@tp], '
                                         'Tensor[V@ep, V@tp] | Any | None]", expected "Tensor[Any]")'): 1,
})

UNANNOTATED = "an unannotated parameter"
THIRD_PARTY = "an untyped third-party call"
PLAIN_PARAMETER = "a parameter typed plain torch.Tensor"
BOUNDARY = "spmd-untyped-boundary"
# docs/third_party.md#mixture-of-experts (where types end): strict mode's places, one per line:
# (module, function, code, what takes or returns the value, the kind) -> count.
EXPECTED_PLACES = Counter({
    # MoELayer.forward runs its steps in a nested, unannotated custom_forward, or under activation
    # checkpointing; MoE latent projections are Transformer Engine's.
    (LAYER, "MoELayer.forward", BOUNDARY, "custom_forward", UNANNOTATED): 1,
    **{(LAYER, function, BOUNDARY, callee, THIRD_PARTY): 1 for function, callee in [
        ("MoELayer.forward", "te_checkpoint"), ("MoELayer.forward", "tensor_parallel.checkpoint"),
        ("MoELayer.shared_experts_compute", "te_checkpoint"),
        ("MoELayer.shared_experts_compute", "tensor_parallel.checkpoint"),
        ("MoELayer.preprocess", "self.fc1_latent_proj"), ("MoELayer.postprocess", "self.fc2_latent_proj")]},
    # The router: its aux-loss methods, sinkhorn and the benchmark's random logits take plain tensors; the
    # z-loss and the gate's matmul go through autograd Functions (MoEAuxLossAutoScaler,
    # RouterGatingLinearFunction) left untyped.
    **{(ROUTER, function, BOUNDARY, callee, PLAIN_PARAMETER): 1 for function, callee in [
        ("TopKRouter.routing", "_apply_aux_loss"), ("TopKRouter.routing", "_apply_seq_aux_loss"),
        ("TopKRouter.routing", "_apply_global_aux_loss"), ("TopKRouter.routing", "sinkhorn_load_balancing"),
        ("TopKRouter._apply_aux_loss", "attach_and_log_load_balancing_loss"),
        ("TopKRouter._apply_seq_aux_loss", "attach_and_log_load_balancing_loss"),
        ("TopKRouter._apply_global_aux_loss", "attach_and_log_load_balancing_loss"),
        ("TopKRouter.forward", "apply_random_logits")]},
    (ROUTER, "TopKRouter.apply_z_loss", BOUNDARY, "apply", UNANNOTATED): 2,
    (UTILS, "router_gating_linear", BOUNDARY, "apply", UNANNOTATED): 1,
    # moe_utils: the fused kernels (Transformer Engine), the unannotated nested top-k, and masks built by
    # zeros_like / ones_like and filled by scatter (unmodelled).
    **{(UTILS, function, BOUNDARY, kernel, THIRD_PARTY): 1 for function, kernel in [
        ("permute", "fused_permute"), ("permute", "fused_permute_with_probs"), ("unpermute", "fused_unpermute"),
        ("switch_load_balancing_loss_func", "fused_moe_aux_loss"),
        ("topk_routing_with_score_function", "fused_topk_with_score_function"),
        ("compute_routing_scores_for_aux_loss", "fused_compute_score_for_moe_aux_loss")]},
    (UTILS, "topk_routing_with_score_function", BOUNDARY, "compute_topk", UNANNOTATED): 4,
    (UTILS, "topk_routing_with_score_function", "spmd-unmodelled", None, None): 5,
    (UTILS, "compute_routing_scores_for_aux_loss", "spmd-unmodelled", None, None): 1,
    (UTILS, "apply_router_token_dropping", "spmd-unmodelled", None, None): 3,
    # The dispatcher: the routing map's padding and counting (plain-tensor helpers), the overlapped shared
    # experts' steps (unannotated), the sort of the received chunks by local expert and the un-permutation's
    # indices (plain tensors).
    **{(DISPATCHER, f"MoEAlltoAllTokenDispatcher.{method}", BOUNDARY, callee, kind): 1 for method, callee, kind in [
        ("dispatch_preprocess", "fused_pad_routing_map", THIRD_PARTY),
        ("dispatch_preprocess", "pad_routing_map", PLAIN_PARAMETER),
        ("dispatch_preprocess", "preprocess", PLAIN_PARAMETER),
        ("dispatch_preprocess", "pre_forward_comm", UNANNOTATED),
        ("dispatch_postprocess", "linear_fc1_forward_and_act", UNANNOTATED),
        ("dispatch_postprocess", "sort_chunks_by_idxs", PLAIN_PARAMETER),
        ("combine_preprocess", "sort_chunks_by_idxs", PLAIN_PARAMETER),
        ("combine_postprocess", "linear_fc2_forward", UNANNOTATED),
        ("combine_postprocess", "unpermute", PLAIN_PARAMETER)]},
    # The other dispatchers call the typed permute/unpermute with plain tensors of their own.
    (DISPATCHER, "MoEAllGatherTokenDispatcher.combine_preprocess", BOUNDARY, "unpermute", PLAIN_PARAMETER): 1,
    (DISPATCHER, DEEPEP, BOUNDARY, "get_permuted_hidden_states_by_experts", "a return typed plain torch.Tensor"): 1,
    (DISPATCHER, "_DeepepManager.get_restored_hidden_states_by_experts", BOUNDARY,
     "get_restored_hidden_states_by_experts", "a return typed plain torch.Tensor"): 1,
    (DISPATCHER, "_DeepepManager.get_restored_hidden_states_by_experts", BOUNDARY, "unpermute", PLAIN_PARAMETER): 1,
    # The experts: grouped GEMM kernels, the activation (a nested jit function), the quantization padding
    # and offloading helpers, and SequentialMLP's experts, held in a ModuleList (plain nn.Module).
    (EXPERTS, "GroupedMLP.forward", BOUNDARY, "gg.ops.gmm", THIRD_PARTY): 3,
    (EXPERTS, "GroupedMLP.forward", BOUNDARY, "self.activation_func_with_probs", THIRD_PARTY): 2,
    (EXPERTS, "TEGroupedMLP.forward", BOUNDARY, "self.quantization_padding", THIRD_PARTY): 2,
    (EXPERTS, "TEGroupedMLP.forward", BOUNDARY, "off_interface", THIRD_PARTY): 1,
    (EXPERTS, "TEGroupedMLP.forward", BOUNDARY, "bias_act_func", UNANNOTATED): 1,
    (EXPERTS, "TEGroupedMLP.forward", BOUNDARY, "_apply_bias", UNANNOTATED): 1,
    (EXPERTS, "SequentialMLP.forward", BOUNDARY, "_pad_tensor_for_quantization", UNANNOTATED): 2,
    (EXPERTS, "SequentialMLP.forward", BOUNDARY, "expert", "a module typed plain nn.Module"): 1,
    (EXPERTS, "SequentialMLP.forward", BOUNDARY, None, "a module typed plain nn.Module"): 1,
})

# docs/third_party.md#mixture-of-experts (What is typed): per module, (tensor-valued expressions, those with a
# known SPMD type, functions with tensor-valued expressions, those with a known one).
EXPECTED_FIGURES = {
    DISPATCHER: (228, 62, 33, 10),
    ROUTER: (152, 74, 15, 9),
    EXPERTS: (134, 61, 12, 4),
    SHARED: (23, 15, 3, 2),
    LAYER: (48, 38, 10, 9),
    UTILS: (473, 155, 28, 8),
}


def figures(measured: Measured) -> dict[str, tuple[int, int, int, int]]:
    found = {}
    for module in measured.coverage["modules"]:
        if module["module"] in MODULES:
            functions = [f for f in module["functions"] if f["expressions"]]
            found[module["module"]] = (module["expressions"], module["known"], len(functions),
                                       sum(1 for f in functions if f["known"]))
    return found


def test_what_the_checker_finds(checked: Measured) -> None:
    assert findings(checked) == EXPECTED_FINDINGS, "\n".join(map(str, sorted(findings(checked).items())))


def test_where_typed_values_become_unknown(checked: Measured) -> None:
    found = unknown_places(checked)
    assert found == EXPECTED_PLACES, "\n".join(map(str, sorted(found.items(), key=str)))


def test_coverage_by_module(checked: Measured) -> None:
    assert figures(checked) == EXPECTED_FIGURES


def test_the_documented_figures_are_the_pinned_ones() -> None:
    """docs/third_party.md#mixture-of-experts states the figures, the places and the findings pinned here."""
    page = (PROJECT / "docs" / "third_party.md").read_text()
    section = page[page.index("### Mixture of experts"):page.index("## torchtitan 0.3.0")]
    rows = [(f"`{module.rpartition('.')[2]}`", figures) for module, figures in EXPECTED_FIGURES.items()]
    totals = tuple(sum(column) for column in zip(*EXPECTED_FIGURES.values()))
    for name, (expressions, known, functions, typed) in [*rows, ("all six", totals)]:
        assert (f"| {name} | {expressions:,} | {known} ({100 * known / expressions:.1f}%) | {typed} of {functions} |"
                in section), name
    assert f"(strict mode, {sum(EXPECTED_PLACES.values())} places, each pinned by the test)" in " ".join(section.split())
    assert "No true finding and no false positive" in " ".join(section.split())
