"""spmd-check's merge of several configurations' mypy outputs: each diagnostic once, labelled where it occurs."""

from spmd_mypy.configurations.merge import diagnostics, report

SP = """\
model.py:3: error: In `x + b`: add mixes Invariant with Varying on axis tp (V@tp, I@tp).  [spmd-invariant-mix]
model.py:3: note: a note attached to it
model.py:9:5: error: Incompatible return value type (got "Tensor[I@tp]", expected "Tensor[S(0)@tp]")  [return-value]
    return x
    ^~~~~~~~
other.py:1: error: in every configuration  [spmd-partial-mul]
Found 3 errors in 2 files (checked 2 source files)
"""
NO_SP = """\
other.py:1: error: in every configuration  [spmd-partial-mul]
model.py:5: note: Revealed type is "Tensor[I@tp]"
"""


def test_a_diagnostic_keeps_its_notes_and_excerpt_lines_and_drops_the_summary() -> None:
    found = diagnostics(SP)
    assert [(d.path, d.line, d.column, d.severity) for d in found] == [
        ("model.py", 3, 0, "error"), ("model.py", 9, 5, "error"), ("other.py", 1, 0, "error")]
    assert found[0].text.endswith("\nmodel.py:3: note: a note attached to it")
    assert found[1].text.endswith("    return x\n    ^~~~~~~~")
    assert "Found 3 errors" not in found[2].text


def test_labels_name_the_configurations_a_diagnostic_occurs_in_and_only_those() -> None:
    lines, errors = report({"sp": SP, "no_sp": NO_SP})
    assert lines[0].startswith("model.py:3: error: [sp] In `x + b`")
    assert lines[1] == 'model.py:5: note: [no_sp] Revealed type is "Tensor[I@tp]"'
    assert lines[2].startswith("model.py:9:5: error: [sp] Incompatible return value type")
    assert lines[3] == "other.py:1: error: in every configuration  [spmd-partial-mul]"
    assert errors == 3


def test_one_configuration_labels_nothing() -> None:
    lines, errors = report({"sp": SP})
    assert not any("[sp]" in line for line in lines) and errors == 3
