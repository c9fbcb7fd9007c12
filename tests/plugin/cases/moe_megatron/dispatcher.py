"""megatron-core 0.16.1's MoEAlltoAllTokenDispatcher (transformer/moe/token_dispatcher.py) with expert tensor
parallelism under sequence parallelism, which megatron requires beside ep: each tp rank holds its own tokens
(S(0)@tp) and each ep rank its own batch (V@ep).  preprocess counts the tokens per expert and gathers every
rank's counts over tp x ep; the tokens, permuted by the routing map, go to their experts' ep ranks by the
uneven all_to_all, are gathered over tp inside the expert region (the experts are split over tp, experts.py)
and reduce-scattered back, then return by the reverse all_to_all and are unpermuted (the router probabilities
weigh them inside the experts).  The count tensors are read through .tolist() where megatron moves them to the
host as numpy arrays.

The counts are values, not types: the combine's all_to_all given the dispatch's split sizes unswapped, or
_AllToAll's backward without its swap, type-checks as the right one does; at run time the exchange finds
it (rows that do not add up to the sizes sent, and in validation mode, SPMD_VALIDATE=1, sizes received that the
other ranks did not send).  megatron's _AllToAll itself,
with its raw all_to_all_single, is groups/row_exchange.py; the combine's all_to_all given the experts' output
before its reduce-scatter (P@tp rows, counts of no known type) is collectives/row_exchange.py's
counts_of_unknown_type."""

import torch

import spmd_stubs as spmd
from spmd_stubs import Group, P, R, S, Tensor, V
from spmd_stubs.axes import ep, tp
from spmd_stubs.megatron import (
    all_to_all,
    gather_from_sequence_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
)


def permute(
    tokens: Tensor[S(0)@tp, V@ep], routing_map: Tensor[V@tp, V@ep], probs: Tensor[S(0)@tp, V@ep]
) -> tuple[Tensor[V@tp, V@ep], Tensor[V@tp, V@ep], torch.Tensor]:
    """moe_utils.permute (not fused, no drop and pad): the token copies grouped by expert, by index selectors."""
    num_tokens, hidden = tokens.shape
    num_experts = routing_map.shape[1]
    routing_map = routing_map.bool().T.contiguous()
    token_indices = torch.arange(num_tokens, device=routing_map.device).unsqueeze(0).expand(num_experts, -1)
    sorted_indices = token_indices.masked_select(routing_map)
    permuted_probs = probs.T.contiguous().masked_select(routing_map)
    permuted_input = tokens.index_select(0, sorted_indices)
    return permuted_input, permuted_probs, sorted_indices


def unpermute(
    permuted_tokens: Tensor[V@tp, V@ep], sorted_indices: torch.Tensor, restore_shape: torch.Size
) -> Tensor[V@tp, V@ep]:
    """moe_utils.unpermute without probs (0.16 weighs the rows in the experts): each copy added back at its token."""
    _, hidden = restore_shape
    output_tokens = torch.zeros(restore_shape, dtype=permuted_tokens.dtype, device=permuted_tokens.device)
    return output_tokens.scatter_add(0, sorted_indices.unsqueeze(1).expand(-1, hidden), permuted_tokens)


def sort_chunks_by_idxs(input: Tensor[V@ep], split_sizes: list[int], sorted_idxs: list[int]) -> Tensor[V@ep]:
    """moe_utils.sort_chunks_by_idxs: the chunks of the received rows reordered (rank-major to expert-major); the
    other axes pass through."""
    inputs = torch.split(input, split_sizes, dim=0)
    return torch.cat([inputs[i] for i in sorted_idxs], dim=0)


