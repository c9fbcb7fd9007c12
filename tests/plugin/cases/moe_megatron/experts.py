"""megatron-core 0.16.1's TEGroupedMLP (transformer/moe/experts.py) with expert tensor parallelism: the stack of
this ep rank's experts (S(0)@ep), each split over tp, fc1 column- and fc2 row-parallel (TEGroupedLinear with
explicit_expert_comm: no communication inside, the dispatcher gathers the rows over tp before and reduce-scatters
them after).  The grouped GEMM is written as one F.linear per expert over the rows split by tokens_per_expert.
The rows and their router probabilities arrive gathered over tp (R@tp); the router probabilities weigh each row
after the activation (bias_act_func), the main loss's path to the router.

_apply_bias adds fc2's bias, weighted by each row's probability, to fc2's output: with ETP > 1 that output is
this rank's part of a sum still pending the dispatcher's reduce-scatter, so every tp rank's copy of the bias
would be summed (megatron forbids the bias with ETP > 1 in TransformerConfig: "Bias in Moe is only supported
when ETP==1")."""
import torch
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import P, R, S, Tensor, V
from spmd_stubs.axes import ep, tp
from spmd_stubs.megatron import reduce_scatter_to_sequence_parallel_region


class TEGroupedMLP:
    num_local_experts: int
    linear_fc1_weight: Tensor[S(0)@ep, S(1)@tp]  # [experts, ffn, hidden]: column-parallel
    linear_fc2_weight: Tensor[S(0)@ep, S(2)@tp]  # [experts, hidden, ffn]: row-parallel
    linear_fc2_bias: Tensor[S(0)@ep, R@tp]  # [experts, hidden]

    def linear_fc1(self, x: Tensor[R@tp, V@ep], tokens_per_expert: list[int]) -> Tensor[V@tp, V@ep]:
        return torch.cat(
            [F.linear(t, self.linear_fc1_weight[e]) for e, t in enumerate(torch.split(x, tokens_per_expert))]
        )

    def linear_fc2(self, x: Tensor[V@tp, V@ep], tokens_per_expert: list[int]) -> Tensor[P@tp, V@ep]:
        """Each rank's product over its slice of the ffn dim: a part of the row's sum over tp."""
        out = torch.cat(
            [F.linear(t, self.linear_fc2_weight[e]) for e, t in enumerate(torch.split(x, tokens_per_expert))]
        )
        return spmd.reinterpret(out, tp, src=V, dst=P)

    @staticmethod
    def bias_act_func(intermediate_parallel: Tensor[V@tp, V@ep], permuted_probs: Tensor[R@tp, V@ep]) -> Tensor[V@tp, V@ep]:
        intermediate_parallel = F.silu(intermediate_parallel)
        original_dtype = intermediate_parallel.dtype
        intermediate_parallel = intermediate_parallel * permuted_probs
        return intermediate_parallel.to(original_dtype)

    def forward(
        self, permuted_local_hidden_states: Tensor[R@tp, V@ep], tokens_per_expert: list[int],
        permuted_probs: Tensor[R@tp, V@ep],
    ) -> Tensor[P@tp, V@ep]:
        permuted_probs = permuted_probs.unsqueeze(-1)
        fc1_output = self.linear_fc1(permuted_local_hidden_states, tokens_per_expert)
        bias_act_output = self.bias_act_func(fc1_output, permuted_probs)
        return self.linear_fc2(bias_act_output, tokens_per_expert)

    def _apply_bias(
        self, intermediate_parallel: Tensor[P@tp, V@ep], tokens_per_expert: list[int], permuted_probs: Tensor[R@tp, V@ep]
    ) -> Tensor[S(0)@tp, V@ep]:
        """_apply_bias, then the dispatcher's next step (combine_preprocess's reduce-scatter over tp)."""
        shape = intermediate_parallel.shape
        output = torch.cat(
            [
                t + self.linear_fc2_bias[e] * p  # E: spmd-partial-affine add adds a Partial to a non-Partial operand on axis tp (P@tp + R@tp)
                for e, (t, p) in enumerate(
                    zip(torch.split(intermediate_parallel.view(-1, shape[-1]), tokens_per_expert),
                        torch.split(permuted_probs, tokens_per_expert))
                )
            ]
        ).view(shape)
        return reduce_scatter_to_sequence_parallel_region(output)

    def _apply_bias_fixed(
        self, intermediate_parallel: Tensor[P@tp, V@ep], tokens_per_expert: list[int], permuted_probs: Tensor[R@tp, V@ep]
    ) -> Tensor[S(0)@tp, V@ep]:
        """The weighted bias held as a Partial (on one tp rank, zeros on the others): summed once."""
        shape = intermediate_parallel.shape
        output = torch.cat(
            [
                t + spmd.convert(self.linear_fc2_bias[e] * p, tp, src=R, dst=P)
                for e, (t, p) in enumerate(
                    zip(torch.split(intermediate_parallel.view(-1, shape[-1]), tokens_per_expert),
                        torch.split(permuted_probs, tokens_per_expert))
                )
            ]
        ).view(shape)
        return reduce_scatter_to_sequence_parallel_region(output)
