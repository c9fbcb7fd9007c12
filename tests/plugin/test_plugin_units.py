"""Unit tests of the plugin's pieces that need no mypy run: config loading, the crash guard, shape arguments."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from mypy.nodes import ARG_POS, Expression, IndexExpr, IntExpr, MemberExpr, NameExpr, StrExpr, TupleExpr, UnaryExpr

from spmd_mypy import config, errorcodes
from spmd_mypy.global_mode.arguments import CallArgs, behaviour_of
from spmd_mypy.hooks import guarded
from spmd_mypy.report import balanced
from spmd_stubs.core import sharding, torch_ops


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("mypy.ini", "[mypy]\n[spmd_mypy]\nstrict = true\nallow_redefinition = false\n"),
        ("setup.cfg", "[metadata]\nname = x\n[spmd_mypy]\nstrict = yes\nallow_redefinition = off\n"),
        ("pyproject.toml", "[tool.spmd_mypy]\nstrict = true\nallow_redefinition = false\n"),
    ],
)
def test_config_sections(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert config.load(str(path)) == config.Config(strict=True, allow_redefinition=False)


def test_config_defaults(tmp_path: Path) -> None:
    (tmp_path / "mypy.ini").write_text("[mypy]\n")
    assert config.load(str(tmp_path / "mypy.ini")) == config.Config(strict=False, allow_redefinition=True)
    assert config.load(None) == config.Config()


def test_config_rejects_non_booleans(tmp_path: Path) -> None:
    (tmp_path / "mypy.ini").write_text("[spmd_mypy]\nstrict = sometimes\n")
    with pytest.raises(ValueError, match="strict must be true or false"):
        config.load(str(tmp_path / "mypy.ini"))


@pytest.mark.parametrize(("name", "text", "message"), [
    ("mypy.ini", "[spmd_mypy]\nstrikt = true\n", "[spmd_mypy] has no setting 'strikt' (set to 'true'; "),
    ("pyproject.toml", "[tool.spmd_mypy]\nstrikt = true\n", "[tool.spmd_mypy] has no setting 'strikt' (set to true; "),
])
def test_config_rejects_unknown_settings(tmp_path: Path, name: str, text: str, message: str) -> None:
    """Named as the file writes the section, with the value and the nearest setting, then every setting."""
    (tmp_path / name).write_text(text)
    with pytest.raises(config.ConfigError) as raised:
        config.load(str(tmp_path / name))
    assert str(raised.value).startswith(message + "did you mean 'strict'?): the settings are strict, "), raised.value


def test_an_override_wins_over_the_file_for_its_block_only(tmp_path: Path) -> None:
    (tmp_path / "mypy.ini").write_text("[spmd_mypy]\nstrict = false\n")
    with config.overriding(strict=True):
        assert config.load(str(tmp_path / "mypy.ini")).strict
    assert not config.load(str(tmp_path / "mypy.ini")).strict
    with pytest.raises(ValueError, match="not a flag"):
        with config.overriding(groups=True):
            pass


TP_GETTER = "megatron.core.parallel_state.get_tensor_model_parallel_group"
DECLARED = config.AxisNames(functions=((TP_GETTER, "tp"),), attributes=(("tp_group", "tp"), ("dp_group", "dp")))


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("mypy.ini", f"[mypy]\n[spmd_mypy]\ngroups = {TP_GETTER}: tp, *.tp_group: tp, *.dp_group: dp\n"),
        ("setup.cfg", f"[metadata]\nname = x\n[spmd_mypy]\ngroups =\n    {TP_GETTER}: tp\n    *.tp_group: tp\n"
                      "    *.dp_group : dp\n"),
        ("pyproject.toml", f'[tool.spmd_mypy.groups]\n"{TP_GETTER}" = "tp"\n"*.tp_group" = "tp"\n"*.dp_group" = "dp"\n'),
    ],
)
def test_group_declarations_in_every_config_format(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    groups = config.load(str(path)).groups
    assert groups == DECLARED
    assert (groups.of_function(TP_GETTER), groups.of_attribute("dp_group"), groups.of_attribute("ep_group")) == (
        "tp", "dp", None)


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("[spmd_mypy]\ngroups = *.tp_group: tensor parallel\n", "the axis of '*.tp_group' must be a mesh axis name"),
        ("[spmd_mypy]\ngroups = *.tp_group\n", "'*.tp_group' has no axis"),
        ("[spmd_mypy]\ngroups = self.tp_group(): tp\n", "'self.tp_group()' is not a function's full name"),
        ("[spmd_mypy]\ngroups = *.a.b: tp\n", "'*.a.b' is not a function's full name or *.ATTRIBUTE"),
    ],
)
def test_a_bad_group_declaration_names_the_entry_and_the_fix(tmp_path: Path, text: str, complaint: str) -> None:
    (tmp_path / "mypy.ini").write_text(text)
    with pytest.raises(config.ConfigError, match=re.escape(complaint)) as error:
        config.load(str(tmp_path / "mypy.ini"))
    assert "write each entry as NAME: AXIS" in str(error.value)


def test_sizes_and_collectives_read_in_both_file_forms(tmp_path: Path) -> None:
    getter = "megatron.core.parallel_state.get_tensor_model_parallel_world_size"
    wrapper = "nanotron.distributed.all_gather_into_tensor"
    (tmp_path / "mypy.ini").write_text(f"[spmd_mypy]\nsizes = {getter}: tp, *.tp_ws: tp\n"
                                       f"collectives =\n    {wrapper}: torch.distributed.all_gather_into_tensor\n")
    (tmp_path / "pyproject.toml").write_text(f'[tool.spmd_mypy.sizes]\n"{getter}" = "tp"\n"*.tp_ws" = "tp"\n'
                                             f'[tool.spmd_mypy.collectives]\n"{wrapper}" = '
                                             '"torch.distributed.all_gather_into_tensor"\n')
    for name in ("mypy.ini", "pyproject.toml"):
        settings = config.load(str(tmp_path / name))
        assert (settings.sizes.of_function(getter), settings.sizes.of_attribute("tp_ws")) == ("tp", "tp")
        assert settings.collectives == ((wrapper, "torch.distributed.all_gather_into_tensor"),)


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("[spmd_mypy]\nsizes = *.tp_ws\n", "[spmd_mypy] sizes: '*.tp_ws' has no axis"),
        ("[spmd_mypy]\ncollectives = all_gather: torch.distributed.all_gather\n",
         "[spmd_mypy] collectives: 'all_gather' is not a function's full name"),
        ("[spmd_mypy]\ncollectives = lib.gather: lib.all_gather\n",
         "[spmd_mypy] collectives: 'lib.gather' must name a torch.distributed collective, got 'lib.all_gather'"),
        ("[spmd_mypy]\ncollectives = lib.gather\n", "[spmd_mypy] collectives: 'lib.gather' has no collective"),
    ],
)
def test_a_bad_size_or_collective_declaration_names_the_entry(tmp_path: Path, text: str, complaint: str) -> None:
    (tmp_path / "mypy.ini").write_text(text)
    with pytest.raises(config.ConfigError, match=re.escape(complaint)):
        config.load(str(tmp_path / "mypy.ini"))


@pytest.mark.parametrize("table", ['[tool.spmd_mypy.groups]\n"*.tp_group" = 1\n', "[tool.spmd_mypy]\ngroups = 1\n"])
def test_a_group_declaration_must_be_text(tmp_path: Path, table: str) -> None:
    (tmp_path / "pyproject.toml").write_text(table)
    with pytest.raises(config.ConfigError, match="groups"):
        config.load(str(tmp_path / "pyproject.toml"))


def test_group_declarations_are_in_the_config_data_mypy_caches() -> None:
    """As written, in JSON's types: mypy compares the data it cached with the data reported now."""
    assert config.Config(groups=DECLARED).as_dict()["groups"] == {TP_GETTER: "tp", "*.tp_group": "tp", "*.dp_group": "dp"}


