"""torchtitan 0.3.0's auxiliary-loss-free load balancing (components/optimizer/optimizer.py, _update_expert_bias,
an optimizer step pre-hook): each MoE layer's routing bias moves towards its under-used experts, by the sign of
each expert's token count against the mean.  The counts MoE.forward accumulated are this rank's: its sequence
shard over tp (with ep on, moe_sharding's Partial on tp) and its batch over the loss mesh (dp here).  torchtitan
sums them over tp, then over the loss mesh, before the update; the bias, the same on every rank, stays so only
if every rank updates it from the same counts.  The raw all_reduce calls are written as the typed ones."""
import torch

import spmd_stubs as spmd
from spmd_stubs import P, R, Tensor, V
from spmd_stubs.axes import dp, tp


class MoE:
    load_balance_coeff: float
    expert_bias_E: Tensor[R@tp, R@dp]
    tokens_per_expert_E: Tensor[V@tp, V@dp]


def _update_expert_bias(moes: list[MoE]) -> None:
    tokens_per_expert_E_list: list[Tensor[V@tp, V@dp]] = []
    for moe in moes:
        tokens_per_expert_E_list.append(moe.tokens_per_expert_E)
    tokens_per_expert_E_by_layer = torch.vstack(tokens_per_expert_E_list)
    by_layer_over_tp = spmd.all_reduce(tokens_per_expert_E_by_layer, tp, src=P, dst=R)
    by_layer = spmd.all_reduce(by_layer_over_tp, dp, src=P, dst=R)
    with torch.no_grad():
        for moe_layer_idx, moe in enumerate(moes):
            tokens_per_expert_E = by_layer[moe_layer_idx].float()
            expert_bias_delta_E = moe.load_balance_coeff * torch.sign(tokens_per_expert_E.mean() - tokens_per_expert_E)
            expert_bias_delta_E = expert_bias_delta_E - expert_bias_delta_E.mean()
            moe.expert_bias_E.add_(expert_bias_delta_E)
            moe.tokens_per_expert_E.zero_()


def update_expert_bias_without_tp_all_reduce(moes: list[MoE]) -> None:
    """The counts of this rank's sequence shard: each tp rank would move its copy of the bias its own way."""
    tokens_per_expert_E_list: list[Tensor[V@tp, V@dp]] = []
    for moe in moes:
        tokens_per_expert_E_list.append(moe.tokens_per_expert_E)
    tokens_per_expert_E_by_layer = spmd.all_reduce(torch.vstack(tokens_per_expert_E_list), dp, src=P, dst=R)
    with torch.no_grad():
        for moe_layer_idx, moe in enumerate(moes):
            tokens_per_expert_E = tokens_per_expert_E_by_layer[moe_layer_idx].float()
            expert_bias_delta_E = moe.load_balance_coeff * torch.sign(tokens_per_expert_E.mean() - tokens_per_expert_E)
            expert_bias_delta_E = expert_bias_delta_E - expert_bias_delta_E.mean()
            moe.expert_bias_E.add_(expert_bias_delta_E)  # E: spmd-inplace in-place add_ would change its target from R@tp to V@tp on axis tp


def update_expert_bias_without_tp_all_reduce_fixed(moes: list[MoE]) -> None:
    _update_expert_bias(moes)


def update_expert_bias_without_loss_mesh_all_reduce(moes: list[MoE]) -> None:
    """The counts of this rank's batch only: each data-parallel rank would move its copy of the bias its own way."""
    tokens_per_expert_E_list: list[Tensor[V@tp, V@dp]] = []
    for moe in moes:
        tokens_per_expert_E_list.append(moe.tokens_per_expert_E)
    tokens_per_expert_E_by_layer = spmd.all_reduce(torch.vstack(tokens_per_expert_E_list), tp, src=P, dst=R)
    with torch.no_grad():
        for moe_layer_idx, moe in enumerate(moes):
            tokens_per_expert_E = tokens_per_expert_E_by_layer[moe_layer_idx].float()
            expert_bias_delta_E = moe.load_balance_coeff * torch.sign(tokens_per_expert_E.mean() - tokens_per_expert_E)
            expert_bias_delta_E = expert_bias_delta_E - expert_bias_delta_E.mean()
            moe.expert_bias_E.add_(expert_bias_delta_E)  # E: spmd-inplace in-place add_ would change its target from R@dp to V@dp on axis dp


def update_expert_bias_without_loss_mesh_all_reduce_fixed(moes: list[MoE]) -> None:
    _update_expert_bias(moes)
