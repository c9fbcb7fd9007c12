"""The benchmark scripts stay runnable: each at a tiny size, its table printed (no timing is asserted)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.plugin.harness import ROOT


def test_bench_configurations_prints_both_ratios() -> None:
    command = [sys.executable, str(ROOT / "scripts" / "bench_configurations.py"), "--configurations", "3",
               "--lines", "100", "--repeat", "1", "--workloads", "generated"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    number = r"\s+(\d+\.\d\d)"
    row = re.search(rf"^generated \(\d+ lines\){number * 6}$", done.stdout, re.M)
    assert row is not None, done.stdout
    one_cold, all_cold, cold_ratio, one_warm, all_warm, warm_ratio = map(float, row.groups())
    # the ratios are of the unrounded seconds: equal to the printed ones' within their rounding
    assert cold_ratio == pytest.approx(all_cold / one_cold, rel=0.03)
    assert warm_ratio == pytest.approx(all_warm / one_warm, rel=0.03)
    assert done.stdout.startswith("3 configurations;")


def test_bench_features_prints_each_feature_against_a_plain_run() -> None:
    command = [sys.executable, str(ROOT / "scripts" / "bench_features.py"), "--lines", "100", "--repeat", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = re.findall(r"^(\S.*?)\s+(\d+\.\d\d)\s+(\d+\.\d\d)\s+(\d+\.\d\d)$", done.stdout, re.M)
    assert [row[0] for row in rows] == ["mypy + plugin", "autograd Functions, mypy + plugin",
                                        "spmd-coverage (strict check + report)", "spmd-check, 2 configurations"]
    for _, feature, plain, ratio in rows:
        # the ratio is of the unrounded seconds: equal to the printed ones' within their rounding
        assert float(ratio) == pytest.approx(float(feature) / float(plain), rel=0.03)


def test_bench_checker_breakdown_splits_the_typed_check() -> None:
    command = [sys.executable, str(ROOT / "scripts" / "bench_checker.py"), "--breakdown", "--sizes", "200",
               "--repeat", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    # "the rest" may come out below zero at this size, where the two sides' runs differ by more than it
    number = r"\s+(-?\d+\.\d+)"
    row = re.search(rf"^\s+\d+{number * 7}$", done.stdout, re.M)
    assert row is not None, done.stdout
    plain, typed, hooks, rest, ratio, no_hooks, _ = map(float, row.groups())
    # printed from unrounded seconds: each agrees with the others within their rounding (0.005 each; a
    # ratio of values near 0.5 s moves by up to 2% with it)
    assert rest == pytest.approx(typed - hooks - plain, abs=0.025)
    assert ratio == pytest.approx(typed / plain, rel=0.03)
    assert no_hooks == pytest.approx((typed - hooks) / plain, rel=0.05)
    kinds = dict(re.findall(r"^\s+(get_\w+|report_config_data)\s+(\d+) calls", done.stdout, re.M))
    # every annotation of the package goes through the type-analyze hook
    assert int(kinds.get("get_type_analyze_hook", 0)) > 10, done.stdout


def test_bench_real_code_prints_plain_and_plugin_side_by_side() -> None:
    command = [sys.executable, str(ROOT / "scripts" / "bench_real_code.py"), "--workloads", "fairscale",
               "--repeats", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    header = re.search(r"^workload.*$", done.stdout, re.M)
    assert header is not None, done.stdout
    assert re.findall(r"\| (cold|warm|new code)\s+plain\s+plugin\s+ratio", header.group()) == ["cold", "warm", "new code"]
    number = r"\s+(\d+\.\d\d)"
    row = re.search(rf"^fairscale\s+7\s+\d+(?:\s+\|{number * 3}){{3}}\s*$", done.stdout, re.M)
    assert row is not None, done.stdout
    cells = re.findall(r"\|" + number * 3, row.group())
    for plain, plugin, ratio in cells:
        # the ratio is of the unrounded seconds: equal to the printed ones' within their rounding
        assert float(ratio) == pytest.approx(float(plugin) / float(plain), rel=0.05)
