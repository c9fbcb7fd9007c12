"""The ``parallelize_module`` plan example type-checks clean with the plugin.

``examples/dtensor_plan`` is plain torch code whose layout is stated by its
plan only; ``tests/runtime/test_dtensor_plan.py`` runs the plan on 4 gloo
ranks against the block in one process.
"""

from __future__ import annotations

from spmd_examples import PLAN_EXAMPLE, ROOT, MypyRun


def test_plan_example_type_checks_clean(example_mypy_run: MypyRun) -> None:
    files = sorted(str(p.relative_to(ROOT)) for p in PLAN_EXAMPLE.glob("*.py"))
    assert files == [f"examples/dtensor_plan/{name}.py" for name in ("llama_block", "run_plan", "tp_plan")]
    assert all(example_mypy_run.clean(path) for path in files), example_mypy_run.output
