"""DTensor interop: to_local's result has the declared types; from_local checks them against x."""
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor

from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp
from spmd_stubs.dtensor import from_local, to_local


def local_view(dt: DTensor) -> None:
    x = to_local(dt, S(0)@dp, R@tp)
    reveal_type(x)  # N: Tensor[S(0)@dp, R@tp]
    y = to_local(dt, S(0)@(dp, tp))
    reveal_type(y)  # N: Tensor[S(0)@(dp,tp)]


def back_to_dtensor(x: Tensor[V@dp, P@tp], mesh: DeviceMesh) -> None:
    from_local(x, mesh, S(0)@dp, P@tp)
    from_local(x, mesh, S(0)@dp, I@tp)  # E: spmd-assert says I@tp but the value is P@tp


def malformed(dt: DTensor) -> None:
    to_local(dt, "R@tp")  # E: spmd-annotation  # E: arg-type
