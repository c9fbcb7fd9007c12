"""Pending avg/max/min on 4 real gloo processes (2 dp x 2 tp): the checks of ``partial_checks``.

One world runs all the checks (``CHECKS``); each is reported as its own test.
Gloo's own all_reduce and reduce_scatter run MAX/MIN here (the eager c10d path).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.distributed as dist
from partial_checks import check_double_backward, check_make, check_resolve, check_softmax
from spmd_world import GROUPS, Check, GlooWorld, gloo_tests
from torch.distributed.device_mesh import DeviceMesh

import spmd_stubs as spmd
from spmd_stubs import I, Pmax, R, S, V
from spmd_stubs.axes import dp, tp


def _bound(fn: Callable[..., None], *args: Any, **kwargs: Any) -> Check:
    def run(mesh: DeviceMesh) -> None:
        spmd.bind_mesh(mesh)
        try:
            fn(GlooWorld(), *args, **kwargs)
        finally:
            spmd.unbind()

    return run


def compiles_with_a_pending_max(mesh: DeviceMesh) -> None:
    """A function resolving a pending max traces whole (fullgraph) and matches eager, values and grads."""
    from torch._dynamo.testing import CompileCounterWithBackend

    def f(x: torch.Tensor) -> torch.Tensor:
        pending = spmd.reinterpret(x.amax(-1, keepdim=True), tp, src=V, dst=Pmax)
        return (x - spmd.all_reduce(pending, tp, src=Pmax, dst=R)).exp().sum()

    spmd.bind_mesh(mesh)
    try:
        counter = CompileCounterWithBackend("aot_eager")
        compiled = torch.compile(f, backend=counter, fullgraph=True)
        base = torch.tensor([[1.0, 3.0, 2.0], [0.0, 0.0, 5.0]]) * (dist.get_rank() % 2 + 1)
        x_eager, x_compiled = base.clone().requires_grad_(), base.clone().requires_grad_()
        eager_out, compiled_out = f(x_eager), compiled(x_compiled)
        torch.testing.assert_close(compiled_out, eager_out)
        eager_out.backward()
        compiled_out.backward()
        assert counter.frame_count == 1
        torch.testing.assert_close(x_compiled.grad, x_eager.grad)
    finally:
        spmd.unbind()


def _build_checks() -> dict[str, Check]:
    checks: dict[str, Check] = {}
    axes = {"tp": (tp, GROUPS["tp"]), "dp_tp": ((dp, tp), GROUPS["dp_tp"])}
    for reduce in ("avg", "max", "min"):
        for label, (axis, groups) in axes.items():
            for name, dst in (("R", R), ("I", I)):
                checks[f"all_reduce(P{reduce},{name})@{label}"] = _bound(check_resolve, "all_reduce", reduce, dst, axis, groups)
            for name, dst in (("V", V), ("S(0)", S(0)), ("S(-1)", S(-1))):
                checks[f"reduce_scatter(P{reduce},{name})@{label}"] = _bound(
                    check_resolve, "reduce_scatter", reduce, dst, axis, groups
                )
            for op in ("convert", "reinterpret"):
                checks[f"{op}->P{reduce}@{label}"] = _bound(check_make, op, reduce, axis, groups)
        checks[f"reduce_scatter(P{reduce},S(0))-uneven@tp"] = _bound(
            check_resolve, "reduce_scatter", reduce, S(0), tp, GROUPS["tp"], split_sizes=[1, 3]
        )
    for log in (False, True):
        checks[f"vocab_parallel_{'log_' if log else ''}softmax"] = _bound(check_softmax, tp, GROUPS["tp"], log)
    checks["gradient_of_the_gradient"] = _bound(check_double_backward, tp, GROUPS["tp"])
    checks["compiles_with_a_pending_max"] = compiles_with_a_pending_max
    return checks


CHECKS = _build_checks()


gloo_world, test_gloo = gloo_tests(__name__, CHECKS)
