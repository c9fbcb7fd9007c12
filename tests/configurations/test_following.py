"""Which conditions a configuration decides, on parsed trees (as the plugin sees them, before analysis):
flags followed through a module's assignments, and enum flags decided by the member's class.

Each source marks its ``if`` conditions with a comment saying what the
flags make of it: ``# true``, ``# false`` or ``# undecided``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from mypy.errors import Errors
from mypy.nodes import IfStmt, MypyFile
from mypy.options import Options
from mypy.parse import load_from_raw, parse

from spmd_mypy.configurations import declared, pruning
from spmd_mypy.configurations.conditions import Flags, truth
from spmd_mypy.statements import walk

NAMED = {"tp_mode": "REDUCE_SCATTER", "sequence_parallel": True}
"""Flags read by their names (the unqualified enum member of the existing syntax)."""
TYPED = {"tp_mode": "TensorParallelLinearMode.REDUCE_SCATTER", "sequence_parallel": True}
"""``tp_mode`` declared by its enum type."""


def tree_of(source: str) -> MypyFile:
    """``source`` parsed as mypy's build parses it (the native parser's tree, loaded)."""
    options = Options()
    errors = Errors(options)
    raw = parse(textwrap.dedent(source).encode(), "m.py", "m", errors, options)
    return raw if raw.raw_data is None else load_from_raw("m.py", "m", raw.raw_data, errors, options)


def decided(source: str, flags: Flags) -> list[tuple[int, str, str]]:
    """Each ``if`` condition's line, what the flags make of it, and what its comment expects."""
    text = textwrap.dedent(source)
    tree = tree_of(text)
    places = pruning._Places(tree, flags)
    lines = text.splitlines()
    found = []
    for visit in walk(tree.defs):
        if isinstance(statement := visit.statement, IfStmt):
            for condition in statement.expr:
                made = truth(condition, places.at(visit.scope.node if visit.scope else None))
                said = {True: "true", False: "false", None: "undecided"}[made]
                expected = lines[condition.line - 1].rpartition("#")[2].strip()
                found.append((condition.line, said, expected))
    return found


def assert_as_marked(source: str, flags: Flags) -> None:
    found = decided(source, flags)
    assert found, "no if statement"
    wrong = [f"line {line}: {said}, expected {expected}" for line, said, expected in found if said != expected]
    assert not wrong, "\n".join(wrong)


def test_an_attribute_set_to_the_flag_in_its_class_is_the_flag() -> None:
    assert_as_marked("""
        class Linear:
            def __init__(self, config):
                self.mode = config.tp_mode
                self.sp = config.sequence_parallel

            def forward(self, x):
                if self.mode == Mode.ALL_REDUCE:  # false
                    pass
                if self.mode is not Mode.ALL_REDUCE:  # true
                    pass
                if self.sp and x:  # undecided
                    pass
                if not self.sp:  # false
                    pass

        class Other:
            def forward(self):
                if self.mode == Mode.ALL_REDUCE:  # undecided
                    pass
    """, NAMED)


def test_related_classes_share_their_attributes() -> None:
    assert_as_marked("""
        class Base(nn.Module):
            def __init__(self, tp_mode):
                self.mode = tp_mode

        class Row(Base):
            def forward(self):
                if self.mode == Mode.ALL_REDUCE:  # false
                    pass

        class Overriding(Base):
            def reset(self):
                self.mode = Mode.ALL_REDUCE  # an Overriding's self.mode is no longer only the flag (nor a Base's)

            def forward(self):
                if self.mode == Mode.ALL_REDUCE:  # undecided
                    pass

        class Mixin:
            def forward(self):  # runs on a Mixed, whose self.mode only Base sets
                if self.mode == Mode.ALL_REDUCE:  # false
                    pass

        class Mixed(Row, Mixin):
            pass

        def base_method(layer):
            return Base.forward(layer)
    """, NAMED)


def test_an_attribute_assigned_on_another_object_is_not_followed() -> None:
    assert_as_marked("""
        class Linear:
            def __init__(self, tp_mode):
                self.mode = tp_mode

            def forward(self):
                if self.mode == Mode.ALL_REDUCE:  # undecided
                    pass

        def configure(layer):
            layer.mode = Mode.ALL_REDUCE
    """, NAMED)


def test_a_self_that_is_rebound_or_a_static_method_reads_no_attribute() -> None:
    assert_as_marked("""
        class Linear:
            def __init__(self, tp_mode):
                self.mode = tp_mode

            def rebound(self, other):
                self = other
                if self.mode == Mode.ALL_REDUCE:  # undecided
                    pass

            @staticmethod
            def static(self):
                if self.mode == Mode.ALL_REDUCE:  # undecided
                    pass

            def closure(self):
                def inner():
                    if self.mode == Mode.ALL_REDUCE:  # false
                        pass
                return inner
    """, NAMED)


