"""``[spmd_mypy] modules``: the entries as both file forms write them, the errors that name a bad one, the
cache's view of them, and the dependencies a declaring module gets (spmd_mypy.runtime_classes).

The reads themselves are case files: tests/plugin/cases/runtime_classes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mypy.nodes import MypyFile

from spmd_mypy import config, runtime_classes
from spmd_mypy.config import RuntimeClass

ATTENTION = "picotron.model.Attention"
COLUMN = "picotron.tensor_parallel.tensor_parallel.ColumnParallelLinear"
DECLARED = (RuntimeClass(ATTENTION, "q_proj", COLUMN),
            RuntimeClass("picotron.model.Llama", "decoder_layers", "picotron.model.DecoderLayer", items=True))


@pytest.mark.parametrize(("name", "text"), [
    ("mypy.ini", f"[spmd_mypy]\nmodules = {ATTENTION}.q_proj: {COLUMN},\n"
                 "    picotron.model.Llama.decoder_layers[*]: picotron.model.DecoderLayer\n"),
    ("setup.cfg", f"[spmd_mypy]\nmodules =\n    {ATTENTION}.q_proj : {COLUMN}\n"
                  "    picotron.model.Llama.decoder_layers[*]: picotron.model.DecoderLayer\n"),
    ("pyproject.toml", f'[tool.spmd_mypy.modules]\n"{ATTENTION}.q_proj" = "{COLUMN}"\n'
                       '"picotron.model.Llama.decoder_layers[*]" = "picotron.model.DecoderLayer"\n'),
])
def test_modules_read_in_every_config_format(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(text)
    assert config.load(str(tmp_path / name)).modules == DECLARED


@pytest.mark.parametrize(("text", "complaint"), [
    ("[spmd_mypy]\nmodules = q_proj: picotron.tp.Column\n", "'q_proj' is not an owner class's full name and an attribute"),
    ("[spmd_mypy]\nmodules = picotron.Model.layers[0]: picotron.Layer\n", "'picotron.Model.layers[0]' is not an owner"),
    ("[spmd_mypy]\nmodules = picotron.model.Attention.q_proj\n", "'picotron.model.Attention.q_proj' has no class"),
    ("[spmd_mypy]\nmodules = picotron.model.Attention.q_proj: Column\n",
     "the class of 'picotron.model.Attention.q_proj' must be a class's full name, got ' Column'"),
])
def test_a_bad_modules_entry_names_the_entry_and_the_fix(tmp_path: Path, text: str, complaint: str) -> None:
    (tmp_path / "mypy.ini").write_text(text)
    with pytest.raises(config.ConfigError, match=re.escape(f"[spmd_mypy] modules: {complaint}")) as error:
        config.load(str(tmp_path / "mypy.ini"))
    assert "write each entry as OWNER.ATTRIBUTE: CLASS" in str(error.value)


def test_an_attribute_declared_twice_is_refused(tmp_path: Path) -> None:
    (tmp_path / "mypy.ini").write_text("[spmd_mypy]\nmodules = a.B.c: a.C, a.B.c: a.D\n")
    with pytest.raises(config.ConfigError, match=re.escape("[spmd_mypy] modules: 'a.B.c' is declared twice")):
        config.load(str(tmp_path / "mypy.ini"))


def test_an_unquoted_toml_name_is_refused_with_its_quoted_spelling(tmp_path: Path) -> None:
    """TOML reads ``picotron.model.Attention.q_proj = ...`` as nested tables, not one name."""
    (tmp_path / "pyproject.toml").write_text(f'[tool.spmd_mypy.modules]\n{ATTENTION}.q_proj = "{COLUMN}"\n')
    with pytest.raises(config.ConfigError, match=re.escape(
            f'[tool.spmd_mypy] modules: {ATTENTION}.q_proj is read by TOML as nested tables: quote the whole name '
            f'("{ATTENTION}.q_proj" = "CLASS")')):
        config.load(str(tmp_path / "pyproject.toml"))


def test_modules_are_in_the_config_data_mypy_caches() -> None:
    """As written, in JSON's types: a changed entry invalidates the user's cached modules."""
    assert config.Config(modules=DECLARED).as_dict()["modules"] == {
        f"{ATTENTION}.q_proj": COLUMN, "picotron.model.Llama.decoder_layers[*]": "picotron.model.DecoderLayer"}


HEAD = RuntimeClass("picotron.model.Llama", "final_proj", COLUMN, arguments=(("gather_output", True), ("mode", "x")))


@pytest.mark.parametrize(("name", "text"), [
    ("mypy.ini", f'[spmd_mypy]\nmodules = picotron.model.Llama.final_proj: {COLUMN}(gather_output=True, mode="x"),'
                 f" {ATTENTION}.q_proj: {COLUMN}\n"),
    ("pyproject.toml", f'[tool.spmd_mypy.modules]\n"picotron.model.Llama.final_proj" = '
                       f"'{COLUMN}(gather_output=True, mode=\"x\")'\n\"{ATTENTION}.q_proj\" = \"{COLUMN}\"\n"),
])
def test_an_entry_states_the_literal_constructor_arguments_that_decide_flags(tmp_path: Path, name: str,
                                                                              text: str) -> None:
    """picotron passes ``gather_output=True`` to its swapped-in LM head only; a comma between arguments does
    not end the entry."""
    (tmp_path / name).write_text(text)
    loaded = config.load(str(tmp_path / name))
    assert loaded.modules == (HEAD, DECLARED[0])
    assert loaded.as_dict()["modules"]["picotron.model.Llama.final_proj"] == f"{COLUMN}(gather_output=True, mode='x')"


@pytest.mark.parametrize("arguments", ["True", "gather_output=flag", "gather_output=None", "gather_output=(1"])
def test_arguments_that_are_not_keyword_literals_are_refused(tmp_path: Path, arguments: str) -> None:
    (tmp_path / "mypy.ini").write_text(f"[spmd_mypy]\nmodules = a.B.c: a.C({arguments})\n")
    with pytest.raises(config.ConfigError, match=re.escape(
            "[spmd_mypy] modules: the arguments of 'a.B.c' must be keyword arguments with literal values")):
        config.load(str(tmp_path / "mypy.ini"))


def _module(root: Path, fullname: str) -> MypyFile:
    path = root.joinpath(*fullname.split(".")).with_suffix(".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    module = MypyFile([], [])
    module._fullname, module.path = fullname, str(path)
    return module


def test_the_owners_module_depends_on_the_declared_classes_in_its_source_tree(tmp_path: Path) -> None:
    """So mypy analyses the class before the owner's forward reads it; a module it cannot find is left to the
    read's error (a dependency mypy cannot find is a missing import with no line)."""
    model = _module(tmp_path, "picotron.model")
    _module(tmp_path, "picotron.tensor_parallel.tensor_parallel")
    declared = (*DECLARED, RuntimeClass(ATTENTION, "k_proj", "megatron.core.layers.ColumnParallelLinear"))
    assert runtime_classes.additional_deps(model, declared) == [
        (20, "picotron.tensor_parallel.tensor_parallel", -1), (20, "spmd_stubs.containers", -1)]
    elsewhere = _module(tmp_path, "picotron.train")
    assert runtime_classes.additional_deps(elsewhere, DECLARED[:1]) == []
