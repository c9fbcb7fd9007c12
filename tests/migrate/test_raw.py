"""spmd-migrate on raw torch.distributed collectives: rewrites where unambiguous, TODOs otherwise."""

import textwrap

import pytest

from spmd_mypy.config import AxisNames
from spmd_mypy.migrate import migrate_source

HEADER = "import torch\nimport torch.distributed as dist\n\n\ndef f(x, g):\n"


def migrate(lines: str, replicated_dst: str | None = None):
    code = HEADER + textwrap.indent(textwrap.dedent(lines), "    ")
    return migrate_source(code, "pkg.mod", replicated_dst=replicated_dst)


@pytest.mark.parametrize(
    "before, after",
    [
        ("dist.reduce_scatter_tensor(out, buf, group=get_tensor_model_parallel_group())",
         "out = spmd.reduce_scatter(buf, tp, src=P, dst=S(0), group=get_tensor_model_parallel_group())"),
        ("torch.distributed._reduce_scatter_base(out, buf, group=dp_group)",
         "out = spmd.reduce_scatter(buf, dp, src=P, dst=S(0), group=dp_group)"),
        ("dist.all_to_all_single(out, buf, group=self.ep_group)",
         "out = spmd.all_to_all(buf, ep, src=S(0), dst=S(0), group=self.ep_group)"),
        ("dist.all_to_all_single(out, buf, output_split_sizes=received, input_split_sizes=sent, group=ep_group)",
         "out = spmd.all_to_all(buf, ep, src=V, dst=V, input_split_sizes=sent, output_split_sizes=received, "
         "group=ep_group)"),
        ("dist.reduce_scatter_tensor(out, buf, op=dist.ReduceOp.SUM, group=cp_group, async_op=False)",
         "out = spmd.reduce_scatter(buf, cp, src=P, dst=S(0), group=cp_group)"),
    ],
)
def test_unambiguous_collectives_are_rewritten(before: str, after: str) -> None:
    result = migrate(f"buf = x * 2\n{before}\n")
    assert f"    {after}\n" in result.code
    assert result.report.rewritten == 1 and result.report.todos == 0


@pytest.mark.parametrize("dst", ["R", "I"])
def test_replicated_dst_is_the_users_choice(dst: str) -> None:
    lines = "buf = x * 2\ndist.all_reduce(buf, group=tp_group)\ndist.all_gather_into_tensor(out, buf, group=tp_group)\n"
    undecided = migrate(lines)
    assert undecided.report.todos == 2 and undecided.report.rewritten == 0
    assert "choose the type of the replicated result" in undecided.code
    assert "`buf = spmd.all_reduce(buf, tp, src=P, dst=R|I, group=tp_group)`" in undecided.code
    decided = migrate(lines, replicated_dst=dst)
    assert f"    buf = spmd.all_reduce(buf, tp, src=P, dst={dst}, group=tp_group)\n" in decided.code
    assert f"    out = spmd.all_gather(buf, tp, src=S(0), dst={dst}, group=tp_group)\n" in decided.code


def test_average_is_kept() -> None:
    result = migrate("buf = x * 2\ndist.all_reduce(buf, op=dist.ReduceOp.AVG, group=dp_group)\n", "R")
    assert '    buf = spmd.all_reduce(buf, dp, src=P, dst=R, op="avg", group=dp_group)\n' in result.code


@pytest.mark.parametrize(("op", "pending"), [("MAX", "Pmax"), ("MIN", "Pmin")])
def test_a_max_or_min_names_its_pending_type(op: str, pending: str) -> None:
    """A max or min is a typed collective too, on an input that pends it: the TODO names that form."""
    result = migrate(f"buf = x * 2\ndist.all_reduce(buf, op=dist.ReduceOp.{op}, group=tp_group)\n", "R")
    assert result.report.todos == 1
    assert f"the typed form is `buf = spmd.all_reduce(buf, tp, src={pending}, dst=R|I, group=tp_group)`" in result.code


@pytest.mark.parametrize(
    "before, after",
    [
        ("dist.all_reduce(p.grad, group=dp_group)", "spmd.all_reduce_(p.grad, dp, src=P, dst=R, group=dp_group)"),
        ("dist.all_reduce(self.grad_data, op=dist.ReduceOp.AVG, group=self.dp_group)",
         'spmd.all_reduce_(self.grad_data, dp, src=P, dst=R, op="avg", group=self.dp_group)'),
        ("dist.all_reduce(bufs[0], group=tp_group)", "spmd.all_reduce_(bufs[0], tp, src=P, dst=R, group=tp_group)"),
        ("dist.all_reduce(x, group=tp_group)", "spmd.all_reduce_(x, tp, src=P, dst=R, group=tp_group)"),
    ],
)
def test_an_all_reduce_into_a_tensor_others_see_stays_in_place(before: str, after: str) -> None:
    """A gradient buffer's views, an attribute's readers, the caller: all still see the sum."""
    result = migrate(f"{before}\n", replicated_dst="R")
    assert f"    {after}\n" in result.code, result.code
    assert (result.report.rewritten, result.report.todos) == (1, 0)
    undecided = migrate(f"{before}\n")
    assert "spmd.all_reduce_(" in undecided.code and "dst=R|I" in undecided.code, undecided.code


