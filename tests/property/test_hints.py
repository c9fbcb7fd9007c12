"""The hint harness on generated programs (a sample; scripts/hints.py runs thousands).

The programs the checker rejects get their hints applied mechanically until
they check clean or an error needs a choice (tests/hints/harness.py); every
one that ends clean must compute the reference gradients in the simulated
world (spmd_hints).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from spmd_hints import Judged, judge_hints
from spmd_programs import draw
from spmd_soundness import simulated_world

from tests.hints.harness import Status

PROGRAMS = 80
SEED = 1


@pytest.fixture(scope="module")
def mesh() -> Iterator[object]:
    with simulated_world() as m:
        yield m


def test_hinted_programs_that_check_clean_compute_the_reference(mesh: object, tmp_path: Path) -> None:
    judged = Judged()
    judge_hints(draw(PROGRAMS, SEED), tmp_path, mesh, seed=SEED, judged=judged)
    assert not judged.tally.wrong, judged.tally.wrong[0]
    assert judged.status.get(Status.CLEAN, 0) >= 5, f"too few rejected programs ended clean: {judged.status}"
