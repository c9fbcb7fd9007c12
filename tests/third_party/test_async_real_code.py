"""The in-flight check on real code as written: megatron-core's and torchtitan's modules that overlap
communication, installed, unannotated, under the recommended config (docs/collectives.md#in-flight-checked).

megatron-core's pipeline transfers (p2p_communication.py: ``batch_isend_irecv``'s handles waited in a loop
or returned to the caller, each ``isend``/``irecv`` handle stored in a dict), the 1F1B and interleaved
schedules that wait those handles, the bucketed gradient reduction and parameter gather
(param_and_grad_buffer.py, distributed_data_parallel.py) and the async linear backward (layers.py); torchtitan's
pipelining and context parallelism, and its DTensor redistributions passing ``async_op=True`` (no handle:
nothing to wait). One mypy run; the test pins exactly the ``spmd-async`` diagnostics: none.
"""

import ast
from pathlib import Path

import pytest

from spmd_mypy.migrate.thirdparty import MypyRun, copy_installed, run_mypy

MODULES = [
    "megatron/core/pipeline_parallel/p2p_communication.py",
    "megatron/core/pipeline_parallel/schedules.py",
    "megatron/core/distributed/param_and_grad_buffer.py",
    "megatron/core/distributed/distributed_data_parallel.py",
    "megatron/core/tensor_parallel/layers.py",
    "torchtitan/distributed/pipeline_parallel.py",
    "torchtitan/distributed/context_parallel/api.py",
    "torchtitan/distributed/tensor_parallel.py",
    "torchtitan/protocols/module.py",
]

# The calls the check follows until their wait(), per module: torch's transfers, and the collectives that pass
# async_op=True (megatron's dist_all_gather_func among them, in layers.py, which defines autograd Functions).
TRANSFERS = {"isend", "irecv", "batch_isend_irecv"}
FOLLOWED = {
    "megatron/core/pipeline_parallel/p2p_communication.py": 10,
    "megatron/core/tensor_parallel/layers.py": 3,
}


def started(call: ast.Call) -> bool:
    callee = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    async_op = any(k.arg == "async_op" and isinstance(k.value, ast.Constant) and k.value.value is True
                   for k in call.keywords)
    return callee in TRANSFERS or (async_op and callee != "redistribute")  # DTensor's has no handle


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, MypyRun]:
    root = copy_installed(["megatron", "torchtitan"], tmp_path_factory.mktemp("async_real_code"))
    run = run_mypy(root, [root / module for module in MODULES], ["megatron", "torchtitan"],
                   tmp_path_factory.getbasetemp() / "cache")
    assert not run.crashed, run.output[-3000:]
    assert run.diagnostics, "mypy said nothing at all: the files were not checked"
    return root, run


def test_the_overlapping_calls_are_there(checked: tuple[Path, MypyRun]) -> None:
    """The installed modules still start the transfers and collectives the pin below is about."""
    root = checked[0]
    found = {module: sum(isinstance(node, ast.Call) and started(node)
                         for node in ast.walk(ast.parse((root / module).read_text()))) for module in MODULES}
    assert {module: count for module, count in found.items() if count} == FOLLOWED


def test_no_false_positives(checked: tuple[Path, MypyRun]) -> None:
    run = checked[1]
    assert [f"{d.path}:{d.line}: {d.message}" for d in run.diagnostics if d.code == "spmd-async"] == []
