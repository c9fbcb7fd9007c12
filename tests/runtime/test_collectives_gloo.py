"""Every typed operation on 4 real gloo processes (2 dp x 2 tp), plus binding and compile.

One world runs all the checks below (``CHECKS``); each check is reported as
its own test.
"""

from __future__ import annotations

import functools
import sys
from typing import Callable

import torch
import torch.distributed as dist
from spmd_cases import cases, check, check_in_place, in_place_cases
from spmd_world import GROUPS, Check, GlooWorld, gloo_tests
from torch.distributed.device_mesh import DeviceMesh
from torch.overrides import TorchFunctionMode

import spmd_stubs as spmd
from spmd_stubs import R, S, V
from spmd_stubs.axes import dp, tp


def _case_check(run, case, axis, groups, mesh: DeviceMesh) -> None:  # type: ignore[no-untyped-def]
    """``run`` (:func:`check` or :func:`check_in_place`) on this world, the mesh bound."""
    spmd.bind_mesh(mesh)
    try:
        run(GlooWorld(), case, axis, groups)
    finally:
        spmd.unbind()


def _rank_tensor() -> torch.Tensor:
    return torch.tensor([float(dist.get_rank())])


def _all_groups(groups: list[list[int]]) -> dist.ProcessGroup:
    """Create every group (all ranks must, in the same order); return this rank's."""
    mine = None
    for ranks in groups:
        group = dist.new_group(ranks)
        if dist.get_rank() in ranks:
            mine = group
    assert mine is not None
    return mine


def flattened_order_from_mesh(mesh: DeviceMesh) -> None:
    """(dp, tp) and (tp, dp) flatten outer-first: gathering ranks shows the order."""
    spmd.bind_mesh(mesh)
    try:
        for axes, key in [((dp, tp), "dp_tp"), ((tp, dp), "tp_dp")]:
            got = spmd.all_gather(_rank_tensor(), axes, src=S(0), dst=R)
            assert got.tolist() == [float(r) for r in GROUPS[key][0]], (axes, got)
    finally:
        spmd.unbind()


def flattened_order_from_groups(mesh: DeviceMesh) -> None:
    """Axes bound to explicit groups: the product group is built in flattened order."""
    spmd.bind_groups({tp: _all_groups(GROUPS["tp"]), dp: _all_groups(GROUPS["dp"])})
    try:
        for axes, key in [((dp, tp), "dp_tp"), ((tp, dp), "tp_dp")]:
            got = spmd.all_gather(_rank_tensor(), axes, src=S(0), dst=R)
            assert got.tolist() == [float(r) for r in GROUPS[key][0]], (axes, got)
            total = spmd.all_reduce(_rank_tensor(), axes, src=V, dst=R)
            assert total.item() == 6.0
    finally:
        spmd.unbind()


def explicit_flattened_group(mesh: DeviceMesh) -> None:
    spmd.bind_groups({(dp, tp): dist.group.WORLD})
    try:
        assert spmd.group_of((dp, tp)) is dist.group.WORLD
        assert spmd.all_reduce(_rank_tensor(), (dp, tp), dst=R).item() == 6.0
    finally:
        spmd.unbind()


def group_argument_overrides_the_binding(mesh: DeviceMesh) -> None:
    spmd.bind_mesh(mesh)
    try:
        # Bound tp sums within {0,1}/{2,3}; group= the dp group sums {0,2}/{1,3}.
        got = spmd.all_reduce(_rank_tensor(), tp, dst=R, group=mesh.get_group("dp"))
        assert got.item() == {0: 2.0, 1: 4.0, 2: 2.0, 3: 4.0}[dist.get_rank()]
    finally:
        spmd.unbind()


