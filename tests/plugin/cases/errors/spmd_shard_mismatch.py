"""spmd-shard-mismatch: in global SPMD, operands split differently (or one without a partition spec), an op along or reshaping the sharded dim, or a boundary given another split; names the collective that fixes it."""
import spmd_stubs as spmd
from spmd_stubs import S, Tensor
from spmd_stubs.axes import tp


@spmd.global_spmd(tp)
def wrong(x: Tensor[S(0)@tp], y: Tensor[S(1)@tp]) -> Tensor[S(0)@tp]:
    return x + y  # E: spmd-shard-mismatch all_to_all(y, tp, src=S(1), dst=S(0))


@spmd.global_spmd(tp)
def fixed(x: Tensor[S(0)@tp], y: Tensor[S(1)@tp]) -> Tensor[S(0)@tp]:
    z = x + spmd.all_to_all(y, tp, src=S(1), dst=S(0))
    reveal_type(z)  # N: Tensor[S(0)@tp]
    return z
