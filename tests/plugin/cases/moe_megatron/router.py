"""megatron's TopKRouter under sequence parallelism: each tp rank routes its own tokens with the shared gating
weight, so the weight's gradient is a sum over tp (megatron all-reduces it in finalize_model_grads); and its
load-balancing loss, whose token counts and mean probabilities are over every tp rank's tokens (moe_utils'
switch_load_balancing_loss_func is given them reduced)."""
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
