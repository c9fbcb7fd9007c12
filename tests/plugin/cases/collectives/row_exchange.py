"""all_to_all with row counts: a mixture of experts' token dispatch, V to V from tokens that vary on ep."""
import torch

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import dp, ep, tp


def dispatch(tokens: Tensor[V@ep], tokens_per_rank: Tensor[V@ep], expert_weight: Tensor[V@ep]) -> Tensor[V@ep]:
    """Counts first (integers, no gradient), then the rows they count; the combine sends them back."""
    received = spmd.all_to_all(tokens_per_rank, ep, src=V, dst=V)
    reveal_type(received)  # N: Tensor[V@ep]
    sent_sizes, received_sizes = tokens_per_rank.tolist(), received.tolist()
    routed = spmd.all_to_all(tokens, ep, src=V, dst=V, input_split_sizes=sent_sizes, output_split_sizes=received_sizes)
    reveal_type(routed)  # N: Tensor[V@ep]
    expert_out = routed @ expert_weight
    return spmd.all_to_all(expert_out, ep, src=V, dst=V, input_split_sizes=received_sizes,
                           output_split_sizes=sent_sizes)


def shards_and_other_axes(tokens: Tensor[S(0)@ep, V@dp], sizes: list[int], back: list[int]) -> None:
    reveal_type(spmd.all_to_all(tokens, ep, src=V, dst=V, input_split_sizes=sizes, output_split_sizes=back))  # N: Tensor[V@dp, V@ep]
    reveal_type(spmd.all_to_all(tokens, (dp, ep), src=V, dst=V, input_split_sizes=sizes, output_split_sizes=back))  # N: Tensor[V@dp, V@ep]


def replicated_tokens(tokens: Tensor[R@ep], sizes: list[int], back: list[int]) -> None:
    spmd.all_to_all(tokens, ep, src=V, dst=V, input_split_sizes=sizes, output_split_sizes=back)  # E: spmd-collective every rank of ep holds the same rows, so each would send its copy and every row would arrive once from each rank (and its gradient be summed as often). Fix (needs your choice): first convert(x, ep, src=R, dst=S(0)) to keep this rank's share of the rows


def replicated_tokens_fixed(tokens: Tensor[R@ep], sizes: list[int], back: list[int]) -> None:
    share = spmd.convert(tokens, ep, src=R, dst=S(0))
    reveal_type(spmd.all_to_all(share, ep, src=V, dst=V, input_split_sizes=sizes, output_split_sizes=back))  # N: Tensor[V@ep]


def invariant_tokens(tokens: Tensor[I@ep], sizes: list[int], back: list[int]) -> None:
    spmd.all_to_all(tokens, ep, src=V, dst=V, input_split_sizes=sizes, output_split_sizes=back)  # E: spmd-collective sends each rank's own rows to their owners, but the input is I@ep on axis ep


def invariant_tokens_fixed(tokens: Tensor[I@ep], sizes: list[int], back: list[int]) -> None:
    share = spmd.convert(tokens, ep, src=I, dst=S(0))
    reveal_type(spmd.all_to_all(share, ep, src=V, dst=V, input_split_sizes=sizes, output_split_sizes=back))  # N: Tensor[V@ep]


def pending_sum(partial: Tensor[P@ep], sizes: list[int], back: list[int]) -> None:
    routed = spmd.all_to_all(partial, ep, src=V, dst=V, input_split_sizes=sizes, output_split_sizes=back)  # E: spmd-collective each rank holds a part of a pending sum, and the parts of one row sent to different ranks are never reduced. Fix (needs your choice): first reduce_scatter(x, ep, src=P, dst=S(0))
    reveal_type(routed)  # N: Tensor[V@ep]


def pending_sum_fixed(partial: Tensor[P@ep], sizes: list[int], back: list[int]) -> None:
    share = spmd.reduce_scatter(partial, ep, src=P, dst=S(0))
    reveal_type(spmd.all_to_all(share, ep, src=V, dst=V, input_split_sizes=sizes, output_split_sizes=back))  # N: Tensor[V@ep]


def shard_types_declared(tokens: Tensor[V@ep], sizes: list[int], back: list[int]) -> None:
    routed = spmd.all_to_all(tokens, ep, src=S(0), dst=S(0), input_split_sizes=sizes, output_split_sizes=back)  # E: spmd-collective uneven rows go from each rank to their owners, which takes V@ep to V@ep, while S(i) parts are pieces of one whole in rank order. Fix (needs your choice): pass src=V, dst=V, keeping the split sizes.
    reveal_type(routed)  # N: Tensor[V@ep]


