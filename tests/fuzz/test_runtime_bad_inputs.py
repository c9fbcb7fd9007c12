"""What the runtime shim does with bad inputs, in the simulated 4-rank world.

Each bad input either gets a clear error (the exception type and the words
that tell the user what to do) or a correct result. docs/robustness.md lists
the same cases and their outcomes.
"""

from __future__ import annotations

from typing import Callable

import pytest
import torch
from spmd_world import SimWorld

import spmd_stubs as spmd
from spmd_stubs import P, R, S, V
from spmd_stubs.axes import cp, tp
from spmd_stubs.mesh import UnboundAxisError

Call = Callable[[SimWorld], torch.Tensor]


def _same(shape: tuple[int, ...]) -> Callable[[SimWorld], torch.Tensor]:
    """Per-rank random tensors of one shape."""
    return lambda w: w.make({r: torch.randn(shape) for r in range(4)})


def _ragged(w: SimWorld) -> torch.Tensor:
    """Ranks disagree on dim 0 (4 rows on even tp ranks, 3 on odd ones)."""
    return w.make({r: torch.randn(4 if r % 2 == 0 else 3, 6) for r in range(4)})


x46, x36 = _same((4, 6)), _same((3, 6))

CLEAR_ERRORS: dict[str, tuple[Call, type[Exception], str]] = {
    "invalid pair names the collective": (lambda w: spmd.reinterpret(x46(w), tp, src=P, dst=R), ValueError, "all_reduce(x, tp, src=P, dst=R)"),
    "gated pair asks for expert_mode": (lambda w: spmd.reinterpret(x46(w), tp, src=R, dst=P), ValueError, "expert_mode=True"),
    "collective given a cast's pair": (lambda w: spmd.all_gather(x46(w), tp, src=P, dst=R), ValueError, "all_reduce"),
    "src that is not a type": (lambda w: spmd.all_reduce(x46(w), tp, src="P", dst=R), TypeError, "R, I, V, P, Pavg, Pmax, Pmin or S(dim)"),  # type: ignore[arg-type]
    "axis given as a string": (lambda w: spmd.all_reduce(x46(w), "tp", src=P, dst=R), TypeError, "MeshAxis"),  # type: ignore[arg-type]
    "axis not bound to a group": (lambda w: spmd.all_reduce(x46(w), cp, src=P, dst=R), UnboundAxisError, "bind_mesh"),
    "unsupported reduce op": (lambda w: spmd.all_reduce(x46(w), tp, src=P, dst=R, op="max"), ValueError, '"sum" or "avg"'),  # type: ignore[arg-type]
    "uneven split without split_sizes": (lambda w: spmd.reduce_scatter(x36(w), tp, src=P, dst=S(0)), ValueError, "split_sizes="),
    "uneven shard of a replicated value": (lambda w: spmd.convert(x36(w), tp, src=R, dst=S(0)), ValueError, "split_sizes="),
    "split_sizes of the wrong length": (lambda w: spmd.reduce_scatter(x36(w), tp, src=P, dst=S(0), split_sizes=[1, 1, 1]), ValueError, "one non-negative size per rank"),
    "split_sizes of the wrong sum": (lambda w: spmd.reduce_scatter(x36(w), tp, src=P, dst=S(0), split_sizes=[1, 1]), ValueError, "summing to the size of dim 0"),
    "V whose dim 0 is not the axis size": (lambda w: spmd.all_to_all(x36(w), tp, src=V, dst=V), ValueError, "dim 0 must have size 2"),
    "ranks disagree on the shape (all_reduce)": (lambda w: spmd.all_reduce(_ragged(w), tp, src=P, dst=R), ValueError, "all_reduce(x, tp, src=P, dst=R) failed in the communication backend"),
    "ranks disagree on the shape (all_to_all)": (lambda w: spmd.all_to_all(_ragged(w), tp, src=S(0), dst=S(1)), ValueError, "ranks of axis tp passing tensors of different shapes"),
}


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"])
def test_backend_error_names_the_call_the_axis_and_the_fix(sim: SimWorld, op: str) -> None:
    """The backend's RuntimeError on ragged parts comes back as a ValueError chained to it."""
    calls = {
        "all_reduce": lambda x: spmd.all_reduce(x, tp, src=P, dst=R),
        "all_gather": lambda x: spmd.all_gather(x, tp, src=S(1), dst=R),
        "reduce_scatter": lambda x: spmd.reduce_scatter(x, tp, src=P, dst=S(1)),
        "all_to_all": lambda x: spmd.all_to_all(x, tp, src=S(0), dst=S(1)),
    }
    with pytest.raises(ValueError) as info:
        calls[op](_ragged(sim))
    message = str(info.value)
    assert f"{op}(x, tp, src=" in message and "axis tp" in message and "shape (" in message, message
    assert "Fix: make the ranks' " in message, message
    assert isinstance(info.value.__cause__, RuntimeError)


