"""spmd-migrate on Megatron/fairscale mapping helper calls: one before/after case per rewrite."""

import textwrap

import pytest

from spmd_mypy.migrate import migrate_source

MEGATRON = "from megatron.core.tensor_parallel.mappings import {name}\n"


def migrate(code: str, module: str = "pkg.mod") -> str:
    return migrate_source(textwrap.dedent(code), module).code


def body(code: str) -> str:
    """The migrated text after the import block (the last import line)."""
    lines = code.splitlines()
    last_import = max(i for i, line in enumerate(lines) if line.startswith(("import ", "from ")))
    return "\n".join(lines[last_import + 1:]).strip()


@pytest.mark.parametrize(
    "call, expected",
    [
        ("copy_to_tensor_model_parallel_region(x)", "spmd.convert(x, tp, src=I, dst=R)"),
        ("reduce_from_tensor_model_parallel_region(x)", "spmd.all_reduce(x, tp, src=P, dst=I)"),
        ("scatter_to_tensor_model_parallel_region(x)", "spmd.convert(x, tp, src=I, dst=S(-1))"),
        ("gather_from_tensor_model_parallel_region(x)", "spmd.all_gather(x, tp, src=S(-1), dst=I)"),
        ("scatter_to_sequence_parallel_region(x)", "spmd.convert(x, tp, src=I, dst=S(0))"),
        ("gather_from_sequence_parallel_region(x)", "spmd.all_gather(x, tp, src=S(0), dst=R)"),
        ("gather_from_sequence_parallel_region(x, tensor_parallel_output_grad=True)",
         "spmd.all_gather(x, tp, src=S(0), dst=R)"),
        ("gather_from_sequence_parallel_region(x, tensor_parallel_output_grad=False)",
         "spmd.all_gather(x, tp, src=S(0), dst=I)"),
        ("gather_from_sequence_parallel_region(x, False, tp_group)",
         "spmd.all_gather(x, tp, src=S(0), dst=I, group=tp_group)"),
        # Megatron reuses the helpers on other groups: the group names the axis.
        ("gather_from_sequence_parallel_region(x, group=self.pg_collection.cp)",
         "spmd.all_gather(x, cp, src=S(0), dst=R, group=self.pg_collection.cp)"),
        ("all_to_all(cp_group, x)", "spmd.all_to_all(x, cp, src=S(0), dst=S(0), group=cp_group)"),
        ("gather_from_sequence_parallel_region(x, output_split_sizes=sizes, use_global_buffer=False)",
         "spmd.all_gather(x, tp, src=S(0), dst=R, split_sizes=sizes)"),
        ("reduce_scatter_to_sequence_parallel_region(x)", "spmd.reduce_scatter(x, tp, src=P, dst=S(0))"),
        ("reduce_scatter_to_sequence_parallel_region(x, input_split_sizes=sizes)",
         "spmd.reduce_scatter(x, tp, src=P, dst=S(0), split_sizes=sizes)"),
        ("all_gather_last_dim_from_tensor_parallel_region(x)", "spmd.all_gather(x, tp, src=S(-1), dst=R)"),
        ("reduce_scatter_last_dim_to_tensor_parallel_region(x)",
         "spmd.reduce_scatter(x, tp, src=P, dst=S(-1))"),
        ("all_to_all(ep_group, x)", "spmd.all_to_all(x, ep, src=S(0), dst=S(0), group=ep_group)"),
        # The token dispatch: uneven rows, V -> V with both sizes (megatron's order: output first).
        ("all_to_all(self.ep_group, tokens, self.output_splits, self.input_splits)",
         "spmd.all_to_all(tokens, ep, src=V, dst=V, group=self.ep_group, input_split_sizes=self.input_splits, "
         "output_split_sizes=self.output_splits)"),
        ("reduce_from_tensor_model_parallel_region(x, group=self.tp_group)",
         "spmd.all_reduce(x, tp, src=P, dst=I, group=self.tp_group)"),
        ("reduce_from_tensor_model_parallel_region(x, group=None)", "spmd.all_reduce(x, tp, src=P, dst=I)"),
    ],
)
def test_megatron_core_helper(call: str, expected: str) -> None:
    name = call.partition("(")[0]
    assert body(migrate(MEGATRON.format(name=name) + f"y = {call}\n")) == f"y = {expected}"