def test_the_config_file_is_found_the_way_mypy_finds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = x\n")
    (tmp_path / "pyproject.toml").write_text("[tool.mypy]\nplugins = ['spmd_mypy']\n")
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path / "src")
    assert config.find_config_file() == str(tmp_path / "pyproject.toml")
    (tmp_path / "src" / "mypy.ini").write_text("[mypy]\n")
    assert config.find_config_file() == str(tmp_path / "src" / "mypy.ini")


def test_the_users_own_config_file_is_found_as_mypy_finds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No config in the project: mypy reads the user's ``$XDG_CONFIG_HOME/mypy/config`` (or ``~/.mypy.ini``)."""
    from mypy import defaults

    (tmp_path / "project" / ".git").mkdir(parents=True)
    user = tmp_path / "xdg" / "mypy" / "config"
    user.parent.mkdir(parents=True)
    user.write_text("[mypy]\nplugins = spmd_mypy\n[spmd_mypy]\nconfigurations =\n    a: f = true\n    b: f = false\n")
    monkeypatch.setattr(defaults, "USER_CONFIG_FILES", [str(user)])
    monkeypatch.chdir(tmp_path / "project")
    assert config.find_config_file() == str(user)
    assert [c.name for c in config.load(config.find_config_file()).configurations] == ["a", "b"]


class _Api:
    def __init__(self) -> None:
        self.failures: list[tuple[str, object, object]] = []

    def fail(self, message: str, context: object, code: object = None) -> None:
        self.failures.append((message, context, code))


