"""torchtitan 0.3.0's layouts held as data, checked against its modules (docs/spec.md#layouts-held-as-data).

The setters of ``decoder_sharding``, ``moe_sharding`` and the llama3 and
gpt_oss sharding modules attach ``ShardingConfig``s to module configs, each
itself or through the setters it calls (``set_gqa_attention_sharding`` ->
``set_qkv_linear_sharding``; ``set_gpt_oss_sharding_config`` -> a loop over
``config.layers`` -> ``set_moe_sharding_config``); the checker runs each in
every value of its flags and of the tests on its configs and evaluates the
modules' ``forward``\\ s with the layouts it attaches.  The installed package
is copied and checked as it is; each plan mistake is re-introduced into a
copy of its module, checked beside it with its fix applied (the fixed
twin), in one mypy run with the documented config; the same run's cache is
checked once more with an owner's ``forward`` edited, and the copies once
more in strict mode, where what is not checked is a boundary.
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
from spmd_mypy.untyped_boundaries import Boundary
from tests.third_party.checked_copy import installed_source, module_path

PROJECT = Path(__file__).resolve().parents[2]
CONFIG = Path(__file__).with_name("torchtitan") / "mypy.ini"
COMMON = "torchtitan.models.common"
DECODER = f"{COMMON}.decoder_sharding"
MOE = f"{COMMON}.moe_sharding"
SHIPPED = (DECODER, MOE, "torchtitan.models.llama3.sharding", "torchtitan.models.gpt_oss.sharding")
"""The modules checked as installed."""
SHIPPED_INPUT = 'in_dst_shardings={"x": dense_activation_placement(tp=spmd.R)}'
SHIPPED_W2 = "feed_forward_cfg.w2.sharding_config = w2_config"
ATTENTION_INPUT = '''            in_dst_shardings={
                "x_BLD": dense_activation_placement(tp=spmd.R),
            },'''
BOTH_SP = "(enable_sp=True) and (enable_sp=False)"


@dataclass(frozen=True)
class Mistake:
    """A plan mistake in a copy of ``module``: (shipped text, mistaken text), the attachment reported, what
    the error and its fix say, and the fix as an edit of the mistaken copy."""

    module: str
    edit: tuple[str, str]
    target: str
    says: tuple[str, ...]
    fix: tuple[str, str]


MISTAKES = {
    # The FFN's input declared I (the same on every rank, its gradient whole) where the colwise w1/w3 need
    # R: I beside their sharded weights has no single gradient.
    "ffn_input_invariant": Mistake(
        DECODER, (SHIPPED_INPUT, SHIPPED_INPUT.replace("spmd.R", "spmd.I")),
        "feed_forward_cfg.sharding_config",
        (BOTH_SP, 'I@tp from "feed_forward_cfg" and V@tp from "feed_forward_cfg.w1"', "on axis tp",
         "declare R@tp in the in_dst_shardings of feed_forward_cfg.sharding_config (tp=spmd.R)"),
        (SHIPPED_INPUT.replace("spmd.R", "spmd.I"), SHIPPED_INPUT),
    ),
    # w2 colwise: it contracts this rank's slice of the hidden features (w1's and w3's S(-1) outputs)
    # against its whole input features.
    "w2_colwise": Mistake(
        DECODER, (SHIPPED_W2, "feed_forward_cfg.w2.sharding_config = colwise_config()"),
        "feed_forward_cfg.w2.sharding_config",
        (BOTH_SP, '"feed_forward_cfg.w2" (weight S(0)@tp) is given S(-1)@tp from "feed_forward_cfg.w1", '
         '"feed_forward_cfg.w3"', "splits different dims",
         "feed_forward_cfg.w2.sharding_config = rowwise_config(output_sp=enable_sp)"),
        ("feed_forward_cfg.w2.sharding_config = colwise_config()",
         "feed_forward_cfg.w2.sharding_config = rowwise_config(output_sp=enable_sp)"),
    ),
    # The attention's input declared I: the Q/K/V projections the setter attaches through
    # set_qkv_linear_sharding (colwise, under attention_cfg.qkv_linear) need R, whichever QKV class the
    # isinstance tests pick, with or without a RoPE cache.
    "attention_input_invariant": Mistake(
        DECODER, (ATTENTION_INPUT, ATTENTION_INPUT.replace("spmd.R", "spmd.I")),
        "attention_cfg.sharding_config",
        (BOTH_SP, 'I@tp from "attention_cfg" and V@tp from "qkv_linear_cfg.wqkv"', "on axis tp",
         "declare R@tp in the in_dst_shardings of attention_cfg.sharding_config (tp=spmd.R)"),
        (ATTENTION_INPUT.replace("spmd.R", "spmd.I"), ATTENTION_INPUT),
    ),
    # wq rowwise, as set_gqa_attention_sharding attaches it: the attention hands it the whole input R,
    # which a weight split on its input features cannot take.
    "wq_rowwise": Mistake(
        DECODER, ("qkv_linear_cfg.wq.sharding_config = colwise_config()",
                  "qkv_linear_cfg.wq.sharding_config = rowwise_config()"),
        "qkv_linear_cfg.wq.sharding_config",
        ("With the layouts set_gqa_attention_sharding attaches " + BOTH_SP,
         '"qkv_linear_cfg.wq" (weight S(1)@tp) is given R@tp from "attention_cfg"',
         "qkv_linear_cfg.wq.sharding_config = colwise_config()"),
        ("qkv_linear_cfg.wq.sharding_config = rowwise_config()",
         "qkv_linear_cfg.wq.sharding_config = colwise_config()"),
    ),
    # The shared experts' w1 given w2's rowwise layout: the shared FeedForward hands it the whole input R
    # in every value of enable_ep and enable_sp.
    "shared_w1_rowwise": Mistake(
        MOE, ("shared.w1.sharding_config = w1_config", "shared.w1.sharding_config = w2_config"),
        "shared.w1.sharding_config",
        ("(enable_ep=True, enable_sp=True) and (enable_ep=True, enable_sp=False) and (enable_ep=False, "
         'enable_sp=True) and (enable_ep=False, enable_sp=False)', '"shared.w1" (weight S(1)@tp) is given R@tp '
         'from "shared"', "shared.w1.sharding_config = w1_config"),
        ("shared.w1.sharding_config = w2_config", "shared.w1.sharding_config = w1_config"),
    ),
}

# torchtitan's PR 4054 bug class: the routed experts' local_map reads their inputs' gradients with EP off as
# DTensor's default (Replicate), so x_BLD is I@tp in a region whose output is P@tp: each rank's gradient of it
# is only its share of the sum.
ROUTED_GRADIENT = '''                        tokens_per_expert_layout,
                    )
                ),'''
ROUTED_GRADIENT_DROPPED = ROUTED_GRADIENT.replace("                    )\n",
                                                  "                    )\n                    if enable_ep\n"
                                                  "                    else None\n")
# The fix as the error words it: every input's gradient P@tp, each other axis as DTensor's default.
ROUTED_GRADIENT_SUMMED = ROUTED_GRADIENT_DROPPED.replace(
    "else None", "else (experts_input_grad_layout, experts_input_grad_layout, experts_input_grad_layout, "
    "SpmdLayout({DP: spmd.R, CP: spmd.R, TP: spmd.P}))")
ROUTED_INPUTS = "x_BLD, topk_scores_BLK, topk_expert_ids_BLK, num_local_tokens_per_expert_E"
MISTAKES["routed_gradient_dropped"] = Mistake(
    MOE, (ROUTED_GRADIENT, ROUTED_GRADIENT_DROPPED), "moe_cfg.routed_experts.sharding_config",
    ("(enable_ep=False, enable_sp=True) and (enable_ep=False, enable_sp=False)",
     f'"moe_cfg.routed_experts" reads {ROUTED_INPUTS} as I@tp (DTensor\'s local_map: Replicate() with its gradient '
     "left out) in a region whose result is P@tp (mesh axis tp)", "its share of the sum",
     "give the local_map of moe_cfg.routed_experts.sharding_config in_grad_placements that take the gradients of "
     f"{ROUTED_INPUTS} as P@tp (tp=spmd.P)"),
    (ROUTED_GRADIENT_DROPPED, ROUTED_GRADIENT_SUMMED),
)
# A statement the setter interpreter does not follow (a loop over anything but a config's list).
UNFOLLOWED_W1 = ("    feed_forward_cfg.w1.sharding_config = colwise_config()\n",
                 "    for _ in range(1):\n        feed_forward_cfg.w1.sharding_config = colwise_config()\n")
OTHER_COPIES = {f"{DECODER}_unfollowed_loop": (DECODER, UNFOLLOWED_W1)}


def replaced(code: str, edit: tuple[str, str]) -> str:
    before, after = edit
    assert code.count(before) == 1, f"{before!r} is not in the code once"
    return code.replace(before, after)


def copies() -> dict[str, str]:
    """Module -> its code: each mistake's copy and its fixed twin, and the other copies."""
    found = {}
    for name, mistake in MISTAKES.items():
        mistaken = replaced(installed_source(mistake.module), mistake.edit)
        found[f"{mistake.module}_{name}"] = mistaken
        found[f"{mistake.module}_{name}_fixed"] = replaced(mistaken, mistake.fix)
    for module, (original, edit) in OTHER_COPIES.items():
        found[module] = replaced(installed_source(original), edit)
    return found


