"""``get_partition_spec(q)`` as torchtitan's attention passes it on: q's known shards, read where q's type is
known (models/common/attention.py retypes a kernel's output like its query)."""
import torch
from spmd_types.runtime import get_partition_spec

import spmd_types as spmd


def output_like_query(q: torch.Tensor, out: torch.Tensor, lse: torch.Tensor) -> None:
    spmd.assert_type(q, {"dp": spmd.S(0), "tp": spmd.S(1), "cp": spmd.S(2)})
    q_local = spmd.get_local_type(q)
    q_ps = get_partition_spec(q)
    spmd.assert_type(out, q_local, q_ps)
    reveal_type(out)  # N: Tensor[S(2)@cp, S(0)@dp, S(1)@tp]
    lse_ps = None if q_ps is None else spmd.PartitionSpec(*q_ps[:-1])  # which dim is last is not known
    spmd.assert_type(lse, q_local, lse_ps)
    reveal_type(lse)  # N: Tensor[V@cp, V@dp, V@tp]


def dims_swapped(q_TNH: torch.Tensor, lse_NT: torch.Tensor) -> None:
    spmd.assert_type(q_TNH, {"cp": spmd.S(0), "tp": spmd.S(1)})
    q_local = spmd.get_local_type(q_TNH)
    q_ps = spmd.get_partition_spec(q_TNH)
    lse_ps = None if q_ps is None else spmd.PartitionSpec(q_ps[1], q_ps[0])
    spmd.assert_type(lse_NT, q_local, lse_ps)
    reveal_type(lse_NT)  # N: Tensor[S(1)@cp, S(0)@tp]


def dim_counted_from_the_back(q: torch.Tensor, lse: torch.Tensor) -> None:
    spmd.assert_type(q, {"tp": spmd.S(-1)})
    q_ps = get_partition_spec(q)
    lse_ps = None if q_ps is None else spmd.PartitionSpec(q_ps[1], q_ps[0])
    spmd.assert_type(lse, spmd.get_local_type(q), lse_ps)
    reveal_type(lse)  # N: Tensor[V@tp]


def query_unknown(q: torch.Tensor, out: torch.Tensor) -> None:
    spmd.assert_type(out, {"tp": spmd.V}, get_partition_spec(q))
    reveal_type(out)  # N: Tensor[V@tp]


def replicated_output_like_sharded_query(q: torch.Tensor, out: torch.Tensor) -> None:
    spmd.assert_type(q, {"tp": spmd.S(1)})
    spmd.assert_type(out, {"tp": spmd.R})
    spmd.assert_type(out, spmd.get_local_type(q), get_partition_spec(q))  # E: spmd-assert assert_type says S(1)@tp but the value is R@tp


def sharded_output_like_sharded_query(q: torch.Tensor, out: torch.Tensor) -> None:
    spmd.assert_type(q, {"tp": spmd.S(1)})
    spmd.assert_type(out, {"tp": spmd.R})
    out = spmd.convert(out, "tp", src=spmd.R, dst=spmd.S(1))
    spmd.assert_type(out, spmd.get_local_type(q), get_partition_spec(q))
    reveal_type(out)  # N: Tensor[S(1)@tp]
