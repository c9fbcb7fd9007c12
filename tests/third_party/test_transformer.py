"""Check megatron-core's transformer MLP and attention as upstream wrote them, with their sub-layers' real classes.

``MLP`` and ``SelfAttention`` build their linear layers from a spec
(``build_module(submodules.linear_fc1, ...)``), which mypy reads as
``Any``; ``[spmd_mypy] modules`` declares the classes they are,
with the literal flags the build calls pass
(``ColumnParallelLinear(gather_output=False)``), which decide in which
configurations each layer's calls are judged.  The installed modules are
copied, annotated with the shipped overlay and migrated, and
``spmd-check`` runs in strict mode once per configuration.  The test pins
exactly what is found (docs/third_party.md#the-transformer-layer), the
places a typed value still becomes unknown (strict, counted per kind and
function), and that classic bugs, patched into copies of the MLP, are
reported where their fixed twins are clean.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from spmd_mypy.migrate.overlay import load_overlays, shipped_overlays
from spmd_mypy.migrate.thirdparty import run_mypy
from tests.third_party.checked_copy import function_at, installed_source, spmd_findings, write_checked

MAPPINGS = "megatron.core.tensor_parallel.mappings"
LAYERS = "megatron.core.tensor_parallel.layers"
MLP = "megatron.core.transformer.mlp"
ATTENTION = "megatron.core.transformer.attention"
MODULES = [
    MAPPINGS,
    LAYERS,
    # apply_module(self.linear_qkv)(x): typed, it is the layer's own forward.
    "megatron.core.typed_torch",
    MLP,
    ATTENTION,
]

# gather_output and input_is_parallel are each layer's own (its modules entry
# states them); a configuration sets one value of each, so both values are
# checked somewhere: sequence parallel and tensor parallel as the transformer
# runs, column layers that gather (gathered), row layers given a whole input
# (scattered).  A layer's calls are judged where the configuration agrees with it.
CONFIGURATIONS = """
sp: sequence_parallel = true, reduce_scatter_embeddings = true, gather_output = false, input_is_parallel = true
no_sp: sequence_parallel = false, reduce_scatter_embeddings = false, gather_output = false, input_is_parallel = true
gathered: sequence_parallel = false, reduce_scatter_embeddings = false, gather_output = true, input_is_parallel = true
scattered: sequence_parallel = false, reduce_scatter_embeddings = false, gather_output = false, input_is_parallel = false
"""

COLUMN = f"{LAYERS}.ColumnParallelLinear"
ROW = f"{LAYERS}.RowParallelLinear"
# The classes megatron's specs build (megatron/core/models/gpt/gpt_layer_specs.py, without Transformer
# Engine), with the flags their build calls pass, which decide each layer's flags.
SUBMODULES = {
    f"{MLP}.MLP.linear_fc1": f"{COLUMN}(gather_output=False)",
    f"{MLP}.MLP.linear_fc2": f"{ROW}(input_is_parallel=True)",
    f"{ATTENTION}.SelfAttention.linear_qkv": f"{COLUMN}(gather_output=False)",
    f"{ATTENTION}.Attention.linear_proj": f"{ROW}(input_is_parallel=True)",
}


@dataclass(frozen=True)
class Variant:
    """A copy of the MLP with a bug patched in (``bug``) and the same code fixed (``fixed``), each text
    replacing ``where`` in upstream's module."""

    where: str
    bug: str
    fixed: str
    declared: dict[str, tuple[str, str]] = field(default_factory=dict)
    """A sub-module the patch builds otherwise: attribute -> (its class in the bug, in the fix)."""


FC1_CALL = "        intermediate_parallel, bias_parallel = self.linear_fc1(hidden_states)\n"
FC2_CALL = "        output, output_bias = self.linear_fc2(intermediate_parallel)\n"
IMPORTS = ("from megatron.core.tensor_parallel.mappings import (copy_to_tensor_model_parallel_region, "
           "gather_from_sequence_parallel_region, reduce_from_tensor_model_parallel_region, "
           "reduce_scatter_to_sequence_parallel_region)\n")

