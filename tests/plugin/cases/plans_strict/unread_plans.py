"""Strict mode: each part of a plan the checker does not read is spmd-untyped-boundary, naming it (what it decides
is not checked); the same plan written with literals is read and checks clean."""
import torch
from plugin.cases.plans._llama import TransformerBlock
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


class Transformer(nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleDict({str(i): TransformerBlock(dim, 4, 4 * dim) for i in range(layers)})
        self.norm = nn.RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        for layer in self.layers.values():
            h = layer(h)
        return self.output(self.norm(h))


def loss_parallel_by_flag(model: Transformer, tp_mesh: DeviceMesh, loss_parallel: bool) -> None:
    parallelize_module(model, tp_mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(
            input_layouts=Shard(1),
            output_layouts=Shard(-1) if loss_parallel else Replicate(),  # E: spmd-untyped-boundary the style of plan entry "output" is not read: `loss_parallel` is a parameter of `loss_parallel_by_flag`, given no literal, so the layouts it gives on mesh axis tp are not checked
            use_local_output=not loss_parallel,
        ),
    })


def loss_parallel(model: Transformer, tp_mesh: DeviceMesh) -> None:
    parallelize_module(model, tp_mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False),
    })


class NoParallel(ParallelStyle):
    """torchtitan's style for a module replicated on the mesh: not one of torch's."""

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        return module


def a_style_of_its_own(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    parallelize_module(block, tp_mesh, {
        "attention_norm": NoParallel(),  # E: spmd-untyped-boundary the style of plan entry "attention_norm" is not read: `NoParallel` is not one of torch's styles the checker models
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(),
    })


def updated_under_a_condition(block: TransformerBlock, tp_mesh: DeviceMesh, sequence_parallel: bool) -> None:
    layer_plan: dict[str, ParallelStyle] = {
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(),
    }
    if sequence_parallel:
        layer_plan.update({"attention_norm": SequenceParallel()})  # E: spmd-untyped-boundary the plan is not read: `layer_plan.update({"attention_norm": SequenceParallel()})` may change the plan `layer_plan`, so the plan on mesh axis tp is checked without it
    parallelize_module(block, tp_mesh, layer_plan)


def updated_in_the_plans_block(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    layer_plan: dict[str, ParallelStyle] = {
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(),
    }
    layer_plan.update({"feed_forward.w[13]": ColwiseParallel(), "feed_forward.w2": RowwiseParallel()})
    parallelize_module(block, tp_mesh, layer_plan)


def a_plan_passed_in(block: TransformerBlock, tp_mesh: DeviceMesh, plan: dict[str, ParallelStyle]) -> None:
    parallelize_module(block, tp_mesh, plan)  # E: spmd-untyped-boundary the plan is not read: `plan` is a parameter of `a_plan_passed_in`, given no literal, so the plan on mesh axis tp is not checked


def a_module_of_unknown_class(model: Transformer, tp_mesh: DeviceMesh) -> None:
    parallelize_module(model.layers["0"], tp_mesh, {  # E: spmd-untyped-boundary the class of the planned module `model.layers["0"]` is not known, so the plan on mesh axis tp is not checked
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(),
    })


def each_block_of_a_known_class(model: Transformer, tp_mesh: DeviceMesh) -> None:
    for block in model.layers.values():
        parallelize_module(block, tp_mesh, {
            "attention.w[qkv]": ColwiseParallel(),
            "attention.wo": RowwiseParallel(),
            "feed_forward.w[13]": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(),
        })


def sequence_parallel_on_a_module_of_modules(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    parallelize_module(block, tp_mesh, {
        "attention.w[qkv]": ColwiseParallel(),
        "attention.wo": RowwiseParallel(),
        "feed_forward": SequenceParallel(),  # E: spmd-untyped-boundary the style of plan entry "feed_forward", SequenceParallel(), is not modelled on FeedForward: SequenceParallel is modelled on a module without sub-modules (a norm, dropout)
    })


BLOCK_PLAN: dict[str, ParallelStyle] = {"attention.w[qkv]": ColwiseParallel(), "attention.wo": RowwiseParallel()}


def add_to_the_module_plan() -> None:
    BLOCK_PLAN["feed_forward.w2"] = RowwiseParallel()  # E: spmd-untyped-boundary the plan is not read: `BLOCK_PLAN["feed_forward.w2"] = RowwiseParallel()` may change the plan `BLOCK_PLAN`, so the plan on mesh axis tp is checked without it


def a_module_plan_changed_elsewhere(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    parallelize_module(block, tp_mesh, BLOCK_PLAN)