def compiles_with_collectives_and_casts(mesh: DeviceMesh) -> None:
    """A typed function traces whole (fullgraph) and matches eager, values and grads."""
    from torch._dynamo.testing import CompileCounterWithBackend

    def f(x: torch.Tensor) -> torch.Tensor:
        shard = spmd.convert(x.sin(), tp, src=R, dst=S(0))
        return spmd.all_gather(shard * 2, tp, src=S(0), dst=R).sum()

    spmd.bind_mesh(mesh)
    try:
        counter = CompileCounterWithBackend("aot_eager")
        compiled = torch.compile(f, backend=counter, fullgraph=True)
        x_eager = torch.arange(4.0, requires_grad=True)
        x_compiled = torch.arange(4.0, requires_grad=True)
        f(x_eager).backward()
        compiled(x_compiled).backward()
        assert counter.frame_count == 1
        torch.testing.assert_close(x_compiled.grad, x_eager.grad)
    finally:
        spmd.unbind()


def compiles_once_for_new_axes(mesh: DeviceMesh) -> None:
    """The first use of an axis inside compiled code costs no recompile, nor does an eager call or a new group between.

    Traced code reads and fills no group cache, nor torch's registry of
    groups (dynamo would guard on their contents, and the next call would
    find them changed).
    """
    from torch._dynamo.testing import CompileCounterWithBackend

    def f(x: torch.Tensor) -> torch.Tensor:
        y = spmd.all_reduce(x.sin(), tp, src=V, dst=R)
        y = spmd.all_gather(y, dp, src=V, dst=R)
        return spmd.all_reduce(y, (dp, tp), src=V, dst=R, op="avg")

    spmd.bind_mesh(mesh)  # fresh bindings: no axis resolved yet
    try:
        spmd.group_of((dp, tp))  # a flattened group is built eagerly, once
        counter = CompileCounterWithBackend("aot_eager")
        compiled = torch.compile(f, backend=counter, fullgraph=True)
        x = torch.arange(4.0) + dist.get_rank()
        first, second = compiled(x), compiled(x)
        assert counter.frame_count == 1, f"recompiled: {counter.frame_count} frames after two calls"
        eager = f(x)  # fills the eager caches
        third = compiled(x)
        assert counter.frame_count == 1, f"recompiled after an eager call: {counter.frame_count} frames"
        dist.new_group(list(range(dist.get_world_size())))  # a side group, as checkpointing makes
        fourth = compiled(x)
        assert counter.frame_count == 1, f"recompiled after a new group: {counter.frame_count} frames"
        for got in (first, second, third, fourth):
            torch.testing.assert_close(got, eager)
    finally:
        spmd.unbind()


def compiles_the_in_place_all_reduce(mesh: DeviceMesh) -> None:
    """all_reduce_ traces whole (fullgraph) and writes the eager sum into its input."""
    from torch._dynamo.testing import CompileCounterWithBackend

    def sync(g: torch.Tensor) -> torch.Tensor:
        return spmd.all_reduce_(g, dp, src=spmd.P, dst=R)

    spmd.bind_mesh(mesh)
    try:
        counter = CompileCounterWithBackend("aot_eager")
        compiled = torch.compile(sync, backend=counter, fullgraph=True)
        eager, traced = (torch.arange(4.0) + dist.get_rank() for _ in range(2))
        assert sync(eager) is eager
        compiled(traced)
        assert counter.frame_count == 1
        torch.testing.assert_close(traced, eager)
    finally:
        spmd.unbind()


