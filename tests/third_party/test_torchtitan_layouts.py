"""torchtitan 0.3.0's layouts held as data, checked against its modules (docs/spec.md#layouts-held-as-data).

``decoder_sharding.set_dense_ffn_sharding`` attaches ``ShardingConfig``s to
a dense FFN's config and its ``w1``/``w2``/``w3``; the checker runs it in
each value of ``enable_sp`` and evaluates ``FeedForward.forward`` with the
layouts it attaches.  The installed package is copied and checked as it
is; each plan mistake is re-introduced into a copy of the module, checked
beside it with its fix applied (the fixed twin), in one mypy run with the
documented config, and once more on that run's cache with the owner's
``forward`` edited.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from spmd_mypy.migrate.thirdparty import installed_dir
from tests.third_party.checked_copy import installed_source, module_path

PROJECT = Path(__file__).resolve().parents[2]
CONFIG = Path(__file__).with_name("torchtitan") / "mypy.ini"
MODULE = "torchtitan.models.common.decoder_sharding"
SETTER = "set_dense_ffn_sharding"
SHIPPED_INPUT = 'in_dst_shardings={"x": dense_activation_placement(tp=spmd.R)}'
SHIPPED_W2 = "feed_forward_cfg.w2.sharding_config = w2_config"


@dataclass(frozen=True)
class Mistake:
    """A plan mistake: (shipped text, mistaken text), the attachment reported, what the error and its fix
    say, and the fix as an edit of the mistaken copy."""

    edit: tuple[str, str]
    target: str
    says: tuple[str, ...]
    fix: tuple[str, str]


MISTAKES = {
    # The FFN's input declared I (the same on every rank, its gradient whole) where the colwise w1/w3 need
    # R: I beside their sharded weights has no single gradient.
    "ffn_input_invariant": Mistake(
        (SHIPPED_INPUT, SHIPPED_INPUT.replace("spmd.R", "spmd.I")),
        "feed_forward_cfg.sharding_config",
        ("(enable_sp=True) and (enable_sp=False)", 'I@tp from "feed_forward_cfg" and V@tp from '
         '"feed_forward_cfg.w1"', "on axis tp",
         "declare R@tp in the in_dst_shardings of feed_forward_cfg.sharding_config (tp=spmd.R)"),
        (SHIPPED_INPUT.replace("spmd.R", "spmd.I"), SHIPPED_INPUT),
    ),
    # w2 colwise: it contracts this rank's slice of the hidden features (w1's and w3's S(-1) outputs)
    # against its whole input features.
    "w2_colwise": Mistake(
        (SHIPPED_W2, "feed_forward_cfg.w2.sharding_config = colwise_config()"),
        "feed_forward_cfg.w2.sharding_config",
        ("(enable_sp=True) and (enable_sp=False)", '"feed_forward_cfg.w2" (weight S(0)@tp) is given '
         'S(-1)@tp from "feed_forward_cfg.w1", "feed_forward_cfg.w3"', "splits different dims",
         "feed_forward_cfg.w2.sharding_config = rowwise_config(output_sp=enable_sp)"),
        ("feed_forward_cfg.w2.sharding_config = colwise_config()",
         "feed_forward_cfg.w2.sharding_config = rowwise_config(output_sp=enable_sp)"),
    ),
}


def replaced(code: str, edit: tuple[str, str]) -> str:
    before, after = edit
    assert code.count(before) == 1, f"{before!r} is not in the code once"
    return code.replace(before, after)


def copies() -> dict[str, str]:
    """Module -> its code: the shipped module, each mistake's copy and its fixed twin."""
    shipped = installed_source(MODULE)
    found = {MODULE: shipped}
    for name, mistake in MISTAKES.items():
        mistaken = replaced(shipped, mistake.edit)
        found[f"{MODULE}_{name}"] = mistaken
        found[f"{MODULE}_{name}_fixed"] = replaced(mistaken, mistake.fix)
    return found


Found = list[tuple[str, int, str, str]]
"""Each error and note in the copies: (module, line, code, message)."""


def run_mypy(root: Path, paths: dict[str, str]) -> Found:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(CONFIG), "--cache-dir",
                           str(root / "cache"), "--show-error-codes", "--no-pretty", "--no-error-summary",
                           *paths], cwd=root, capture_output=True, text=True, env=env)
    output = done.stdout + done.stderr
    assert done.returncode in (0, 1) and "Traceback" not in output and "INTERNAL ERROR" not in output, output[-4000:]
    found = []
    for line in output.splitlines():
        path, _, rest = line.partition(":")
        number, _, rest = rest.partition(": ")
        if path in paths and number.isdigit():
            message, _, code = rest.rpartition("  [")
            found.append((paths[path], int(number), code.rstrip("]") if message else "", message or rest))
    return found


FORWARD = "        return self.w2(F.silu(self.w1(x)) * self.w3(x))\n"
ROWWISE_GIVEN_WHOLE = "        return self.w2(x)\n"
"""``FeedForward.forward`` edited so that the rowwise ``w2`` is given the whole input."""


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Found, Found]:
    """The root, what mypy says about the copies, and what it says on that run's cache once
    ``FeedForward.forward`` is edited (the setters' module itself unchanged)."""
    root = tmp_path_factory.mktemp("torchtitan-layouts")
    shutil.copytree(installed_dir("torchtitan"), root / "torchtitan", ignore=shutil.ignore_patterns("__pycache__"))
    paths = {}
    for module, code in copies().items():
        path = module_path(Path(), module)
        (root / path).write_text(code)
        paths[str(path)] = module
    cold = run_mypy(root, paths)
    owner = root / module_path(Path(), "torchtitan.models.common.feed_forward")
    owner.write_text(replaced(owner.read_text(), (FORWARD, ROWWISE_GIVEN_WHOLE)))
    return root, cold, run_mypy(root, paths)


def layout_errors(found: Found, module: str) -> list[tuple[int, str]]:
    return [(line, message) for m, line, code, message in found if m == module and code in ("spmd-plan",
                                                                                               "spmd-internal")]


def test_no_finding_on_the_module_as_shipped(checked: tuple[Path, Found, Found]) -> None:
    assert layout_errors(checked[1], MODULE) == []


def test_an_edited_owner_forward_is_checked_on_a_warm_cache(checked: tuple[Path, Found, Found]) -> None:
    """The setters are checked against their owners' sources, so their module's cache entry is never
    valid: an owner's ``forward`` edited elsewhere reaches them."""
    errors = layout_errors(checked[2], MODULE)
    assert len(errors) == 1 and '"feed_forward_cfg.w2" (weight S(1)@tp) is given R@tp' in errors[0][1], errors


@pytest.mark.parametrize("name", MISTAKES)
def test_each_plan_mistake_is_reported_at_its_attachment(
        checked: tuple[Path, Found, Found], name: str) -> None:
    """One error, on the attachment the fix changes, naming the axis, the types, both modules and the fix;
    the copy with that fix applied has none."""
    root, found, _ = checked
    mistake, module = MISTAKES[name], f"{MODULE}_{name}"
    tree = ast.parse((root / module_path(Path(), module)).read_text())
    setter = next(s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == SETTER)
    line = next(s.lineno for s in ast.walk(setter) if isinstance(s, ast.Assign)
                and ast.unparse(s.targets[0]) == mistake.target)
    errors = layout_errors(found, module)
    assert [at for at, _ in errors] == [line], errors
    said = " ".join(message for m, at, _, message in found if m == module and at == line)
    assert all(fragment in said for fragment in mistake.says), said
    assert layout_errors(found, f"{module}_fixed") == []
