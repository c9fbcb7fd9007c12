"""torchtitan 0.3.0's AllToAllTokenDispatcher (models/common/token_dispatcher.py) inside the routed experts'
local_map region, with expert parallelism: the tokens, their top-k scores and expert ids are this rank's sequence
shard over tp (torchtitan reuses tp as a token axis when ep is on) and this ep rank's batch; the per-expert counts
are this rank's (torchtitan's mutate_type(P -> V) on them).  _local_reorder sorts the token copies by expert, the
counts go first by an even all_to_all, then the rows by the uneven one; combine sends them back (the split sizes
swapped), weighs each by its score and adds it to its token.  The spmd_types calls are written as spmd_stubs'
(the process group as its axis, ep); deterministic_scatter_add is its out.scatter_add(dim=0, ...)."""
import torch

import spmd_stubs as spmd
from spmd_stubs import I, S, Tensor, V
from spmd_stubs.axes import ep, tp


class AllToAllTokenDispatcher:
    top_k: int
    ep_size: int

    def _local_reorder(
        self, x_TD: Tensor[S(0)@tp, V@ep], topk_scores_TK: Tensor[S(0)@tp, V@ep], topk_expert_ids_TK: Tensor[S(0)@tp, V@ep]
    ) -> tuple[Tensor[V@tp, V@ep], Tensor[V@tp, V@ep], Tensor[V@tp, V@ep]]:
        token_indices_experts_sorted_N = torch.argsort(topk_expert_ids_TK.view(-1), stable=True)
        topk_scores_experts_sorted_N = topk_scores_TK.view(-1)[token_indices_experts_sorted_N]
        token_indices_experts_sorted_N = token_indices_experts_sorted_N // self.top_k
        routed_input_ND = x_TD[token_indices_experts_sorted_N]
        return routed_input_ND, token_indices_experts_sorted_N, topk_scores_experts_sorted_N

    def _token_count_exchange(self, num_local_tokens_per_expert_E: Tensor[V@tp, V@ep], ep_size: int) -> Tensor[V@tp, V@ep]:
        return spmd.all_to_all(num_local_tokens_per_expert_E.view(ep_size, -1), ep, src=V, dst=V)

    def _sync_token_count_exchange(
        self, num_local_tokens_per_expert_E: Tensor[V@tp, V@ep], num_global_tokens_per_local_expert_EP_e: Tensor[V@tp, V@ep],
        ep_size: int,
    ) -> tuple[Tensor[V@tp, V@ep], list[int], list[int]]:
        num_global_tokens_per_local_expert_E = num_global_tokens_per_local_expert_EP_e.reshape(-1)
        input_splits = num_local_tokens_per_expert_E.view(ep_size, -1).sum(dim=1).to(torch.device("cpu"), non_blocking=True)
        output_splits = (
            num_global_tokens_per_local_expert_E.view(ep_size, -1).sum(dim=1).to(torch.device("cpu"), non_blocking=False)
        )
        input_splits_list = input_splits.tolist()
        output_splits_list = output_splits.tolist()
        return num_global_tokens_per_local_expert_E, input_splits_list, output_splits_list

    def _dispatch_token_exchange(
        self, routed_input_ND: Tensor[V@tp, V@ep], output_splits: list[int], input_splits: list[int]
    ) -> Tensor[V@tp, V@ep]:
        return spmd.all_to_all(
            routed_input_ND, ep, src=V, dst=V, output_split_sizes=output_splits, input_split_sizes=input_splits
        )

    def _combine_token_exchange(
        self, routed_output_RD: Tensor[V@tp, V@ep], input_splits: list[int], output_splits: list[int]
    ) -> Tensor[V@tp, V@ep]:
        return spmd.all_to_all(
            routed_output_RD, ep, src=V, dst=V, output_split_sizes=input_splits, input_split_sizes=output_splits
        )

    def _permute(
        self, routed_input_RD: Tensor[V@tp, V@ep], num_global_tokens_per_local_expert_E: Tensor[V@tp, V@ep]
    ) -> tuple[torch.Size, Tensor[V@tp, V@ep], torch.Tensor, Tensor[V@tp, V@ep]]:
        """Rank-major to expert-major: an index computed from the counts (no gradient) selects the rows."""
        ep_size = self.ep_size
        e = num_global_tokens_per_local_expert_E.shape[0] // ep_size
        total = routed_input_RD.shape[0]
        t_mat = num_global_tokens_per_local_expert_E.view(ep_size, e)
        input_starts = (num_global_tokens_per_local_expert_E.cumsum(0) - num_global_tokens_per_local_expert_E).view(ep_size, e)
        segment_lens = t_mat.t().reshape(-1)
        input_starts = input_starts.t().reshape(-1)
        seg_ids = torch.arange(segment_lens.shape[0]).repeat_interleave(segment_lens, output_size=total)
        output_starts = segment_lens.cumsum(0) - segment_lens
        permuted_indices = input_starts[seg_ids] + torch.arange(seg_ids.shape[0]) - output_starts[seg_ids]
        num_global_tokens_per_local_expert_e = t_mat.sum(0)
        return routed_input_RD.shape, routed_input_RD[permuted_indices, :], permuted_indices, num_global_tokens_per_local_expert_e

    def _unpermute(
        self, routed_output_RD: Tensor[V@tp, V@ep], input_shape: torch.Size, permuted_indices: torch.Tensor
    ) -> Tensor[V@tp, V@ep]:
        out_unpermuted_RD = routed_output_RD.new_empty(input_shape)
        out_unpermuted_RD[permuted_indices, :] = routed_output_RD
        return out_unpermuted_RD

    def dispatch(
        self, x_TD: Tensor[S(0)@tp, V@ep], topk_scores_TK: Tensor[S(0)@tp, V@ep], topk_expert_ids_TK: Tensor[S(0)@tp, V@ep],
        num_local_tokens_per_expert_E: Tensor[V@tp, V@ep],
    ) -> tuple[Tensor[V@tp, V@ep], Tensor[V@tp, V@ep], Tensor[V@tp, V@ep], torch.Tensor, list[int], list[int]]:
        ep_size = self.ep_size
        routed_input_ND, token_indices_experts_sorted_N, topk_scores_experts_sorted_N = self._local_reorder(
            x_TD, topk_scores_TK, topk_expert_ids_TK
        )
        with torch.no_grad():
            num_global_tokens_per_local_expert_EP_e = self._token_count_exchange(num_local_tokens_per_expert_E, ep_size)
            num_global_tokens_per_local_expert_E, input_splits_list, output_splits_list = self._sync_token_count_exchange(
                num_local_tokens_per_expert_E, num_global_tokens_per_local_expert_EP_e, ep_size
            )
        routed_input_RD = self._dispatch_token_exchange(routed_input_ND, output_splits_list, input_splits_list)
        input_shape, routed_input_RD, permuted_indices, num_global_tokens_per_local_expert_e = self._permute(
            routed_input_RD, num_global_tokens_per_local_expert_E
        )
        return (routed_input_RD, num_global_tokens_per_local_expert_e, topk_scores_experts_sorted_N,
                token_indices_experts_sorted_N, input_splits_list, output_splits_list)

    def combine(
        self, routed_output_RD: Tensor[V@tp, V@ep], x_TD: Tensor[S(0)@tp, V@ep], input_shape: torch.Size,
        permuted_indices: torch.Tensor, input_splits: list[int], output_splits: list[int],
        topk_scores_experts_sorted_N: Tensor[V@tp, V@ep], token_indices_experts_sorted_N: Tensor[V@tp, V@ep],
    ) -> Tensor[S(0)@tp, V@ep]:
        routed_output_RD = self._unpermute(routed_output_RD, input_shape, permuted_indices)
        routed_output_RD = self._combine_token_exchange(routed_output_RD, input_splits, output_splits)
        out_TD = torch.zeros_like(x_TD)
        routed_output_RD = (
            routed_output_RD.to(torch.float32) * topk_scores_experts_sorted_N.reshape(-1, 1)
        ).to(routed_output_RD.dtype)
        return out_TD.scatter_add(
            dim=0, index=token_indices_experts_sorted_N.reshape(-1, 1).expand(-1, out_TD.shape[-1]), src=routed_output_RD
        )


