"""spmd_types' local_map: callers see in_types and out_types, on a def and on a function value, as torchtitan writes it."""
import spmd_types as spmd
import torch

from spmd_stubs import P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp


@spmd.local_map(
    in_types=({"dp": spmd.S(1), "tp": spmd.S(2)}, None, None),
    out_types={"dp": spmd.S(0), "tp": spmd.S(2)},
)
def unflatten_to_bld(tensor: torch.Tensor, batch_size: int, seq_len: int) -> torch.Tensor:
    return tensor.reshape(batch_size, seq_len, -1)


@spmd.local_map(out_types=({"dp": spmd.S(0), "tp": spmd.S(2)},) * 3)
def split_qkv(qkv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q, k, v = qkv.chunk(3, dim=-1)
    return q, k, v


def callers(x: Tensor[S(1)@dp, S(2)@tp], qkv: torch.Tensor) -> None:
    reveal_type(unflatten_to_bld(x, 2, 8))  # N: Tensor[S(0)@dp, S(2)@tp]
    reveal_type(split_qkv(qkv)[2])  # N: Tensor[S(0)@dp, S(2)@tp]


def silu_and_mul(gate: Tensor[S(2)@tp], up: Tensor[S(2)@tp]) -> Tensor[S(2)@tp]:
    """fused_swiglu.py's call form: a lambda wrapped and called at once."""
    return spmd.local_map(
        in_types=({"tp": spmd.S(2)}, {"tp": spmd.S(2)}),
        out_types={"tp": spmd.S(2)},
    )(lambda g, u: torch.nn.functional.silu(g) * u)(gate, up)


def entry_conflict(partial: Tensor[P@tp, V@dp]) -> None:
    """The run time's entry check raises on a pending sum where a shard is declared."""
    unflatten_to_bld(partial, 2, 8)  # E: arg-type


def entry_conflict_fixed(partial: Tensor[P@tp, V@dp]) -> None:
    unflatten_to_bld(spmd.reduce_scatter(partial, "tp", dst=spmd.S(2)), 2, 8)


def out_types_used_downstream(x: Tensor[S(1)@dp, S(2)@tp]) -> Tensor[R@tp]:
    return unflatten_to_bld(x, 2, 8)  # E: return-value


def out_types_used_downstream_fixed(x: Tensor[S(1)@dp, S(2)@tp]) -> Tensor[R@tp]:
    return spmd.all_gather(unflatten_to_bld(x, 2, 8), "tp", src=spmd.S(2), dst=spmd.R)
