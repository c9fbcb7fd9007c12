"""Plans built as torchtitan and torch's docs build them: styles from aliases, constants and helper functions, a
plan dict filled in by ``plan[key] = style`` and ``plan.update({...})`` (also under a literal flag), and a plan
returned by a function. A mistake in each shape is reported at the entry it comes from."""
from plugin.cases.plans._llama import TransformerBlock
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Placement, Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

SEQUENCE_SHARD = Shard(1)
NORM = SequenceParallel()
TENSOR_PARALLEL: dict[str, ParallelStyle] = {
    "attention.w[qkv]": ColwiseParallel(),
    "attention.wo": RowwiseParallel(),
    "feed_forward.w[13]": ColwiseParallel(),
    "feed_forward.w2": RowwiseParallel(),
}


def colwise() -> ColwiseParallel:
    return ColwiseParallel()


def rowwise(output: Placement = Replicate()) -> RowwiseParallel:
    return RowwiseParallel(output_layouts=output)


def gathered(sequence_parallel: bool) -> PrepareModuleInput:
    return PrepareModuleInput(
        input_layouts=(Shard(1) if sequence_parallel else Replicate(),),
        desired_input_layouts=(Replicate(),),
    )


def torchtitan_shape(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    rowwise_parallel, colwise_parallel, prepare_module_input = RowwiseParallel, ColwiseParallel, PrepareModuleInput
    layer_plan: dict[str, ParallelStyle] = {
        "attention_norm": NORM,
        "attention": prepare_module_input(input_layouts=(SEQUENCE_SHARD,), desired_input_layouts=(Replicate(),)),
        "attention.wq": colwise_parallel(),
        "attention.wk": colwise_parallel(),
        "attention.wv": colwise_parallel(),
        "attention.wo": rowwise_parallel(output_layouts=SEQUENCE_SHARD),
        "ffn_norm": SequenceParallel(),
    }
    layer_plan.update({
        "feed_forward": gathered(sequence_parallel=True),
        "feed_forward.w1": colwise(),
        "feed_forward.w3": colwise(),
    })
    layer_plan["feed_forward.w2"] = rowwise(Shard(1))
    parallelize_module(block, tp_mesh, layer_plan)


def w2_set_colwise(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    layer_plan: dict[str, ParallelStyle] = {
        "attention_norm": NORM,
        "attention": gathered(True),
        "attention.w[qkv]": colwise(),
        "attention.wo": rowwise(SEQUENCE_SHARD),
        "ffn_norm": NORM,
        "feed_forward": gathered(True),
        "feed_forward.w[13]": colwise(),
    }
    layer_plan["feed_forward.w2"] = colwise()  # E: spmd-plan FeedForward.forward feeds S(-1)@tp from "feed_forward.w[13]" to "feed_forward.w2": ColwiseParallel() where I@tp is needed (mesh axis tp)
    parallelize_module(block, tp_mesh, layer_plan)


def gathered_from_the_wrong_layout(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    layer_plan: dict[str, ParallelStyle] = {
        "attention_norm": NORM,
        "attention": gathered(True),
        "attention.w[qkv]": colwise(),
        "attention.wo": rowwise(SEQUENCE_SHARD),
        "ffn_norm": SequenceParallel(use_local_output=True),  # E: spmd-plan TransformerBlock.forward feeds S(1)@tp from "ffn_norm" to "feed_forward": PrepareModuleInput(input_layouts=(Replicate(),), desired_input_layouts=(Replicate(),)) where I@tp is needed (mesh axis tp)
    }
    layer_plan.update({
        "feed_forward": gathered(sequence_parallel=False),
        "feed_forward.w[13]": colwise(),
        "feed_forward.w2": rowwise(SEQUENCE_SHARD),
    })
    parallelize_module(block, tp_mesh, layer_plan)


def layer_plan(sequence_parallel: bool) -> dict[str, ParallelStyle]:
    plan: dict[str, ParallelStyle] = {
        "attention.w[qkv]": colwise(),
        "attention.wo": rowwise(),
        "feed_forward.w[13]": colwise(),
        "feed_forward.w2": rowwise(),
    }
    if sequence_parallel:
        plan.update({
            "attention_norm": NORM,
            "attention": gathered(sequence_parallel),
            "attention.wo": rowwise(SEQUENCE_SHARD),
            "ffn_norm": NORM,
            "feed_forward": gathered(sequence_parallel),
            "feed_forward.w2": rowwise(SEQUENCE_SHARD),
        })
    return plan


def sequence_parallel_from_a_function(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    parallelize_module(block, tp_mesh, layer_plan(True))


def tensor_parallel_from_a_function(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    parallelize_module(block, tp_mesh, layer_plan(sequence_parallel=False))


def tensor_parallel_from_a_constant(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    parallelize_module(block, tp_mesh, TENSOR_PARALLEL)
