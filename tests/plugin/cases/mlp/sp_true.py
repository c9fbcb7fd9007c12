"""The same MLP with sequence parallelism: activations S(0)@tp between blocks; checks clean."""
import torch.nn.functional as F
from torch import nn

from spmd_stubs import I, P, R, S, Tensor, V, all_gather, reduce_scatter, reinterpret
from spmd_stubs.axes import dp, tp


class SequenceParallelMLP(nn.Module):
    w1: Tensor[S(0)@tp]
    w2: Tensor[S(1)@tp]
    norm_weight: Tensor[R@tp]

    def forward(self, x: Tensor[S(0)@tp]) -> Tensor[S(0)@tp]:
        normed = F.rms_norm(x, [1024], self.norm_weight)
        full = all_gather(normed, tp, src=S(0), dst=R)
        h = F.gelu(F.linear(full, self.w1))
        partial = reinterpret(F.linear(h, self.w2), tp, src=V, dst=P)
        return x + reduce_scatter(partial, tp, src=P, dst=S(0))


def train_step(mlp: SequenceParallelMLP, x: Tensor[S(0)@tp, V@dp], head: Tensor[S(0)@tp], target: Tensor[I@tp]) -> None:
    y = mlp(x)
    reveal_type(y)  # N: Tensor[V@dp, S(0)@tp]
    logits = all_gather(y, tp, src=S(0), dst=R) @ head.T
    gathered = all_gather(logits, tp, src=S(-1), dst=I)
    loss = reinterpret(F.cross_entropy(gathered, target), dp, src=V, dst=P)
    reveal_type(loss)  # N: Tensor[P@dp, I@tp]
    loss.backward()
