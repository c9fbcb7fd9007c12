"""megatron's TopKRouter under sequence parallelism: each tp rank routes its own tokens with the shared gating
weight, so the weight's gradient is a sum over tp (megatron all-reduces it in finalize_model_grads); and its
load-balancing loss, whose token counts and mean probabilities are over every tp rank's tokens (moe_utils'
switch_load_balancing_loss_func is given them reduced).  The loss reaches the gradient through
MoEAuxLossAutoScaler, which seeds the main loss's scale on every rank: the gradient of each rank's part of a
sum, so what it is given must be P@tp, and a loss every tp rank holds whole would count once per tp rank.

megatron's own split (this rank's probabilities times the counts over tp, each rank a part) is left out: its
counts reach switch_load_balancing_loss_func as a parameter, which no annotation can say carries no gradient,
so I@tp counts times V@tp probabilities read as spmd-invariant-mix."""
from typing import Any

import torch
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import tp
from spmd_stubs.megatron import reduce_from_tensor_model_parallel_region


def gating(tokens: Tensor[S(0)@tp], weight: Tensor[I@tp]) -> Tensor[S(0)@tp]:
    return F.linear(tokens, weight)  # E: spmd-invariant-mix linear mixes Invariant with Varying on axis tp (V@tp, I@tp)


def gating_fixed(tokens: Tensor[S(0)@tp], weight: Tensor[I@tp]) -> Tensor[S(0)@tp]:
    return F.linear(tokens, spmd.convert(weight, tp, src=I, dst=R))


def aux_loss(probs: Tensor[S(0)@tp], routing_map: Tensor[S(0)@tp], experts: int) -> Tensor[I@tp]:
    tokens_per_expert = routing_map.sum(dim=0)
    return (probs.mean(dim=0) * tokens_per_expert).sum() * experts  # E: return-value "Tensor[V@tp]", expected "Tensor[I@tp]"


def aux_loss_fixed(probs: Tensor[S(0)@tp], routing_map: Tensor[S(0)@tp], experts: int, tokens: int) -> Tensor[I@tp]:
    local_counts = spmd.reinterpret(routing_map.sum(dim=0), tp, src=V, dst=P)
    tokens_per_expert = reduce_from_tensor_model_parallel_region(local_counts)
    probs_sum = reduce_from_tensor_model_parallel_region(spmd.reinterpret(probs.sum(dim=0), tp, src=V, dst=P))
    return (probs_sum / tokens * tokens_per_expert).sum() * experts


class MoEAuxLossAutoScaler(torch.autograd.Function):
    """megatron's way in (router.py): the loss rides on the activation, and its gradient is the main loss's scale
    on every rank, which is the gradient of each rank's part of a sum (P@tp)."""

    main_loss_backward_scale: torch.Tensor

    @staticmethod
    def forward(ctx: Any, output: Tensor[S(0)@tp], aux_loss: Tensor[P@tp]) -> Tensor[S(0)@tp]:
        ctx.save_for_backward(aux_loss)
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor[S(0)@tp]) -> tuple[Tensor[S(0)@tp], Tensor[R@tp]]:
        (aux_loss,) = ctx.saved_tensors
        aux_loss_backward_scale = MoEAuxLossAutoScaler.main_loss_backward_scale
        scaled_aux_loss_grad = torch.ones_like(aux_loss) * aux_loss_backward_scale
        return grad_output, scaled_aux_loss_grad


def aux_loss_counted_per_tp_rank(
    activation: Tensor[S(0)@tp], scores_for_aux_loss: Tensor[S(0)@tp], routing_map: Tensor[S(0)@tp], topk: int,
    num_experts: int, tp_size: int,
) -> Tensor[S(0)@tp]:
    """The probabilities summed over tp too: every tp rank holds the whole batch's loss, and attached as a part
    of the sum it would be counted once per tp rank."""
    local_tokens_per_expert = spmd.reinterpret(routing_map.sum(dim=0), tp, src=V, dst=P)
    global_tokens_per_expert = reduce_from_tensor_model_parallel_region(local_tokens_per_expert)
    probs_sum = reduce_from_tensor_model_parallel_region(spmd.reinterpret(scores_for_aux_loss.sum(dim=0), tp, src=V, dst=P))
    total_num_tokens = routing_map.shape[0] * tp_size
    aux_loss = torch.sum(probs_sum * global_tokens_per_expert) * (num_experts * 1e-2 / (topk * total_num_tokens * total_num_tokens))
    return MoEAuxLossAutoScaler.apply(activation, aux_loss)  # E: arg-type "Tensor[I@tp]"; expected "Tensor[P@tp]"


def aux_loss_counted_per_tp_rank_fixed(
    activation: Tensor[S(0)@tp], scores_for_aux_loss: Tensor[S(0)@tp], routing_map: Tensor[S(0)@tp], topk: int,
    num_experts: int, tp_size: int,
) -> Tensor[S(0)@tp]:
    """The whole loss on every tp rank, attached once: convert(I, P) keeps it on one rank as the sum's part."""
    local_tokens_per_expert = spmd.reinterpret(routing_map.sum(dim=0), tp, src=V, dst=P)
    global_tokens_per_expert = reduce_from_tensor_model_parallel_region(local_tokens_per_expert)
    probs_sum = reduce_from_tensor_model_parallel_region(spmd.reinterpret(scores_for_aux_loss.sum(dim=0), tp, src=V, dst=P))
    total_num_tokens = routing_map.shape[0] * tp_size
    aux_loss = torch.sum(probs_sum * global_tokens_per_expert) * (num_experts * 1e-2 / (topk * total_num_tokens * total_num_tokens))
    return MoEAuxLossAutoScaler.apply(activation, spmd.convert(aux_loss, tp, src=I, dst=P, expert_mode=True))
