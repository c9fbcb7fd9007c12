"""Programs written in global SPMD compute the single-device program: values and gradients.

Each program of ``examples/global_mlp.py`` is ``@spmd.global_spmd(tp)``: its
inputs are pieces of full tensors per their partition specs (``S(i)@tp``) or
the full tensors (``R@tp``).  On a 2 dp x 2 tp mesh, each dp group gets its
own full tensors; every rank's output must be its piece of the reference
(the program's meaning on one device), and after a backward whose loss sums
to the single-device loss ``<reference, G>``:

* an ``S(i)@tp`` input's gradient on each rank is its piece of the
  single-device gradient;
* an ``R@tp`` input's gradients (``P@tp``: parts of a sum) add up over the tp
  group to the single-device gradient.

The programs cover (a) the row-parallel linear, (b) the column- then
row-parallel MLP (also with a ``local_map`` tail), (c) a sum over a sharded
dim, (d) einsums over a sharded batch dim and over a contracted sharded dim
(and ``spmd.matmul``), (e) a vocab-parallel max (``amax`` with
``out_partial_axes`` is a pending max, ``all_reduce(src=Pmax)``) and
log-softmax.  Run in the simulated world (one process, ``LocalTensorMode``)
and on 4 real gloo processes.  Sabotaged programs show the check catches a
wrong value, a wrong gradient and a max reduced as a sum.
"""

from __future__ import annotations

import functools
import sys
import zlib
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Union

import pytest
import torch
from spmd_cases import Parts, World
from spmd_world import GROUPS, Check, GlooWorld, SimWorld, gloo_tests
from torch.distributed._local_tensor import maybe_disable_local_tensor_mode
from torch.distributed.device_mesh import DeviceMesh

import spmd_stubs as spmd
from spmd_stubs import I, P, R, V
from spmd_stubs.axes import tp

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
import global_mlp  # noqa: E402

Placement = Union[int, str]  # a shard dim (S(i)@tp) or "R"
TP_GROUPS = GROUPS["tp"]


@dataclass(frozen=True)
class Program:
    """A global program's signature on tp: each input's placement and full shape, the output's placement."""

    inputs: tuple[tuple[Placement, tuple[int, ...]], ...]
    output: Placement


PROGRAMS: dict[str, Program] = {
    # (a) row-parallel linear: contraction over the split dim, out_partial_axes, all_reduce(P, R)
    "row_parallel_linear": Program(((-1, (3, 4, 6)), (1, (5, 6))), "R"),
    "column_parallel_linear": Program((("R", (3, 4, 6)), (0, (8, 6))), -1),
    # (b) column-parallel -> gelu -> row-parallel; and the same with a local_map tail
    "mlp": Program((("R", (3, 4, 6)), (0, (8, 6)), (1, (5, 8))), "R"),
    "mlp_local_tail": Program((("R", (3, 4, 6)), (0, (8, 6)), (1, (5, 8))), "R"),
    # (c) a sum over the split dim
    "row_norms": Program(((1, (3, 8)),), "R"),
    # (d) einsum over a split batch dim (no comm), and contractions over a split dim
    "batched_chain": Program(((0, (4, 3, 5)), (0, (4, 5, 2)), ("R", (2, 3))), 0),
    "contracted_einsum": Program(((1, (3, 8)), (0, (8, 5))), "R"),
    "contracted_matmul": Program(((-1, (2, 3, 8)), (0, (8, 5))), "R"),
    # (e) vocab-parallel max and log-softmax: a pending max (Pmax) from amax, all_reduce(Pmax, R)
    "vocab_max": Program(((-1, (3, 4, 10)),), "R"),
    "vocab_log_softmax": Program(((-1, (3, 4, 10)),), -1),
}


def single_device() -> AbstractContextManager[object]:
    """Plain torch on plain tensors (the simulated world's mode off; a no-op on gloo ranks)."""
    return maybe_disable_local_tensor_mode()


