"""mypy's verdicts on real untyped code are the same with the plugin as without it, but for the races.

A sample of the matrix ``scripts/differential.py`` runs in full (every code
base under every setting, results in docs/robustness.md): all four code
bases with bodies checked, and the smaller two under the settings that
change most of what mypy reports.  ``spmd-async`` is the one check that
reads code without SPMD types (a buffer read while its collective is in
flight is a race whatever its types): its findings are pinned here, each
with its verdict, and nothing else may differ.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.third_party.differential import compare, copy_code_bases

SAMPLE = [
    (("megatron-core", "fairscale", "torchtitan", "torch.distributed.tensor.parallel"), "check-untyped-defs"),
    (("fairscale", "torch.distributed.tensor.parallel"), "strict"),
    (("fairscale", "torch.distributed.tensor.parallel"), "allow-redefinition"),
]


RACES = {
    # GradScaler.unscale_: a CPU found_inf copied to CUDA, all-reduced with async_op=True, and read back by
    # `v_on_cuda.cpu()` before the wait: the copy is of an unfinished buffer (and dropped: the CPU value is never
    # synced). A true finding.
    "fairscale": ["fairscale/optim/grad_scaler.py:255"],
}
"""The ``spmd-async`` findings on each code base as installed, where they are reported."""


@pytest.mark.parametrize(("code_bases", "setting"), SAMPLE, ids=[setting for _, setting in SAMPLE])
def test_the_same_errors_without_and_with_the_plugin(code_bases: tuple[str, ...], setting: str, tmp_path: Path) -> None:
    files = copy_code_bases(code_bases, tmp_path / "code")
    comparison = compare(tmp_path / "code", files, setting, tmp_path / "cache")
    assert len(comparison.without) > 100, "mypy found almost nothing: the code was not checked"
    races = sorted({line.split(": ", 1)[0] for line in comparison.only_with if line.endswith("[spmd-async]")})
    assert races == sorted(place for name in code_bases for place in RACES.get(name, []))
    others = [line for line in comparison.only_with if line.split(": ", 1)[0] not in races]
    assert (comparison.only_without, others) == ([], [])
