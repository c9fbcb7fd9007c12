"""Overlay files: SPMD annotations declared outside a module, written into a copy of it."""

import textwrap
from pathlib import Path

import pytest

from spmd_mypy.migrate.cli import main
from spmd_mypy.migrate.infer import overlay_toml
from spmd_mypy.migrate.overlay import SHIPPED, OverlayError, apply_overlay, load_overlays, shipped_overlays

SOURCE = textwrap.dedent('''\
    import torch


    class Column(torch.nn.Module):
        """A layer."""

        def __init__(self):
            self.weight = torch.nn.Parameter(torch.empty(2, 2))
            self.bias = None

        def forward(self, input_: torch.Tensor, flag=True) -> torch.Tensor:  # type: ignore
            return input_ @ self.weight.T


    def helper(x, *, group=None):
        return x
    ''')

SPEC = textwrap.dedent('''\
    [modules."pkg.layers".functions]
    "Column.forward" = { input_ = "I@tp, V@dp", return = ["I@tp", "S(-1)@tp"] }
    helper = { x = "P@tp", return = "I@tp" }

    [modules."pkg.layers".attributes]
    "Column.weight" = "S(0)@tp"
    "Column.bias" = ["I@tp", "None"]
    ''')


def overlay_for(tmp_path: Path, spec: str, module: str = "pkg.layers"):
    path = tmp_path / "overlay.toml"
    path.write_text(spec)
    return load_overlays([path])[module]


def test_annotations_are_written(tmp_path: Path) -> None:
    out = apply_overlay(SOURCE, "pkg.layers", overlay_for(tmp_path, SPEC))
    assert ('    def forward(self, input_: Tensor[V@dp, I@tp], flag=True) -> Tensor[I@tp] | Tensor[S(-1)@tp]:'
            '  # type: ignore\n') in out
    assert "def helper(x: Tensor[P@tp], *, group=None) -> Tensor[I@tp]:\n" in out
    assert '    """A layer."""\n    weight: Tensor[S(0)@tp]\n    bias: Tensor[I@tp] | None\n' in out
    assert "from spmd_stubs import I, P, S, Tensor, V\n" in out
    assert "from spmd_stubs.axes import dp, tp\n" in out


def test_applying_twice_is_applying_once(tmp_path: Path) -> None:
    overlay = overlay_for(tmp_path, SPEC)
    once = apply_overlay(SOURCE, "pkg.layers", overlay)
    assert apply_overlay(once, "pkg.layers", overlay) == once


def test_the_annotated_copy_runs_and_erases(tmp_path: Path) -> None:
    import torch

    namespace: dict = {}
    exec(compile(apply_overlay(SOURCE, "pkg.layers", overlay_for(tmp_path, SPEC)), "layers.py", "exec"), namespace)
    assert namespace["Column"].__annotations__["weight"] is torch.Tensor
    assert namespace["helper"](3) == 3


@pytest.mark.parametrize("spec, message", [
    ('[modules."pkg.layers".functions]\n"Column.backward" = { x = "R@tp" }\n', "match nothing in pkg.layers: ['Column.backward']"),
    ('[modules."pkg.layers".attributes]\n"Row.weight" = "R@tp"\n', "match nothing in pkg.layers: ['Row.weight']"),
    ('[modules."pkg.layers".functions]\n"Column.forward" = { inputs = "R@tp" }\n', "has no parameter ['inputs']"),
])
def test_a_stale_entry_is_an_error(tmp_path: Path, spec: str, message: str) -> None:
    with pytest.raises(OverlayError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        apply_overlay(SOURCE, "pkg.layers", overlay_for(tmp_path, spec))


@pytest.mark.parametrize("spec, message", [
    ('[modules."m".functions]\nf = { x = "Q@tp" }\n', "unknown SPMD type 'Q'"),
    ('[modules."m".functions]\nf = { x = "R@tp, V@tp" }\n', "axis tp is given twice"),
    ('[modules."m".functions]\nf = { x = ["None"] }\n', "at least one tensor type"),
    ('[modules."m".attributes]\nweight = "R@tp"\n', "written Class.attribute"),
    ('[modules."m".classes]\n', "expected only [functions] and [attributes]"),
    ('[modules."m"\n', "overlay.toml"),
])
def test_a_malformed_overlay_is_an_error(tmp_path: Path, spec: str, message: str) -> None:
    with pytest.raises(OverlayError) as caught:
        overlay_for(tmp_path, spec, "m")
    assert message in str(caught.value)


@pytest.mark.parametrize("name", ["fairscale.toml", "megatron_core.toml"])
def test_shipped_overlays_load(name: str) -> None:
    overlays = load_overlays([SHIPPED / name])
    assert overlays and all(o.functions for o in overlays.values())


def test_shipped_overlays_are_found_by_name(tmp_path: Path, monkeypatch, capsys) -> None:
    assert shipped_overlays() == {"fairscale": SHIPPED / "fairscale.toml",
                                  "megatron-core": SHIPPED / "megatron_core.toml"}
    for name in ("fairscale", "megatron-core", "megatron_core"):
        assert load_overlays([Path(name)]) == load_overlays([shipped_overlays()[name.replace("_", "-")]])
    monkeypatch.chdir(tmp_path)
    Path("fairscale").write_text('[modules."m".functions]\nf = { x = "R@tp" }\n')  # an existing file wins
    assert list(load_overlays([Path("fairscale")])) == ["m"]
    with pytest.raises(OverlayError, match=r"no such overlay file, nor a shipped overlay \(fairscale, megatron-core\)"):
        load_overlays([Path("missing.toml")])
    Path("plain.py").write_text("x = 1\n")
    assert main(["--overlay", "megatron-core", "--overlay", "fairscale", "--quiet", "plain.py"]) == 0
    assert main(["--overlay", "megatron", "plain.py"]) == 2
    assert "megatron: no such overlay file, nor a shipped overlay" in capsys.readouterr().err


def test_cli_reports_a_stale_overlay(tmp_path: Path, capsys) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "layers.py").write_text(SOURCE)
    spec = tmp_path / "o.toml"
    spec.write_text('[modules."pkg.layers".functions]\n"Gone.forward" = { x = "R@tp" }\n')
    assert main(["--overlay", str(spec), str(package)]) == 2
    assert "Gone.forward" in capsys.readouterr().err


