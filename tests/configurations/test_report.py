"""spmd-check's merged report in the form mypy's output settings ask for: text or JSON, labels, summary."""

import json

from mypy.options import Options

from spmd_mypy.configurations.merge import merged, read
from spmd_mypy.configurations.report import Report
from tests.configurations.test_merge import NO_SP, SP


def report(**settings: object) -> Report:
    options = Options()
    options.color_output = False
    for name, value in settings.items():
        setattr(options, name, value)
    return Report(options, ["sp", "no_sp"])


MERGED = merged({"sp": read(SP), "no_sp": read(NO_SP)})


def test_text_labels_what_occurs_in_some_configurations_after_the_severity_and_keeps_notes_and_context() -> None:
    assert report(show_error_context=True).by_file(MERGED) == {
        "model.py": [
            "model.py:3: error: [sp] add mixes Invariant with Varying  [misc]",
            "model.py:3: note: In `x + b`",
            "model.py:3: note: Fix: convert(b)",
            'model.py: note: In function "f":',
            'model.py:5: note: [no_sp] Revealed type is "Tensor[I@tp]"',
            "model.py:9: error: [sp] Incompatible return value type  [return-value]",
        ],
        "other.py": ["other.py:1: error: in every configuration  [misc]"],
    }


def test_text_shows_columns_and_ends_and_hides_codes_as_mypy_does() -> None:
    lines = report(show_column_numbers=True, show_error_end=True, hide_error_codes=True).by_file(MERGED)
    assert lines["other.py"] == ["other.py:1:5:1:5: error: in every configuration"]


def test_json_is_mypys_object_with_the_configurations_it_occurs_in() -> None:
    lines = report(output="json").by_file(MERGED)
    first = json.loads(lines["model.py"][0])
    assert first == {**json.loads(SP.splitlines()[0]), "configurations": ["sp"]}
    assert json.loads(lines["other.py"][0])["configurations"] == ["sp", "no_sp"]


def test_the_summary_counts_errors_and_configurations_in_good_grammar() -> None:
    assert report().summary(1) == "Found 1 error in 2 configurations (sp, no_sp)"
    one = Report(Options(), ["no_sp"])
    one.options.color_output = False
    assert one.summary(0) == "Success: no issues found in 1 configuration (no_sp)"
    assert one.summary(3) == "Found 3 errors in 1 configuration (no_sp)"
    assert report(error_summary=False).summary(1) is None and report(output="json").summary(1) is None