VARIANTS = {
    # fc2's replicated bias added to the sequence-parallel output: its gradient is this rank's tokens' only.
    "bias_added": Variant(
        FC2_CALL,
        FC2_CALL + "        if output_bias is not None:\n"
                   "            output = output + output_bias\n"
                   "            output_bias = None\n",
        FC2_CALL + "        if output_bias is not None:\n"
                   "            if self.config.sequence_parallel:\n"
                   "                output = output + copy_to_tensor_model_parallel_region(output_bias)\n"
                   "            else:\n"
                   "                output = output + output_bias\n"
                   "            output_bias = None\n"),
    # The sequence gathered before fc1, which gathers it itself under sequence parallelism.
    "gathered_twice": Variant(
        FC1_CALL,
        "        if self.config.sequence_parallel:\n"
        "            hidden_states = gather_from_sequence_parallel_region(hidden_states)\n" + FC1_CALL,
        FC1_CALL),
    # fc1 gathers its output: fc2 then reads whole rows as its slice (and fc1's bias slice meets them).
    "fc1_gathers": Variant("            gather_output=False,\n",
                           "            gather_output=True,\n",
                           "            gather_output=False,\n",
                           {"linear_fc1": (f"{COLUMN}(gather_output=True)", f"{COLUMN}(gather_output=False)")}),
    # fc2 told its input is whole: it scatters fc1's already-split columns again.
    "fc2_whole_input": Variant("            input_is_parallel=True,\n",
                               "            input_is_parallel=False,\n",
                               "            input_is_parallel=True,\n",
                               {"linear_fc2": (f"{ROW}(input_is_parallel=False)", f"{ROW}(input_is_parallel=True)")}),
    # fc2's matmul written out and returned before the all-reduce (reduce-scatter) the row layer does.
    "unreduced": Variant(
        FC2_CALL,
        "        output = F.linear(intermediate_parallel, self.linear_fc2.weight)\n"
        "        output_bias = self.linear_fc2.bias\n",
        "        partial = F.linear(intermediate_parallel, self.linear_fc2.weight)\n"
        "        if self.config.sequence_parallel:\n"
        "            output = reduce_scatter_to_sequence_parallel_region(partial)\n"
        "        else:\n"
        "            output = reduce_from_tensor_model_parallel_region(partial)\n"
        "        output_bias = self.linear_fc2.bias\n"),
}


def variant_source(upstream: str, where: str, replacement: str) -> str:
    assert upstream.count(where) == 1, where
    return IMPORTS + upstream.replace(where, replacement)


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    root = tmp_path_factory.mktemp("transformer")
    overlays = load_overlays(list(shipped_overlays().values()))
    files = {}
    for module in MODULES:
        files[str(write_checked(root, module, installed_source(module), overlays).relative_to(root))] = module
    submodules = dict(SUBMODULES)
    upstream = installed_source(MLP)
    for name, variant in VARIANTS.items():
        for kind, text in (("bug", variant.bug), ("fixed", variant.fixed)):
            module = f"{MLP}_{name}_{kind}"
            path = write_checked(root, module, variant_source(upstream, variant.where, text), overlays, overlay_of=MLP)
            files[str(path.relative_to(root))] = module
            for attribute in ("linear_fc1", "linear_fc2"):
                bug_class, fixed_class = variant.declared.get(attribute, (SUBMODULES[f"{MLP}.MLP.{attribute}"],) * 2)
                submodules[f"{module}.MLP.{attribute}"] = bug_class if kind == "bug" else fixed_class
    run = run_mypy(root, [root / f for f in files], ["megatron"], tmp_path_factory.getbasetemp() / "mypy-cache",
                   CONFIGURATIONS, "\n".join(f"{owner}: {cls}" for owner, cls in submodules.items()), strict=True)
    return root, files, run


def test_the_checker_runs_without_crashing(checked):
    run = checked[2]
    assert not run.crashed, run.output[-3000:]
    assert run.diagnostics, "mypy said nothing at all: the files were not checked"


# The checker's errors on upstream's modules outside strict mode's own kinds (those are STRICT_SITES):
# (module, function, error code, the expression the error is "In", the configurations it occurs in).
EXPECTED = Counter({
    # Real: the replicated bias added to S(0)@tp activations inside the row layer (test_check.py's finding).
    (LAYERS, "RowParallelLinear.forward", "spmd-invariant-mix", "output_", "sp"): 1,
})

STRICT_CODES = {"spmd-untyped-boundary", "spmd-unmodelled", "spmd-missing-axis", "spmd-untyped-collective"}

