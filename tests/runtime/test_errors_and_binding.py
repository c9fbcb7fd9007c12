"""Invalid or gated src/dst raise the algebra's exact message; unbound axes say how to bind."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest
import torch
from spmd_world import SimWorld

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, V, core
from spmd_stubs.axes import cp, dp, tp
from spmd_stubs.core import SpmdTypeError
from spmd_stubs.mesh import UnboundAxisError
from spmd_stubs.types import to_axis_type

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "reinterpret", "convert")
TYPES = (R, I, V, P, S(0), S(-1))


def _rejections() -> list[tuple[str, object, object, str]]:
    """Every (op, src, dst) the algebra rejects without expert_mode, with its message."""
    out = []
    for op, src, dst in itertools.product(OPS, TYPES, TYPES):
        try:
            core.transition(op, to_axis_type(src), to_axis_type(dst), "tp")
        except SpmdTypeError as err:
            out.append((op, src, dst, str(err)))
    return out


REJECTIONS = _rejections()


def test_rejections_include_gated_and_invalid_pairs() -> None:
    codes = set()
    for op, src, dst, _ in REJECTIONS:
        try:
            core.transition(op, to_axis_type(src), to_axis_type(dst), "tp")
        except SpmdTypeError as err:
            codes.add(err.code)
    assert codes == {core.Code.EXPERT_MODE, core.Code.INVALID_TRANSITION, core.Code.COLLECTIVE}


@pytest.mark.parametrize("op,src,dst,message", REJECTIONS, ids=[f"{o}({s},{d})" for o, s, d, _ in REJECTIONS])
def test_runtime_raises_the_algebra_message(op: str, src: object, dst: object, message: str) -> None:
    # No axis is bound: validity is decided before any group is looked up.
    with pytest.raises(ValueError) as info:
        getattr(spmd, op)(torch.zeros(2, 4, 4), tp, src=src, dst=dst)
    assert isinstance(info.value, SpmdTypeError)
    assert str(info.value) == message


def test_expert_mode_opens_the_gate(sim: SimWorld) -> None:
    x = sim.make({r: torch.ones(3) for r in range(4)})
    with pytest.raises(ValueError, match="expert_mode=True"):
        spmd.reinterpret(x, tp, src=R, dst=P)
    y = spmd.reinterpret(x, tp, src=R, dst=P, expert_mode=True)
    assert torch.equal(sim.parts(y)[1], torch.ones(3))


def test_unbound_axis_names_the_axis_and_the_fix() -> None:
    spmd.unbind()
    with pytest.raises(UnboundAxisError) as info:
        spmd.all_reduce(torch.ones(2), cp, src=P, dst=R)
    text = str(info.value)
    assert "mesh axis cp is not bound" in text
    assert "bind_mesh" in text and "bind_groups({cp: group})" in text and "group=" in text


def test_bind_mesh_binds_every_named_dim(sim: SimWorld, fake_mesh) -> None:  # type: ignore[no-untyped-def]
    assert spmd.group_of(tp) is fake_mesh.get_group("tp")
    assert spmd.group_of(dp) is fake_mesh.get_group("dp")
    flat = spmd.group_of((dp, tp))
    assert torch.distributed.get_process_group_ranks(flat) == [0, 1, 2, 3]
    assert spmd.group_of((dp, tp)) is flat  # cached


def test_bind_groups_rebinds_one_axis(sim: SimWorld, fake_mesh) -> None:  # type: ignore[no-untyped-def]
    spmd.bind_groups({tp: fake_mesh.get_group("dp")})
    assert spmd.group_of(tp) is fake_mesh.get_group("dp")
    assert spmd.group_of(dp) is fake_mesh.get_group("dp")


def test_binding_rejects_bad_input() -> None:
    with pytest.raises(TypeError, match="must map to a ProcessGroup"):
        spmd.bind_groups({tp: "not a group"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match=r"axis tp is given twice in \(tp, tp\)"):
        spmd.group_of((tp, tp))
    with pytest.raises(TypeError, match="expected a mesh axis"):
        spmd.group_of("tp")  # type: ignore[arg-type]


def test_uneven_and_shape_errors(sim: SimWorld) -> None:
    x = sim.make({r: torch.ones(3) for r in range(4)})
    with pytest.raises(ValueError, match="does not split evenly over the 2 ranks of axis tp; pass split_sizes"):
        spmd.convert(x, tp, src=I, dst=S(0))
    with pytest.raises(ValueError, match="dim 0 must have size 2"):
        spmd.convert(x, tp, src=I, dst=V)
    with pytest.raises(ValueError, match="one non-negative size per rank"):
        spmd.all_gather(x, tp, src=S(0), dst=R, split_sizes=[1, 1, 1])
    with pytest.raises(ValueError, match="needs a shard type"):
        spmd.all_gather(x, tp, src=V, dst=R, split_sizes=[1, 2])
    with pytest.raises(ValueError, match='op must be "sum" or "avg"'):
        spmd.all_reduce(x, tp, dst=R, op="max")  # type: ignore[arg-type]


def test_redistribute_routes_and_skips_no_ops(sim: SimWorld) -> None:
    parts = {r: torch.arange(4.0) + r for r in range(4)}
    x = sim.make(parts)
    assert spmd.redistribute(x, tp, src=V, dst=S(0)) is x
    total = sim.parts(spmd.redistribute(x, tp, src=P, dst=R))
    assert torch.equal(total[0], parts[0] + parts[1]) and torch.equal(total[3], parts[2] + parts[3])
    # V -> P routes to convert(V,P), gated for users, allowed here.
    padded = sim.parts(spmd.redistribute(x, tp, src=V, dst=P))
    assert torch.equal(padded[1], torch.stack([torch.zeros(4), parts[1]]))


@pytest.mark.parametrize("src, dst", [(spmd.Pmax, P), (V, spmd.Pmax), (S(0), spmd.Pavg)])
def test_redistribute_refuses_two_step_pairs_naming_the_axis(sim: SimWorld, src: object, dst: object) -> None:
    x = sim.make({r: torch.arange(4.0) for r in range(4)})
    with pytest.raises(SpmdTypeError, match=r"on axis tp has no single operation .* Fix: .*, then convert\(x, tp, src=R"):
        spmd.redistribute(x, tp, src=src, dst=dst)  # type: ignore[arg-type]


def test_an_average_of_integers_is_refused(sim: SimWorld) -> None:
    """op="avg" (or a pending avg) on an integer tensor would have to change its dtype."""
    x = sim.make({r: torch.ones(2, dtype=torch.int64) for r in range(4)})
    with pytest.raises(ValueError, match=r"averages x of dtype torch.int64.*Fix: x.float\(\) first"):
        spmd.all_reduce(x, tp, src=P, dst=R, op="avg")
    assert spmd.all_reduce(x, tp, src=P, dst=R).dtype == torch.int64


_AFTER_DESTROY = """
import torch, torch.distributed as dist
import spmd_stubs as spmd
from spmd_stubs import P, R
from spmd_stubs.axes import tp
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
spmd.bind_groups({tp: dist.group.WORLD})
assert spmd.all_reduce(torch.ones(2), tp, src=P, dst=R).tolist() == [1.0, 1.0]
dist.destroy_process_group()
try:
    spmd.all_reduce(torch.ones(2), tp, src=P, dst=R)
