"""torchtitan 0.3.0's GptOssGroupedExperts (models/gpt_oss/moe.py), the GroupedExperts with biases, tensor parallel
without expert parallelism (moe_sharding's dense placement): every tp rank holds every expert's slice, mlp1
column-parallel (weight and bias S(1)@tp), mlp2 row-parallel (weight S(2)@tp, bias replicated); the routed tokens
and their counts are the same on every tp rank (R@tp) and the output is each rank's part of the sum over the
hidden dim (the routed experts' local_map output is Partial).  The grouped GEMM seam (_grouped_mm) is called as
its default, torch._grouped_mm.

mlp2's bias is a replicated term added to a pending sum: torchtitan divides it by the tp degree in forward
(ScaleBiasForward) so that the sum holds it once; added as it is, every tp rank's copy is summed."""
import torch

import spmd_stubs as spmd
from spmd_stubs import P, R, S, Tensor, V
from spmd_stubs.axes import tp


def swiglu(x: Tensor[V@tp], alpha: float = 1.702, limit: float = 7.0) -> Tensor[V@tp]:
    x_glu, x_linear = x[..., ::2], x[..., 1::2]
    x_glu = x_glu.clamp(min=None, max=limit)
    x_linear = x_linear.clamp(min=-limit, max=limit)
    out_glu = x_glu * torch.sigmoid(alpha * x_glu)
    return torch.addcmul(out_glu, out_glu, x_linear)


class GptOssGroupedExperts:
    swiglu_limit: float
    mlp1_weight_EGD: Tensor[S(1)@tp]
    mlp1_bias_EG: Tensor[S(1)@tp]
    mlp2_weight_EDF: Tensor[S(2)@tp]
    mlp2_bias_ED: Tensor[R@tp]

    def experts_and_bias(
        self, x_RD: Tensor[R@tp], num_tokens_per_expert_E: Tensor[R@tp]
    ) -> tuple[Tensor[P@tp], Tensor[R@tp]]:
        """forward up to its return: mlp2's partial product, and its bias repeated for each routed token."""
        offsets_E = torch.cumsum(num_tokens_per_expert_E, dim=0, dtype=torch.int32)
        tail_slack = (x_RD.shape[0] - offsets_E[-1]).unsqueeze(0).to(num_tokens_per_expert_E.dtype)
        num_tokens_per_expert_long = torch.cat([num_tokens_per_expert_E, tail_slack]).long()
        h_RG = torch._grouped_mm(x_RD.bfloat16(), self.mlp1_weight_EGD.transpose(-2, -1).bfloat16(), offs=offsets_E)
        b1 = torch.cat([self.mlp1_bias_EG, self.mlp1_bias_EG.new_zeros(1, self.mlp1_bias_EG.shape[-1])])
        b1_RG = b1.repeat_interleave(num_tokens_per_expert_long, dim=0, output_size=x_RD.shape[0])
        h_RG = h_RG + b1_RG.to(h_RG.dtype)
        h_RF = swiglu(h_RG, limit=self.swiglu_limit)
        h_RD = torch._grouped_mm(h_RF, self.mlp2_weight_EDF.transpose(-2, -1).bfloat16(), offs=offsets_E)
        b2 = torch.cat([self.mlp2_bias_ED, self.mlp2_bias_ED.new_zeros(1, self.mlp2_bias_ED.shape[-1])])
        b2_RD = b2.repeat_interleave(num_tokens_per_expert_long, dim=0, output_size=x_RD.shape[0])
        return spmd.reinterpret(h_RD, tp, src=V, dst=P), b2_RD.to(h_RD.dtype)

    def forward_unscaled_bias(self, x_RD: Tensor[R@tp], num_tokens_per_expert_E: Tensor[R@tp]) -> Tensor[S(0)@tp]:
        """forward's return, reduce-scattered to the sequence-sharded layout as the MoE's exit is under SP."""
        h_RD, b2_RD = self.experts_and_bias(x_RD, num_tokens_per_expert_E)
        return spmd.reduce_scatter(h_RD + b2_RD, tp, src=P, dst=S(0))  # E: spmd-partial-affine add adds a Partial to a non-Partial operand on axis tp (P@tp + R@tp)

    def forward_unscaled_bias_fixed(self, x_RD: Tensor[R@tp], num_tokens_per_expert_E: Tensor[R@tp]) -> Tensor[S(0)@tp]:
        """The bias held as a Partial, as ScaleBiasForward's 1/tp share on each rank is: the sum holds it once."""
        h_RD, b2_RD = self.experts_and_bias(x_RD, num_tokens_per_expert_E)
        return spmd.reduce_scatter(h_RD + spmd.convert(b2_RD, tp, src=R, dst=P), tp, src=P, dst=S(0))