@pytest.mark.parametrize(
    "name, expected",
    [
        ("copy_to_model_parallel_region", "spmd.convert(x, tp, src=I, dst=R)"),
        ("reduce_from_model_parallel_region", "spmd.all_reduce(x, tp, src=P, dst=I)"),
        ("scatter_to_model_parallel_region", "spmd.convert(x, tp, src=I, dst=S(-1))"),
        ("gather_from_model_parallel_region", "spmd.all_gather(x, tp, src=S(-1), dst=I)"),
    ],
)
@pytest.mark.parametrize("module", ["fairscale.nn.model_parallel.mappings", "fairscale.nn.model_parallel"])
def test_fairscale_helper(name: str, expected: str, module: str) -> None:
    assert body(migrate(f"from {module} import {name}\ny = {name}(x)\n")) == f"y = {expected}"


@pytest.mark.parametrize(
    "imports, call",
    [
        ("from megatron.core.tensor_parallel.mappings import copy_to_tensor_model_parallel_region as c", "c(x)"),
        ("from megatron.core.tensor_parallel import mappings", "mappings.copy_to_tensor_model_parallel_region(x)"),
        ("from megatron.core import tensor_parallel", "tensor_parallel.copy_to_tensor_model_parallel_region(x)"),
        ("import megatron.core.tensor_parallel.mappings as m", "m.copy_to_tensor_model_parallel_region(x)"),
        ("import megatron.core.tensor_parallel", "megatron.core.tensor_parallel.copy_to_tensor_model_parallel_region(x)"),
        ("from megatron import mpu", "mpu.copy_to_tensor_model_parallel_region(x)"),
        ("from megatron.mpu.mappings import copy_to_tensor_model_parallel_region", "copy_to_tensor_model_parallel_region(x)"),
    ],
)
def test_names_resolve_through_imports(imports: str, call: str) -> None:
    assert body(migrate(f"{imports}\ny = {call}\n")) == "y = spmd.convert(x, tp, src=I, dst=R)"


def test_relative_import_resolves_against_the_package() -> None:
    code = "from .mappings import copy_to_model_parallel_region\ny = copy_to_model_parallel_region(x)\n"
    assert "spmd.convert" in migrate(code, "fairscale.nn.model_parallel.layers")
    # The same import in another package names something else: left alone.
    assert migrate(code, "mylib.layers") == code


def test_relative_import_under_a_namespace_package_matches_by_suffix() -> None:
    """megatron has no __init__.py, so a file's package may be known only as core.tensor_parallel."""
    code = "from .mappings import reduce_from_tensor_model_parallel_region as r\ny = r(x)\n"
    assert "spmd.all_reduce" in migrate(code, "core.tensor_parallel.layers")


def test_unrelated_names_are_untouched() -> None:
    code = textwrap.dedent("""\
        from mylib import copy_to_tensor_model_parallel_region

        def copy_to_model_parallel_region(x):
            return x

        y = copy_to_tensor_model_parallel_region(x) + copy_to_model_parallel_region(x)
        """)
    result = migrate_source(code, "pkg.mod")
    assert result.code == code
    assert result.report.findings == []