except ValueError as error:
    print(error)
"""


def test_a_collective_after_destroy_process_group_is_an_error() -> None:
    """A real (one-rank) gloo group: the cached group must not be used once the process group is gone."""
    run = subprocess.run([sys.executable, "-c", _AFTER_DESTROY], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "destroy_process_group() ended it" in run.stdout and "Fix: init_process_group" in run.stdout, run.stdout


_UNSUPPORTED_DTYPES = """
import torch
import torch.distributed as dist
import spmd_stubs as spmd
from spmd_stubs import P, R, S
from spmd_stubs.axes import tp
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
spmd.bind_groups({tp: dist.group.WORLD})
for dtype in (torch.float8_e4m3fn, torch.uint16):
    x = torch.ones(2).to(dtype)
    for call in (lambda: spmd.all_reduce(x, tp, src=P, dst=R), lambda: spmd.all_gather(x, tp, src=S(0), dst=R)):
        try:
            call()
        except ValueError as error:
            print(error)
dist.destroy_process_group()
"""


def test_a_dtype_the_backend_cannot_move_gets_its_real_reason() -> None:
    """gloo has no float8: the error says so and how to cast, not that shapes may differ."""
    run = subprocess.run([sys.executable, "-c", _UNSUPPORTED_DTYPES], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    errors = run.stdout.strip().splitlines()
    assert len(errors) == 4, run.stdout
    for error, dtype in zip(errors, ["float8_e4m3fn"] * 2 + ["uint16"] * 2):
        assert f"cannot move or reduce dtype torch.{dtype}" in error and "Fix: cast x" in error, error
        assert "different shapes" not in error and "split_sizes" not in error, error
