"""Train the typed tensor-parallel GPT on 4 CPU ranks (2 dp x 2 tp) against a reference.

Every rank builds the full weights from one seed and keeps its shards; the
same weights also train, unparallelised, in every process.  Each step prints
the parallel loss beside the reference loss and the largest difference
between any parameter gradient and the matching shard of the reference
gradient.  The run exits nonzero if any of them differ.

    python examples/gpt/train.py [--sp on|off|both] [--steps N]
    torchrun --nproc-per-node 4 examples/gpt/train.py [--sp on|off|both]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist
from gloo_launch import run_here, spawn, under_torchrun
from gpt_reference import reference_loss
from torch.distributed.device_mesh import init_device_mesh
from tp_gpt import GPT, Config, Params, gpt_loss, init_full_params, sync_data_parallel_grads, tp_shard

import spmd_stubs as spmd
from spmd_stubs import I, S
from spmd_stubs.axes import dp, tp

MESH = (2, 2)  # (dp, tp)
LR = 0.1
TOLERANCE = 1e-9


@dataclass(frozen=True)
class StepReport:
    """One training step seen from one rank."""

    sequence_parallel: bool
    step: int
    loss: float
    reference: float
    grad_error: float

    @property
    def ok(self) -> bool:
        loss_error = abs(self.loss - self.reference) / max(1.0, abs(self.reference))
        return loss_error <= TOLERANCE and self.grad_error <= TOLERANCE

    def line(self) -> str:
        sp = "on " if self.sequence_parallel else "off"
        verdict = "ok" if self.ok else "DIFFERENT"
        return (
            f"sp {sp} step {self.step}: loss {self.loss:.12f}  reference {self.reference:.12f}  "
            f"max grad error {self.grad_error:.1e}  {verdict}"
        )


def make_batch(cfg: Config, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch of a step: tokens and targets, ``[seq, batch]``."""
    gen = torch.Generator().manual_seed(1000 + step)
    tokens = torch.randint(cfg.vocab, (cfg.seq, cfg.batch), generator=gen)
    targets = torch.randint(cfg.vocab, (cfg.seq, cfg.batch), generator=gen)
    return tokens, targets


def sgd(params: list[torch.Tensor]) -> None:
    with torch.no_grad():
        for p in params:
            assert p.grad is not None
            p -= LR * p.grad
            p.grad = None


def _max_grad_error(model: GPT, full: Params, tp_rank: int, tp_size: int) -> float:
    """Largest relative difference between a parameter's gradient and its reference shard."""
    worst = 0.0
    for name, param in model.named_parameters():
        reference_grad = full[name].grad
        assert param.grad is not None and reference_grad is not None
        expected = tp_shard(name, reference_grad, tp_rank, tp_size)
        scale = max(1.0, expected.abs().max().item())
        worst = max(worst, (param.grad - expected).abs().max().item() / scale)
    return worst


def train(cfg: Config, steps: int) -> list[StepReport]:
    """Train the parallel model and the reference side by side on this rank."""
    mesh = init_device_mesh("cpu", MESH, mesh_dim_names=("dp", "tp"))
    spmd.bind_mesh(mesh)
    try:
        dp_rank, tp_rank = mesh.get_local_rank("dp"), mesh.get_local_rank("tp")
        dp_size, tp_size = MESH
        full = {name: p.requires_grad_() for name, p in init_full_params(cfg).items()}
        model = GPT(cfg, full, tp_rank, tp_size).double()
        reports = []
        for step in range(steps):
            tokens, targets = make_batch(cfg, step)
            # This dp rank's micro-batch; every tp rank sees all of its tokens.
            my_tokens = spmd.assert_type(tokens.chunk(dp_size, 1)[dp_rank], S(1)@dp, I@tp)
            my_targets = spmd.assert_type(targets.chunk(dp_size, 1)[dp_rank], S(1)@dp, I@tp)
            loss = gpt_loss(model, my_tokens, my_targets, dp_size)
            loss.backward()
            sync_data_parallel_grads(model)
            expected = reference_loss(full, tokens, targets, cfg)
            expected.backward()
            with torch.no_grad():
                total = spmd.all_reduce(loss.detach(), dp, src=spmd.P, dst=I).item()
            grad_error = _max_grad_error(model, full, tp_rank, tp_size)
            reports.append(StepReport(cfg.sequence_parallel, step, total, expected.item(), grad_error))
            sgd(list(model.parameters()))
            sgd(list(full.values()))
        return reports
    finally:
        spmd.unbind()


def train_configs(sp_modes: list[bool], steps: int) -> list[StepReport]:
    """Both SP modes (or one) in the same world, one after the other."""
    reports: list[StepReport] = []
    for sp in sp_modes:
        reports += train(dataclasses.replace(Config(), sequence_parallel=sp), steps)
    return reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sp", choices=("on", "off", "both"), default="both", help="sequence parallelism")
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)
    modes = {"on": [True], "off": [False], "both": [False, True]}[args.sp]
    if under_torchrun():
        per_rank = [run_here(train_configs, modes, args.steps)]
        is_printer = dist.is_available() and int(__import__("os").environ["RANK"]) == 0
    else:
        per_rank = spawn(train_configs, modes, args.steps, world_size=MESH[0] * MESH[1])
        is_printer = True
    ok = all(report.ok for reports in per_rank for report in reports)
    if is_printer:
        for report in per_rank[0]:
            print(report.line())
        print("all steps match the reference" if ok else "MISMATCH against the reference", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
