"""spmd-mesh: a value moved to another mesh (reinterpret_mesh) whose types cannot stand on the new axes (a group of axes holding different types, an axis on both meshes), or a value of one declared mesh passed where another's is declared."""
import spmd_stubs as spmd
from spmd_stubs import R, Tensor, V
from spmd_stubs.axes import cp, ep, tp


def wrong(x: Tensor[R@cp, V@tp]) -> Tensor[V@ep]:
    return spmd.reinterpret_mesh(x, {(cp, tp): ep})  # E: spmd-mesh reinterpret_mesh moves (cp, tp) to ep, but x is R@cp, V@tp there


def fixed(x: Tensor[R@cp, V@tp]) -> Tensor[V@ep]:
    varying = spmd.convert(x, cp, src=R, dst=V)
    moved = spmd.reinterpret_mesh(varying, {(cp, tp): ep})
    reveal_type(moved)  # N: Tensor[V@ep]
    return moved
