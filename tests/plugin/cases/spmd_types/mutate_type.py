"""``spmd.mutate_type``: the relabels the spec has as a reinterpret narrow ``x``; the others are refused.  A loop over
axes written out is one call per axis."""
import torch

import spmd_types as spmd


def rank_local_metadata(packed_cu_seqlens: torch.Tensor) -> None:
    spmd.assert_type(packed_cu_seqlens, {"dp": spmd.R, "tp": spmd.R})
    spmd.mutate_type(packed_cu_seqlens, "dp", src=spmd.R, dst=spmd.V)
    reveal_type(packed_cu_seqlens)  # N: Tensor[V@dp, R@tp]


def row_parallel_partials(out: torch.Tensor) -> None:
    spmd.assert_type(out, {"tp": spmd.V})
    out = spmd.mutate_type(out, "tp", src=spmd.V, dst=spmd.P)
    reveal_type(out)  # N: Tensor[P@tp]


def per_axis_dicts(pos: torch.Tensor) -> None:
    spmd.assert_type(pos, {"dp": spmd.R, "cp": spmd.R})
    spmd.mutate_type(pos, src=spmd.R, dst={"dp": spmd.V, "cp": spmd.V})
    reveal_type(pos)  # N: Tensor[V@cp, V@dp]


def every_axis(h: torch.Tensor) -> None:
    spmd.assert_type(h, {"dp": spmd.R, "tp": spmd.R})
    spmd.mutate_type(h, src=spmd.R, dst=spmd.V)
    reveal_type(h)  # N: Tensor[V@dp, V@tp]


def relabelled_per_axis(packed_cu_seqlens: torch.Tensor) -> None:
    spmd.assert_type(packed_cu_seqlens, {"dp": spmd.R, "cp": spmd.R, "tp": spmd.R})
    for axis in ("dp", "cp"):
        spmd.mutate_type(packed_cu_seqlens, axis, src=spmd.R, dst=spmd.V)
    reveal_type(packed_cu_seqlens)  # N: Tensor[V@cp, V@dp, R@tp]


def counts_relabelled_per_axis_out_of_a_sum(num_tokens_per_expert: torch.Tensor) -> None:
    """models/common/moe.py's loop."""
    spmd.assert_type(num_tokens_per_expert, {"dp": spmd.P, "cp": spmd.P})
    for axis in ("dp", "cp"):
        spmd.mutate_type(num_tokens_per_expert, axis, src=spmd.P, dst=spmd.V)  # E: spmd-runtime-rule relabels P@dp as V@dp  # E: spmd-runtime-rule relabels P@cp as V@cp


def counts_reduce_scattered_per_axis(num_tokens_per_expert: torch.Tensor) -> None:
    spmd.assert_type(num_tokens_per_expert, {"dp": spmd.P, "cp": spmd.P})
    for axis in ("dp", "cp"):
        num_tokens_per_expert = spmd.reduce_scatter(num_tokens_per_expert, axis, src=spmd.P, dst=spmd.V)
    reveal_type(num_tokens_per_expert)  # N: Tensor[V@cp, V@dp]


def loss_accumulator_relabelled(hidden_states: torch.Tensor) -> None:
    """components/loss.py's loop over a dict's items: zeros relabelled as a sum's parts (zero is every type's
    value)."""
    total_loss = hidden_states.new_zeros(())
    spmd.assert_type(total_loss, {"dp": spmd.R, "cp": spmd.R, "tp": spmd.R})
    for axis_name, dst in {"dp": spmd.P, "cp": spmd.P, "tp": spmd.I}.items():
        total_loss = spmd.mutate_type(total_loss, axis_name, src=spmd.R, dst=dst)
    reveal_type(total_loss)  # N: Tensor[P@cp, P@dp, I@tp]


def ones_relabelled_as_parts(hidden_states: torch.Tensor) -> None:
    """Ones are no zeros: their copies relabelled as a sum's parts sum to the axis size."""
    count = hidden_states.new_ones(())
    spmd.assert_type(count, {"dp": spmd.R})
    count = spmd.mutate_type(count, "dp", src=spmd.R, dst=spmd.P)  # E: spmd-runtime-rule relabels R@dp as P@dp


def accumulator_filled_then_relabelled(hidden_states: torch.Tensor, loss: torch.Tensor) -> None:
    total_loss = hidden_states.new_zeros(())
    total_loss += loss
    spmd.assert_type(total_loss, {"dp": spmd.R})
    total_loss = spmd.mutate_type(total_loss, "dp", src=spmd.R, dst=spmd.P)  # E: spmd-runtime-rule relabels R@dp as P@dp