def backward_leaves_a_shared_gradient_alone(mesh: DeviceMesh) -> None:
    """convert(I,R)'s backward all-reduces a copy of the gradient it is handed.

    autograd may hand the same gradient tensor to another node too (``y + c``
    gives both operands the very same tensor), so a backward that reduced it
    in place, as Megatron's ``_CopyToModelParallelRegion`` does, would also
    sum ``c``'s gradient over tp.  ``c`` is made first so that autograd runs
    the cast's backward before ``c``'s.
    """
    spmd.bind_mesh(mesh)
    try:
        b = torch.ones(3, requires_grad=True)
        c = b * 1.0
        x = torch.ones(3, requires_grad=True)
        y = spmd.convert(x, tp, src=spmd.I, dst=R)
        (y + c).backward(torch.full((3,), float(dist.get_rank() + 1)))
        assert b.grad is not None and x.grad is not None
        torch.testing.assert_close(b.grad, torch.full((3,), float(dist.get_rank() + 1)))
        tp_sum = sum(float(r + 1) for r in GROUPS["tp"][dist.get_rank() // 2])
        torch.testing.assert_close(x.grad, torch.full((3,), tp_sum))
    finally:
        spmd.unbind()


_COLLECTIVES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "all_reduce": lambda x: spmd.all_reduce(x, tp, src=spmd.P, dst=R),
    "all_reduce_": lambda x: spmd.all_reduce_(x.clone(), tp, src=spmd.P, dst=R),
    "all_gather": lambda x: spmd.all_gather(x, tp, src=S(0), dst=R),
    "reduce_scatter": lambda x: spmd.reduce_scatter(x, tp, src=spmd.P, dst=S(0)),
    "all_to_all": lambda x: spmd.all_to_all(x, tp, src=S(0), dst=S(0)),
}


class _SeenCalls(TorchFunctionMode):
    """Records the name of every function torch hands it, then runs the function."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.names.append(getattr(func, "__name__", ""))
        return func(*args, **(kwargs or {}))


def complex_and_torch_function_calls_keep_torch_distributed(mesh: DeviceMesh) -> None:
    """The direct c10d path leaves to ``torch.distributed``'s functions what they do first.

    A complex tensor is reduced as its real view; under a torch function mode
    (non-strict export maps collectives to functional ones in one) the mode
    sees every collective, as it would in raw code.
    """
    spmd.bind_mesh(mesh)
    try:
        tp_ranks = GROUPS["tp"][dist.get_rank() // 2]
        z = torch.tensor([complex(1, dist.get_rank())])
        total = spmd.all_reduce(z, tp, src=spmd.P, dst=R)
        torch.testing.assert_close(total, torch.tensor([complex(2, sum(tp_ranks))]))
        gathered = spmd.all_gather(z, tp, src=S(0), dst=R)
        torch.testing.assert_close(gathered, torch.tensor([complex(1, r) for r in tp_ranks]))
        with _SeenCalls() as mode:
            x = _rank_tensor().repeat(2)
            for collective in _COLLECTIVES.values():
                collective(x)
        assert {"all_reduce", "all_gather_single", "reduce_scatter_single", "all_to_all_single"} <= set(mode.names)
    finally:
        spmd.unbind()


class _Recording(torch.Tensor):
    """A tensor subclass that records the name of every function torch hands it."""

    seen: list[str] = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        cls.seen.append(getattr(func, "__name__", ""))
        return super().__torch_function__(func, types, args, kwargs or {})


class _Reentrant(torch.Tensor):
    """A tensor subclass whose handler calls ``all_reduce`` on itself again, without end (a bug in it)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if getattr(func, "__name__", "") == "all_reduce":
            return func(*args, **(kwargs or {}))
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


def tensor_subclasses_keep_torch_distributed(mesh: DeviceMesh) -> None:
    """A tensor subclass is handed every collective, as in raw code, and its own errors reach the caller as they are.

    Only a ``RuntimeError`` of the backend becomes the shim's ``ValueError``
    about ranks that disagree: the subclass's endless recursion is none.
    """
    spmd.bind_mesh(mesh)
    try:
        x = _rank_tensor().repeat(2).as_subclass(_Recording)
        for collective in _COLLECTIVES.values():
            collective(x)
        seen = set(_Recording.seen)
        assert {"all_reduce", "all_gather_single", "reduce_scatter_single", "all_to_all_single"} <= seen, seen
        try:
            spmd.all_reduce_(_rank_tensor().as_subclass(_Reentrant), tp, src=spmd.P, dst=R)
        except RecursionError:
            pass
        else:
            raise AssertionError("the subclass's recursion did not reach the caller")
    finally:
        spmd.unbind()


def coalescing_block_queues_typed_calls(mesh: DeviceMesh) -> None:
    """Inside torch's ``_coalescing_manager`` block a typed call is queued, as a raw one is, and issued at its end."""
    spmd.bind_mesh(mesh)
    try:
        group = spmd.group_of(tp)
        with dist._coalescing_manager(group=group):
            total = spmd.all_reduce(_rank_tensor(), tp, src=spmd.P, dst=R)
            queued = len(dist.distributed_c10d._world.pg_coalesce_state[group])
        assert queued == 1, queued
        tp_ranks = GROUPS["tp"][dist.get_rank() // 2]
        torch.testing.assert_close(total, torch.tensor([float(sum(tp_ranks))]))
    finally:
        spmd.unbind()


def _kernel_calls(call: Callable[[], object]) -> list[str]:
    """The functions of ``spmd_stubs._kernels`` that ``call()`` enters."""
    entered: list[str] = []

    def profile(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call" and frame.f_code.co_filename.endswith("_kernels.py"):
            entered.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return entered


def eager_calls_go_straight_to_the_group(mesh: DeviceMesh) -> None:
    """An eager call on dim 0 in equal parts skips the kernels, with the kernels' result.

    Under a torch function mode the same calls take the kernels and
    ``torch.distributed``'s functions: both paths must agree.  Where dim 0 does
    not split evenly (or is missing) the kernel runs and explains, on every rank.
    """
    spmd.bind_mesh(mesh)
    try:
        x = torch.arange(8.0).reshape(4, 2) * (dist.get_rank() + 1)
        for name, collective in _COLLECTIVES.items():
            collective(x)  # the site is made on the first call
            assert _kernel_calls(lambda: collective(x)) == [], name
            with _SeenCalls():
                through_kernels = collective(x)
            torch.testing.assert_close(collective(x), through_kernels, msg=name)
        column = x.t()[0]  # a view that is not contiguous: reduced, then copied back into x
        spmd.all_reduce_(column, tp, src=spmd.P, dst=R)
        tp_ranks = GROUPS["tp"][dist.get_rank() // 2]
        torch.testing.assert_close(x[:, 0], torch.arange(0.0, 8.0, 2) * sum(r + 1 for r in tp_ranks))
        odd = torch.ones(3, 2)
        for name in ("reduce_scatter", "all_to_all"):
            try:
                _COLLECTIVES[name](odd)
            except ValueError as error:
                assert "does not split evenly over the 2 ranks of axis tp" in str(error), error
            else:
                raise AssertionError(f"{name} of 3 rows over 2 ranks ran")
        try:
            _COLLECTIVES["all_gather"](torch.tensor(1.0))
        except ValueError as error:
            assert "names dim 0, but the tensor has shape ()" in str(error), error
        else:
            raise AssertionError("all_gather of a 0-dim tensor as S(0) ran")
    finally:
        spmd.unbind()


def exports_then_calls_eagerly_straight_to_the_group(mesh: DeviceMesh) -> None:
    """Non-strict ``torch.export`` runs the typed calls as Python: functional collectives in the graph.

    The call sites it makes are cached as eager ones (no dynamo reads them),
    so the first eager call afterwards reuses them and must go straight to
    the group: a site cached without its direct path would take the kernels.
    """

    class Block(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = spmd.all_reduce(x.sin(), tp, src=spmd.P, dst=R)
            return spmd.all_gather(y, tp, src=S(0), dst=R)

    spmd.bind_mesh(mesh)  # fresh bindings: the export makes the first sites
    try:
        x = _rank_tensor().repeat(2)
        exported = torch.export.export(Block(), (x,), strict=False)
        ops = {str(node.target) for node in exported.graph.nodes if node.op == "call_function"}
        assert {"_c10d_functional.all_reduce.default", "_c10d_functional.all_gather_into_tensor.default"} <= ops, ops
        assert _kernel_calls(lambda: Block()(x)) == []
        torch.testing.assert_close(exported.module()(x), Block()(x))
    finally:
        spmd.unbind()


def forward_mode_tangents_cross_the_ranks(mesh: DeviceMesh) -> None:
    """Forward-mode AD: a typed collective moves the tangent as it moves the value.

    A tensor carrying a tangent requires no gradient, so without the node's
    jvp the eager call would communicate the value alone and leave each
    rank its own tangent.  A pending max has no forward-mode derivative, and
    the in-place all-reduce cannot update a tangent: both say so.
    """
    import torch.autograd.forward_ad as forward_ad

    spmd.bind_mesh(mesh)
    try:
        x = torch.arange(8.0).reshape(4, 2) * (dist.get_rank() + 1)
        tangent = torch.full((4, 2), float(10 * dist.get_rank() + 1))
        calls = {name: call for name, call in _COLLECTIVES.items() if name != "all_reduce_"}
        calls["convert(R, S(0))"] = lambda v: spmd.convert(v, tp, src=R, dst=S(0))
        for name, call in calls.items():
            with forward_ad.dual_level():
                value, tangent_out = forward_ad.unpack_dual(call(forward_ad.make_dual(x, tangent)))
            torch.testing.assert_close(value, call(x), msg=name)
            assert tangent_out is not None, name
            torch.testing.assert_close(tangent_out, call(tangent), msg=name)
        with forward_ad.dual_level():
            try:
                spmd.all_reduce(forward_ad.make_dual(x, tangent), tp, src=spmd.Pmax, dst=R)
            except ValueError as error:
                assert "all_reduce(x, tp, src=Pmax, dst=R) has no forward-mode derivative" in str(error), error
            else:
                raise AssertionError("a forward-mode derivative through a pending max ran")
            try:
                spmd.all_reduce_(forward_ad.make_dual(x.clone(), tangent), tp, src=spmd.P, dst=R)
            except ValueError as error:
                message = str(error)
                assert "all_reduce_(x, tp, src=P, dst=R) reduces x in place" in message, message
                assert "cannot update the forward-mode tangent x carries" in message, message
                assert "Fix: y = all_reduce(x, tp, src=P, dst=R)" in message, message
            else:
                raise AssertionError("an in-place all-reduce of a tensor carrying a tangent ran")
            plain = x.clone()  # no tangent: the in-place sum runs as usual
            spmd.all_reduce_(plain, tp, src=spmd.P, dst=R)
            torch.testing.assert_close(plain, spmd.all_reduce(x, tp, src=spmd.P, dst=R))
    finally:
        spmd.unbind()


def _build_checks() -> dict[str, Check]:
    checks: dict[str, Check] = {}
    for case in cases():
        checks[f"tp:{case.id}"] = functools.partial(_case_check, check, case, tp, GROUPS["tp"])
        checks[f"dp_tp:{case.id}"] = functools.partial(_case_check, check, case, (dp, tp), GROUPS["dp_tp"])
    for case in in_place_cases():
        checks[f"in place, tp:{case.id}"] = functools.partial(_case_check, check_in_place, case, tp, GROUPS["tp"])
    for fn in (
        flattened_order_from_mesh,
        flattened_order_from_groups,
        explicit_flattened_group,
        group_argument_overrides_the_binding,
        compiles_with_collectives_and_casts,
        compiles_once_for_new_axes,
        compiles_the_in_place_all_reduce,
        backward_leaves_a_shared_gradient_alone,
        complex_and_torch_function_calls_keep_torch_distributed,
        tensor_subclasses_keep_torch_distributed,
        coalescing_block_queues_typed_calls,
        eager_calls_go_straight_to_the_group,
        exports_then_calls_eagerly_straight_to_the_group,
        forward_mode_tangents_cross_the_ranks,
    ):
        checks[fn.__name__] = fn
    return checks


CHECKS = _build_checks()


gloo_world, test_gloo = gloo_tests(__name__, CHECKS)