def test_a_local_every_binding_of_which_is_the_flag() -> None:
    assert_as_marked("""
        def f(self, config, modes):
            mode = config.tp_mode
            if mode is Mode.REDUCE_SCATTER:  # true
                pass
            alias = mode
            if alias == Mode.ALL_REDUCE:  # false
                pass
            looped = config.tp_mode
            for looped in modes:
                pass
            if looped is Mode.REDUCE_SCATTER:  # undecided
                pass
            pair, other = config.tp_mode, config.tp_mode
            if pair is Mode.REDUCE_SCATTER:  # undecided
                pass
            walrus = config.tp_mode
            if (walrus := modes[0]) is Mode.REDUCE_SCATTER:  # undecided
                pass
            shadowed = config.tp_mode
            ignored = [shadowed for shadowed in modes]
            if shadowed is Mode.REDUCE_SCATTER:  # undecided
                pass
            sp = config.sequence_parallel
            if sp:  # true
                pass
    """, NAMED)


def test_a_name_rebound_by_global_or_nonlocal_is_not_followed() -> None:
    assert_as_marked("""
        MODE = config.tp_mode

        def read():
            if MODE is Mode.REDUCE_SCATTER:  # undecided
                pass

        def write():
            global MODE
            MODE = other

        def outer(config):
            mode = config.tp_mode
            def inner():
                nonlocal mode
                mode = None
            if mode is Mode.REDUCE_SCATTER:  # undecided
                pass
    """, NAMED)


def test_a_module_level_name_read_in_a_function() -> None:
    assert_as_marked("""
        MODE = config.tp_mode

        def read():
            if MODE is Mode.REDUCE_SCATTER:  # true
                pass
    """, NAMED)


def test_a_parameter_every_call_of_which_passes_the_flag() -> None:
    assert_as_marked("""
        def enter(x, mode, *, gather=False):
            if mode is Mode.REDUCE_SCATTER:  # true
                pass
            if gather:  # undecided
                pass

        def keyword_only(x, *, mode):
            if mode is Mode.REDUCE_SCATTER:  # true
                pass

        class Linear:
            def __init__(self, config):
                self.mode = config.tp_mode

            def forward(self, x):
                local = self.mode
                enter(x, local)
                keyword_only(x, mode=self.mode)
                return enter(x, mode=self.mode, gather=True)
    """, NAMED)


def test_a_parameter_is_undecided_where_its_calls_disagree_or_are_unseen() -> None:
    assert_as_marked("""
        def disagree(x, mode):
            if mode is Mode.REDUCE_SCATTER:  # undecided
                pass

        def never_called(x, mode):
            if mode is Mode.REDUCE_SCATTER:  # undecided
                pass

        def passed_on(x, mode):
            if mode is Mode.REDUCE_SCATTER:  # undecided
                pass

        def unpacked(x, mode):
            if mode is Mode.REDUCE_SCATTER:  # undecided
                pass

        def defaulted(x, mode=Mode.ALL_REDUCE):
            if mode is Mode.REDUCE_SCATTER:  # undecided
                pass

        @functools.cache
        def decorated(x, mode):
            if mode is Mode.REDUCE_SCATTER:  # undecided
                pass

        def calls(config, args):
            disagree(1, config.tp_mode)
            disagree(1, Mode.ALL_REDUCE)
            passed_on(1, config.tp_mode)
            callbacks = [passed_on]
            unpacked(1, config.tp_mode)
            unpacked(*args)
            defaulted(1, config.tp_mode)
            defaulted(1)
            decorated(1, config.tp_mode)
    """, NAMED)


def test_a_parameter_fed_through_other_parameters() -> None:
    assert_as_marked("""
        def inner(x, mode):
            if mode is Mode.REDUCE_SCATTER:  # true
                pass

        def outer(x, m):
            return inner(x, m)

        def recursive(x, mode):
            if mode is Mode.REDUCE_SCATTER:  # undecided
                pass
            return recursive(x, mode)

        def top(config):
            outer(1, config.tp_mode)
            recursive(1, config.tp_mode)
    """, NAMED)


def test_methods_and_constructors_called_in_the_module() -> None:
    assert_as_marked("""
        class Block:
            def __init__(self, mode):
                self.mode = mode

            def step(self, mode):
                if mode is Mode.REDUCE_SCATTER:  # true
                    pass

            def forward(self):
                if self.mode is Mode.REDUCE_SCATTER:  # true
                    pass
                self.step(self.mode)

        class Sub(Block):
            def __init__(self, mode):
                super().__init__(mode)

        def build(config):
            Block(config.tp_mode)
            return Sub(mode=config.tp_mode)

        class Called:
            def relay(self, mode):
                if mode is Mode.REDUCE_SCATTER:  # undecided
                    pass

            def forward(self, other, config):
                self.relay(config.tp_mode)
                other.relay(config.tp_mode)  # any object's .relay could be this one's
    """, NAMED)


