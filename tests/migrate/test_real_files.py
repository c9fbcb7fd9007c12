"""spmd-migrate on the real, installed megatron-core and fairscale: copies, never the originals.

The whole packages are copied into a temporary directory (so the migrated
modules import with their package context), the modules that use the
mapping helpers are migrated in place there, and then: the copies import,
a second run changes nothing, only the helper calls changed, and mypy with
the ``spmd_mypy`` plugin accepts the typed calls in the tensor-parallel
layers (one mypy run for the module).
"""

import difflib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from spmd_mypy.migrate import migrate_source
from spmd_mypy.migrate.thirdparty import copy_installed, installed_dir, run_mypy

# (module, calls rewritten, TODOs): every megatron-core module that calls a
# mapping helper, and fairscale's layers.  The counts are the review the
# codemod did by hand: a change in them is a change in behaviour.
TARGETS = [
    ("megatron.core.tensor_parallel.layers", 8, 0),
    ("megatron.core.tensor_parallel.mappings", 0, 3),
    ("megatron.core.models.gpt.gpt_model", 2, 0),
    ("megatron.core.models.bert.pooler", 1, 0),
    ("megatron.core.models.common.embeddings.language_model_embedding", 1, 0),
    ("megatron.core.transformer.attention", 1, 2),
    ("megatron.core.transformer.multi_latent_attention", 5, 0),
    ("megatron.core.transformer.moe.shared_experts", 4, 0),
    # The (tp, ep)-flattened group of the MoE dispatcher is left to the author; its uneven
    # all_to_all calls (the token dispatch, both split sizes given) are rewritten.
    ("megatron.core.transformer.moe.token_dispatcher", 6, 5),
    ("megatron.core.ssm.mamba_context_parallel", 2, 0),
    ("fairscale.nn.model_parallel.layers", 9, 0),
    ("fairscale.nn.model_parallel.mappings", 0, 2),
]
LAYERS = ["megatron.core.tensor_parallel.layers", "fairscale.nn.model_parallel.layers"]


def path_of(root: Path, module: str) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    root = copy_installed(["megatron", "fairscale"], tmp_path_factory.mktemp("real"))
    results = {}
    for module, _, _ in TARGETS:
        path = path_of(root, module)
        original = path.read_text()
        result = migrate_source(original, module)
        path.write_text(result.code)
        results[module] = (original, result)
    return root, results


@pytest.mark.parametrize("module, rewritten, todos", TARGETS)
def test_counts(migrated, module, rewritten, todos):
    report = migrated[1][module][1].report
    assert (report.rewritten, report.todos) == (rewritten, todos)


# Idempotence on the files with rewrites, TODOs of both kinds, and both libraries.
@pytest.mark.parametrize("module", [*LAYERS, "megatron.core.transformer.moe.token_dispatcher",
                                    "megatron.core.tensor_parallel.mappings"])
def test_second_run_changes_nothing(migrated, module):
    code = migrated[1][module][1].code
    again = migrate_source(code, module)
    assert again.code == code
    assert again.report.rewritten == 0


@pytest.mark.parametrize("module", LAYERS)
def test_only_helper_calls_and_imports_changed(migrated, module):
    original, result = migrated[1][module]
    removed, added = [], []
    for line in difflib.ndiff(original.splitlines(), result.code.splitlines()):
        if line.startswith("- "):
            removed.append(line[2:])
        elif line.startswith("+ "):
            added.append(line[2:])
    assert removed and all("_region(" in line or line.strip() in ("output_parallel, group=self.tp_group",
                                                                     "input, tensor_parallel_output_grad=True, group=tp_group")
                           for line in removed), removed
    assert all("spmd" in line or line.strip().startswith(("output_parallel, tp,", "input, tp,"))
               for line in added), added


def test_the_originals_are_untouched(migrated):
    for module, _, _ in TARGETS:
        assert path_of(installed_dir(module.split(".")[0]).parent, module).read_text() == migrated[1][module][0]


def test_the_migrated_copies_import(migrated):
    root = migrated[0]
    modules = [m for m, _, _ in TARGETS]
    script = (
        "import json, sys, warnings\n"
        "warnings.simplefilter('ignore')\n"
        f"sys.path.insert(0, {str(root)!r})\n"
        "import importlib\n"
        f"mods = [importlib.import_module(m) for m in {modules!r}]\n"
        "print(json.dumps({m.__name__: [m.__file__, hasattr(m, 'spmd')] for m in mods}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    for module, rewritten, _ in TARGETS:
        file, has_spmd = loaded[module]
        assert Path(file).is_relative_to(root)
        assert has_spmd == (rewritten > 0)


# What the plugin reports on the migrated, otherwise unannotated layers
# (docs/third_party.md explains both): (file, line text, error code).
UNANNOTATED_FINDINGS = sorted([
    # linear(R, unannotated weight) is judged on R alone, so the column output looks R.
    ("fairscale/nn/model_parallel/layers.py",
     "output = spmd.all_gather(output_parallel, tp, src=S(-1), dst=I)", "spmd-collective"),
])


def test_the_migrated_layers_under_the_plugin(migrated, tmp_path_factory):
    """The typed calls type-check: no error on a rewritten line but the two pinned SPMD findings.

    Megatron and fairscale are not mypy-clean themselves (Optional misuse,
    implicit Optional defaults); those errors are theirs and are not
    counted, only what concerns the migration is.
    """
    root = migrated[0]
    files = [path_of(root, module) for module in LAYERS]
    run = run_mypy(root, files, ["megatron", "fairscale"], tmp_path_factory.getbasetemp() / "mypy-cache")
    assert not run.crashed, run.output[-3000:]
    text = {str(path.relative_to(root)): path.read_text().splitlines() for path in files}
    rewritten_lines = {
        (name, number)
        for name, lines in text.items()
        for number, line in enumerate(lines, start=1)
        if "spmd." in line or line.strip().startswith(("output_parallel, tp,", "input, tp,"))
    }
    assert len(rewritten_lines) == 20  # 17 calls, 3 of them over two lines
    errors = [d for d in run.diagnostics if d.severity == "error"]
    assert [d for d in errors if (d.path, d.line) in rewritten_lines and not d.is_spmd] == []
    spmd = sorted((d.path, text[d.path][d.line - 1].strip(), d.code) for d in errors if d.is_spmd)
    assert spmd == UNANNOTATED_FINDINGS, run.output