def test_guard_turns_an_exception_into_spmd_internal() -> None:
    def broken(ctx: object) -> object:
        raise KeyError("boom")

    api, context, default = _Api(), object(), object()
    ctx = SimpleNamespace(api=api, context=context, default_return_type=default)
    assert guarded(broken)(ctx) is default
    [(message, where, code)] = api.failures
    assert where is context and code is errorcodes.INTERNAL
    assert "KeyError" in message and "boom" in message


def test_guard_is_transparent_when_the_hook_works() -> None:
    api = _Api()
    ctx = SimpleNamespace(api=api, context=object(), default_return_type=None)
    assert guarded(lambda c: "result")(ctx) == "result"
    assert api.failures == []


def test_every_code_is_an_spmd_sub_code() -> None:
    codes = [*errorcodes.BY_RULE.values(), errorcodes.UNMODELLED, errorcodes.MISSING_AXIS, errorcodes.INTERNAL]
    assert all(code.sub_code_of is errorcodes.SPMD for code in codes)
    assert len({code.code for code in codes}) == len(codes)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1 - s) * x", "(1 - s) * x"),
        ("a * b", "a * b"),
        ("f(a) + (b)", "f(a) + (b)"),
        ("x)) @ w", "((x)) @ w"),
    ],
)
def test_snippets_get_their_opening_parentheses(text: str, expected: str) -> None:
    assert balanced(text) == expected


def _name(name: str, fullname: str = "") -> NameExpr:
    expr = NameExpr(name)
    expr.fullname = fullname
    return expr


def _call(**arguments: Expression) -> CallArgs:
    """A method call on ``x`` passing each argument by its parameter's name."""
    return CallArgs({name: [(expr, ARG_POS)] for name, expr in arguments.items()}, _name("x"))


def _x_shape(index: int) -> IndexExpr:
    return IndexExpr(MemberExpr(_name("x"), "shape"), IntExpr(index))


@pytest.mark.parametrize(
    ("op", "args", "behaviour"),
    [
        ("softmax", _call(dim=UnaryExpr("-", IntExpr(1))), sharding.Along((-1,))),
        ("max", _call(other=_name("y")), sharding.Pointwise()),
        ("sum", _call(dim=TupleExpr([IntExpr(0), IntExpr(1)]), keepdim=_name("True", "builtins.True")),
         sharding.Reduce((0, 1), True, "sum", torch_ops.OPS["sum"].spmd)),
        ("view", _call(size=TupleExpr([_x_shape(0), UnaryExpr("-", IntExpr(1))])), sharding.View(1, 0, 2)),
        ("einsum", _call(args=StrExpr("ij,jk->ik")), sharding.Einsum("ij,jk->ik", torch_ops.OPS["einsum"].spmd)),
        ("addmm", _call(), sharding.Opaque("has no shard propagation rule")),
        ("softmax", _call(), sharding.Opaque("has no shard propagation rule for this call (dim is not given)")),
        ("softmax", _call(dim=_name("d")),
         sharding.Opaque("has no shard propagation rule for this call (a dim that is not an int literal)")),
        ("view", _call(), sharding.Opaque("has no shard propagation rule for this call (no shape)")),
        ("einsum", _call(args=_name("equation")),
         sharding.Opaque("has no shard propagation rule for this call (the equation is not a string literal)")),
    ],
)
def test_shape_arguments_are_read_from_the_call(op: str, args: CallArgs, behaviour: sharding.Behaviour) -> None:
    assert behaviour_of(torch_ops.OPS[op], args) == behaviour


def test_importing_the_plugin_leaves_what_few_runs_use_unimported() -> None:
    """Every mypy run pays the plugin's import: shard propagation, the redistribute planner and the Megatron
    table load where a run first needs them (global SPMD, ``redistribute``, a Megatron helper), torch never.
    The op table names its ``spmd.*`` forms (:class:`~spmd_stubs.core.sharding.SpmdForm`), from two small modules."""
    code = (
        "import sys, mypy.plugin, spmd_mypy.main\n"
        "for m in sorted(sys.modules):\n"
        "    if m.startswith(('spmd_stubs.core.sharding.', 'torch', 'spmd_stubs.core.planner', 'spmd_stubs.core.megatron')):\n"
        "        print(m)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["spmd_stubs.core.sharding.errors", "spmd_stubs.core.sharding.specs"]


@pytest.mark.parametrize("line", ['x = "é€😀"; y = p + r', "α, β = p + r, 1", "plain = p + r"])
def test_character_index_of_the_old_parsers_columns(line: str) -> None:
    """``--no-native-parser`` places nodes at Python's ``ast`` columns (UTF-8 bytes); the native
    parser's columns are checked through mypy itself (cases/annotations/non_ascii.py)."""
    import ast

    from spmd_mypy.sources import character_index

    name = next(node for node in ast.walk(ast.parse(line)) if isinstance(node, ast.Name) and node.id == "p")
    assert character_index(line, name.col_offset, native_parser=False) == line.index("p +")
