"""Check fairscale's and megatron-core's tensor-parallel layers with types declared outside their source.

The installed packages are copied, the shipped overlays (spmd_mypy/overlays/*.toml)
and the codemod are applied to the copies, and ``spmd-check`` runs mypy with
the plugin over the four modules in each configuration of the layers' flags.
The test pins exactly what the checker reports, and where (the table in
docs/third_party.md): a new finding or a vanished one fails it.
"""

import configparser
from collections import Counter
from pathlib import Path

import pytest

from spmd_mypy.migrate import migrate_source
from spmd_mypy.migrate.overlay import apply_overlay, load_overlays, shipped_overlays
from spmd_mypy.migrate.thirdparty import RECOMMENDED_CONFIG, copy_installed, mypy_config, run_mypy
from tests.third_party.checked_copy import spmd_findings
from tests.third_party.test_moe_overlay import MODULES as MOE_MODULES
from tests.third_party.test_transformer import MODULES as TRANSFORMER_MODULES

OVERLAYS = list(shipped_overlays().values())
MODULES = [
    "fairscale.nn.model_parallel.mappings",
    "fairscale.nn.model_parallel.layers",
    "megatron.core.tensor_parallel.mappings",
    "megatron.core.tensor_parallel.layers",
]

# The layers' flags, in the settings they are used in (docs/third_party.md#configurations):
# sequence parallel; tensor parallel without it; a row-parallel layer given a whole input.
CONFIGURATIONS = """
sp: sequence_parallel = true, input_is_parallel = true, reduce_scatter_embeddings = true, gather_output = false
no_sp: sequence_parallel = false, input_is_parallel = true, reduce_scatter_embeddings = false, gather_output = false
whole_input: sequence_parallel = false, input_is_parallel = false, reduce_scatter_embeddings = false, gather_output = true
"""

# megatron's names for torch's collectives (layers.py picks one by torch version): followed as torch's, so
# the async all-gather and reduce-scatter of LinearWithGradAccumulationAndAsyncCommunication.backward are checked
# until their wait() (docs/spec.md#collectives-in-flight).
COLLECTIVES = """
megatron.core.tensor_parallel.layers.dist_all_gather_func: torch.distributed.all_gather_into_tensor
megatron.core.tensor_parallel.layers.dist_reduce_scatter_func: torch.distributed.reduce_scatter_tensor
"""

# (module, function, error code, the call or operand the error is "In", the configurations it occurs in).
EXPECTED = Counter([
    # Sequence parallel only: the replicated bias meets S(0)@tp activations; its
    # gradient needs a tp all-reduce, which megatron does outside the layer.
    ("megatron.core.tensor_parallel.layers", "RowParallelLinear.forward", "spmd-invariant-mix", "output_", "sp"),
])


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    root = copy_installed(["megatron", "fairscale"], tmp_path_factory.mktemp("third_party"))
    overlays = load_overlays(OVERLAYS)
    files = {}
    for module in MODULES:
        path = root.joinpath(*module.split(".")).with_suffix(".py")
        code = apply_overlay(path.read_text(), module, overlays[module])
        path.write_text(migrate_source(code, module).code)
        files[str(path.relative_to(root))] = module
    run = run_mypy(root, [root / f for f in files], ["megatron", "fairscale"],
                   tmp_path_factory.getbasetemp() / "mypy-cache", CONFIGURATIONS, collectives=COLLECTIVES)
    return root, files, run


def test_every_overlaid_module_is_covered(checked):
    """Each module the shipped overlays type is checked here or, for the transformer's and the mixture of
    experts', in test_transformer.py and test_moe_overlay.py."""
    overlaid = set(load_overlays(OVERLAYS))
    assert set(checked[1].values()) <= overlaid <= set(checked[1].values()) | set(TRANSFORMER_MODULES) | set(MOE_MODULES)


def test_the_checker_runs_without_crashing(checked):
    run = checked[2]
    assert not run.crashed, run.output[-3000:]
    assert run.diagnostics, "mypy said nothing at all: the files were not checked"


def test_what_the_checker_finds(checked):
    root, files, run = checked
    found = spmd_findings(run, root, files)
    assert found == EXPECTED, "\n".join(str(d) for d in run.diagnostics if d.is_spmd)


def test_annotations_reach_the_checker(checked):
    """The overlay's flag-chosen types are what mypy sees, one per configuration: upstream's own error on
    ColumnParallelLinear's input prints it (S(0)@tp with sequence parallelism, I@tp without)."""
    run = checked[2]
    offloading = [d for d in run.diagnostics if "activation_offloading" in d.message]
    assert {d.configurations for d in offloading if "Tensor[S(0)@tp]" in d.message} == {"sp"}
    assert {d.configurations for d in offloading if "Tensor[I@tp]" in d.message} == {"no_sp, whole_input"}


def test_flag_chosen_types_are_aliases_in_the_copy(checked):
    root = checked[0]
    megatron = (root / "megatron/core/tensor_parallel/layers.py").read_text()
    assert ("_spmd_input_is_parallel_S_m1_tp_I_tp = Tensor[S[-1, tp]] if spmd_stubs.flags.input_is_parallel "
            "else Tensor[I[tp]]") in megatron
    assert ("def forward(self, input_: _spmd_input_is_parallel_S_m1_tp_I_tp) -> "
            "tuple[_spmd_sequence_parallel_S_0_tp_I_tp, Tensor[I@tp] | None]:") in megatron


def test_function_backwards_are_typed_as_duals(checked):
    """The mapping Functions' forward and backward carry the overlay's types (backward's gradients as a tuple)."""
    root = checked[0]
    megatron = (root / "megatron/core/tensor_parallel/mappings.py").read_text()
    assert "def backward(ctx, grad_output: Tensor[P@tp]) -> tuple[Tensor[I@tp], None]:" in megatron
    assert "-> tuple[Tensor[S(0)@tp], None, None, None, None]:" in megatron
    fairscale = (root / "fairscale/nn/model_parallel/mappings.py").read_text()
    assert "def backward(ctx, grad_output: Tensor[P@tp]) -> Tensor[I@tp]:  # type: ignore" in fairscale


def test_the_third_party_config_is_the_recommended_one_plus_the_skipped_packages(tmp_path: Path) -> None:
    """One list of skipped torch internals: the shipped recommended.ini, which the runner extends."""
    recommended = configparser.ConfigParser()
    recommended.read(RECOMMENDED_CONFIG)
    generated = configparser.ConfigParser()
    generated.read_string(mypy_config(tmp_path, ["fairscale", "megatron"]))
    for section in recommended.sections():
        for option, value in recommended[section].items():
            assert generated[section][option] == value, (section, option)
    assert generated["mypy-fairscale.*,megatron.*"]["follow_imports"] == "skip"
    assert generated["mypy"]["check_untyped_defs"] == "True"
