"""Train the typed mixture-of-experts block on 4 CPU ranks (2 ep x 2 tp) against a reference.

Every rank builds the full weights from one seed and keeps its shards (its
experts, their tp slice); the same weights also train, unparallelised, in
every process.  Each step prints the parallel loss beside the reference loss
and the largest difference between any parameter gradient and the matching
shard of the reference gradient.  The run exits nonzero if any of them differ.

    python examples/moe/train_moe.py [--steps N]
    torchrun --nproc-per-node 4 examples/moe/train_moe.py
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from ep_moe import Config, MoE, Params, init_full_params, moe_loss, shard, sync_expert_parallel_grads
from moe_reference import reference_loss
from torch.distributed.device_mesh import init_device_mesh

import spmd_stubs as spmd
from spmd_stubs import I, P, S
from spmd_stubs.axes import ep, tp

# The GPT example's gloo launcher, a script in the GPT's folder: found there at run time.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpt"))
gloo_launch = importlib.import_module("gloo_launch")

MESH = (2, 2)  # (ep, tp)
LR = 0.1
TOLERANCE = 1e-9


@dataclass(frozen=True)
class StepReport:
    """One training step seen from one rank."""

    step: int
    loss: float
    reference: float
    grad_error: float

    @property
    def ok(self) -> bool:
        loss_error = abs(self.loss - self.reference) / max(1.0, abs(self.reference))
        return loss_error <= TOLERANCE and self.grad_error <= TOLERANCE

    def line(self) -> str:
        verdict = "ok" if self.ok else "DIFFERENT"
        return (
            f"step {self.step}: loss {self.loss:.12f}  reference {self.reference:.12f}  "
            f"max grad error {self.grad_error:.1e}  {verdict}"
        )


def make_batch(cfg: Config, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch of a step: inputs and targets, ``[tokens, hidden]``."""
    gen = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(cfg.tokens, cfg.hidden, generator=gen, dtype=torch.float64)
    target = torch.randn(cfg.tokens, cfg.hidden, generator=gen, dtype=torch.float64)
    return x, target


def sgd(params: list[torch.Tensor]) -> None:
    with torch.no_grad():
        for p in params:
            assert p.grad is not None
            p -= LR * p.grad
            p.grad = None


def _max_grad_error(model: MoE, full: Params, ranks: tuple[int, int, int, int]) -> float:
    """Largest relative difference between a parameter's gradient and its reference shard."""
    worst = 0.0
    for name, param in model.named_parameters():
        reference_grad = full[name].grad
        assert param.grad is not None and reference_grad is not None
        expected = shard(name, reference_grad, *ranks)
        scale = max(1.0, expected.abs().max().item())
        worst = max(worst, (param.grad - expected).abs().max().item() / scale)
    return worst


def train(cfg: Config, steps: int) -> list[StepReport]:
    """Train the parallel block and the reference side by side on this rank."""
    mesh = init_device_mesh("cpu", MESH, mesh_dim_names=("ep", "tp"))
    spmd.bind_mesh(mesh)
    try:
        ep_rank, tp_rank = mesh.get_local_rank("ep"), mesh.get_local_rank("tp")
        ranks = (ep_rank, MESH[0], tp_rank, MESH[1])
        full = {name: p.requires_grad_() for name, p in init_full_params(cfg).items()}
        model = MoE(cfg, full, *ranks)
        reports = []
        for step in range(steps):
            x, target = make_batch(cfg, step)
            # This ep rank's tokens; every tp rank of it sees all of them.
            my_x = spmd.assert_type(x.chunk(MESH[0])[ep_rank], S(0)@ep, I@tp)
            my_target = spmd.assert_type(target.chunk(MESH[0])[ep_rank], S(0)@ep, I@tp)
            loss = moe_loss(model, my_x, my_target, cfg.aux_weight)
            loss.backward()
            sync_expert_parallel_grads(model)
            expected = reference_loss(full, x, target, cfg)
            expected.backward()
            with torch.no_grad():
                total = spmd.all_reduce(loss.detach(), ep, src=P, dst=I).item()
            reports.append(StepReport(step, total, expected.item(), _max_grad_error(model, full, ranks)))
            sgd(list(model.parameters()))
            sgd(list(full.values()))
        return reports
    finally:
        spmd.unbind()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)
    if gloo_launch.under_torchrun():
        per_rank = [gloo_launch.run_here(train, Config(), args.steps)]
        is_printer = int(os.environ["RANK"]) == 0
    else:
        per_rank = gloo_launch.spawn(train, Config(), args.steps, world_size=MESH[0] * MESH[1])
        is_printer = True
    ok = all(report.ok for reports in per_rank for report in reports)
    if is_printer:
        for report in per_rank[0]:
            print(report.line())
        print("all steps match the reference" if ok else "MISMATCH against the reference", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