@pytest.mark.parametrize(
    "call, todo",
    [
        ("gather_from_sequence_parallel_region(x, tensor_parallel_output_grad=flag)",
         "tensor_parallel_output_grad=flag is decided at run time"),
        ("gather_from_sequence_parallel_region(x, use_global_buffer=True)", "use_global_buffer= is a buffer-reuse option"),
        ("all_to_all(ep_group, x, sizes_out)", "only output_split_sizes is given"),
        ("copy_to_tensor_model_parallel_region(*args)", "is called with *-unpacked arguments"),
        ("copy_to_tensor_model_parallel_region(x, bogus=1)", "has an argument bogus= the codemod does not know"),
        ("copy_to_tensor_model_parallel_region(group=tp_group)", "is called without its tensor"),
        ("copy_to_tensor_model_parallel_region(x, group=g)", "which mesh axis is group=g?"),
        # A flattened group is several axes at once.
        ("gather_from_sequence_parallel_region(x, group=self.tp_ep_group)", "which mesh axis is group=self.tp_ep_group?"),
    ],
)
def test_dynamic_or_unknown_arguments_keep_the_call_with_a_todo(call: str, todo: str) -> None:
    name = call.partition("(")[0]
    code = MEGATRON.format(name=name) + f"y = {call}\n"
    result = migrate_source(code, "pkg.mod")
    assert "\n# TODO(spmd-migrate): " in result.code
    assert todo in result.code
    assert f"y = {call}\n" in result.code  # the call itself is kept
    assert (result.report.rewritten, result.report.todos) == (0, 1)
    assert "import spmd_stubs" not in result.code  # nothing rewritten, nothing imported


def test_imports_are_added_once_and_merged_with_existing_ones() -> None:
    code = textwrap.dedent("""\
        \"\"\"A module.\"\"\"
        from __future__ import annotations

        import spmd_stubs as spmd
        from spmd_stubs import R
        from megatron.core.tensor_parallel.mappings import (
            copy_to_tensor_model_parallel_region,
            reduce_from_tensor_model_parallel_region,
        )

        a = copy_to_tensor_model_parallel_region(x)
        b = reduce_from_tensor_model_parallel_region(a)
        """)
    out = migrate(code)
    assert out.count("import spmd_stubs as spmd") == 1
    assert out.count("from spmd_stubs.axes import tp") == 1
    imported = {n.strip() for line in out.splitlines() if line.startswith("from spmd_stubs import")
                for n in line.partition("import")[2].split(",")}
    assert imported == {"I", "P", "R"}
    assert out.index("from __future__") < out.index("from spmd_stubs.axes")


def test_a_name_that_shadows_the_axis_blocks_the_rewrite() -> None:
    code = textwrap.dedent("""\
        from megatron.core.tensor_parallel.mappings import copy_to_tensor_model_parallel_region

        def f(x):
            tp = 4
            return copy_to_tensor_model_parallel_region(x)
        """)
    result = migrate_source(code, "pkg.mod")
    assert "tp already names something else here" in result.code
    assert "return copy_to_tensor_model_parallel_region(x)" in result.code
    assert result.report.rewritten == 0


def test_formatting_and_comments_are_preserved() -> None:
    code = textwrap.dedent("""\
        from megatron.core.tensor_parallel.mappings import reduce_scatter_to_sequence_parallel_region


        def forward(self, x):  # the layer
            # Reduce-scatter the sequence dim.
            out = reduce_scatter_to_sequence_parallel_region(
                x, group=self.tp_group  # tp only
            )
            return out   # odd  spacing kept
        """)
    out = migrate(code)
    assert "def forward(self, x):  # the layer\n    # Reduce-scatter the sequence dim.\n" in out
    assert ("    out = spmd.reduce_scatter(\n"
            "        x, tp, src=P, dst=S(0), group=self.tp_group  # tp only\n"
            "    )\n") in out
    assert "    return out   # odd  spacing kept\n" in out


def test_trailing_comma_layout_is_kept() -> None:
    code = textwrap.dedent("""\
        from megatron.core.tensor_parallel.mappings import gather_from_sequence_parallel_region
        y = gather_from_sequence_parallel_region(
            x,
            tensor_parallel_output_grad=False,
        )
        """)
    assert body(migrate(code)) == "y = spmd.all_gather(\n    x, tp, src=S(0), dst=I,\n)"
