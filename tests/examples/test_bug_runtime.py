"""The bug gallery at runtime: each buggy version is silently wrong, each fix is right.

Every scenario runs a bug's function and its fixed twin on real gloo ranks
(2 dp x 2 tp; ``cp`` and ``ep`` are bound to the tp groups) and measures the
largest difference from the same computation done on full tensors in one
process (values and gradients).  No exception is raised by any buggy
version: that is what makes these bugs expensive.

A fix that a hint proposes, where no gallery file holds it, runs the same way
against its own reference (:data:`HINT_FIXES`).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Callable

import pytest
import torch
import torch.nn.functional as F
from spmd_examples import BUGS, GPT
from torch.distributed.device_mesh import init_device_mesh

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import cp, ep, tp

sys.path[:0] = [str(BUGS), str(GPT)]
import gloo_launch  # noqa: E402

TP = 2


def full(seed: int, *shape: int) -> torch.Tensor:
    """The same tensor on every rank (float64, from its own seed)."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def leaf(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone().requires_grad_()


def err(got: torch.Tensor | None, expected: torch.Tensor) -> float:
    return (expected if got is None else got - expected).abs().max().item()


def sp_norm_grad(mod: ModuleType, t: int) -> float:
    x, w, b, g = full(1, 4, 3, 8), full(2, 8), full(3, 8), full(4, 4, 3, 8)
    ref_w, ref_b = leaf(w), leaf(b)
    (F.layer_norm(x, (8,), ref_w, ref_b) * g).sum().backward()
    mw, mb = leaf(w), leaf(b)
    (mod.sp_layer_norm(x.chunk(TP, 0)[t], mw, mb) * g.chunk(TP, 0)[t]).sum().backward()
    return max(err(mw.grad, ref_w.grad), err(mb.grad, ref_b.grad))


def row_parallel_bias(mod: ModuleType, t: int) -> float:
    x, w, b = full(1, 3, 8), full(2, 5, 8), full(3, 5)
    out = mod.row_parallel_linear(x.chunk(TP, -1)[t], w.chunk(TP, 1)[t], b)
    return err(out, x @ w.T + b)


def ce_label_smoothing(mod: ModuleType, t: int) -> float:
    logits, targets, s = full(1, 6, 8), torch.arange(6) % 8, 0.1
    log_z = logits.logsumexp(-1)
    target = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    ref = leaf(logits)
    ref_loss = ((1 - s) * (log_z - target) - s * (ref - log_z.unsqueeze(-1)).mean(-1)).sum()
    ref_loss.backward()
    mine = leaf(logits.chunk(TP, -1)[t])
    loss = mod.smoothed_cross_entropy(mine, log_z, target, 8, s).sum()
    loss.backward()
    return max(err(loss, ref_loss), err(mine.grad, ref.grad.chunk(TP, -1)[t]))


def cp_loss_scaling(mod: ModuleType, t: int) -> float:
    losses = leaf(full(1, 8).chunk(TP, 0)[t])
    mod.backward_step(losses, 8)
    return err(losses.grad, torch.full_like(losses, 1 / 8))


def grad_norm_duplicates(mod: ModuleType, t: int) -> float:
    sharded, dup = full(1, 4, 3), full(2, 5)
    norm = mod.global_grad_norm(sharded.chunk(TP, 0)[t], dup)
    return err(norm, torch.cat([sharded.flatten(), dup]).norm())


def moe_raw_all_to_all(mod: ModuleType, t: int) -> float:
    # Rank r holds tokens_r (4 rows: chunk j goes to expert rank j); expert j scales
    # by its parameter (j + 2), which gets a gradient either way, as in a real model.
    tokens = [full(10 + r, 4, 3) for r in range(TP)]
    grads = [full(20 + j, 4, 3) for j in range(TP)]  # d loss / d expert output on rank j
    mine, expert = leaf(tokens[t]), leaf(torch.tensor(t + 2.0, dtype=torch.float64))
    (mod.dispatch(mine) * expert * grads[t]).sum().backward()
    # Rows [2r, 2r+2) of rank j's output came from rank r's chunk j.
    expected = torch.cat([(j + 2) * grads[j].chunk(TP, 0)[t] for j in range(TP)])
    return err(mine.grad, expected)


def sp_gather_duplicate(mod: ModuleType, t: int) -> float:
    x, w, g = full(1, 4, 8), full(2, 5, 8), full(3, 4, 5)
    mine = leaf(x.chunk(TP, 0)[t])
    (mod.output_head(mine, w) * g).sum().backward()
    return err(mine.grad, (g @ w).chunk(TP, 0)[t])


def ep_gather_missing_reduce(mod: ModuleType, t: int) -> float:
    x, g = full(1, 4, 8), full(2, 4, 8)
    experts = [full(10 + r, 8, 8) for r in range(TP)]
    mine = leaf(x.chunk(TP, 0)[t])
    (mod.local_experts(mine, experts[t]) * g.chunk(TP, 0)[t]).sum().backward()
    return err(mine.grad, (g @ sum(experts)).chunk(TP, 0)[t])


def moe_aux_loss_overcount(mod: ModuleType, t: int) -> float:
    # 8 tokens over 4 experts, rank r routing rows [4r, 4r+4); the global loss is the
    # sum of the main loss's parts plus one load-balancing loss over the whole batch.
    probs, fraction, main_parts = full(1, 8, 4).softmax(-1), full(2, 4).softmax(-1), full(3, TP)
    ref = leaf(probs)
    ref_loss = main_parts.sum() + 4 * (fraction * ref.mean(dim=0)).sum()
    ref_loss.backward()
    mine = leaf(probs.chunk(TP, 0)[t])
    share = mod.training_loss(main_parts[t], mine, fraction, 8)
    share.backward()
    total = spmd.all_reduce(share.detach(), ep, src=P, dst=I)
    return max(err(total, ref_loss), err(mine.grad, ref.grad.chunk(TP, 0)[t]))


