"""spmd_types' type expressions as torchtitan writes them, read into SPMD types (docs/spec.md#spmd_types-vocabulary)."""
from enum import StrEnum, auto

import torch
from torch.distributed import ProcessGroup

import spmd_types as spmd


class MeshAxisName(StrEnum):
    DP = "dp"
    CP = "cp"
    TP = "tp"


def string_keys(loss: torch.Tensor) -> None:
    spmd.assert_type(loss, {"dp": spmd.P, "cp": spmd.P, "tp": spmd.I})
    reveal_type(loss)  # N: Tensor[P@cp, P@dp, I@tp]


def enum_keys(cu_seq_q: torch.Tensor) -> None:
    spmd.assert_type(cu_seq_q, {MeshAxisName.DP: spmd.V, MeshAxisName.TP: spmd.R})
    reveal_type(cu_seq_q)  # N: Tensor[V@dp, R@tp]


def group_keys(logits: torch.Tensor, labels: torch.Tensor, tp_group: ProcessGroup) -> None:
    spmd.assert_type(logits, {tp_group: spmd.S(logits.dim() - 1)})  # a shard of unknown dim: V locally
    spmd.assert_type(labels, {tp_group: spmd.I})
    reveal_type(logits)  # N: Tensor[V@tp]
    reveal_type(labels)  # N: Tensor[I@tp]


def bare_type_and_partition_spec(x_: torch.Tensor, rope_cache: torch.Tensor) -> None:
    spmd.assert_type(x_, spmd.V, spmd.PartitionSpec("dp", "cp", "tp", None))
    spmd.assert_type(rope_cache, spmd.R)
    reveal_type(x_)  # N: Tensor[S(1)@cp, S(0)@dp, S(2)@tp]
    reveal_type(rope_cache)  # N: Tensor[R@cp, R@dp, R@tp]


def shard_group(h: torch.Tensor) -> None:
    spmd.assert_type(h, {"dp": spmd.V, "tp": spmd.V}, partition_spec=spmd.PartitionSpec(("dp", "tp"), None))
    reveal_type(h)  # N: Tensor[S(0)@(dp,tp)]


def local_type_of_another(q: torch.Tensor, out: torch.Tensor, lse: torch.Tensor) -> None:
    spmd.assert_type(q, {"dp": spmd.S(0), "cp": spmd.S(1), "tp": spmd.S(2)})
    q_local = spmd.get_local_type(q)
    spmd.assert_type(out, q_local, None)
    reveal_type(out)  # N: Tensor[V@cp, V@dp, V@tp]
    spmd.assert_type(lse, {**spmd.get_local_type(q), "cp": spmd.R})
    reveal_type(lse)  # N: Tensor[R@cp, V@dp, V@tp]


def local_dict_then_item(logits: torch.Tensor, result: torch.Tensor, tp_group: ProcessGroup) -> None:
    spmd.assert_type(logits, {"dp": spmd.S(0), tp_group: spmd.S(2)})
    output_type = dict(spmd.get_local_type(logits))
    output_type[tp_group] = spmd.I
    spmd.assert_type(result, output_type)
    reveal_type(result)  # N: Tensor[V@dp, I@tp]


def local_dict_changed_in_a_branch(logits: torch.Tensor, result: torch.Tensor, flag: bool) -> None:
    spmd.assert_type(logits, {"tp": spmd.V})
    output_type = dict(spmd.get_local_type(logits))
    if flag:
        output_type["tp"] = spmd.I  # which runs is not known: the dict is not read
    spmd.assert_type(result, output_type)
    reveal_type(result)  # N: Tensor[Any]


def contradicted(labels: torch.Tensor, tp_group: ProcessGroup) -> None:
    spmd.assert_type(labels, {tp_group: spmd.I})
    spmd.assert_type(labels, {MeshAxisName.TP: spmd.R})  # E: spmd-assert assert_type says R@tp but the value is I@tp


def agreeing(labels: torch.Tensor, tp_group: ProcessGroup) -> None:
    spmd.assert_type(labels, {tp_group: spmd.I})
    spmd.assert_type(labels, {MeshAxisName.TP: spmd.I, "dp": spmd.V})
    reveal_type(labels)  # N: Tensor[V@dp, I@tp]


class AutoAxis(StrEnum):
    EP = auto()


def enum_auto_keys(tokens: torch.Tensor) -> None:
    spmd.assert_type(tokens, {AutoAxis.EP: spmd.V})
    reveal_type(tokens)  # N: Tensor[V@ep]