CHOICE_SPEC = textwrap.dedent('''\
    [modules."pkg.layers".functions]
    "Column.forward" = { input_ = { if = "sequence_parallel", then = "S(0)@tp", else = "I@tp" } }

    [modules."pkg.layers".attributes]
    "Column.bias" = { if = "sequence_parallel", then = ["S(0)@tp", "None"], else = "I@tp" }
    ''')


def test_a_flag_chosen_type_becomes_one_alias_before_the_first_class(tmp_path: Path) -> None:
    spec = tmp_path / "choice.toml"
    spec.write_text(CHOICE_SPEC)
    code = apply_overlay(SOURCE, "pkg.layers", load_overlays([spec])["pkg.layers"])
    lines = code.splitlines()
    alias = ("_spmd_sequence_parallel_S_0_tp_I_tp = Tensor[S[0, tp]] if spmd_stubs.flags.sequence_parallel "
             "else Tensor[I[tp]]")
    optional = ("_spmd_sequence_parallel_S_0_tp_None_I_tp = Tensor[S[0, tp]] | None if "
                "spmd_stubs.flags.sequence_parallel else Tensor[I[tp]]")
    assert lines.index(alias) < lines.index("class Column(torch.nn.Module):")
    assert optional in lines and "import spmd_stubs" in lines
    assert "    bias: _spmd_sequence_parallel_S_0_tp_None_I_tp" in lines
    assert "def forward(self, input_: _spmd_sequence_parallel_S_0_tp_I_tp, flag=True)" in code
    compile(code, "layers.py", "exec")


@pytest.mark.parametrize("entry", [
    '{ if = "sequence_parallel", then = "S(0)@tp" }',
    '{ if = "not a name", then = "S(0)@tp", else = "I@tp" }',
    '{ if = "sequence_parallel", then = "S(0)@tp", else = "Q@tp" }',
])
def test_a_malformed_choice_is_an_overlay_error(tmp_path: Path, entry: str) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text(f'[modules."pkg.layers".functions]\n"Column.forward" = {{ input_ = {entry} }}\n')
    with pytest.raises(OverlayError, match="Column.forward"):
        load_overlays([spec])


def test_inferred_overlays_write_choices_back_as_they_are_read(tmp_path: Path) -> None:
    spec = tmp_path / "choice.toml"
    spec.write_text(CHOICE_SPEC)
    overlays = load_overlays([spec])
    (tmp_path / "again.toml").write_text(overlay_toml(overlays))
    assert load_overlays([tmp_path / "again.toml"]) == overlays


TUPLE_CHOICE_SPEC = textwrap.dedent('''\
    [modules."pkg.layers".functions]
    "Column.forward" = { input_ = "I@tp", return = { tuple = [{ if = "gather_output", then = "I@tp", else = "S(-1)@tp" }, ["S(0)@tp", "None"]] } }
    ''')


def test_a_tuple_item_may_be_chosen_by_a_flag(tmp_path: Path) -> None:
    """megatron's layers return ``(output, bias)``: the output's layout is the flag's, the bias's fixed."""
    spec = tmp_path / "tuple.toml"
    spec.write_text(TUPLE_CHOICE_SPEC)
    overlays = load_overlays([spec])
    code = apply_overlay(SOURCE, "pkg.layers", overlays["pkg.layers"])
    lines = code.splitlines()
    alias = "_spmd_gather_output_I_tp_S_m1_tp = Tensor[I[tp]] if spmd_stubs.flags.gather_output else Tensor[S[-1, tp]]"
    assert lines.index(alias) < lines.index("class Column(torch.nn.Module):")
    assert ("def forward(self, input_: Tensor[I@tp], flag=True) -> "
            "tuple[_spmd_gather_output_I_tp_S_m1_tp, Tensor[S(0)@tp] | None]:") in code
    compile(code, "layers.py", "exec")
    (tmp_path / "again.toml").write_text(overlay_toml(overlays))
    assert load_overlays([tmp_path / "again.toml"]) == overlays


def test_a_module_that_imports_torchs_tensor_gets_qualified_annotations(tmp_path: Path) -> None:
    """megatron's attention.py does ``from torch import Tensor``: importing spmd_stubs' under the same name
    would be shadowed by it (mypy: incompatible import), and every annotation would stay plain."""
    source = SOURCE.replace("import torch\n", "import torch\nfrom torch import Tensor\n", 1)
    spec = tmp_path / "choice.toml"
    spec.write_text(CHOICE_SPEC)
    code = apply_overlay(source, "pkg.layers", load_overlays([spec])["pkg.layers"])
    lines = code.splitlines()
    assert "from torch import Tensor" in lines and "import spmd_stubs" in lines
    assert not any(line.startswith("from spmd_stubs import") and "Tensor" in line for line in lines)
    assert ("_spmd_sequence_parallel_S_0_tp_I_tp = spmd_stubs.Tensor[S[0, tp]] if spmd_stubs.flags.sequence_parallel "
            "else spmd_stubs.Tensor[I[tp]]") in lines
    assert "Tensor[" not in code.replace("spmd_stubs.Tensor[", "")
    compile(code, "layers.py", "exec")
