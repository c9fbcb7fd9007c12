"""megatron-core's expert mesh: ep (and the expert data-parallel edp) carved out of dp x tp over the same
ranks (ProcessGroupCollection's expt_dp / ep / expt_tp groups); the expert tp axis etp of size 1 here."""
import spmd_stubs as spmd
from spmd_stubs import R, S, Tensor, V
from spmd_stubs.axes import dp, ep, tp
from spmd_stubs.types import MeshAxis


class edp(MeshAxis):  # noqa: N801
    """Expert data parallel."""


class etp(MeshAxis):  # noqa: N801
    """Expert tensor parallel."""


def routed(tokens: Tensor[V@edp, V@ep]) -> Tensor[V@edp, V@ep]:
    return tokens


def dispatch(hidden: Tensor[S(0)@(dp, tp)]) -> Tensor[V@edp, V@ep]:
    return routed(spmd.reinterpret_mesh(hidden, {(dp, tp): (edp, ep)}))


def replicated_gate(hidden: Tensor[R@dp, R@tp]) -> Tensor[R@edp, R@ep]:
    return spmd.reinterpret_mesh(hidden, {(dp, tp): (edp, ep)})


def gate_mixed(hidden: Tensor[V@dp, R@tp]) -> None:
    spmd.reinterpret_mesh(hidden, {(dp, tp): (edp, ep)})  # E: spmd-mesh but x is V@dp, R@tp there