class MoEAlltoAllTokenDispatcher:
    ep_group: Group[ep]
    tp_group: Group[tp]
    ep_size: int
    tp_size: int
    tp_rank: int
    num_experts: int
    num_local_experts: int
    local_expert_indices: list[int]
    sort_input_by_local_experts: list[int]
    restore_output_by_local_experts: list[int]
    # Integer counts.  This rank's own (from its tokens' routing), and slices of every rank's by this rank's
    # tp rank and local experts: python indices, which types do not follow, so those are left untyped.
    input_splits: Tensor[V@tp, V@ep]
    output_splits: torch.Tensor
    output_splits_tp: torch.Tensor
    num_global_tokens_per_local_expert: torch.Tensor
    tokens_per_expert: torch.Tensor
    reversed_local_input_permutation_mapping: torch.Tensor
    hidden_shape_before_permute: torch.Size

    def preprocess(self, routing_map: Tensor[V@tp, V@ep]) -> torch.Tensor:
        # [num_experts], number of tokens assigned to each expert from the current rank's input.
        num_local_tokens_per_expert = routing_map.sum(dim=0).long()
        # [ep_size]. Represents the number of tokens sent by the current rank to other EP ranks.
        self.input_splits = num_local_tokens_per_expert.reshape(self.ep_size, self.num_local_experts).sum(dim=1)
        # [tp_size, ep_size, num_experts]: gather_from_sequence_parallel_region over tp_ep_group, ep outermost.
        num_global_tokens_per_expert = (
            spmd.all_gather(num_local_tokens_per_expert, (ep, tp), src=V, dst=R)
            .reshape(self.ep_size, self.tp_size, self.num_experts)
            .transpose(0, 1)
        )
        num_global_tokens_per_local_expert = num_global_tokens_per_expert[
            :, :, self.local_expert_indices[0] : self.local_expert_indices[-1] + 1
        ].contiguous()
        num_global_tokens_per_rank = num_global_tokens_per_local_expert.sum(dim=2)
        self.output_splits = num_global_tokens_per_rank[self.tp_rank]
        self.output_splits_tp = num_global_tokens_per_rank.sum(dim=1)
        num_tokens_per_local_expert = num_global_tokens_per_local_expert.sum(dim=(0, 1))
        self.num_global_tokens_per_local_expert = num_global_tokens_per_local_expert.view(-1, self.num_local_experts)
        return num_tokens_per_local_expert

    def dispatch_preprocess(
        self, hidden_states: Tensor[S(0)@tp, V@ep], routing_map: Tensor[V@tp, V@ep], probs: Tensor[S(0)@tp, V@ep]
    ) -> tuple[Tensor[V@tp, V@ep], Tensor[V@tp, V@ep]]:
        hidden_states = hidden_states.view(-1, hidden_states.shape[-1])
        self.tokens_per_expert = self.preprocess(routing_map)
        self.hidden_shape_before_permute = hidden_states.shape
        permutated_local_input_tokens, permuted_probs, self.reversed_local_input_permutation_mapping = permute(
            hidden_states, routing_map, probs
        )
        return permutated_local_input_tokens, permuted_probs

    def token_dispatch(
        self, permutated_local_input_tokens: Tensor[V@tp, V@ep], permuted_probs: Tensor[V@tp, V@ep]
    ) -> tuple[Tensor[V@tp, V@ep], Tensor[V@tp, V@ep]]:
        global_input_tokens = all_to_all(
            self.ep_group, permutated_local_input_tokens, self.output_splits.tolist(), self.input_splits.tolist()
        )
        global_probs = all_to_all(self.ep_group, permuted_probs, self.output_splits.tolist(), self.input_splits.tolist())
        return global_input_tokens, global_probs

    def dispatch_postprocess(
        self, global_input_tokens: Tensor[V@tp, V@ep], global_probs: Tensor[V@tp, V@ep]
    ) -> tuple[Tensor[R@tp, V@ep], torch.Tensor, Tensor[R@tp, V@ep]]:
        output_split_sizes = self.output_splits_tp.tolist()
        global_input_tokens = gather_from_sequence_parallel_region(
            global_input_tokens, group=self.tp_group, output_split_sizes=output_split_sizes
        )
        global_probs = gather_from_sequence_parallel_region(
            global_probs, group=self.tp_group, output_split_sizes=output_split_sizes
        )
        global_input_tokens = sort_chunks_by_idxs(
            global_input_tokens, self.num_global_tokens_per_local_expert.ravel().tolist(), self.sort_input_by_local_experts
        )
        global_probs = sort_chunks_by_idxs(
            global_probs, self.num_global_tokens_per_local_expert.ravel().tolist(), self.sort_input_by_local_experts
        )
        return global_input_tokens, self.tokens_per_expert, global_probs

    def combine_preprocess(self, hidden_states: Tensor[P@tp, V@ep]) -> Tensor[S(0)@tp, V@ep]:
        """hidden_states: the experts' row-parallel output, this tp rank's part of each row's sum."""
        hidden_states = sort_chunks_by_idxs(
            hidden_states, self.num_global_tokens_per_local_expert.T.ravel().tolist(), self.restore_output_by_local_experts
        )
        input_split_sizes = self.output_splits_tp.tolist()
        return reduce_scatter_to_sequence_parallel_region(
            hidden_states, group=self.tp_group, input_split_sizes=input_split_sizes
        )

    def token_combine(self, hidden_states: Tensor[S(0)@tp, V@ep]) -> Tensor[V@tp, V@ep]:
        return all_to_all(self.ep_group, hidden_states, self.input_splits.tolist(), self.output_splits.tolist())

    def combine_postprocess(self, permutated_local_input_tokens: Tensor[V@tp, V@ep]) -> Tensor[S(0)@tp, V@ep]:
        return unpermute(
            permutated_local_input_tokens, self.reversed_local_input_permutation_mapping, self.hidden_shape_before_permute
        )
