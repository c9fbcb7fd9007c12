"""Annotations erase to torch.Tensor: introspection and torch.compile see plain tensors."""

import inspect
import typing
from typing import Literal

import pytest
import torch
from spmd_world import SimWorld
from torch._dynamo.testing import CompileCounterWithBackend

import spmd_stubs as spmd
from spmd_stubs import R, S, Sharded, Tensor, V
from spmd_stubs.axes import dp, tp

# No ``from __future__ import annotations``: the annotations are evaluated when
# the functions are defined, the harder case for erasure.


def column_parallel(x: Tensor[R@tp, V@dp], w: Tensor[S(0)@tp]) -> Tensor[S(-1)@tp, V@dp]:
    return x @ w.T


def canonical(x: Tensor[R[tp], V[dp]], w: Tensor[S[0, tp]]) -> Tensor[S[-1, tp], V[dp]]:
    return x @ w.T


def portable(x: Tensor[R[tp], V[dp]], w: Tensor[Sharded[Literal[0], tp]]) -> Tensor[Sharded[Literal[-1], dp, tp]]:
    return x @ w.T


Activation = Tensor[S[0, tp]] if spmd.flags.sequence_parallel else Tensor[R[tp]]
"""A type chosen by a configuration's flag (docs/checker.md#configurations-every-parallel-setting-checked)."""


def chosen_by_flag(x: Activation, w: Tensor[S[0, tp]]) -> Activation:
    return x @ w.T


FUNCTIONS = [column_parallel, canonical, portable, chosen_by_flag]


def test_the_spellings_of_a_shard_are_one_entry() -> None:
    assert Sharded[Literal[0], tp] == S[0, tp] == S(0) @ tp
    assert Sharded[Literal[-1], dp, tp] == S[-1, dp, tp] == S(-1) @ (dp, tp)


def test_flags_read_false_at_run_time_and_choose_a_plain_tensor() -> None:
    assert spmd.flags.sequence_parallel is False and spmd.flags.any_name_at_all is False
    assert Activation is torch.Tensor
    with pytest.raises(AttributeError):
        spmd.flags.__wrapped__  # dunders are not flags: copy and pickle probe them


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_get_type_hints_gives_tensors(fn) -> None:  # type: ignore[no-untyped-def]
    assert typing.get_type_hints(fn) == {"x": torch.Tensor, "w": torch.Tensor, "return": torch.Tensor}


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_signature_gives_tensors(fn) -> None:  # type: ignore[no-untyped-def]
    signature = inspect.signature(fn)
    assert [p.annotation for p in signature.parameters.values()] == [torch.Tensor, torch.Tensor]
    assert signature.return_annotation is torch.Tensor


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_compiles_whole(fn, backend: str) -> None:  # type: ignore[no-untyped-def]
    torch._dynamo.reset()
    counter = CompileCounterWithBackend(backend)
    x, w = torch.randn(3, 4), torch.randn(5, 4)
    compiled = torch.compile(fn, backend=counter, fullgraph=True)
    torch.testing.assert_close(compiled(x, w), fn(x, w))
    assert counter.frame_count == 1


def test_typed_collective_compiles_in_the_simulated_world(sim: SimWorld) -> None:
    """Collectives trace whole under LocalTensorMode (the rank-dependent casts do not:
    LocalTensorMode's per-rank map patches DeviceMesh class attributes, which dynamo
    cannot trace; they are compiled in the gloo world test instead)."""

    def f(x: Tensor[S(0)@tp]) -> Tensor[R@tp]:
        return spmd.all_gather(x * 2, tp, src=S(0), dst=R).sin()

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    parts = {r: torch.arange(2.0) + r for r in range(4)}
    x_eager, x_compiled = sim.make(parts).requires_grad_(), sim.make(parts).requires_grad_()
    f(x_eager).sum().backward()
    y = torch.compile(f, backend=counter, fullgraph=True)(x_compiled)
    y.sum().backward()
    assert counter.frame_count == 1
    assert torch.equal(sim.parts(y)[2], (torch.cat([parts[2], parts[3]]) * 2).sin())
    for rank in range(4):
        torch.testing.assert_close(sim.parts(x_compiled.grad)[rank], sim.parts(x_eager.grad)[rank])
