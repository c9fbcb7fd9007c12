"""Mesh transitions in generated programs: a value moved to the flattened axis ``ep`` and back.

On the 2 (dp) x 2 (tp) mesh, ``ep`` (``spmd_programs.EP``) is the flattening of ``(dp, tp)`` over
the same 4 ranks, dp outermost: the rank at ``(dp_index, tp_index)`` is member
``dp_index * 2 + tp_index`` of ep. ``spmd.reinterpret_mesh(x, {(dp, tp): ep})`` moves a value there
without moving data (docs/spec.md#meshes-over-the-same-ranks): the type of ``(dp, tp)``, uniform
over the group, lands on ep (:func:`spmd_stubs.core.mesh_transitions.regroup`: R, I, V, P carry
over, a shard keeps its dim where ``(dp, tp)`` is the order of its shard axes, else it is V). The
program then runs ordinary ops and typed collectives on ep among the values there (a pool of their
own: no op mixes the two meshes), and either moves one back with ``{ep: (dp, tp)}`` or finishes
the loss on ep.

Wild programs also move a group whose axes hold different types (``R@dp, V@tp``, which the checker
must refuse: ``spmd-mesh``) or name the group in the wrong order, ``{(tp, dp): ep}``: its type is
what the rule gives (V for a shard), and at run time the call refuses it, ep's ranks being
(dp, tp)'s in another order than (tp, dp)'s.
"""

from __future__ import annotations

from hypothesis import strategies as st
from spmd_programs import (
    _LENIENT_ORDER,
    AXES,
    EP,
    Candidate,
    Move,
    Value,
    _comm_candidates,
    _Draft,
    _local_candidates,
)

from spmd_stubs.core import AxisType, SpmdTypeError, TensorType
from spmd_stubs.core.mesh_transitions import regroup

WRONG_ORDER = tuple(reversed(AXES))
"""``(tp, dp)``: the same ranks as ep, flattened in another order."""

MESH_TRANSITION = "mesh transition"
"""The feature of every program that moves a value to ep (the others name what else it does)."""


def moved(x: Value, source: tuple[str, ...], destination: tuple[str, ...], name: str) -> tuple[Move, frozenset[str]]:
    """``name = spmd.reinterpret_mesh(x, {source: destination})`` and the error codes of the rule.

    After an error (a mixed group) the tracker guesses the type the author believed in, as for an op.
    """
    try:
        result = regroup(TensorType.of(dict(zip(x.mesh, x.types))), ((source, destination),)).as_dict()
        types = tuple(result[axis] for axis in destination)
        codes: frozenset[str] = frozenset()
    except SpmdTypeError as err:
        kinds = {t.kind for t in x.types}
        types = tuple(AxisType(next(k for k in _LENIENT_ORDER if k in kinds)) for _ in destination)
        codes = frozenset({err.code.value})
    mesh = AXES if set(destination) == set(AXES) else (EP,)
    return Move(Value(name, x.shape, types, mesh), x.name, source, destination), codes


def mesh_step(draw: st.DrawFn, draft: _Draft) -> None:
    """A live value moved to ep, one to three steps there, and half the time a value moved back to dp x tp.

    A tame program moves a value whose type is the same on dp and tp (the rule accepts it); a wild one
    any value, a third of the time naming the group in the wrong order.
    """
    source = WRONG_ORDER if draft.wild and draw(st.integers(0, 2)) == 0 else AXES
    moves = [moved(x, source, (EP,), draft.next_name()) for x in draft.pool]
    moves = [(move, codes) for move, codes in moves if draft.wild or not codes]
    if not moves:
        return
    move, codes = draw(st.sampled_from(moves))
    draft.on_ep.append(draft.add(move, codes, data=False))
    draft.features.add(MESH_TRANSITION)
    if source != AXES:
        draft.features.add("mesh transition in the wrong order")
    if codes:
        draft.features.add("mesh transition of a mixed group")
    for _ in range(draw(st.integers(1, 3))):
        collective = draw(st.booleans())
        candidates: list[Candidate] = (_comm_candidates(draw(st.sampled_from(draft.on_ep)), 0, draft.wild)
                                       if collective else _local_candidates(draft.on_ep, draft.wild))
        if candidates:
            chosen = draw(st.sampled_from(candidates))
            draft.on_ep.append(draft.add(chosen.make(draft.next_name()), chosen.codes, data=False))
            draft.features.add("collective on ep" if collective else "local op on ep")
    if draw(st.booleans()):
        # Usually the last value there, so that the steps on ep feed the rest of the program.
        back = draft.on_ep[-1] if draw(st.booleans()) else draw(st.sampled_from(draft.on_ep))
        move, codes = moved(back, (EP,), AXES, draft.next_name())
        draft.add(move, codes)
        draft.features.add("mesh transition and back")