def piece(full: torch.Tensor, placement: Placement, n: int, k: int) -> torch.Tensor:
    """Member k's tensor: its chunk of dim i for S(i), the whole tensor for R."""
    if isinstance(placement, str):
        return full.clone()
    return full.chunk(n, placement)[k].clone()


def _full_tensors(name: str, program: Program, group_index: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The full inputs and output cotangent of one dp group (each group gets its own)."""
    gen = torch.Generator().manual_seed(zlib.crc32(name.encode()) + 7919 * group_index)
    full = [torch.randn(shape, generator=gen, dtype=torch.float64) for _, shape in program.inputs]
    reference = global_mlp.REFERENCES[name](*full)
    cotangent = torch.randn(reference.shape, generator=gen, dtype=torch.float64)
    return full, cotangent


def check_program(world: World, name: str, fn: Callable[..., torch.Tensor] | None = None) -> None:
    """Run program ``name`` (or ``fn`` in its place) on every tp group and compare with one device."""
    program = PROGRAMS[name]
    fn = fn if fn is not None else getattr(global_mlp, name)
    reference_fn = global_mlp.REFERENCES[name]
    n = len(TP_GROUPS[0])
    input_parts: list[Parts] = [{} for _ in program.inputs]
    cotangent_parts: Parts = {}
    expected: dict[int, dict[str, object]] = {}
    for group_index, group in enumerate(TP_GROUPS):
        with single_device():
            full, cotangent = _full_tensors(name, program, group_index)
            leaves = [t.clone().requires_grad_() for t in full]
            reference = reference_fn(*leaves)
            reference.backward(cotangent)
        expected[group_index] = {
            "output": reference.detach(),
            "loss": (reference.detach() * cotangent).sum(),
            "grads": [leaf.grad for leaf in leaves],
        }
        for k, rank in enumerate(group):
            for i, (placement, _) in enumerate(program.inputs):
                input_parts[i][rank] = piece(full[i], placement, n, k)
            cotangent_parts[rank] = piece(cotangent, program.output, n, k)

    inputs = [world.make(parts).requires_grad_() for parts in input_parts]
    y = fn(*inputs)
    g = world.make(cotangent_parts)
    # A loss that is P@tp, whose sum over the group is <reference, G>:
    # an R output is counted once (convert(R, P): rank 0 keeps it, backward
    # gives G to rank 0 only, a P@tp gradient summing to G); an S(i) output's
    # pieces each contribute their part (reinterpret(V, P), identity backward).
    if program.output == "R":
        loss = (spmd.convert(y, tp, src=R, dst=P) * g).sum()
    else:
        loss = spmd.reinterpret((y * g).sum(), tp, src=V, dst=P)
    loss.backward()

    outputs, losses = world.parts(y), world.parts(loss)
    assert all(x.grad is not None for x in inputs), f"{name}: an input got no gradient"
    grads = [world.parts(x.grad) for x in inputs if x.grad is not None]
    with single_device():
        _compare(name, program, expected, outputs, losses, grads)


def _compare(
    name: str,
    program: Program,
    expected: dict[int, dict[str, object]],
    outputs: Parts,
    losses: Parts,
    grads: list[Parts],
) -> None:
    n = len(TP_GROUPS[0])
    for group_index, group in enumerate(TP_GROUPS):
        want = expected[group_index]
        for k, rank in enumerate(group):
            torch.testing.assert_close(
                outputs[rank], piece(want["output"], program.output, n, k),  # type: ignore[arg-type]
                msg=lambda m: f"{name}: output on rank {rank}: {m}",
            )
        torch.testing.assert_close(
            sum(losses[r] for r in group), want["loss"], msg=lambda m: f"{name}: loss of group {group}: {m}"
        )
        for i, (placement, _) in enumerate(program.inputs):
            full_grad: torch.Tensor = want["grads"][i]  # type: ignore[index]
            if placement == "R":
                torch.testing.assert_close(
                    sum(grads[i][r] for r in group), full_grad,
                    msg=lambda m: f"{name}: input {i} (R@tp) gradient summed over group {group}: {m}",
                )
                continue
            for k, rank in enumerate(group):
                torch.testing.assert_close(
                    grads[i][rank], piece(full_grad, placement, n, k),
                    msg=lambda m: f"{name}: input {i} (S({placement})@tp) gradient on rank {rank}: {m}",
                )


# --------------------------------------------------------------------------
# Sabotaged programs: the check must catch them
# --------------------------------------------------------------------------


@spmd.global_spmd(tp)
def _row_parallel_without_reduction(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Wrong value: the partial product is never summed."""
    return spmd.linear(x, w, out_partial_axes=tp)


@spmd.global_spmd(tp)
def _row_parallel_reduced_to_invariant(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Right value, wrong gradient for an R result: all_reduce(P, I)'s backward does not sum."""
    return spmd.all_reduce(spmd.linear(x, w, out_partial_axes=tp), tp, src=P, dst=I)


@spmd.global_spmd(tp)
def _vocab_max_reduced_with_sum(logits: torch.Tensor) -> torch.Tensor:
    """Wrong value: the slices' maxima are added, not maxed (a Pmax resolved as a sum)."""
    local_max = spmd.amax(logits, -1, out_partial_axes=tp)
    return spmd.all_reduce(local_max, tp, src=P, dst=R)  # type: ignore[spmd-collective]  # the checker rejects it too


SABOTAGED: dict[str, tuple[str, Callable[..., torch.Tensor], str]] = {
    "wrong_value": ("row_parallel_linear", _row_parallel_without_reduction, "output on rank"),
    "wrong_gradient": ("row_parallel_linear", _row_parallel_reduced_to_invariant, "gradient on rank"),
    "max_reduced_with_sum": ("vocab_max", _vocab_max_reduced_with_sum, "output on rank"),
}


def _sabotage_caught(world: World, name: str, fn: Callable[..., torch.Tensor], says: str) -> None:
    try:
        check_program(world, name, fn)
    except AssertionError as error:
        assert says in str(error), str(error)
        return
    raise AssertionError(f"check_program accepted a wrong {name} (expected a mismatch in: {says})")


# --------------------------------------------------------------------------
# Simulated world
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_sim_matches_single_device(sim: SimWorld, name: str) -> None:
    check_program(sim, name)


@pytest.mark.parametrize("name", list(SABOTAGED))
def test_sim_catches_sabotage(sim: SimWorld, name: str) -> None:
    _sabotage_caught(sim, *SABOTAGED[name])


def test_every_example_program_is_checked_and_global_on_tp() -> None:
    from spmd_stubs.regions import global_axes_of

    programs = {k for k, v in vars(global_mlp).items() if callable(v) and global_axes_of(v)}
    assert programs == set(PROGRAMS) == set(global_mlp.REFERENCES)
    assert all(global_axes_of(getattr(global_mlp, k)) == (tp,) for k in programs)


# --------------------------------------------------------------------------
# Real gloo processes
# --------------------------------------------------------------------------


def _on_gloo(check: Callable[[World], None], mesh: DeviceMesh) -> None:
    spmd.bind_mesh(mesh)
    try:
        check(GlooWorld())
    finally:
        spmd.unbind()


def _gloo_check(name: str, mesh: DeviceMesh) -> None:
    _on_gloo(lambda world: check_program(world, name), mesh)


def _gloo_sabotage(name: str, mesh: DeviceMesh) -> None:
    _on_gloo(lambda world: _sabotage_caught(world, *SABOTAGED[name]), mesh)


CHECKS: dict[str, Check] = {
    **{name: functools.partial(_gloo_check, name) for name in PROGRAMS},
    **{f"sabotage:{name}": functools.partial(_gloo_sabotage, name) for name in SABOTAGED},
}


gloo_world, test_gloo = gloo_tests(__name__, CHECKS)
