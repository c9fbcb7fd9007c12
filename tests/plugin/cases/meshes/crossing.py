"""Dense layers on (dp, cp, tp), experts on (dp, ep) over the same ranks (ep the flattening of (cp, tp)):
a value crosses only by reinterpret_mesh, each group's type carried to the new axes."""
import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import cp, dp, ep, tp


def experts(tokens: Tensor[V@ep]) -> Tensor[V@ep]:
    return tokens * 2


def dense_to_experts(h: Tensor[R@dp, V@cp, V@tp]) -> Tensor[V@ep]:
    return experts(h)  # E: spmd-mesh argument tokens is on mesh dense (V@cp, R@dp, V@tp) but is declared on mesh experts (V@ep)


def dense_to_experts_fixed(h: Tensor[R@dp, V@cp, V@tp]) -> Tensor[R@dp, V@ep]:
    return experts(spmd.reinterpret_mesh(h, {(cp, tp): ep}))


def sequence_shards(h: Tensor[S(0)@(dp, cp, tp)]) -> None:
    moved = spmd.reinterpret_mesh(h, {(cp, tp): ep})
    reveal_type(moved)  # N: Tensor[S(0)@(dp,ep)]
    back = spmd.reinterpret_mesh(moved, {ep: (cp, tp)})
    reveal_type(back)  # N: Tensor[S(0)@(dp,cp,tp)]


def out_of_order(h: Tensor[S(0)@(dp, cp, tp)]) -> None:
    moved = spmd.reinterpret_mesh(h, {(tp, cp): ep})
    reveal_type(moved)  # N: Tensor[S(0)@dp, V@ep]


def partial_sums(h: Tensor[P@cp, P@tp, I@dp]) -> Tensor[I@dp, I@ep]:
    moved = spmd.reinterpret_mesh(h, {(cp, tp): ep})
    return moved  # E: return-value "Tensor[I@dp, P@ep]", expected "Tensor[I@dp, I@ep]"


def partial_sums_fixed(h: Tensor[P@cp, P@tp, I@dp]) -> Tensor[I@dp, I@ep]:
    moved = spmd.reinterpret_mesh(h, {(cp, tp): ep})
    return spmd.all_reduce(moved, ep, src=P, dst=I)


def mixed_group(h: Tensor[R@cp, V@tp]) -> None:
    spmd.reinterpret_mesh(h, {(cp, tp): ep})  # E: spmd-mesh reinterpret_mesh moves (cp, tp) to ep, but x is R@cp, V@tp there


def on_both_meshes(h: Tensor[V@tp, V@ep]) -> None:
    spmd.reinterpret_mesh(h, {tp: ep})  # E: spmd-mesh reinterpret_mesh moves tp to ep, but x already has V@ep


def named_twice(h: Tensor[V@tp, V@cp]) -> None:
    spmd.reinterpret_mesh(h, {(cp, tp): (ep, tp)})  # E: spmd-mesh reinterpret_mesh: axis tp is named twice
