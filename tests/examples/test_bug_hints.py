"""The bug gallery with its hints applied mechanically: the bugs whose fix is a rewrite end right.

Every ``*_bug.py`` is copied and the checker's ``Fix as an edit`` notes are
applied round by round (tests/hints/harness.py) until the copy checks clean
or an error needs a choice.  The copies that check clean run their gloo
scenario (test_bug_runtime.py) against the one-process reference, like the
hand-written fixed twins: a hint that checks clean but computes something
else would be a bug.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from spmd_examples import BUGS
from test_bug_runtime import SCENARIOS, gloo_launch
from torch.distributed.device_mesh import init_device_mesh

import spmd_stubs as spmd
from spmd_stubs.axes import cp, ep
from tests.hints.harness import Status, Whole, copy_into, fix_whole

EXPECTED = {
    "cp_loss_scaling": Status.CLEAN,
    "embedding_missing_reduce": Status.CLEAN,
    "grad_norm_duplicates": Status.CLEAN,
    "loss_overcount_tp": Status.CLEAN,
    "row_parallel_bias": Status.CLEAN,
    # The matmul of an R and an I value: converting the I operand (the hint)
    # makes an R result where the function declares I; the twin makes the
    # gathered operand I instead, which the message names as the other way.
    "sp_gather_duplicate": Status.STUCK,
    # A Partial plus an R term: the edit all-reduces the Partial operand, which makes an
    # R loss where the function declares P; the message's other way (convert the R
    # term to P) keeps the declared type, and the twin leaves the statistics pending.
    "moe_aux_loss_overcount": Status.STUCK,
    # Which operand is wrong depends on what the value means (docs/bugs.md).
    "ce_label_smoothing": Status.CHOICE,
    "ep_gather_missing_reduce": Status.CHOICE,
    "sp_norm_grad": Status.CHOICE,
    # Raw torch.distributed calls: the typed form is a statement, not an expression.
    "ce_raw_all_reduce": Status.CHOICE,
    "moe_raw_all_to_all": Status.CHOICE,
}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bug_hints")


@pytest.fixture(scope="module")
def hinted(work: Path) -> dict[str, Whole]:
    """Bug name -> how its copy in ``work`` (``<name>_hinted.py``) ended."""
    copies = copy_into(sorted(BUGS.glob("*_bug.py")), work, lambda p: p.name.replace("_bug.py", "_hinted.py"))
    return {path.name[: -len("_hinted.py")]: whole for path, whole in fix_whole(copies, work).items()}


def test_every_bug_ends_as_expected(hinted: dict[str, Whole]) -> None:
    assert {name: whole.status for name, whole in hinted.items()} == EXPECTED


def run_hinted(directory: str, names: list[str]) -> dict[str, float]:
    """On one rank: each hinted copy's largest difference from the reference."""
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    spmd.bind_mesh(mesh)
    spmd.bind_groups({cp: mesh.get_group("tp"), ep: mesh.get_group("tp")})
    try:
        t = mesh.get_local_rank("tp")
        return {name: SCENARIOS[name](_load(Path(directory) / f"{name}_hinted.py"), t) for name in names}
    finally:
        spmd.unbind()


def _load(path: Path) -> object:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_clean_copies_compute_the_reference(hinted: dict[str, Whole], work: Path) -> None:
    clean = sorted(name for name, whole in hinted.items() if whole.status is Status.CLEAN)
    per_rank = gloo_launch.spawn(run_hinted, str(work), clean, world_size=4)
    wrong = {name: [errors[name] for errors in per_rank] for name in clean
             if any(errors[name] > 1e-10 for errors in per_rank)}
    assert clean and not wrong, f"hints that check clean but compute something else: {wrong}"
