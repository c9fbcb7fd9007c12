"""Keyword inputs: Hugging Face's attention takes ``hidden_states=`` by keyword, so its plan entry declares the
layout with ``input_kwarg_layouts``; a local sequence shard declared whole is read as the whole sequence."""
from plugin.cases.plans._hf_llama import LlamaDecoderLayer
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


def sequence_parallel(layer: LlamaDecoderLayer, tp_mesh: DeviceMesh) -> None:
    parallelize_module(layer, tp_mesh, {
        "input_layernorm": SequenceParallel(),
        "self_attn": PrepareModuleInput(
            input_kwarg_layouts={"hidden_states": Shard(1)},
            desired_input_kwarg_layouts={"hidden_states": Replicate()},
        ),
        "self_attn.q_proj": ColwiseParallel(),
        "self_attn.k_proj": ColwiseParallel(),
        "self_attn.v_proj": ColwiseParallel(),
        "self_attn.o_proj": RowwiseParallel(output_layouts=Shard(1)),
        "post_attention_layernorm": SequenceParallel(),
        "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "mlp.gate_proj": ColwiseParallel(),
        "mlp.up_proj": ColwiseParallel(),
        "mlp.down_proj": RowwiseParallel(output_layouts=Shard(1)),
    })


def local_norm_output_declared_whole(layer: LlamaDecoderLayer, tp_mesh: DeviceMesh) -> None:
    parallelize_module(layer, tp_mesh, {
        "input_layernorm": SequenceParallel(use_local_output=True),  # E: spmd-plan LlamaDecoderLayer.forward feeds S(1)@tp from "input_layernorm" to "self_attn": PrepareModuleInput(input_kwarg_layouts={"hidden_states": Replicate()}, desired_input_kwarg_layouts={"hidden_states": Replicate()}) where I@tp is needed (mesh axis tp)
        "self_attn": PrepareModuleInput(
            input_kwarg_layouts={"hidden_states": Replicate()},
            desired_input_kwarg_layouts={"hidden_states": Replicate()},
        ),
        "self_attn.q_proj": ColwiseParallel(),
        "self_attn.k_proj": ColwiseParallel(),
        "self_attn.v_proj": ColwiseParallel(),
        "self_attn.o_proj": RowwiseParallel(output_layouts=Shard(1)),
        "post_attention_layernorm": SequenceParallel(),
        "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "mlp.gate_proj": ColwiseParallel(),
        "mlp.up_proj": ColwiseParallel(),
        "mlp.down_proj": RowwiseParallel(output_layouts=Shard(1)),
    })


def local_norm_output_declared_a_shard(layer: LlamaDecoderLayer, tp_mesh: DeviceMesh) -> None:
    """The fix of the one above, written the other way: the local shard declared Shard(1) and gathered."""
    parallelize_module(layer, tp_mesh, {
        "input_layernorm": SequenceParallel(use_local_output=True),
        "self_attn": PrepareModuleInput(
            input_kwarg_layouts={"hidden_states": Shard(1)},
            desired_input_kwarg_layouts={"hidden_states": Replicate()},
        ),
        "self_attn.q_proj": ColwiseParallel(),
        "self_attn.k_proj": ColwiseParallel(),
        "self_attn.v_proj": ColwiseParallel(),
        "self_attn.o_proj": RowwiseParallel(output_layouts=Shard(1)),
        "post_attention_layernorm": SequenceParallel(),
        "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "mlp.gate_proj": ColwiseParallel(),
        "mlp.up_proj": ColwiseParallel(),
        "mlp.down_proj": RowwiseParallel(output_layouts=Shard(1)),
    })
