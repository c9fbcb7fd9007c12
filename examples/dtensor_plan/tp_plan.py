"""The block's tensor-parallel plan, as torch's docs and torchtitan write it.

Sequence parallel: between sub-layers the activations are split on the
sequence dim (``Shard(1)`` of ``[batch, seq, dim]``) and the norms run on
each rank's tokens (``SequenceParallel``); each sub-layer gathers the whole
sequence (``PrepareModuleInput`` to ``Replicate()``), runs column-parallel
then row-parallel linears, and reduce-scatters back to the sequence split
(``RowwiseParallel(output_layouts=Shard(1))``).
"""

from __future__ import annotations

from llama_block import TransformerBlock
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


def apply_tp(block: TransformerBlock, tp_mesh: DeviceMesh) -> None:
    """Shard ``block`` over ``tp_mesh`` in place; it then takes and returns this rank's ``Shard(1)`` piece."""
    parallelize_module(
        block,
        tp_mesh,
        {
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(
                input_layouts=(Shard(1),),
                desired_input_layouts=(Replicate(),),
            ),
            "attention.wq": ColwiseParallel(),
            "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "ffn_norm": SequenceParallel(),
            "feed_forward": PrepareModuleInput(
                input_layouts=(Shard(1),),
                desired_input_layouts=(Replicate(),),
            ),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
            "feed_forward.w3": ColwiseParallel(),
        },
    )
    # wq, wk and wv now output this rank's heads only.
    block.attention.n_heads //= tp_mesh.size()