Found = list[tuple[str, int, str, str]]
"""Each error and note in the checked modules: (module, line, code, message)."""


def run_mypy(root: Path, paths: dict[str, str], strict: bool = False) -> Found:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT), os.environ.get("PYTHONPATH")])),
           "SPMD_MYPY_STRICT": "true" if strict else "false"}
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


@dataclass(frozen=True)
class Checked:
    """The root, and what mypy says: about the modules as copied, on that run's cache once
    ``FeedForward.forward`` is edited (the setters' modules unchanged), and in strict mode."""

    root: Path
    cold: Found
    warm: Found
    strict: Found


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Checked:
    root = tmp_path_factory.mktemp("torchtitan-layouts")
    shutil.copytree(installed_dir("torchtitan"), root / "torchtitan", ignore=shutil.ignore_patterns("__pycache__"))
    paths = {str(module_path(Path(), module)): module for module in SHIPPED}
    for module, code in copies().items():
        path = module_path(Path(), module)
        (root / path).write_text(code)
        paths[str(path)] = module
    cold = run_mypy(root, paths)
    owner = root / module_path(Path(), f"{COMMON}.feed_forward")
    shipped_owner = owner.read_text()
    owner.write_text(replaced(shipped_owner, (FORWARD, ROWWISE_GIVEN_WHOLE)))
    warm = run_mypy(root, paths)
    owner.write_text(shipped_owner)
    return Checked(root, cold, warm, run_mypy(root, paths, strict=True))