def embedding_missing_reduce(mod: ModuleType, t: int) -> float:
    tokens, table, w, b = torch.tensor([[0, 5], [7, 2], [3, 4]]), full(1, 8, 4), full(2, 4), full(3, 4)
    out = mod.embed_and_norm(tokens, table.chunk(TP, 0)[t], t * 4, w, b)
    return err(out, F.layer_norm(F.embedding(tokens, table), (4,), w, b))


def loss_overcount_tp(mod: ModuleType, t: int) -> float:
    loss = full(1, 1)
    return err(mod.model_parallel_loss(loss), loss)


SCENARIOS: dict[str, Callable[[ModuleType, int], float]] = {
    f.__name__: f
    for f in (
        sp_norm_grad, row_parallel_bias, ce_label_smoothing, cp_loss_scaling,
        grad_norm_duplicates, moe_raw_all_to_all, sp_gather_duplicate, ep_gather_missing_reduce,
        embedding_missing_reduce, loss_overcount_tp, moe_aux_loss_overcount,
    )
}


def row_parallel_partial_bias(x: Tensor[S(-1)@tp], weight: Tensor[S(1)@tp], bias: Tensor[P@tp]) -> Tensor[R@tp]:
    """The hint's fix for ``F.linear(x_v, w_v, b0_p)``: the product as P, the bias added before the reduction."""
    partial = spmd.reinterpret(F.linear(x, weight), tp, src=V, dst=P)
    return spmd.all_reduce(partial + bias, tp, src=P, dst=R)


def partial_bias_before_reduction(t: int) -> float:
    """Output and the gradients of x, w and b against ``x @ w.T + b`` in one process.

    The bias is I, held as P by ``convert(b, tp, src=I, dst=P)`` (rank 0 holds b,
    the others zeros); the output is R, whose gradient is a pending sum: rank 0
    seeds all of it.
    """
    x, w, b, g = full(1, 3, 8), full(2, 5, 8), full(3, 5), full(4, 3, 5)
    ref_x, ref_w, ref_b = leaf(x), leaf(w), leaf(b)
    ref = F.linear(ref_x, ref_w, ref_b)
    ref.backward(g)
    mx, mw, mb = leaf(x.chunk(TP, -1)[t]), leaf(w.chunk(TP, 1)[t]), leaf(b)
    out = row_parallel_partial_bias(mx, mw, spmd.convert(mb, tp, src=I, dst=P, expert_mode=True))
    out.backward(g if t == 0 else torch.zeros_like(g))
    return max(
        err(out, ref),
        err(mx.grad, ref_x.grad.chunk(TP, -1)[t]),
        err(mw.grad, ref_w.grad.chunk(TP, 1)[t]),
        err(mb.grad, ref_b.grad),
    )


HINT_FIXES: dict[str, Callable[[int], float]] = {f.__name__: f for f in (partial_bias_before_reduction,)}

RankErrors = tuple[dict[str, tuple[float, float]], dict[str, float]]
"""One rank's errors: gallery name -> (buggy version, fixed one), and hint fix name -> its error."""


def run_all() -> RankErrors:
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    spmd.bind_mesh(mesh)
    spmd.bind_groups({cp: mesh.get_group("tp"), ep: mesh.get_group("tp")})
    try:
        t = mesh.get_local_rank("tp")
        gallery = {
            name: (scenario(importlib.import_module(f"{name}_bug"), t), scenario(importlib.import_module(f"{name}_fixed"), t))
            for name, scenario in SCENARIOS.items()
        }
        return gallery, {name: fix(t) for name, fix in HINT_FIXES.items()}
    finally:
        spmd.unbind()


@pytest.fixture(scope="module")
def errors() -> list[RankErrors]:
    return gloo_launch.spawn(run_all, world_size=4)


# In its reduced form this one computes the right numbers: an in-place c10d
# all-reduce is invisible to autograd, i.e. its backward is the identity, which
# is exactly the backward of all_reduce(P, I).  It is flagged statically because
# the checker (like autograd) cannot see through it; docs/bugs.md explains.
STATIC_ONLY = {"ce_raw_all_reduce"}


def test_every_bug_has_a_runtime_scenario() -> None:
    bugs = {p.name[: -len("_bug.py")] for p in BUGS.glob("*_bug.py")}
    assert set(SCENARIOS) == bugs - STATIC_ONLY


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_buggy_version_is_silently_wrong_and_fix_is_right(errors: list[RankErrors], name: str) -> None:
    per_rank = [gallery[name] for gallery, _ in errors]
    assert all(fixed < 1e-10 for _, fixed in per_rank), f"fixed {name} differs from the reference: {per_rank}"
    assert any(bug > 1e-3 for bug, _ in per_rank), f"buggy {name} matches the reference: {per_rank}"


@pytest.mark.parametrize("name", list(HINT_FIXES))
def test_hint_fix_matches_the_reference(errors: list[RankErrors], name: str) -> None:
    per_rank = [fixes[name] for _, fixes in errors]
    assert all(error < 1e-10 for error in per_rank), f"{name} differs from the reference: {per_rank}"