# Strict mode: each place a typed value becomes unknown, counted per (module, function, code, what takes
# it), whatever configurations it occurs in (docs/third_party.md#the-transformer-layer says why each stays).
STRICT_SITES = Counter({
    # The mapping Functions' hand-written bodies call megatron's untyped helpers (docs/third_party.md).
    **{(MAPPINGS, f"{function}", "spmd-untyped-boundary", helper, "an unannotated parameter"): 1
       for function, helper in [
           ("_CopyToModelParallelRegion.backward", "_reduce"),
           ("_ReduceFromModelParallelRegion.forward", "_reduce"),
           ("_ScatterToModelParallelRegion.forward", "_split_along_last_dim"),
           ("_ScatterToModelParallelRegion.backward", "_gather_along_last_dim"),
           ("_GatherFromModelParallelRegion.forward", "_gather_along_last_dim"),
           ("_GatherFromModelParallelRegion.backward", "_split_along_last_dim"),
           ("_ScatterToSequenceParallelRegion.forward", "_split_along_first_dim"),
           ("_ScatterToSequenceParallelRegion.backward", "_gather_along_first_dim"),
           ("_GatherFromSequenceParallelRegion.forward", "_gather_along_first_dim"),
           ("_GatherFromSequenceParallelRegion.backward", "_reduce_scatter_along_first_dim"),
           ("_GatherFromSequenceParallelRegion.backward", "_split_along_first_dim"),
           ("_ReduceScatterToSequenceParallelRegion.forward", "_reduce_scatter_along_first_dim"),
           ("_ReduceScatterToSequenceParallelRegion.backward", "_gather_along_first_dim"),
           ("_AllGatherFromTensorParallelRegion.forward", "_gather_along_last_dim"),
           ("_AllGatherFromTensorParallelRegion.backward", "_reduce_scatter_along_last_dim"),
           ("_ReduceScatterToTensorParallelRegion.forward", "_reduce_scatter_along_last_dim"),
           ("_ReduceScatterToTensorParallelRegion.backward", "_gather_along_last_dim"),
       ]},
    # _AllToAll.forward's buffers (empty_like, new_empty) and its raw all_to_all_single.
    (MAPPINGS, "_AllToAll.forward", "spmd-unmodelled", None, None): 2,
    (MAPPINGS, "_AllToAll.forward", "spmd-untyped-collective", None, None): 1,
    # The linear autograd Function, which serves every layout and stays untyped (docs/third_party.md).
    (LAYERS, "ColumnParallelLinear.forward", "spmd-untyped-boundary", "_forward_impl", "an unannotated parameter"): 1,
    (LAYERS, "RowParallelLinear.forward", "spmd-untyped-boundary", "_forward_impl", "an unannotated parameter"): 1,
    # The activation between fc1 and fc2: the config's callable (two paths), the nested glu, and the fused
    # bias-activation kernels (megatron.core.fusions), all untyped: fc2's input is unknown.
    (MLP, "MLP.forward", "spmd-untyped-boundary", "self.activation_func", "an untyped third-party call"): 2,
    (MLP, "MLP.forward", "spmd-untyped-boundary", "glu", "an unannotated parameter"): 1,
    **{(MLP, "MLP.forward", "spmd-untyped-boundary", kernel, "an untyped third-party call"): 1
       for kernel in ["bias_gelu_impl", "bias_geglu_impl", "bias_swiglu_impl", "weighted_bias_swiglu_impl",
                      "weighted_bias_quick_geglu_impl"]},
    # Attention's typed activations reach what stays untyped there: activation offloading's context
    # manager, Transformer Engine's SplitAlongDim (the fused qkv split) and the q/k layernorms, built by
    # build_module from a spec no entry declares.
    (ATTENTION, "Attention.forward", "spmd-untyped-boundary", "off_interface", "an untyped third-party call"): 1,
    (ATTENTION, "Attention.forward", "spmd-untyped-boundary", "off_interface.group_commit",
     "an untyped third-party call"): 1,
    (ATTENTION, "SelfAttention.get_query_key_value_tensors", "spmd-untyped-boundary", "SplitAlongDim",
     "an untyped third-party call"): 2,
    (ATTENTION, "SelfAttention.get_query_key_value_tensors", "spmd-untyped-boundary", "self.q_layernorm",
     "an untyped third-party call"): 1,
    (ATTENTION, "SelfAttention.get_query_key_value_tensors", "spmd-untyped-boundary", "self.k_layernorm",
     "an untyped third-party call"): 1,
    # QK clipping hands linear_qkv's weight to an unannotated helper.
    (ATTENTION, "SelfAttention.clip_qk", "spmd-untyped-boundary", "_clip_linear_qkv", "an unannotated parameter"): 1,
})


def strict_sites(root: Path, files: dict[str, str], run) -> Counter:
    """Strict mode's reports on upstream's modules, one per line: (module, function, code, what loses the
    type, where: the boundary's kind); a line reported with other types in other configurations counts once."""
    trees = {path: ast.parse((root / path).read_text()) for path in files}
    sites = set()
    for d in run.diagnostics:
        if d.severity == "error" and d.code in STRICT_CODES and files.get(d.path) in MODULES:
            named = re.match(r"`([\w.]+)`", d.message)
            kind = re.search(r"lost at (.*)$", d.message)
            sites.add((d.path, d.line, d.code, named and named.group(1), kind and kind.group(1)))
    return Counter((files[path], function_at(trees[path], line), code, named, kind)
                   for path, line, code, named, kind in sites)