@pytest.mark.parametrize(
    "line, reason",
    [
        ("dist.all_gather_into_tensor(x, buf, group=tp_group)",
         "writes into the parameter x in place, which the caller sees"),
        ("dist.all_reduce(buf.contiguous(), group=tp_group)", "writes into buf.contiguous() in place"),
        ("dist.all_gather_into_tensor(self.out, buf, group=tp_group)", "writes into self.out in place"),
        ("handle = dist.all_reduce(buf, group=tp_group)", "the result of all_reduce (a work handle) is used"),
        ("dist.all_reduce(buf, group=tp_group, async_op=True)", "may run asynchronously"),
        ("dist.all_reduce(buf, op=dist.ReduceOp.MAX, group=tp_group)", "reduces with dist.ReduceOp.MAX"),
        ("dist.all_reduce(buf)", "runs on the default (world) group"),
        ("dist.all_reduce(buf, group=g)", "which mesh axis is group=g?"),
        # The flattened (dp, cp) group: a getter with arguments is not trusted.
        ("dist.all_reduce(buf, group=get_data_parallel_group(with_context_parallel=True))",
         "which mesh axis is group=get_data_parallel_group(with_context_parallel=True)?"),
        ("dist.all_to_all_single(out, buf, sizes, None, group=ep_group)", "only output_split_sizes is given"),
        ("dist.all_gather(parts, buf, group=tp_group)", "all_gather fills a list of tensors"),
        ("dist.reduce_scatter(out, parts, group=tp_group)", "reduce_scatter takes a list of inputs"),
        ("dist.all_to_all(outs, ins, group=ep_group)", "all_to_all exchanges lists of tensors"),
        ("dist.all_reduce(*args)", "is called with *-unpacked arguments"),
    ],
)
def test_ambiguous_collectives_keep_the_call_with_a_todo(line: str, reason: str) -> None:
    result = migrate(f"buf = x * 2\n{line}\n", replicated_dst="R")
    assert "    # TODO(spmd-migrate): " in result.code
    assert reason in result.code
    assert f"    {line}\n" in result.code
    assert (result.report.rewritten, result.report.todos) == (0, 1)


@pytest.mark.parametrize("spelling", [
    "import torch.distributed as dist\n_ = dist.all_reduce",
    "import torch\n_ = torch.distributed.all_reduce",
    "from torch.distributed import all_reduce\n_ = all_reduce",
    "from torch import distributed\n_ = distributed.all_reduce",
])
def test_every_spelling_of_the_collective_is_found(spelling: str) -> None:
    imports, _, func = spelling.partition("\n_ = ")
    code = f"{imports}\n\ndef f():\n    buf = h()\n    {func}(buf, group=tp_group)\n"
    result = migrate_source(code, "pkg.mod", replicated_dst="I")
    assert "    buf = spmd.all_reduce(buf, tp, src=P, dst=I, group=tp_group)\n" in result.code


def test_collectives_inside_autograd_functions_are_left_alone() -> None:
    code = textwrap.dedent("""\
        import torch
        from torch.autograd import Function

        class _Reduce(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad):
                torch.distributed.all_reduce(grad, group=ctx.tp_group)
                return grad

        class _Other(Function):
            @staticmethod
            def forward(ctx, x):
                buf = x.clone()
                torch.distributed.all_reduce(buf, group=tp_group)
                return buf
        """)
    result = migrate_source(code, "pkg.mod", replicated_dst="R")
    assert result.code == code
    assert (result.report.skipped, result.report.rewritten, result.report.todos) == (2, 0, 0)


@pytest.mark.parametrize("group, axis", [
    ("parallel_state.get_tensor_model_parallel_group()", "tp"),
    ("self.tp_group", "tp"),
    ("get_model_parallel_group()", "tp"),
    ("mpu.get_data_parallel_group()", "dp"),
    ("get_context_parallel_group()", "cp"),
    ("get_expert_model_parallel_group()", "ep"),
    ("get_expert_tensor_parallel_group()", "tp"),
    ("pp_group", "pp"),
])
def test_the_axis_is_read_from_the_group(group: str, axis: str) -> None:
    result = migrate(f"buf = x * 2\ndist.reduce_scatter_tensor(out, buf, group={group})\n")
    assert f"out = spmd.reduce_scatter(buf, {axis}, src=P, dst=S(0), group={group})" in result.code


DECLARED = AxisNames(functions=(("pkg.mpu.get_shard_group", "tp"),), attributes=(("dp_group", "fsdp"),))


@pytest.mark.parametrize("group, axis", [
    ("mpu.get_shard_group()", "tp"),
    ("shard_group()", "tp"),
    ("self.dp_group", "fsdp"),
    ("ep_group", "ep"),
])
def test_a_declared_group_names_the_axis_before_any_guess(group: str, axis: str) -> None:
    """``[spmd_mypy] groups`` first (a function by its full name, ``*.attr``), the name guesses after."""
    code = ("import torch.distributed as dist\nfrom pkg import mpu\nfrom pkg.mpu import get_shard_group as shard_group\n"
            f"\n\ndef f(self, x):\n    buf = x * 2\n    dist.reduce_scatter_tensor(out, buf, group={group})\n")
    result = migrate_source(code, "pkg.mod", groups=DECLARED)
    assert f"out = spmd.reduce_scatter(buf, {axis}, src=P, dst=S(0), group={group})" in result.code


@pytest.mark.parametrize("group, axis", [
    ('mesh.get_group("tp")', "tp"),
    ('mesh.get_group(mesh_dim="dp")', "dp"),
    ('mesh["ep"].get_group()', "ep"),
    ("spmd.group_of(cp)", "cp"),
])
def test_a_mesh_lookup_by_name_names_the_axis(group: str, axis: str) -> None:
    result = migrate(f"buf = x * 2\ndist.reduce_scatter_tensor(out, buf, group={group})\n")
    assert f"out = spmd.reduce_scatter(buf, {axis}, src=P, dst=S(0), group={group})" in result.code