def dispatch_tokens_replicated_over_tp(
    x_TD: Tensor[I@tp, V@ep], topk_expert_ids_TK: Tensor[I@tp, V@ep], num_local_tokens_per_expert_E: Tensor[V@tp, V@ep],
    top_k: int, ep_size: int,
) -> Tensor[V@ep]:
    """The tokens left whole on every tp rank (the local_map's input not moved to the sequence-sharded layout) but
    counted from the router's sequence shard: each tp rank would cut the same rows by its own counts."""
    token_indices_experts_sorted_N = torch.argsort(topk_expert_ids_TK.view(-1), stable=True) // top_k
    routed_input_ND = x_TD[token_indices_experts_sorted_N]
    num_global_tokens_per_local_expert_EP_e = spmd.all_to_all(num_local_tokens_per_expert_E.view(ep_size, -1), ep, src=V, dst=V)
    input_splits = num_local_tokens_per_expert_E.view(ep_size, -1).sum(dim=1)
    output_splits = num_global_tokens_per_local_expert_EP_e.sum(dim=1)
    return spmd.all_to_all(  # E: spmd-collective may send other rows from each rank of tp, as the counts are V@tp
        routed_input_ND, ep, src=V, dst=V, output_split_sizes=output_splits.tolist(), input_split_sizes=input_splits.tolist()
    )


def dispatch_tokens_replicated_over_tp_fixed(
    x_TD: Tensor[I@tp, V@ep], topk_expert_ids_TK: Tensor[I@tp, V@ep], num_local_tokens_per_expert_E: Tensor[I@tp, V@ep],
    top_k: int, ep_size: int,
) -> Tensor[V@ep, I@tp]:
    """Counted from the same routing as the tokens, the counts are the same on every tp rank: the rows stay I@tp."""
    token_indices_experts_sorted_N = torch.argsort(topk_expert_ids_TK.view(-1), stable=True) // top_k
    routed_input_ND = x_TD[token_indices_experts_sorted_N]
    num_global_tokens_per_local_expert_EP_e = spmd.all_to_all(num_local_tokens_per_expert_E.view(ep_size, -1), ep, src=V, dst=V)
    input_splits = num_local_tokens_per_expert_E.view(ep_size, -1).sum(dim=1)
    output_splits = num_global_tokens_per_local_expert_EP_e.sum(dim=1)
    return spmd.all_to_all(
        routed_input_ND, ep, src=V, dst=V, output_split_sizes=output_splits.tolist(), input_split_sizes=input_splits.tolist()
    )