@pytest.mark.parametrize("name", list(CLEAR_ERRORS))
def test_bad_input_gets_a_clear_error(sim: SimWorld, name: str) -> None:
    call, error, words = CLEAR_ERRORS[name]
    with pytest.raises(error) as info:
        call(sim)
    assert words in str(info.value)


def test_shard_dim_out_of_range_is_an_error(sim: SimWorld) -> None:
    with pytest.raises(ValueError, match="names dim 5"):
        spmd.all_gather(x36(sim), tp, src=S(5), dst=R)


def test_shard_of_a_scalar_is_a_clear_error(sim: SimWorld) -> None:
    scalar = sim.make({r: torch.tensor(float(r)) for r in range(4)})
    with pytest.raises(ValueError, match="0 dims"):
        spmd.all_gather(scalar, tp, src=S(0), dst=R)


def _parts(sim: SimWorld, t: torch.Tensor) -> dict[int, torch.Tensor]:
    return {r: local.clone() for r, local in sim.parts(t).items()}


@pytest.mark.parametrize(
    "call",
    [
        lambda x: spmd.all_gather(x, tp, src=S(0), dst=R),
        lambda x: spmd.reduce_scatter(x, tp, src=P, dst=S(1)),
        lambda x: spmd.all_to_all(x, tp, src=S(0), dst=S(1)),
        lambda x: spmd.convert(x, tp, src=R, dst=S(1)),
        lambda x: spmd.all_reduce(x, tp, src=P, dst=R),
    ],
    ids=["all_gather", "reduce_scatter", "all_to_all", "convert", "all_reduce"],
)
def test_non_contiguous_input_gives_the_contiguous_result(sim: SimWorld, call: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """A transposed view gives what its contiguous copy gives (values and gradients)."""
    base = {r: torch.randn(6, 4, dtype=torch.float64) for r in range(4)}
    strided = sim.make(base).requires_grad_()
    dense = sim.make(base).requires_grad_()
    out_strided, out_dense = call(strided.transpose(0, 1)), call(dense.transpose(0, 1).contiguous())
    assert not strided.transpose(0, 1).is_contiguous()
    for r, value in _parts(sim, out_dense).items():
        torch.testing.assert_close(_parts(sim, out_strided)[r], value)
    weight = sim.make({r: torch.randn(out_dense.shape, dtype=torch.float64) for r in range(4)})
    (out_strided * weight).sum().backward()
    (out_dense * weight).sum().backward()
    for r, grad in _parts(sim, dense.grad).items():
        torch.testing.assert_close(_parts(sim, strided.grad)[r], grad)


def test_uneven_split_with_split_sizes_is_correct(sim: SimWorld) -> None:
    """reduce_scatter of 3 rows over 2 ranks with split_sizes=[1, 2]: rank k gets its rows of the sum."""
    base = {r: torch.randn(3, 6, dtype=torch.float64) for r in range(4)}
    out = _parts(sim, spmd.reduce_scatter(sim.make(base), tp, src=P, dst=S(0), split_sizes=[1, 2]))
    for d in (0, 1):
        total = base[2 * d] + base[2 * d + 1]
        torch.testing.assert_close(out[2 * d], total[:1])
        torch.testing.assert_close(out[2 * d + 1], total[1:])


def test_ranks_with_uneven_shard_rows_gather_the_whole(sim: SimWorld) -> None:
    """Simulated world: all_gather(S(0)) of 4 and 3 rows gives the 7-row whole on every rank."""
    ragged = _ragged(sim)
    parts = _parts(sim, ragged)
    out = _parts(sim, spmd.all_gather(ragged, tp, src=S(0), dst=R))
    for r, value in out.items():
        first = r - r % 2
        torch.testing.assert_close(value, torch.cat([parts[first], parts[first + 1]]))