def test_a_class_used_otherwise_than_called_leaves_its_init_undecided() -> None:
    assert_as_marked("""
        class Block:
            def __init__(self, mode):
                self.mode = mode

            def forward(self):
                if self.mode is Mode.REDUCE_SCATTER:  # undecided
                    pass

        def build(config, factory):
            Block(config.tp_mode)
            return factory(Block)
    """, NAMED)
    assert_as_marked("""
        class Block:
            def __init__(self, mode):
                self.mode = mode

            def forward(self, x):
                if self.mode is Mode.REDUCE_SCATTER:  # true
                    pass
                return isinstance(x, Block)

        def build(config):
            return Block(config.tp_mode)
    """, NAMED)


def test_the_flag_name_itself_wins_over_what_is_assigned() -> None:
    assert_as_marked("""
        def f(tp_mode):
            if tp_mode is Mode.ALL_REDUCE:  # false
                pass

        f(Mode.ALL_REDUCE)
    """, NAMED)


def test_an_enum_flag_decides_every_comparison_with_its_class() -> None:
    assert_as_marked("""
        from .enum import TensorParallelLinearMode
        from .enum import TensorParallelLinearMode as TPMode
        from . import enum
        Alias = TensorParallelLinearMode

        def f(layer, mode, other):
            if layer.mode is TensorParallelLinearMode.REDUCE_SCATTER:  # true
                pass
            if TensorParallelLinearMode.ALL_REDUCE == mode:  # false
                pass
            if mode is not TPMode.REDUCE_SCATTER:  # false
                pass
            if other.kind != Alias.ALL_REDUCE:  # true
                pass
            if mode is enum.TensorParallelLinearMode.ALL_REDUCE:  # false
                pass
            if mode is OtherEnum.ALL_REDUCE:  # undecided
                pass
            if TensorParallelLinearMode.ALL_REDUCE is TensorParallelLinearMode.ALL_REDUCE:  # undecided
                pass
            if mode in (TensorParallelLinearMode.ALL_REDUCE,):  # undecided
                pass
            if mode == "REDUCE_SCATTER":  # undecided
                pass
            if tp_mode == "REDUCE_SCATTER":  # undecided
                pass
            if tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:  # true
                pass
            if tp_mode is OtherEnum.REDUCE_SCATTER:  # undecided
                pass
    """, TYPED)


def test_an_unqualified_enum_flag_matches_by_the_members_name_only() -> None:
    assert_as_marked("""
        def f(tp_mode, mode):
            if tp_mode is AnyEnum.REDUCE_SCATTER:  # true
                pass
            if tp_mode == "REDUCE_SCATTER":  # true
                pass
            if mode is TensorParallelLinearMode.REDUCE_SCATTER:  # undecided
                pass
    """, NAMED)


def test_a_module_without_a_flag_or_an_enum_class_is_left_alone() -> None:
    tree = tree_of("""
        def f(mode):
            if mode is Mode.REDUCE_SCATTER:
                pass
    """)
    places = pruning._Places(tree, TYPED)
    assert not places.decide_anything
    pruning.prune(tree, TYPED)


def test_pruning_marks_the_branch_the_enum_flag_rules_out() -> None:
    tree = tree_of("""
        def f(self):
            if self.mode is TensorParallelLinearMode.ALL_REDUCE:
                a = 1
            elif self.mode is TensorParallelLinearMode.REDUCE_SCATTER:
                a = 2
            else:
                raise ValueError
            b = 3 if self.mode is TensorParallelLinearMode.ALL_REDUCE else 4
    """)
    pruning.prune(tree, TYPED)
    function = tree.defs[0]
    statement = function.body.body[0]
    assert statement.body[0].is_unreachable
    inner = statement.else_body.body[0]
    assert not inner.body[0].is_unreachable and inner.else_body.is_unreachable
    conditional = function.body.body[1].rvalue
    assert conditional.cond.name == "False"


@pytest.mark.parametrize("source, flags", [
    ("if x is Mode.A:\n    pass\n", {"tp_mode": "Mode.A"}),
    ("from e import Mode as M\nif x is M.A:\n    pass\n", {"tp_mode": "Mode.A"}),
    ("if self.tp_mode:\n    pass\n", {"tp_mode": True}),
])
def test_a_module_comparing_with_an_enum_flags_class_is_parsed_afresh(tmp_path: Path, source: str,
                                                                       flags: dict[str, declared.FlagValue]) -> None:
    """mypy must parse it through the path that asks the plugin first (``FlagTests``)."""
    path = tmp_path / "m.py"
    path.write_text(source)
    tests = pruning.FlagTests((declared.Configuration("c", tuple(flags.items())),))
    assert tests.found_in(str(path))
    (tmp_path / "other.py").write_text("x = 1\n")
    assert not tests.found_in(str(tmp_path / "other.py"))
