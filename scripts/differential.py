"""mypy over real untyped code without and with the plugin, under every setting: the differences.

    python scripts/differential.py [--settings default strict ...] [--code-bases fairscale ...]

Copies megatron-core, fairscale, torchtitan and torch's tensor-parallel
package (installed by the set-up), runs mypy twice per setting (two configs
that differ only in ``plugins = spmd_mypy``) and prints, per setting, the
files and lines checked, the errors on each side and the lines found on one
side only (listed below the table).  The suite runs a sample
(tests/third_party/test_differential.py); docs/robustness.md holds this
script's figures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.third_party.differential import CODE_BASES, SETTINGS, compare, copy_code_bases  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--code-bases", nargs="+", choices=list(CODE_BASES), default=list(CODE_BASES))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "code"
        files = copy_code_bases(args.code_bases, root)
        print(f"{'setting':<24} {'files':>6} {'lines':>8} {'errors':>8} {'only without':>13} {'only with':>10} {'seconds':>8}")
        differing = []
        for setting in args.settings:
            c = compare(root, files, setting, Path(scratch) / "cache")
            print(f"{setting:<24} {c.files:>6} {c.lines:>8} {len(c.without):>8} {len(c.only_without):>13} "
                  f"{len(c.only_with):>10} {c.seconds:>8.0f}", flush=True)
            if not c.equal:
                differing.append(c)
        for c in differing:
            print(f"\n{c.setting}: only without the plugin")
            print("\n".join(f"  {line}" for line in c.only_without))
            print(f"{c.setting}: only with the plugin")
            print("\n".join(f"  {line}" for line in c.only_with))
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
