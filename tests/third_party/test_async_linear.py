"""megatron-core's LinearWithGradAccumulationAndAsyncCommunication.backward: its waits verified as written.

As installed it is clean in every configuration (tests/third_party/test_check.py pins no ``spmd-async``
there). In a copy with its waits removed, each race is reported where it happens: the all-gathered input
read by the weight gradient before the all-gather's ``wait()``, and a return while the all-reduce of the
input's gradient is in flight (docs/spec.md#collectives-in-flight). With the all-gather never waited, each
later ``handle = ...`` loses it, and says so.
"""

from pathlib import Path

import pytest

from spmd_mypy.migrate.thirdparty import copy_installed, run_mypy
from tests.third_party.test_check import COLLECTIVES

LAYERS = Path("megatron/core/tensor_parallel/layers.py")

# The two waits a newcomer might drop: after the input's all-gather, and before the last return.
GATHER_WAIT = """        if ctx.sequence_parallel and wgrad_compute:
            # pylint: disable=possibly-used-before-assignment
            handle.wait()
"""
ALL_REDUCE_WAIT = """        if ctx.allreduce_dgrad:
            handle.wait()

        return grad_input, grad_weight, grad_bias"""


@pytest.fixture(scope="module")
def without_waits(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    root = copy_installed(["megatron"], tmp_path_factory.mktemp("async_linear"))
    source = (root / LAYERS).read_text()
    assert GATHER_WAIT in source and ALL_REDUCE_WAIT in source, "megatron-core's backward changed: update the patch"
    patched = source.replace(GATHER_WAIT, "").replace(ALL_REDUCE_WAIT, "\n        return grad_input, grad_weight, grad_bias")
    (root / LAYERS).write_text(patched)
    run = run_mypy(root, [root / LAYERS], ["megatron"], tmp_path_factory.getbasetemp() / "cache",
                   collectives=COLLECTIVES)
    assert not run.crashed, run.output[-3000:]
    lines = patched.splitlines()
    return [(d.message.partition(" while ")[0], lines[d.line - 1].strip()) for d in run.diagnostics
            if d.code == "spmd-async" and d.severity == "error"]


def test_each_race_where_it_happens(without_waits: list[tuple[str, str]]) -> None:
    """Nothing about the reduce-scatter, whose wait is still there."""
    assert sorted(without_waits) == sorted([
        ("total_input is used", "grad_output, total_input = prepare_input_tensors_for_wgrad_compute("),
        ("handle is bound again", "handle = torch.distributed.all_reduce(grad_input, group=tp_group, async_op=True)"),
        ("handle is bound again", "handle = dist_reduce_scatter_func("),
        ("returns", "return grad_input, grad_weight, grad_bias, None, None, None, None, None, None"),
    ])
