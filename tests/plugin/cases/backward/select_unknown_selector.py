"""SELECT with an unknown selector (docs/spec.md#select): the data decides, so the loss rule still sees
a loss over logits gathered to R, where the labels are a plain torch.Tensor from a data loader."""
import torch
import torch.nn.functional as F

from spmd_stubs import I, P, R, S, Tensor, V, all_gather, all_reduce, reinterpret
from spmd_stubs.axes import dp, tp


def gathered_to_r(logits: Tensor[S(-1)@tp, V@dp], labels: torch.Tensor) -> None:
    full = all_gather(logits, tp, src=S(-1), dst=R)
    loss = F.cross_entropy(full, labels)
    reveal_type(loss)  # N: Tensor[V@dp, R@tp]
    loss = reinterpret(loss, dp, src=V, dst=P)
    loss.backward()  # E: spmd-backward is R@tp on axis tp


def nll_gathered_to_r(logits: Tensor[S(-1)@tp], labels: torch.Tensor) -> None:
    log_probs = F.log_softmax(all_gather(logits, tp, src=S(-1), dst=R), dim=-1)
    F.nll_loss(log_probs, labels).backward()  # E: spmd-backward is R@tp on axis tp


def gathered_to_i(logits: Tensor[S(-1)@tp, V@dp], labels: torch.Tensor) -> None:
    loss = F.cross_entropy(all_gather(logits, tp, src=S(-1), dst=I), labels)
    reveal_type(loss)  # N: Tensor[V@dp, I@tp]
    reinterpret(loss, dp, src=V, dst=P).backward()


def all_reduced_loss(logits: Tensor[V@tp], labels: torch.Tensor) -> None:
    # Each tp rank's loss over its own rows, summed once: the loss is I.
    loss = F.cross_entropy(logits, labels, reduction="sum")
    reveal_type(loss)  # N: Tensor[V@tp]
    total = all_reduce(reinterpret(loss, tp, src=V, dst=P), tp, src=P, dst=I)
    total.backward()


def partial_logits(logits: Tensor[P@tp], labels: torch.Tensor) -> None:
    F.cross_entropy(logits, labels)  # E: spmd-partial-nonlinear


def indexing(x: Tensor[P@tp], r: Tensor[R@tp], ids: torch.Tensor) -> None:
    reveal_type(x[ids])  # N: Tensor[P@tp]
    reveal_type(torch.gather(r, 0, ids))  # N: Tensor[R@tp]
    reveal_type(torch.where(ids > 0, r, r))  # N: Tensor[R@tp]
    reveal_type(F.embedding(ids, r))  # N: Tensor[R@tp]


def unknown_data(logits: torch.Tensor, labels: Tensor[V@tp]) -> None:
    # The selector gives none of the result's values: with the data unknown, so is the loss.
    reveal_type(F.cross_entropy(logits, labels))  # N: Tensor[Any]
