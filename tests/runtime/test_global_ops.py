"""The global-SPMD runtime: ops with ``out_partial_axes`` and the region decorators.

The ops are erasable: each computes exactly torch's op (values and
gradients, bit for bit), whatever ``out_partial_axes`` names.  Arguments are
validated: ``out_partial_axes`` on every call, the decorators' axes once.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import MeshAxis, regions
from spmd_stubs.axes import dp, ep, tp

PARTIALS: list[Any] = [None, tp, (dp, tp)]


def _op(name: str) -> Callable[..., torch.Tensor]:
    """``spmd.<name>``, for calls whose ``out_partial_axes`` is a runtime value.

    The checker types only axes written in the call (``out_partial_axes=tp``);
    these tests pass them as parameters on purpose, to test the runtime.
    """
    op: Callable[..., torch.Tensor] = getattr(spmd, name)
    return op


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# op name -> (our call, torch's call, input shapes)
OPS: dict[str, tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor], list[tuple[int, ...]]]] = {
    "einsum_batched": (
        lambda a, b, p: _op("einsum")("bij,bjk->bik", a, b, out_partial_axes=p),
        lambda a, b: torch.einsum("bij,bjk->bik", a, b),
        [(2, 3, 4), (2, 4, 5)],
    ),
    "einsum_contract_all": (
        lambda a, b, p: _op("einsum")("ij,ij->", a, b, out_partial_axes=p),
        lambda a, b: torch.einsum("ij,ij->", a, b),
        [(3, 4), (3, 4)],
    ),
    "einsum_one_operand": (
        lambda a, p: _op("einsum")("ijk->ki", a, out_partial_axes=p),
        lambda a: torch.einsum("ijk->ki", a),
        [(2, 3, 4)],
    ),
    "matmul": (lambda a, b, p: _op("matmul")(a, b, out_partial_axes=p), torch.matmul, [(2, 3, 4), (4, 5)]),
    "matmul_vector": (lambda a, b, p: _op("matmul")(a, b, out_partial_axes=p), torch.matmul, [(3, 4), (4,)]),
    "linear": (lambda x, w, p: _op("linear")(x, w, out_partial_axes=p), F.linear, [(2, 3, 4), (5, 4)]),
    "linear_bias": (lambda x, w, b, p: _op("linear")(x, w, b, out_partial_axes=p), F.linear, [(3, 4), (5, 4), (5,)]),
    "sum_all": (lambda x, p: _op("sum")(x, out_partial_axes=p), torch.sum, [(2, 3, 4)]),
    "sum_all_keepdim": (
        lambda x, p: _op("sum")(x, None, True, out_partial_axes=p),
        lambda x: x.sum(dim=(0, 1, 2), keepdim=True),
        [(2, 3, 4)],
    ),
    "sum_dim": (lambda x, p: _op("sum")(x, 1, out_partial_axes=p), lambda x: torch.sum(x, 1), [(2, 3, 4)]),
    "sum_dims_keepdim": (
        lambda x, p: _op("sum")(x, [0, -1], keepdim=True, out_partial_axes=p),
        lambda x: torch.sum(x, (0, -1), keepdim=True),
        [(2, 3, 4)],
    ),
    "amax": (lambda x, p: _op("amax")(x, -1, out_partial_axes=p), lambda x: torch.amax(x, -1), [(2, 3, 4)]),
    "amax_dims_keepdim": (
        lambda x, p: _op("amax")(x, (0, 2), True, out_partial_axes=p),
        lambda x: torch.amax(x, (0, 2), True),
        [(2, 3, 4)],
    ),
    "amin": (lambda x, p: _op("amin")(x, 0, out_partial_axes=p), lambda x: torch.amin(x, 0), [(2, 3, 4)]),
    "amin_keepdim": (
        lambda x, p: _op("amin")(x, 1, keepdim=True, out_partial_axes=p),
        lambda x: torch.amin(x, 1, keepdim=True),
        [(2, 3, 4)],
    ),
}


@pytest.mark.parametrize("partial", PARTIALS, ids=["none", "tp", "dp_tp"])
@pytest.mark.parametrize("name", list(OPS))
def test_op_is_torchs_op_values_and_gradients(name: str, partial: Any) -> None:
    ours, theirs, shapes = OPS[name]
    inputs = [_randn(*shape, seed=k).requires_grad_() for k, shape in enumerate(shapes)]
    copies = [t.detach().clone().requires_grad_() for t in inputs]
    got = ours(*inputs, partial)
    want = theirs(*copies)
    assert type(got) is torch.Tensor and got.shape == want.shape and got.dtype == want.dtype
    assert torch.equal(got, want)
    cotangent = _randn(*want.shape, seed=99)
    got.backward(cotangent)
    want.backward(cotangent)
    for k, (a, b) in enumerate(zip(inputs, copies)):
        assert a.grad is not None and b.grad is not None
        assert torch.equal(a.grad, b.grad), f"gradient of input {k}"


def test_result_is_the_local_result_unscaled() -> None:
    """reinterpret(V -> P) is the identity: nothing is scaled or communicated.

    (The local part of a pending sum is read on purpose here, hence ``_op``.)
    """
    x = _randn(3, 4, seed=0)
    assert torch.equal(_op("sum")(x, 1, out_partial_axes=tp), x.sum(1))
    w = torch.eye(4, dtype=torch.float64)
    assert torch.equal(_op("linear")(x, w, out_partial_axes=(dp, tp)), x)


def test_ops_need_no_process_group() -> None:
    """No mesh is bound here: the ops never communicate."""
    from spmd_stubs import mesh

    mesh.unbind()
    assert _op("amax")(torch.arange(6.0).reshape(2, 3), -1, out_partial_axes=tp).tolist() == [2.0, 5.0]


def test_ops_compile_whole() -> None:
    from torch._dynamo.testing import CompileCounterWithBackend

    def f(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = spmd.linear(x.sin(), w, out_partial_axes=tp)
        s = spmd.sum(x, -1, out_partial_axes=tp)
        m = spmd.amax(x, -1, out_partial_axes=dp)
        return y * 2 + s.unsqueeze(-1), m

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    x, w = _randn(2, 3, 4, seed=0), _randn(5, 4, seed=1)
    torch.testing.assert_close(torch.compile(f, backend=counter, fullgraph=True)(x, w), f(x, w))
    assert counter.frame_count == 1


# --------------------------------------------------------------------------
# Argument validation
# --------------------------------------------------------------------------


class other(MeshAxis):  # noqa: N801
    """A user-declared axis."""


# An axis named twice is a DuplicateAxisError (a ValueError): tests/test_duplicate_axes.py.
BAD_AXES = [
    ("tp", "the string 'tp'"),
    (MeshAxis, "a MeshAxis subclass"),
    ((), "an empty tuple"),
    ((tp, "dp"), "the string 'dp'"),
    (3, "a MeshAxis subclass"),
    ([tp], "a MeshAxis subclass"),
    (((dp,), tp), "a MeshAxis subclass"),
]


def _call(name: str, partial: Any) -> torch.Tensor:
    x = torch.ones(2, 2)
    calls: dict[str, Callable[[], torch.Tensor]] = {
        "einsum": lambda: _op("einsum")("ij,jk->ik", x, x, out_partial_axes=partial),
        "matmul": lambda: _op("matmul")(x, x, out_partial_axes=partial),
        "linear": lambda: _op("linear")(x, x, out_partial_axes=partial),
        "sum": lambda: _op("sum")(x, 0, out_partial_axes=partial),
        "amax": lambda: _op("amax")(x, 0, out_partial_axes=partial),
        "amin": lambda: _op("amin")(x, 0, out_partial_axes=partial),
    }
    return calls[name]()


@pytest.mark.parametrize("bad,says", BAD_AXES, ids=lambda v: repr(v))
@pytest.mark.parametrize("name", ["einsum", "matmul", "linear", "sum", "amax", "amin"])
def test_out_partial_axes_is_validated(name: str, bad: Any, says: str) -> None:
    with pytest.raises(TypeError, match=rf"^{name}\(\.\.\., out_partial_axes=\.\.\.\): .*") as info:
        _call(name, bad)
    assert says in str(info.value)


@pytest.mark.parametrize("good", [tp, other, (dp, tp), (tp, other, ep)], ids=repr)
@pytest.mark.parametrize("name", ["einsum", "matmul", "linear", "sum", "amax", "amin"])
def test_out_partial_axes_accepts_axes_and_tuples(name: str, good: Any) -> None:
    assert _call(name, good).shape[-1] == 2


def test_einsum_takes_the_equation_then_tensors() -> None:
    x = torch.ones(2, 2)
    with pytest.raises(TypeError, match="equation comes first"):
        spmd.einsum(x, "ij->j")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="operand 1 must be a tensor, got list"):
        spmd.einsum("ij,jk->ik", x, [x])  # type: ignore[arg-type]


@pytest.mark.parametrize("op", [spmd.sum, spmd.amax, spmd.amin])
def test_dims_must_be_ints(op: Callable[..., torch.Tensor]) -> None:
    with pytest.raises(TypeError, match="dim must be an int or a sequence of ints"):
        op(torch.ones(2, 2), 0.5)
    with pytest.raises(TypeError, match="dim must be an int or a sequence of ints"):
        op(torch.ones(2, 2), True)


# --------------------------------------------------------------------------
# The region decorators
# --------------------------------------------------------------------------

DECORATORS = {"global_spmd": (spmd.global_spmd, regions.GLOBAL_ATTR), "local_map": (spmd.local_map, regions.LOCAL_ATTR)}


@pytest.mark.parametrize("kind", list(DECORATORS))
@pytest.mark.parametrize(
    "axes,recorded",
    [((tp,), (tp,)), ((dp, tp), (dp, tp)), (((dp, tp),), (dp, tp)), ((other, (dp, ep)), (other, dp, ep))],
    ids=["tp", "dp,tp", "(dp,tp)", "other,(dp,ep)"],
)
def test_decorator_returns_the_function_and_records_axes(kind: str, axes: tuple[Any, ...], recorded: tuple[Any, ...]) -> None:
    decorator, attr = DECORATORS[kind]

    def f(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    assert decorator(*axes)(f) is f
    assert getattr(f, attr) == recorded
    getter = regions.global_axes_of if kind == "global_spmd" else regions.local_axes_of
    assert getter(f) == recorded
    assert f(torch.zeros(1)).item() == 1.0


@pytest.mark.parametrize("kind", list(DECORATORS))
@pytest.mark.parametrize("bad,says", BAD_AXES, ids=lambda v: repr(v))
def test_decorator_axes_are_validated_at_decoration(kind: str, bad: Any, says: str) -> None:
    decorator, _ = DECORATORS[kind]
    with pytest.raises(TypeError, match=rf"^{kind}\(\.\.\.\): ") as info:
        decorator(bad)
    assert says in str(info.value)


@pytest.mark.parametrize("kind", list(DECORATORS))
def test_decorator_needs_axes(kind: str) -> None:
    decorator, _ = DECORATORS[kind]
    with pytest.raises(TypeError, match="name at least one mesh axis"):
        decorator()


@pytest.mark.parametrize("kind", list(DECORATORS))
def test_decorator_without_parentheses_says_so(kind: str) -> None:
    decorator, _ = DECORATORS[kind]

    def f() -> None: ...

    with pytest.raises(TypeError, match=r"a function: write the decorator with its axes"):
        decorator(f)  # type: ignore[arg-type]


def test_decorator_takes_a_callable_once() -> None:
    with pytest.raises(TypeError, match="decorates a function"):
        spmd.global_spmd(tp)(3)  # type: ignore[type-var]

    def f() -> None: ...

    spmd.global_spmd(tp)(f)
    with pytest.raises(TypeError, match="already decorated"):
        spmd.global_spmd(dp)(f)
    with pytest.raises(TypeError, match="both global and local on tp"):
        spmd.local_map(ep, tp)(f)
    assert spmd.local_map(ep)(f) is f  # a different axis: global on tp, local on ep
    assert (regions.global_axes_of(f), regions.local_axes_of(f)) == ((tp,), (ep,))


def test_undecorated_functions_have_no_axes() -> None:
    assert regions.global_axes_of(len) == () and regions.local_axes_of(test_undecorated_functions_have_no_axes) == ()


def test_decorated_methods_and_nested_defs() -> None:
    class Layer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.eye(2))

        @spmd.global_spmd(tp)
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            @spmd.local_map(tp)
            def inner(h: torch.Tensor) -> torch.Tensor:
                return h * 2

            return inner(spmd.linear(x, self.w, out_partial_axes=tp))

    layer = Layer()
    assert regions.global_axes_of(Layer.forward) == (tp,)
    assert layer(torch.ones(1, 2)).tolist() == [[2.0, 2.0]]


def test_decorated_function_compiles_whole() -> None:
    from torch._dynamo.testing import CompileCounterWithBackend

    @spmd.global_spmd(tp)
    def f(x: torch.Tensor) -> torch.Tensor:
        return spmd.sum(x.cos(), 0, out_partial_axes=tp)

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    x = _randn(3, 2, seed=0)
    torch.testing.assert_close(torch.compile(f, backend=counter, fullgraph=True)(x), f(x))
    assert counter.frame_count == 1


def test_regions_import_without_torch() -> None:
    """The decorators are free at import: spmd_stubs.regions does not load torch."""
    code = (
        "import sys, spmd_stubs as spmd\n"
        "from spmd_stubs.axes import tp\n"
        "spmd.global_spmd(tp)(lambda: None); spmd.local_map(tp)(lambda: None)\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_ops_are_exported_but_not_star_imported() -> None:
    namespace: dict[str, Any] = {}
    exec("from spmd_stubs import *", namespace)
    assert namespace["global_spmd"] is spmd.global_spmd and namespace["local_map"] is spmd.local_map
    assert "sum" not in namespace and "einsum" not in namespace
    from spmd_stubs import ops

    assert (spmd.einsum, spmd.matmul, spmd.linear, spmd.sum, spmd.amax, spmd.amin) == (
        ops.einsum, ops.matmul, ops.linear, ops.sum, ops.amax, ops.amin,
    )
