"""The ring-attention example: it type-checks clean, and on real gloo ranks it equals full attention.

One spawned 4-rank gloo world runs ``ring_attention`` on ``cp`` = 4 (the
whole world) and on ``cp`` = 2 (a 2 dp x 2 cp mesh, both dp replicas on the
same sequence).  Each rank returns its chunk of the output and the gradients
of its q, k and v chunks for a random upstream gradient; the test compares
them with ``torch.softmax`` attention over the whole sequence in this process.
"""

from __future__ import annotations

import math
import sys
from typing import NamedTuple

import numpy as np
import pytest
import torch
from spmd_examples import GPT, RING_ATTENTION, MypyRun
from torch.distributed.device_mesh import init_device_mesh

sys.path.insert(0, str(GPT))  # the gloo launcher, shared with the GPT example
sys.path.insert(0, str(RING_ATTENTION))
import gloo_launch
from ring_attention import ring_attention

import spmd_stubs as spmd

SHAPE = (2, 2, 8, 4)  # batch, heads, sequence, head dim: a chunk of 2 tokens per rank on cp = 4
MESHES = {4: ((4,), ("cp",)), 2: ((2, 2), ("dp", "cp"))}  # cp size -> mesh shape and dim names
TOLERANCE = 1e-12


class Chunk(NamedTuple):
    """One rank's results: which chunk it held, its output chunk, and its q, k, v chunks' gradients.

    Arrays, not tensors: a tensor crosses the result queue in shared memory,
    which the rank's process takes with it when it exits.
    """

    cp_size: int
    cp_index: int
    out: np.ndarray
    grads: list[np.ndarray]


def _inputs() -> tuple[torch.Tensor, ...]:
    """q, k, v and the upstream gradient over the whole sequence, the same in every process."""
    gen = torch.Generator().manual_seed(0)
    return tuple(torch.randn(SHAPE, generator=gen, dtype=torch.float64) for _ in range(4))


def run_chunks() -> list[Chunk]:
    """On this rank: ring attention over each mesh's cp, forward and backward."""
    chunks = []
    for cp_size, (shape, names) in MESHES.items():
        mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
        spmd.bind_mesh(mesh)
        try:
            index = mesh.get_local_rank("cp")
            q, k, v, grad_out = (t.chunk(cp_size, dim=2)[index] for t in _inputs())
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]
            out = ring_attention(*leaves)
            out.backward(grad_out)
            grads = [leaf.grad.numpy() for leaf in leaves if leaf.grad is not None]
            chunks.append(Chunk(cp_size, index, out.detach().numpy(), grads))
        finally:
            spmd.unbind()
    return chunks


def _reference() -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Attention over the whole sequence in one process: the output and the gradients of q, k, v."""
    q, k, v, grad_out = _inputs()
    leaves = [t.requires_grad_() for t in (q, k, v)]
    out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(SHAPE[-1]), dim=-1) @ v
    out.backward(grad_out)
    return out.detach(), [leaf.grad for leaf in leaves if leaf.grad is not None]


def test_ring_attention_type_checks_clean(example_mypy_run: MypyRun) -> None:
    assert example_mypy_run.clean("examples/ring_attention/ring_attention.py"), example_mypy_run.output


@pytest.fixture(scope="module")
def chunks() -> list[Chunk]:
    return [chunk for rank_chunks in gloo_launch.spawn(run_chunks, world_size=4, timeout=60) for chunk in rank_chunks]


@pytest.mark.parametrize("cp_size", list(MESHES))
def test_output_and_gradients_match_full_attention(chunks: list[Chunk], cp_size: int) -> None:
    out, grads = _reference()
    mine = [c for c in chunks if c.cp_size == cp_size]
    assert sorted(c.cp_index for c in mine) == sorted(list(range(cp_size)) * (4 // cp_size))
    for chunk in mine:
        expected = out.chunk(cp_size, dim=2)[chunk.cp_index]
        assert (torch.from_numpy(chunk.out) - expected).abs().max() < TOLERANCE, f"output, cp index {chunk.cp_index}"
        assert len(chunk.grads) == 3, f"q, k, v all get a gradient, cp index {chunk.cp_index}"
        for name, grad, full in zip("qkv", chunk.grads, grads):
            error = (torch.from_numpy(grad) - full.chunk(cp_size, dim=2)[chunk.cp_index]).abs().max()
            assert error < TOLERANCE, f"d{name}, cp index {chunk.cp_index}: {error:.1e}"
