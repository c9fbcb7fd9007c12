"""spmd_types' collectives and casts are rows of the typed table: the same results and checks as spmd_stubs'.

The axis is a string, a StrEnum member or a process group, as torchtitan writes it.
"""
from enum import StrEnum

import spmd_types as spmd
import torch
from torch.distributed.device_mesh import DeviceMesh

from spmd_stubs import Group, I, P, R, S, Tensor, V
from spmd_stubs.axes import dp, ep, tp


class MeshAxisName(StrEnum):
    DP = "dp"
    TP = "tp"


def row_parallel_exit(partial: Tensor[P@tp, V@dp]) -> Tensor[I@tp, V@dp]:
    return spmd.all_reduce(partial, "tp", src=spmd.P, dst=spmd.I)


def axis_as_enum_member(partial: Tensor[P@tp, V@dp]) -> None:
    reveal_type(spmd.all_reduce(partial, MeshAxisName.TP, dst=spmd.R))  # N: Tensor[V@dp, R@tp]
    reveal_type(spmd.all_gather(partial, MeshAxisName.DP, dst=spmd.I))  # N: Tensor[I@dp, P@tp]


def axis_as_group(local: Tensor[V@tp], mesh: torch.distributed.device_mesh.DeviceMesh, tp_group: Group[tp]) -> None:
    reveal_type(spmd.reduce_scatter(local, mesh.get_group("tp"), dst=spmd.S(0)))  # N: Tensor[S(0)@tp]
    reveal_type(spmd.convert(local, tp_group, src=spmd.V, dst=spmd.P, expert_mode=True))  # N: Tensor[P@tp]


def reduce_an_invariant(x: Tensor[I@tp]) -> Tensor[R@tp]:
    return spmd.all_reduce(x, "tp", dst=spmd.R)  # E: spmd-collective all_reduce is told src=P, but the input is I@tp


def reduce_an_invariant_fixed(x: Tensor[I@tp]) -> Tensor[R@tp]:
    return spmd.invariant_to_replicate(x, "tp")


def gather_vocab_logits(logits: Tensor[P@tp], mesh: DeviceMesh) -> Tensor[I@tp]:
    """components/loss.py's vocab gather, given logits whose pending sum was never reduced."""
    return spmd.redistribute(logits, mesh.get_group("tp"), src=spmd.S(-1), dst=spmd.I)  # E: spmd-collective redistribute is told src=S(-1), but the input is P@tp


def gather_vocab_logits_fixed(logits: Tensor[S(-1)@tp], mesh: DeviceMesh) -> Tensor[I@tp]:
    return spmd.redistribute(logits, mesh.get_group("tp"), src=spmd.S(-1), dst=spmd.I)


def shard_a_replicated_value(x: Tensor[R@tp]) -> Tensor[S(0)@tp]:
    return spmd.shard(x, "tp", src=spmd.I, dst=spmd.S(0))  # E: spmd-collective spmd.shard (a convert) is told src=I, but the input is R@tp on axis tp


def shard_a_replicated_value_fixed(x: Tensor[R@tp]) -> Tensor[S(0)@tp]:
    return spmd.shard(x, "tp", src=spmd.R, dst=spmd.S(0))


def gated_without_expert_mode(x: Tensor[V@tp]) -> Tensor[P@tp]:
    return spmd.convert(x, "tp", src=spmd.V, dst=spmd.P)  # E: spmd-expert-mode spmd.convert(x, "tp", src=spmd.V, dst=spmd.P, expert_mode=True)


def shard_then_gather(x: Tensor[I@dp]) -> Tensor[R@dp]:
    shards = spmd.shard(x, MeshAxisName.DP, src=spmd.I, dst=spmd.S(1))
    reveal_type(shards)  # N: Tensor[S(1)@dp]
    return spmd.unshard(shards, "dp", src=spmd.S(1), dst=spmd.R)


class TokenDispatcher:
    """models/common/token_dispatcher.py's exchange, with its uneven split sizes (no type of their own)."""

    def __init__(self, ep_group: Group[ep]) -> None:
        self.ep_group = ep_group

    def dispatch(self, routed: Tensor[V@ep], output_splits: list[int], input_splits: list[int]) -> Tensor[V@ep]:
        return spmd.all_to_all(routed, self.ep_group, src=spmd.V, dst=spmd.V,
                               output_split_sizes=output_splits, input_split_sizes=input_splits)

    def combine(self, routed: Tensor[P@ep], output_splits: list[int], input_splits: list[int]) -> Tensor[V@ep]:
        return spmd.all_to_all(routed, self.ep_group, src=spmd.V, dst=spmd.V)  # E: spmd-collective all_to_all is told src=V, but the input is P@ep


def unknown_axis(x: Tensor[P@tp], group: torch.distributed.ProcessGroup) -> None:
    """A group that names no axis: the result keeps the type mypy gives it."""
    reveal_type(spmd.all_reduce(x, group, dst=spmd.R))  # N: Any


def scale_by_the_axis_size(x: Tensor[I@tp]) -> Tensor[P@tp]:
    """spmd_types runs reinterpret(I,P); the spec has no such row (docs/spec.md#deviations)."""
    return spmd.reinterpret(x, "tp", src=spmd.I, dst=spmd.P)  # E: spmd-runtime-rule spmd_types runs reinterpret(src=I, dst=P) on axis tp


def scale_by_the_axis_size_fixed(x: Tensor[I@tp]) -> Tensor[P@tp]:
    return spmd.convert(x, "tp", src=spmd.I, dst=spmd.P, expert_mode=True)


def shards_to_stacked(x: Tensor[S(0)@ep], ep_group: Group[ep]) -> None:
    spmd.all_to_all(x, ep_group, src=spmd.S(0), dst=spmd.V)  # E: spmd-runtime-rule all_to_all between V and S(i)


def shards_to_shards(x: Tensor[S(0)@ep], ep_group: Group[ep]) -> None:
    reveal_type(spmd.all_to_all(x, ep_group, src=spmd.S(0), dst=spmd.S(1)))  # N: Tensor[S(1)@ep]


def reduce_in_place(partial: Tensor[P@tp]) -> Tensor[R@tp]:
    """inplace=True sums into the input itself, which still reads as the pending sum afterwards."""
    spmd.all_reduce(partial, "tp", dst=spmd.R, inplace=True)  # E: spmd-inplace
    return partial  # E: return-value


def reduce_in_place_fixed(partial: Tensor[P@tp]) -> Tensor[R@tp]:
    return spmd.all_reduce(partial, "tp", dst=spmd.R)
