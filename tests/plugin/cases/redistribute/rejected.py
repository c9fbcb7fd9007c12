"""redistribute(x, src_spec, dst_spec) misuse: each error names the axis, the types and the fix."""
import spmd_stubs as spmd
from spmd_stubs import P, Pmax, R, S, Tensor, V
from spmd_stubs.axes import cp, dp, tp
from spmd_stubs.collectives import redistribute


def input_is_not_src(x: Tensor[S(0)@(dp, tp)], y: Tensor[P@dp, S(1)@tp]) -> None:
    redistribute(x, (S(0)@(tp, dp),), (R@dp, R@tp))  # E: spmd-collective src says S(0)@(tp,dp), but the input is S(0)@(dp,tp) on axis dp
    redistribute(y, (P@dp, S(0)@tp), (R@dp, R@tp))  # E: spmd-collective src says S(0)@tp, but the input is S(1)@tp on axis tp
    reveal_type(redistribute(y, (R@dp, S(1)@tp), (R@dp, R@tp)))  # E: spmd-collective src says R@dp, but the input is P@dp # N: Tensor[R@dp, R@tp]


def unnamed_axis_on_a_moved_dim(x: Tensor[S(0)@(dp, tp), R@cp]) -> None:
    redistribute(x, (S(0)@tp,), (R@tp,))  # E: spmd-collective name dp in both specs
    redistribute(x, (R@cp,), (S(0)@cp,))  # E: spmd-collective dim 0 is resharded by this redistribute, whose specs leave dp out


def invalid_specs(x: Tensor[S(0)@tp, V@dp], z: Tensor[Pmax@dp, P@tp]) -> None:
    redistribute(x, (S(0)@tp, V@dp), (R@tp, V@dp))  # E: spmd-collective src has V@dp
    redistribute(x, (S(0)@tp,), (R@tp, R@dp))  # E: spmd-collective dst names axis dp (R@dp) but its src does not
    redistribute(x, (S(0)@tp, R@tp), (R@tp,))  # E: spmd-collective src: axis tp is given twice (S(0)@tp and R@tp)
    redistribute(z, (Pmax@dp, P@tp), (R@dp, R@tp))  # E: spmd-collective do not commute
    redistribute(x, (R@(dp, tp),), (S(0)@(dp, tp),))  # E: spmd-annotation only a shard spans several axes # E: operator
    redistribute(x, (S(0),), (R@tp,))  # E: spmd-annotation redistribute's src spec takes TYPE@axis arguments # E: arg-type


@spmd.global_spmd(dp, tp)
def global_boundary(x: Tensor[S(0)@(dp, tp)]) -> Tensor[S(0)@(tp, dp)]:
    return redistribute(x, (S(0)@(dp, tp),), (S(1)@(tp, dp),))  # E: spmd-shard-mismatch declared S(0)@dp (order 1) but gets S(1)@dp # E: spmd-shard-mismatch declared S(0)@tp (order 0) but gets S(1)@tp