def shard_types_declared_fixed(tokens: Tensor[V@ep], sizes: list[int], back: list[int]) -> None:
    reveal_type(spmd.all_to_all(tokens, ep, src=V, dst=V, input_split_sizes=sizes, output_split_sizes=back))  # N: Tensor[V@ep]


def one_member_replicated(flag: bool, v: Tensor[V@ep], r: Tensor[R@ep], sizes: list[int], back: list[int]) -> None:
    tokens = v if flag else r
    spmd.all_to_all(tokens, ep, src=V, dst=V, input_split_sizes=sizes, output_split_sizes=back)  # E: spmd-collective all_to_all with input_split_sizes=/output_split_sizes= sends each rank's own rows to their owners, but the input is R@ep on axis ep


def even_exchange_unchanged(x: Tensor[V@ep], r: Tensor[R@ep]) -> None:
    reveal_type(spmd.all_to_all(x, ep, src=V, dst=V))  # N: Tensor[V@ep]
    spmd.all_to_all(r, ep, src=V, dst=V)  # E: spmd-collective all_to_all is told src=V, but the input is R@ep


def untyped_counts(t: torch.Tensor, sizes: list[int], back: list[int]) -> None:
    reveal_type(spmd.all_to_all(t, ep, src=V, dst=V, input_split_sizes=sizes, output_split_sizes=back))  # N: Tensor[V@ep]


def sizes_left_to_their_default(x: Tensor[S(0)@ep]) -> None:
    reveal_type(spmd.all_to_all(x, ep, src=S(0), dst=S(1), input_split_sizes=None, output_split_sizes=None))  # N: Tensor[S(1)@ep]


def experts_split_over_tp(tokens: Tensor[V@ep, I@tp], counts: Tensor[V@ep, I@tp]) -> None:
    """Counts the same on every tp rank (computed from I@tp routing) send the same rows from each: the rows stay
    I@tp for the experts' tensor parallelism."""
    received = spmd.all_to_all(counts, ep, src=V, dst=V)
    sent_sizes, received_sizes = counts.tolist(), received.tolist()
    routed = spmd.all_to_all(tokens, ep, src=V, dst=V, input_split_sizes=sent_sizes, output_split_sizes=received_sizes)
    reveal_type(routed)  # N: Tensor[V@ep, I@tp]


def counts_varying_on_tp(tokens: Tensor[V@ep, I@tp], counts: Tensor[V@ep, V@tp], back: list[int]) -> None:
    """Counts V@tp may pick other rows on each tp rank: I@tp rows would get a gradient that differs per rank."""
    spmd.all_to_all(tokens, ep, src=V, dst=V, input_split_sizes=counts.tolist(), output_split_sizes=back)  # E: spmd-collective may send other rows from each rank of tp, as the counts are V@tp (only counts R or I on tp are the same on each of its ranks)


def counts_varying_on_tp_fixed(tokens: Tensor[V@ep, I@tp], counts: Tensor[V@ep, V@tp], back: list[int]) -> None:
    replicated = spmd.convert(tokens, tp, src=I, dst=R)
    rows = spmd.all_to_all(replicated, ep, src=V, dst=V, input_split_sizes=counts.tolist(), output_split_sizes=back)
    reveal_type(rows)  # N: Tensor[V@ep, V@tp]


def counts_of_unknown_type(tokens: Tensor[V@ep, P@tp], sizes: list[int], back: list[int]) -> None:
    """Counts whose type is not read may differ on tp: the parts of a pending sum would never meet."""
    spmd.all_to_all(tokens, ep, src=V, dst=V, input_split_sizes=sizes, output_split_sizes=back)  # E: spmd-collective as the counts have no known type


def counts_of_unknown_type_fixed(tokens: Tensor[V@ep, P@tp], sizes: list[int], back: list[int]) -> None:
    whole = spmd.all_reduce(tokens, tp, src=P, dst=R)
    reveal_type(spmd.all_to_all(whole, ep, src=V, dst=V, input_split_sizes=sizes, output_split_sizes=back))  # N: Tensor[V@ep, V@tp]