def table_accumulated_then_relabelled(learned_pos_embed: torch.Tensor, n: int) -> None:
    pos_embeds = learned_pos_embed.new_zeros(n, n)
    pos_embeds += learned_pos_embed
    spmd.assert_type(pos_embeds, {"tp": spmd.R})
    pos_embeds = spmd.mutate_type(pos_embeds, "tp", src=spmd.R, dst=spmd.I)  # E: spmd-runtime-rule the SPMD spec's reinterpret(R,I) runs convert(I,P) on the gradient


def counts_relabelled_undeclared(num_tokens_per_expert: torch.Tensor) -> None:
    """token_dispatcher.py's counts, a parameter of no known type: the relabel declares them, as assert_type
    would."""
    for axis in ["dp", "cp", "tp"]:
        spmd.mutate_type(num_tokens_per_expert, axis, src=spmd.P, dst=spmd.V)


def loss_accumulator_converted(hidden_states: torch.Tensor) -> None:
    total_loss = hidden_states.new_zeros(())
    spmd.assert_type(total_loss, {"dp": spmd.R, "cp": spmd.R, "tp": spmd.R})
    total_loss = spmd.mutate_type(total_loss, "tp", src=spmd.R, dst=spmd.I)
    for axis_name in ("dp", "cp"):
        total_loss = spmd.convert(total_loss, axis_name, src=spmd.R, dst=spmd.P)
    reveal_type(total_loss)  # N: Tensor[P@cp, P@dp, I@tp]


def axes_not_written_out(offsets: torch.Tensor, axes: tuple[str, ...]) -> None:
    spmd.assert_type(offsets, {"dp": spmd.R, "cp": spmd.R})
    for axis in axes:
        spmd.mutate_type(offsets, axis, src=spmd.R, dst=spmd.V)
    reveal_type(offsets)  # N: torch._tensor.Tensor[Any] | torch._tensor.Tensor[R@cp, R@dp]


def loop_variable_read_after(offsets: torch.Tensor) -> str:
    spmd.assert_type(offsets, {"dp": spmd.R, "cp": spmd.R})
    for axis in ("dp", "cp"):
        spmd.mutate_type(offsets, axis, src=spmd.R, dst=spmd.V)
    reveal_type(offsets)  # N: torch._tensor.Tensor[Any] | torch._tensor.Tensor[R@cp, R@dp]
    return axis


def counts_relabelled_out_of_a_sum(num_tokens_per_expert: torch.Tensor) -> None:
    spmd.assert_type(num_tokens_per_expert, {"ep": spmd.P})
    spmd.mutate_type(num_tokens_per_expert, "ep", src=spmd.P, dst=spmd.V)  # E: spmd-runtime-rule the SPMD spec has no reinterpret(P,V): a pending sum is resolved only by communication. Fix (needs your choice): num_tokens_per_expert = spmd.reduce_scatter(num_tokens_per_expert, "ep", src=spmd.P, dst=spmd.V) where the value is P@ep.
    reveal_type(num_tokens_per_expert)  # N: Tensor[V@ep]


def counts_reduce_scattered(num_tokens_per_expert: torch.Tensor) -> None:
    spmd.assert_type(num_tokens_per_expert, {"ep": spmd.P})
    num_tokens_per_expert = spmd.reduce_scatter(num_tokens_per_expert, "ep", src=spmd.P, dst=spmd.V)
    reveal_type(num_tokens_per_expert)  # N: Tensor[V@ep]


def replicate_relabelled_invariant(pos_embeds: torch.Tensor) -> None:
    spmd.assert_type(pos_embeds, {"tp": spmd.R})
    pos_embeds = spmd.mutate_type(pos_embeds, "tp", src=spmd.R, dst=spmd.I)  # E: spmd-runtime-rule the SPMD spec's reinterpret(R,I) runs convert(I,P) on the gradient, the relabel runs nothing. Fix (needs your choice): pos_embeds = spmd.reinterpret(pos_embeds, "tp", src=spmd.R, dst=spmd.I, expert_mode=True).


def replicate_reinterpreted_invariant(pos_embeds: torch.Tensor) -> None:
    spmd.assert_type(pos_embeds, {"tp": spmd.R})
    pos_embeds = spmd.reinterpret(pos_embeds, "tp", src=spmd.R, dst=spmd.I, expert_mode=True)
    reveal_type(pos_embeds)  # N: Tensor[I@tp]


