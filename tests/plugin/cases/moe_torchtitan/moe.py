"""torchtitan 0.3.0's TokenChoiceTopKRouter and MoE.forward (models/common/moe.py) with expert parallelism, where
the MoE reuses tp as a token axis (moe_sharding.py): the tokens x_BLD are this rank's sequence shard (S(1)@tp)
and this ep rank's batch; the router gate's weight is replicated (R@tp, its gradient summed over tp and over the
ranks of ep, which hold other tokens); expert_bias_E, the aux-loss-free routing bias, is a buffer the same on
every rank that only picks the experts (no gradient).  MoE.forward counts this rank's tokens per expert, keeps
the count for the bias update (load_balancing.py), runs the routed experts (the dispatcher, token_dispatcher.py)
and adds the shared experts' output.  torchtitan 0.3.0 has no auxiliary load-balancing loss."""
import torch
import torch.nn.functional as F
from torch import nn

from spmd_stubs import I, R, S, Tensor, V
from spmd_stubs.axes import ep, tp


class Linear(nn.Linear):
    """The router's gate: Replicate on tp (dense_param_placement(tp=R))."""

    weight: Tensor[R@tp, R@ep]
    bias: None


class TokenChoiceTopKRouter(nn.Module):
    gate: Linear
    top_k: int
    score_func: str
    route_norm: bool
    route_scale: float

    def forward(
        self, x_BLD: Tensor[S(1)@tp, V@ep], expert_bias_E: Tensor[R@tp, R@ep] | None = None
    ) -> tuple[Tensor[V@tp, V@ep], Tensor[V@tp, V@ep], Tensor[V@tp, V@ep]]:
        with torch.autocast(device_type=x_BLD.device.type, dtype=torch.float32):
            scores_BLE = self.gate(x_BLD)
        if self.score_func == "sigmoid":
            scores_BLE = torch.sigmoid(scores_BLE)
        elif self.score_func == "softmax":
            scores_BLE = F.softmax(scores_BLE, dim=-1)
        else:
            raise NotImplementedError(f"Unknown score function {self.score_func}")
        scores_for_choice_BLE = scores_BLE if expert_bias_E is None else scores_BLE + expert_bias_E
        _, topk_expert_ids_BLK = torch.topk(scores_for_choice_BLE, k=self.top_k, dim=-1, sorted=False)
        # The expert_bias is only used for routing: the gating value is still derived from the original scores.
        topk_scores_BLK = scores_BLE.gather(dim=-1, index=topk_expert_ids_BLK)
        if self.route_norm:
            denominator = topk_scores_BLK.sum(dim=-1, keepdim=True) + 1e-20
            topk_scores_BLK = topk_scores_BLK / denominator
        topk_scores_BLK = topk_scores_BLK * self.route_scale
        return topk_scores_BLK, topk_expert_ids_BLK, scores_BLE


class RoutedExperts(nn.Module):
    def forward(
        self, x_BLD: Tensor[S(1)@tp, V@ep], topk_scores_BLK: Tensor[V@tp, V@ep], topk_expert_ids_BLK: Tensor[V@tp, V@ep],
        num_local_tokens_per_expert_E: Tensor[V@tp, V@ep],
    ) -> Tensor[S(1)@tp, V@ep]:
        """Dispatch, experts, combine: token_dispatcher.py."""
        raise NotImplementedError


class FeedForward(nn.Module):
    def forward(self, x: Tensor[S(1)@tp, V@ep]) -> Tensor[S(1)@tp, V@ep]:
        """The shared experts, tensor parallel: gathered over tp, column- then row-parallel, reduce-scattered."""
        raise NotImplementedError


class MoE(nn.Module):
    routed_experts: RoutedExperts
    router: TokenChoiceTopKRouter
    shared_experts: FeedForward | None
    expert_bias_E: Tensor[R@tp, R@ep]
    tokens_per_expert_E: Tensor[V@tp, V@ep]  # this rank's counts, summed over the ranks when the bias is updated

    def forward(self, x_BLD: Tensor[S(1)@tp, V@ep]) -> Tensor[S(1)@tp, V@ep]:
        topk_scores_BLK, topk_expert_ids_BLK, scores_BLE = self.router(x_BLD, self.expert_bias_E)
        routing_map_BLE = torch.zeros_like(scores_BLE, dtype=torch.bool).scatter_(-1, topk_expert_ids_BLK, True)
        num_local_tokens_per_expert_E = routing_map_BLE.sum(dim=(0, 1))
        if self.training:
            with torch.no_grad():
                self.tokens_per_expert_E.add_(num_local_tokens_per_expert_E)
        out_BLD = self.routed_experts(x_BLD, topk_scores_BLK, topk_expert_ids_BLK, num_local_tokens_per_expert_E)
        shared_out_BLD = self.shared_experts(x_BLD) if self.shared_experts is not None else None
        if shared_out_BLD is not None:
            out_BLD = out_BLD + shared_out_BLD
        return out_BLD


class InvariantGate(nn.Linear):
    """A gate declared the same on every tp rank and used as such: its gradient would not be summed over tp."""

    weight: Tensor[I@tp, R@ep]
    bias: None


def gate_scores_invariant_weight(gate: InvariantGate, x_BLD: Tensor[S(1)@tp, V@ep]) -> Tensor[V@tp, V@ep]:
    with torch.autocast(device_type=x_BLD.device.type, dtype=torch.float32):
        scores_BLE = gate(x_BLD)  # E: spmd-invariant-mix linear mixes Invariant with Varying on axis tp (V@tp, I@tp)
    return torch.sigmoid(scores_BLE)


def gate_scores_invariant_weight_fixed(gate: Linear, x_BLD: Tensor[S(1)@tp, V@ep]) -> Tensor[V@tp, V@ep]:
    with torch.autocast(device_type=x_BLD.device.type, dtype=torch.float32):
        scores_BLE = gate(x_BLD)
    return torch.sigmoid(scores_BLE)