def layout_errors(found: Found, module: str) -> list[tuple[int, str]]:
    return [(line, message) for m, line, code, message in found if m == module and code in ("spmd-plan",
                                                                                               "spmd-internal")]


def boundaries(found: Found, module: str) -> list[tuple[int, str]]:
    """The layouts not checked in ``module``: (line, the headline and its notes)."""
    lines = [line for m, line, code, message in found if m == module and code == "spmd-untyped-boundary"
             and Boundary.UNCHECKED_LAYOUT.phrase in message]
    return [(line, " ".join(message for m, at, _, message in found if m == module and at == line)) for line in lines]


def line_of(root: Path, module: str, target: str) -> int:
    """The line of the one statement ``<target> = ...`` in the module."""
    tree = ast.parse((root / module_path(Path(), module)).read_text())
    lines = [s.lineno for s in ast.walk(tree) if isinstance(s, ast.Assign) and ast.unparse(s.targets[0]) == target]
    assert len(lines) == 1, (target, lines)
    return lines[0]


@pytest.mark.parametrize("module", SHIPPED)
def test_no_finding_on_the_modules_as_shipped(checked: Checked, module: str) -> None:
    assert layout_errors(checked.cold, module) == [] and layout_errors(checked.strict, module) == []


def test_an_edited_owner_forward_is_checked_on_a_warm_cache(checked: Checked) -> None:
    """The setters are checked against their owners' sources, so their module's cache entry is never
    valid: an owner's ``forward`` edited elsewhere reaches them."""
    errors = layout_errors(checked.warm, DECODER)
    assert len(errors) == 1 and '"feed_forward_cfg.w2" (weight S(1)@tp) is given R@tp' in errors[0][1], errors


@pytest.mark.parametrize("name", MISTAKES)
def test_each_plan_mistake_is_reported_at_its_attachment(checked: Checked, name: str) -> None:
    """One error, on the attachment the fix changes, naming the axis, the types, both modules and the fix;
    the copy with that fix applied has none."""
    mistake = MISTAKES[name]
    module = f"{mistake.module}_{name}"
    line = line_of(checked.root, module, mistake.target)
    errors = layout_errors(checked.cold, module)
    assert [at for at, _ in errors] == [line], errors
    said = " ".join(message for m, at, _, message in checked.cold if m == module and at == line)
    assert all(fragment in said for fragment in mistake.says), said
    assert layout_errors(checked.cold, f"{module}_fixed") == []


# The layouts strict mode reports not checked in the shipped modules: (module, attachment, why).
EXPECTED_BOUNDARIES = {
    (DECODER, "inner_attention_cfg.sharding_config", "its module's class is not known"),
    (DECODER, "config.tok_embeddings.sharding_config", "Embedding.forward's result is not known to the checker"),
    (MOE, "moe_cfg.routed_experts.sharding_config", "RoutedExperts.forward's result is not known to the checker"),
}


def test_strict_mode_names_each_layout_not_checked(checked: Checked) -> None:
    """The local_map regions whose bodies the evaluator does not follow, and nothing else."""
    found = {(module, line, why) for module in SHIPPED for line, why in boundaries(checked.strict, module)}
    expected = {(module, line_of(checked.root, module, target), why) for module, target, why in EXPECTED_BOUNDARIES}
    assert {(m, line) for m, line, _ in found} == {(m, line) for m, line, _ in expected}, found
    assert all(why in said for (_, _, why), (_, _, said) in zip(sorted(expected), sorted(found))), found


def test_a_setter_statement_not_followed_is_a_boundary_only_in_strict_mode(checked: Checked) -> None:
    module = f"{DECODER}_unfollowed_loop"
    line = next(number for number, text in enumerate(
        (checked.root / module_path(Path(), module)).read_text().splitlines(), 1) if text == "    for _ in range(1):")
    said = dict(boundaries(checked.strict, module)).get(line, "")
    assert "set_dense_ffn_sharding" in said and "the loop over `range(1)`" in said, said
    assert boundaries(checked.cold, module) == [] and layout_errors(checked.cold, module) == []
