"""spmd-check's merge of several configurations' mypy ``-O json`` outputs: each diagnostic once, with the
configurations it occurs in."""

import json

from spmd_mypy.configurations.merge import Diagnostic, merged, read


def line(file: str, number: int, message: str, severity: str = "error", code: str | None = "misc",
         hint: str | None = None, column: int = 4) -> str:
    """One object as mypy's ``-O json`` writes it."""
    return json.dumps({"file": file, "line": number, "column": column, "end_line": number,
                       "end_column": column + 1, "message": message, "hint": hint, "code": code,
                       "severity": severity})


def context(file: str, message: str) -> str:
    """``--show-error-context``'s note, as mypy's JSON writes it."""
    return line(file, -1, message, "note", None, column=-1)


SP = "\n".join([
    line("model.py", 3, "add mixes Invariant with Varying", hint="In `x + b`\nFix: convert(b)"),
    context("model.py", 'In function "f":'),
    line("model.py", 9, "Incompatible return value type", code="return-value"),
    line("other.py", 1, "in every configuration"),
])
NO_SP = "\n".join([
    line("other.py", 1, "in every configuration"),
    context("model.py", 'In function "f":'),
    line("model.py", 5, 'Revealed type is "Tensor[I@tp]"', "note"),
])


def test_a_diagnostic_is_mypys_fields_with_its_notes_and_the_context_it_is_under() -> None:
    found = read(SP).diagnostics
    assert [(d.file, d.line, d.column, d.severity, d.context) for d in found] == [
        ("model.py", 3, 4, "error", None), ("model.py", 9, 4, "error", 'In function "f":'),
        ("other.py", 1, 4, "error", None)]
    assert found[0].hint == "In `x + b`\nFix: convert(b)"
    assert json.loads(SP.splitlines()[0]) == found[0].fields()


def test_what_is_not_a_diagnostic_is_kept_apart_as_it_came() -> None:
    output = read(f"Warning: unused section\n{line('a.py', 1, 'x')}\n\n[1, 2]\n")
    assert [d.message for d in output.diagnostics] == ["x"]
    assert output.other_lines == ["Warning: unused section", "", "[1, 2]"]
    assert output.errors == 1


def test_a_note_without_a_place_that_nothing_follows_in_its_file_is_a_note_of_its_own() -> None:
    found = read("\n".join([context("a.py", "a note of its own"), line("b.py", 2, "x")])).diagnostics
    assert [(d.file, d.line, d.message, d.context) for d in found] == [
        ("a.py", -1, "a note of its own", None), ("b.py", 2, "x", None)]


def test_each_diagnostic_once_with_the_configurations_it_occurs_in_in_mypys_order() -> None:
    together = merged({"sp": read(SP), "no_sp": read(NO_SP)})
    assert [(d.file, d.line, occurs) for d, occurs in together] == [
        ("model.py", 3, ["sp"]), ("model.py", 5, ["no_sp"]), ("model.py", 9, ["sp"]),
        ("other.py", 1, ["sp", "no_sp"])]


def test_a_field_that_differs_makes_two_diagnostics() -> None:
    sp, no_sp = read(line("a.py", 1, "x", hint="one")), read(line("a.py", 1, "x", hint="two"))
    assert [occurs for _, occurs in merged({"sp": sp, "no_sp": no_sp})] == [["sp"], ["no_sp"]]
    assert Diagnostic("a.py", 1, 0, 1, 1, "x", None, None, "error", context="In class") == Diagnostic(
        "a.py", 1, 0, 1, 1, "x", None, None, "error")
