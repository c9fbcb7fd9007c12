"""spmd-expert-mode: a gated reinterpret/convert without expert_mode=True."""
from spmd_stubs import P, R, Tensor, convert, reinterpret
from spmd_stubs.axes import tp


def wrong(x: Tensor[R@tp]) -> None:
    y = reinterpret(x, tp, src=R, dst=P)  # E: spmd-expert-mode scales the value by the axis size


def fixed(x: Tensor[R@tp]) -> None:
    y = convert(x, tp, src=R, dst=P)  # keeps the value: rank 0 holds it, the others zeros
    z = reinterpret(x, tp, src=R, dst=P, expert_mode=True)  # or: scaling is what you mean
    reveal_type(y)  # N: Tensor[P@tp]
