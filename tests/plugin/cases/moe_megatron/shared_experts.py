"""megatron-core 0.16.1's SharedExpertMLP (transformer/moe/shared_experts.py) beside the routed experts, under
sequence parallelism, in its overlapped form (moe_shared_expert_overlap): the dispatcher calls pre_forward_comm,
linear_fc1_forward_and_act, linear_fc2_forward, post_forward_comm and get_output around its own exchanges, and
combine_postprocess adds the shared output to the routed one.  The shared expert sees this rank's tokens whole:
gathered over tp (S(0)@tp to R@tp), fc1 column- and fc2 row-parallel, reduce-scattered back to S(0)@tp.

Its gate (use_shared_expert_gate) reads this rank's tokens with one weight, so the weight's gradient is a sum
over tp: megatron marks it `sequence_parallel` for finalize_model_grads to all-reduce it (R@tp).  Without that
mark it is I@tp, and each tp rank's gradient would hold only its own tokens' part."""
import torch
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import ep, tp
from spmd_stubs.megatron import gather_from_sequence_parallel_region, reduce_scatter_to_sequence_parallel_region


class SharedExpertMLP:
    gate_weight: Tensor[R@tp]  # sequence_parallel: its gradient all-reduced over tp
    linear_fc1_weight: Tensor[S(0)@tp]
    linear_fc2_weight: Tensor[S(1)@tp]
    cached_fc1_input: Tensor[R@tp, V@ep]
    cached_fc2_input: Tensor[V@tp, V@ep]
    cached_fc2_output: Tensor[P@tp, V@ep]
    cached_output: Tensor[S(0)@tp, V@ep]
    gate_score: Tensor[V@tp, V@ep]

    def pre_forward_comm(self, input: Tensor[S(0)@tp, V@ep]) -> None:
        logits = torch.nn.functional.linear(input, self.gate_weight)
        self.gate_score = torch.nn.functional.sigmoid(logits)
        self.cached_fc1_input = gather_from_sequence_parallel_region(input, tensor_parallel_output_grad=True)

    def linear_fc1_forward_and_act(self) -> None:
        intermediate_parallel = F.linear(self.cached_fc1_input, self.linear_fc1_weight)
        self.cached_fc2_input = F.silu(intermediate_parallel)

    def linear_fc2(self, x: Tensor[V@tp, V@ep]) -> Tensor[P@tp, V@ep]:
        """The row-parallel linear with its communication disabled (parallel_mode None): this rank's part."""
        return spmd.reinterpret(F.linear(x, self.linear_fc2_weight), tp, src=V, dst=P)

    def linear_fc2_forward(self) -> None:
        self.cached_fc2_output = self.linear_fc2(self.cached_fc2_input)

    def post_forward_comm(self) -> None:
        self.cached_output = reduce_scatter_to_sequence_parallel_region(self.cached_fc2_output)

    def get_output(self) -> Tensor[V@tp, V@ep]:
        output = self.cached_output * self.gate_score
        return output


def combine_postprocess(
    shared_experts: SharedExpertMLP, output: Tensor[S(0)@tp, V@ep], permutated_local_input_tokens: Tensor[V@tp, V@ep]
) -> Tensor[S(0)@tp, V@ep]:
    """MoEAlltoAllTokenDispatcher.combine_postprocess: output is the routed experts' unpermuted output."""
    shared_experts.linear_fc2_forward()
    shared_experts.post_forward_comm()
    shared_expert_output = shared_experts.get_output()
    output += shared_expert_output
    return output


def combine_postprocess_without_post_forward_comm(
    shared_experts: SharedExpertMLP, output: Tensor[S(0)@tp, V@ep]
) -> Tensor[S(0)@tp, V@ep]:
    """The shared expert's fc2 output added before its reduce-scatter: each rank's part of the sum, per rank."""
    shared_experts.linear_fc2_forward()
    shared_expert_output = shared_experts.cached_fc2_output
    return output + shared_expert_output  # E: spmd-partial-varying add adds a Partial to a Varying operand on axis tp


def combine_postprocess_without_post_forward_comm_fixed(
    shared_experts: SharedExpertMLP, output: Tensor[S(0)@tp, V@ep]
) -> Tensor[S(0)@tp, V@ep]:
    shared_experts.linear_fc2_forward()
    shared_experts.post_forward_comm()
    return output + shared_experts.get_output()


def shared_expert_gate_without_sequence_parallel(input: Tensor[S(0)@tp, V@ep], gate_weight: Tensor[I@tp]) -> Tensor[V@tp, V@ep]:
    logits = torch.nn.functional.linear(input, gate_weight)  # E: spmd-invariant-mix linear mixes Invariant with Varying on axis tp (V@tp, I@tp)
    return torch.nn.functional.sigmoid(logits)


def shared_expert_gate_without_sequence_parallel_fixed(
    input: Tensor[S(0)@tp, V@ep], gate_weight: Tensor[R@tp]
) -> Tensor[V@tp, V@ep]:
    logits = torch.nn.functional.linear(input, gate_weight)
    return torch.nn.functional.sigmoid(logits)
