"""mypy's verdicts on real untyped code are the same with the plugin as without it.

A sample of the matrix ``scripts/differential.py`` runs in full (every code
base under every setting, results in docs/robustness.md): all four code
bases with bodies checked, and the smaller two under the settings that
change most of what mypy reports.
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


@pytest.mark.parametrize(("code_bases", "setting"), SAMPLE, ids=[setting for _, setting in SAMPLE])
def test_the_same_errors_without_and_with_the_plugin(code_bases: tuple[str, ...], setting: str, tmp_path: Path) -> None:
    files = copy_code_bases(code_bases, tmp_path / "code")
    comparison = compare(tmp_path / "code", files, setting, tmp_path / "cache")
    assert len(comparison.without) > 100, "mypy found almost nothing: the code was not checked"
    assert (comparison.only_without, comparison.only_with) == ([], [])