def variant_errors(root: Path, files: dict[str, str], run, module: str) -> Counter:
    """Every error in one copy of the MLP but strict mode's own kinds (plain mypy's too): (function, code,
    message, configurations)."""
    path = next(path for path, name in files.items() if name == module)
    tree = ast.parse((root / path).read_text())
    return Counter((function_at(tree, d.line), d.code, d.message.replace(module, MLP), d.configurations)
                   for d in run.diagnostics
                   if d.path == path and d.severity == "error" and d.code not in STRICT_CODES)


def test_what_the_checker_finds(checked):
    root, files, run = checked
    upstream = {path: module for path, module in files.items() if module in MODULES}
    found = spmd_findings(run, root, upstream, lambda d: d.is_spmd and d.code not in STRICT_CODES)
    assert found == EXPECTED, "\n".join(map(str, sorted(found.items())))


def test_where_typed_values_become_unknown(checked):
    found = strict_sites(*checked)
    assert found == STRICT_SITES, "\n".join(map(str, sorted(found.items())))


def test_submodules_are_read_as_their_declared_classes(checked):
    """fc1's typed result reaches the activation (S(-1)@tp, this rank's columns), and fc2 is a
    RowParallelLinear, which has no backward_dw (only Transformer Engine's layers do): upstream's
    MLP.backward_dw calls it."""
    run = checked[2]
    mlp = "megatron/core/transformer/mlp.py"
    activation = {d.configurations for d in run.diagnostics
                  if d.path == mlp and d.message.startswith("`self.activation_func` takes Tensor[S(-1)@tp],")}
    assert activation == {"sp, no_sp, scattered"}
    assert any(d.path == mlp and d.message == '"Tensor[Any]" not callable' for d in run.diagnostics)
    assert not [d for d in run.diagnostics if d.code == "spmd-settings"]


# Each bug the checker reports: what the bug adds to upstream's errors (function, code, message, configurations).
REPORTED = {
    "bias_added": Counter({("MLP.forward", "spmd-invariant-mix",
                            "add mixes Invariant with Varying on axis tp (V@tp, I@tp)", "sp"): 1}),
    "gathered_twice": Counter({("MLP.forward", "arg-type", 'Argument 1 to "forward" of "ColumnParallelLinear" has '
                                'incompatible type "Tensor[R@tp]"; expected "Tensor[S(0)@tp]"', "sp"): 1}),
    # fc1's bias slice (S(-1)@tp) added to its gathered output, on both activation paths.
    "fc1_gathers": Counter({("MLP.forward", "spmd-invariant-mix",
                             "add mixes Invariant with Varying on axis tp (I@tp, V@tp)", "gathered"): 2}),
    # With sequence parallelism the V@tp partial sums pass as the S(0)@tp result: S(0) is a V@tp.
    "unreduced": Counter({("MLP.forward", "return-value", 'Incompatible return value type (got "tuple[Tensor[V@tp], '
                           'Tensor[I@tp] | None]", expected "tuple[Tensor[I@tp], Tensor[I@tp] | None]")',
                           "no_sp, gathered, scattered"): 1}),
}
# Each bug the checker cannot see, and why: its errors are upstream's.
UNSEEN = {
    # fc2 is judged where input_is_parallel = false (scattered) only, and there its input is the activation's
    # result (the config's callable, a fused kernel or the nested glu), which is unknown.
    "fc2_whole_input": "fc2's input is the activation's result, which is unknown",
}


def test_every_variant_is_pinned():
    assert set(REPORTED) | set(UNSEEN) == set(VARIANTS)
    assert not set(REPORTED) & set(UNSEEN)


@pytest.mark.parametrize("name", sorted(REPORTED))
def test_the_bug_is_reported_and_its_fix_is_clean(checked, name):
    root, files, run = checked
    upstream = variant_errors(root, files, run, MLP)
    bug = variant_errors(root, files, run, f"{MLP}_{name}_bug")
    fixed = variant_errors(root, files, run, f"{MLP}_{name}_fixed")
    assert bug - upstream == REPORTED[name] and not upstream - bug, (bug - upstream, upstream - bug)
    assert fixed == upstream, (fixed - upstream, upstream - fixed)


@pytest.mark.parametrize("name", sorted(UNSEEN))
def test_a_bug_the_checker_cannot_see(checked, name):
    root, files, run = checked
    upstream = variant_errors(root, files, run, MLP)
    assert variant_errors(root, files, run, f"{MLP}_{name}_bug") == upstream, UNSEEN[name]
    assert variant_errors(root, files, run, f"{MLP}_{name}_fixed") == upstream