def position_table_relabelled_invariant(learned_pos_embed: torch.Tensor, n: int) -> None:
    pos_embeds = learned_pos_embed.new_zeros(n, n)
    spmd.assert_type(pos_embeds, {"tp": spmd.R})
    pos_embeds = spmd.mutate_type(pos_embeds, "tp", src=spmd.R, dst=spmd.I)
    reveal_type(pos_embeds)  # N: Tensor[I@tp]


def invariant_relabelled_replicate(w: torch.Tensor) -> None:
    spmd.assert_type(w, {"tp": spmd.I})
    spmd.mutate_type(w, "tp", src=spmd.I, dst=spmd.R)  # E: spmd-runtime-rule reinterpret(I,R) runs all_reduce(P,I) on the gradient, the relabel runs nothing. Fix (needs your choice): w = spmd.reinterpret(w, "tp", src=spmd.I, dst=spmd.R).


def source_not_the_value(x: torch.Tensor) -> None:
    spmd.assert_type(x, {"tp": spmd.I})
    spmd.mutate_type(x, "tp", src=spmd.V, dst=spmd.P)  # E: spmd-assert spmd.mutate_type says src=V on axis tp but the value is I@tp


def replicate_relabelled_partial(total_loss: torch.Tensor) -> None:
    spmd.assert_type(total_loss, {"dp": spmd.R})
    spmd.mutate_type(total_loss, "dp", src=spmd.R, dst=spmd.P)  # E: spmd-runtime-rule each rank's copy becomes one part of a sum, the value times the axis size (the spec's reinterpret(R,P) needs expert_mode=True). Fix (needs your choice): total_loss = spmd.convert(total_loss, "dp", src=spmd.R, dst=spmd.P), which keeps the value, or spmd.reinterpret(total_loss, "dp", src=spmd.R, dst=spmd.P, expert_mode=True) if you mean it.


def replicate_converted_partial(total_loss: torch.Tensor) -> None:
    spmd.assert_type(total_loss, {"dp": spmd.R})
    total_loss = spmd.convert(total_loss, "dp", src=spmd.R, dst=spmd.P)
    reveal_type(total_loss)  # N: Tensor[P@dp]


def filled_table_relabelled_invariant(learned_pos_embed: torch.Tensor, n: int) -> None:
    pos_embeds = learned_pos_embed.new_zeros(n, n)
    pos_embeds[0] = learned_pos_embed
    spmd.assert_type(pos_embeds, {"tp": spmd.R})
    pos_embeds = spmd.mutate_type(pos_embeds, "tp", src=spmd.R, dst=spmd.I)  # E: spmd-runtime-rule the SPMD spec's reinterpret(R,I) runs convert(I,P) on the gradient


def table_relabelled_then_filled(learned_pos_embed: torch.Tensor, n: int) -> None:
    pos_embeds = learned_pos_embed.new_zeros(n, n)
    spmd.assert_type(pos_embeds, {"tp": spmd.R})
    pos_embeds = spmd.mutate_type(pos_embeds, "tp", src=spmd.R, dst=spmd.I)
    for i in range(n):
        pos_embeds[i] = learned_pos_embed[i]
    reveal_type(pos_embeds)  # N: Tensor[I@tp]


def table_filled_in_a_loop_around_its_relabel(learned_pos_embed: torch.Tensor, n: int) -> None:
    pos_embeds = learned_pos_embed.new_zeros(n, n)
    for i in range(n):
        spmd.assert_type(pos_embeds, {"tp": spmd.R})
        pos_embeds = spmd.mutate_type(pos_embeds, "tp", src=spmd.R, dst=spmd.I)  # E: spmd-runtime-rule the SPMD spec's reinterpret(R,I) runs convert(I,P) on the gradient
        pos_embeds[i] = learned_pos_embed[i]


def counts_relabelled_in_a_branch(num_tokens_per_expert: torch.Tensor, checking: bool) -> None:
    """gpt_oss/moe.py: the relabels run where type checking is on; after the branch the counts are either
    type, never the one half-way through the loop (V@dp alone)."""
    if checking:
        for axis in ("dp", "cp"):
            spmd.mutate_type(num_tokens_per_expert, axis, src=spmd.P, dst=spmd.V)
    reveal_type(num_tokens_per_expert)  # N: Tensor[Any] | torch._tensor.Tensor[V@cp, V@dp]
