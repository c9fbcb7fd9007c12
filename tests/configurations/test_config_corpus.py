"""Malformed and odd config files: each is one clear error naming the file, section or key and value, never
a traceback, and never a setting silently read as something else.

The corpus is read by the plugin's own reader (what mypy's plugin instance and every tool reads); a sample
of it goes through mypy and the tools for real, where what matters is the exit status and the message.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spmd_mypy import config

PLUGIN = "[mypy]\nplugins = spmd_mypy\n"
PLUGIN_TOML = '[tool.mypy]\nplugins = ["spmd_mypy"]\n'

BAD = {
    # file name, text -> a substring the one error must contain
    "duplicate section": ("mypy.ini", PLUGIN + "[spmd_mypy]\nstrict = true\n[spmd_mypy]\nstrict = false\n",
                          "section 'spmd_mypy' already exists"),
    "duplicate key": ("mypy.ini", PLUGIN + "[spmd_mypy]\nstrict = true\nstrict = false\n",
                      "option 'strict' in section 'spmd_mypy' already exists"),
    "byte-order mark": ("mypy.ini", "\ufeff" + PLUGIN, "byte-order mark"),
    "byte-order mark, toml": ("pyproject.toml", "\ufeff" + PLUGIN_TOML, "byte-order mark"),
    "no section header": ("mypy.ini", "plugins = spmd_mypy\n", "no section headers"),
    "toml syntax": ("pyproject.toml", '[tool.mypy]\nplugins = ["spmd_mypy"\n', "Unclosed array"),
    "toml duplicate key": ("pyproject.toml", PLUGIN_TOML + "[tool.spmd_mypy]\nstrict = true\nstrict = false\n",
                           "Cannot overwrite a value"),
    "misspelt section": ("mypy.ini", PLUGIN + "[spmd-mypy]\nstrict = true\n", "[spmd-mypy] looks like [spmd_mypy]"),
    "misspelt section, letters": ("mypy.ini", PLUGIN + "[spmd_mpy]\nstrict = true\n",
                                  "[spmd_mpy] looks like [spmd_mypy]"),
    "misspelt table, toml": ("pyproject.toml", PLUGIN_TOML + "[tool.spmd-mypy]\nstrict = true\n",
                             "[spmd-mypy] looks like [spmd_mypy]"),
    "empty flag": ("mypy.ini", PLUGIN + "[spmd_mypy]\nstrict =\n", "strict must be true or false, got ''"),
    "quoted boolean in toml": ("pyproject.toml", PLUGIN_TOML + '[tool.spmd_mypy]\nstrict = "yes"\n',
                               "strict must be true or false (a TOML boolean, unquoted), got 'yes'"),
    "quoted true value": ("mypy.ini", PLUGIN + '[spmd_mypy]\nconfigurations =\n    sp: sequence_parallel = "true"\n',
                          "sequence_parallel = 'true' is the string 'true'"),
    "quoted true value, toml": ("pyproject.toml", PLUGIN_TOML
                                + '[tool.spmd_mypy.configurations]\nsp = { sequence_parallel = "true" }\n',
                                "write true unquoted"),
    "empty value": ("mypy.ini", PLUGIN + "[spmd_mypy]\nconfigurations =\n    sp: sequence_parallel =\n",
                    "sequence_parallel = '' must be a boolean, an integer, a name"),
    "two words": ("mypy.ini", PLUGIN + "[spmd_mypy]\nconfigurations =\n    sp: sequence_parallel = tr ue\n",
                  "sequence_parallel = 'tr ue' must be"),
    "a float": ("mypy.ini", PLUGIN + "[spmd_mypy]\nconfigurations =\n    sp: sequence_parallel = 1.5\n",
                "sequence_parallel = '1.5' must be"),
    "a float, toml": ("pyproject.toml", PLUGIN_TOML + "[tool.spmd_mypy.configurations]\nsp = { sequence_parallel = 1.5 }\n",
                      "sequence_parallel = 1.5 must be a boolean"),
    "quoted integer": ("mypy.ini", PLUGIN + "[spmd_mypy]\nconfigurations =\n    sp: tp = '2'\n", "write 2 unquoted"),
    "enum member without its name": ("mypy.ini", PLUGIN + "[spmd_mypy]\nconfigurations =\n"
                                     "    sp: tp_mode = TensorParallelLinearMode.\n",
                                     "tp_mode = 'TensorParallelLinearMode.' must be a boolean, an integer, a name"),
    "enum member, two dots": ("mypy.ini", PLUGIN + "[spmd_mypy]\nconfigurations =\n"
                              "    sp: tp_mode = TensorParallelLinearMode..ALL_REDUCE\n",
                              "or an enum member qualified by its class, each part a Python name"),
    "enum member, a space, toml": ("pyproject.toml", PLUGIN_TOML + "[tool.spmd_mypy.configurations]\n"
                                   'sp = { tp_mode = "TensorParallelLinearMode.REDUCE SCATTER" }\n',
                                   "tp_mode = 'TensorParallelLinearMode.REDUCE SCATTER' must be"),
    "enum member qualified in one configuration only": (
        "mypy.ini", PLUGIN + "[spmd_mypy]\nconfigurations =\n    sp: tp_mode = TensorParallelLinearMode.REDUCE_SCATTER\n"
        "    no_sp: tp_mode = ALL_REDUCE\n",
        "configuration 'no_sp' sets tp_mode = ALL_REDUCE and configuration 'sp' tp_mode = "
        "TensorParallelLinearMode.REDUCE_SCATTER: a flag declared by its enum type"),
    "enum members of two classes": (
        "pyproject.toml", PLUGIN_TOML + "[tool.spmd_mypy.configurations]\n"
        'sp = { tp_mode = "TensorParallelLinearMode.REDUCE_SCATTER" }\n'
        'no_sp = { tp_mode = "ParallelMode.ALL_REDUCE" }\n',
        "(here tp_mode = TensorParallelLinearMode.REDUCE_SCATTER in 'sp', TensorParallelLinearMode.ALL_REDUCE in 'no_sp')"),
    "two flags set to members of one enum": (
        "mypy.ini", PLUGIN + "[spmd_mypy]\nconfigurations =\n"
        "    sp: tp_mode = Mode.REDUCE_SCATTER, pp_mode = Mode.ALL_REDUCE\n",
        "a comparison with a member of Mode could not tell which flag it reads"),
}

GOOD = {
    # odd but meaningful: read as the user meant
    "a percent sign in [mypy]": ("mypy.ini", "[mypy]\nplugins = spmd_mypy\nexclude = (?x)(foo%bar)\n", {}),
    "yes in an ini file": ("mypy.ini", PLUGIN + "[spmd_mypy]\nstrict = yes\n", {"strict": True}),
    "a quoted name": ("mypy.ini", PLUGIN + "[spmd_mypy]\nconfigurations =\n    rs: tp_mode = 'REDUCE_SCATTER'\n",
                      {"configurations": (config.declared.Configuration("rs", (("tp_mode", "REDUCE_SCATTER"),)),)}),
    "an enum member qualified by its class": (
        "mypy.ini", PLUGIN + "[spmd_mypy]\nconfigurations =\n"
        "    rs: tp_mode = nanotron.parallel.tensor_parallel.enum.TensorParallelLinearMode.REDUCE_SCATTER\n",
        {"configurations": (config.declared.Configuration(
            "rs", (("tp_mode", "nanotron.parallel.tensor_parallel.enum.TensorParallelLinearMode.REDUCE_SCATTER"),)),)}),
    "an enum member qualified by its class, toml": (
        "pyproject.toml", PLUGIN_TOML + "[tool.spmd_mypy.configurations]\n"
        'rs = { tp_mode = "TensorParallelLinearMode.REDUCE_SCATTER", other = "TensorParallelLinearMode.REDUCE_SCATTER" }\n',
        {"configurations": (config.declared.Configuration(
            "rs", (("tp_mode", "TensorParallelLinearMode.REDUCE_SCATTER"),
                   ("other", "TensorParallelLinearMode.REDUCE_SCATTER"))),)}),
}


def _written(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return str(path)


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_config_is_one_error_naming_what_is_wrong(tmp_path: Path, case: str) -> None:
    name, text, expected = BAD[case]
    with pytest.raises(config.ConfigError) as raised:
        config.load(_written(tmp_path, name, text))
    assert expected in str(raised.value)


@pytest.mark.parametrize("case", sorted(GOOD))
def test_an_odd_config_is_read_as_meant(tmp_path: Path, case: str) -> None:
    name, text, expected = GOOD[case]
    loaded = config.load(_written(tmp_path, name, text))
    for key, value in expected.items():
        assert getattr(loaded, key) == value


TOOLS = {
    "mypy": [sys.executable, "-m", "mypy"],
    "spmd-check": [sys.executable, "-m", "spmd_mypy.configurations.cli"],
    "spmd-coverage": [sys.executable, "-m", "spmd_mypy.coverage"],
}


@pytest.mark.parametrize("case", ["misspelt section", "quoted true value", "duplicate key",
                                  "enum member qualified in one configuration only"])
@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_mypy_and_the_tools_stop_with_the_error(tmp_path: Path, case: str, tool: str) -> None:
    """Exit status 2 and the message, no traceback, no report of a run that checked nothing as it should."""
    name, text, expected = BAD[case]
    config_file = _written(tmp_path, name, text)
    (tmp_path / "t.py").write_text("x = 1\n")
    done = subprocess.run([*TOOLS[tool], "--config-file", config_file, "--cache-dir", str(tmp_path / "cache"),
                           str(tmp_path / "t.py")], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "MYPY_FORCE_COLOR": "0"})
    said = done.stdout + done.stderr
    assert "Traceback" not in said, said
    if tool == "mypy" and case == "duplicate key":
        # mypy itself reads no settings from a file it cannot parse: it says so, and runs without the plugin
        assert expected in said
        return
    assert done.returncode == 2, said
    assert expected in said, said


@pytest.mark.parametrize("tool", ["spmd-check", "spmd-coverage"])
def test_a_tool_refuses_a_config_that_does_not_load_the_plugin(tmp_path: Path, tool: str) -> None:
    """A buggy file checked without the plugin would read as clean: the tool says why not, exit status 2."""
    config_file = _written(tmp_path, "mypy.ini", "[mypy]\n[spmd_mypy]\nstrict = true\n")
    (tmp_path / "t.py").write_text(
        "from spmd_stubs import I, P, Tensor\nfrom spmd_stubs.axes import tp\n\n"
        "def f(p: Tensor[P@tp], r: Tensor[I@tp]) -> Tensor[I@tp]:\n    return p + r\n")
    done = subprocess.run([*TOOLS[tool], "--config-file", config_file, "--cache-dir", str(tmp_path / "cache"),
                           str(tmp_path / "t.py")], capture_output=True, text=True, cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert "the spmd_mypy plugin is not enabled in" in said and "plugins = spmd_mypy" in said, said
    assert "Success" not in said and "SPMD coverage:" not in said, said
