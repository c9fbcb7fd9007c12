"""Layouts held as data (docs/spec.md#layouts-held-as-data): torchtitan's ``ShardingConfig``s checked
against the modules they are attached to.

A setter function ``set_dense_ffn_sharding(feed_forward_cfg, *, enable_sp)``
attaches layouts to a module config and the configs under it
(``feed_forward_cfg.w2.sharding_config = rowwise_config(output_sp=enable_sp)``),
itself or through the setters it calls.  Where mypy checks the module
defining it (at a ``ShardingConfig(...)`` call or a call of a function of a
module that attaches layouts), the setter is run from source
(:mod:`.setters`) in every world: each value of its flags and each way the
tests on its configs may go.  Its config's class is the one its parameter
is annotated with, else the one its ``isinstance`` tests narrow it to, else
each module class whose ``__init__`` builds every field it attaches to
(``self.w2 = config.w2.build()``) (:mod:`.program`); the modules' ``forward``\\ s
are evaluated with the attached layouts (:mod:`.flow`).  A mismatch is an
``spmd-plan`` error at the attachment the fix changes (:mod:`.fixes`), in
the module that writes one of the attachments involved.  In strict mode,
what is not checked is ``spmd-untyped-boundary``: a statement the
interpreter cannot follow, a ``local_map`` region whose body's result the
evaluator does not know, and an attached layout no evaluated ``forward``
reaches.

=================  =========================================================
module             what
=================  =========================================================
:mod:`.values`     the values setters compute: layouts, configs, worlds
:mod:`.program`    names across modules; the classes of configs
:mod:`.setters`    setters run from source, in every world
:mod:`.flow`       the layouts through the modules' ``forward``\\ s
:mod:`.fixes`      the one-attachment changes a fix is chosen from
=================  =========================================================
"""

from __future__ import annotations

import ast

from mypy.checker import TypeChecker
from mypy.nodes import Context, MypyFile, TypeInfo
from mypy.plugin import FunctionContext
from mypy.types import Type

from spmd_mypy import errorcodes, report
from spmd_mypy.build_state import state_of
from spmd_mypy.layouts.fixes import changes
from spmd_mypy.layouts.judge import AXIS, Judged, clean, evaluate_worlds
from spmd_mypy.layouts.program import Function, Program, owners
from spmd_mypy.layouts.setters import RUNS, attaches, placed, worlds
from spmd_mypy.layouts.values import Attachment, Config, World
from spmd_mypy.plans.tree import source
from spmd_mypy.sources import SourceFiles, SourceUnreadable
from spmd_mypy.untyped_boundaries import Boundary

SHARDING_CONFIG = "torchtitan.protocols.sharding.ShardingConfig"
_BOUNDARY_FIX = ("write it with what the checker evaluates and follows (docs/spec.md#layouts-held-as-data "
                 "lists both)")


def sharding_config_hook(ctx: FunctionContext) -> Type:
    """A ``ShardingConfig(...)`` call, or a call of a function of a module that attaches layouts: check the
    top-level function around it, once."""
    api = ctx.api
    function = api.scope.current_function() if isinstance(api, TypeChecker) else None
    if function is None or not isinstance(api, TypeChecker):
        return ctx.default_return_type
    module = api.modules.get(api.tree.fullname)
    tree = source(api, module.fullname) if module is not None else None
    found = [s for s in tree.body if isinstance(s, ast.FunctionDef) and s.lineno <= function.line
             <= (s.end_lineno or s.lineno)] if tree is not None else []
    checked = state_of(api).layout_setters
    if module is None or not found or (module.path, found[0].lineno) in checked:
        return ctx.default_return_type
    checked.add((module.path, found[0].lineno))
    _check_setter(api, Function(module.fullname, found[0]))
    return ctx.default_return_type


def attaches_layouts(tree: MypyFile, sources: SourceFiles) -> bool:
    """Whether a freshly parsed module may attach layouts (read from its text: mypy writes a module's
    cache entry before checking it)."""
    try:
        return any(".sharding_config =" in line for line in sources.lines(tree))
    except (SourceUnreadable, UnicodeDecodeError):
        return False


def _check_setter(api: TypeChecker, function: Function) -> None:
    positional = [*function.node.args.posonlyargs, *function.node.args.args]
    program = Program(api)
    if not positional or not attaches(program, function):
        return
    found: list[World] = []
    for root in _roots(api, program, function, positional[0].arg):
        ran = worlds(program, function, root)
        if ran is None:
            _boundary(api, function.node, f"The layouts {function.node.name} attaches are not checked",
                      f"it takes more than {RUNS} ways through its flags and tests")
        found += ran or []
    if not any(w.attachments for w in found):
        return
    judged = evaluate_worlds(api, found, strict=False)
    if judged.problems:
        _report(api, program, function, found, judged.problems)
    _report_unchecked(api, function, found, judged)


def _roots(api: TypeChecker, program: Program, function: Function, parameter: str) -> list[TypeInfo | None]:
    """The classes the setter's config may have: its annotation's, else each one its ``isinstance`` tests
    narrow it to or whose module builds every field it attaches to (None: none found)."""
    annotated = program.annotations(function).get(parameter)
    if annotated is not None:
        return [annotated] if annotated.name == "Config" else []
    found: dict[str, TypeInfo | None] = {}
    for world in worlds(program, function, None) or []:
        fields = {path.split(".")[0] for path in world.attachments if path}
        narrowed = world.classes.get("")
        built = [owner.get("Config") for owner in owners(api, function.module, fields)] \
            if narrowed is None and fields else []
        classes = [narrowed] if narrowed is not None else \
            [c.node for c in built if c is not None and isinstance(c.node, TypeInfo)]
        for cls in classes or [None]:
            found.setdefault(cls.fullname if cls is not None else "", cls)
    return list(found.values())


def _report(api: TypeChecker, program: Program, function: Function, found: list[World],
            problems: dict[str, list[int]]) -> None:
    """Each problem at the attachment its fix changes; problems one fix removes together, once.  A problem
    is this module's to report where it writes one of the attachments involved; the fix changes one of
    them."""
    by_name = {a.written: a for world in found for a in world.attachments.values()}
    ours = {message: keys for message in problems if (keys := _keys(message, by_name))
            and any(by_name[k].module == function.module for k in keys)}
    if not ours:
        return
    involved = {id(by_name[k].node) for keys in ours.values() for k in keys}
    allowed = set(evaluate_worlds(api, found, strict=True).problems) - set(problems)
    fix = next((c for c in changes(program, function.module, found, AXIS, involved) if clean(api, c.worlds, allowed)),
               None)
    for message, keys in list(ours.items())[:1] if fix is not None else ours.items():
        shown = " and ".join(dict.fromkeys(
            "(" + ", ".join(f"{k}={v}" for k, v in found[i].flags.items()) + ")" for i in problems[message]))
        if fix is not None:
            advice, node = f"Fix: {fix.words}", fix.node
        else:
            advice = f"Fix: make the layouts {function.node.name} attaches agree"
            first = by_name[keys[0]]
            node = first.node if first.module == function.module else first.anchor
        more = f" (and {len(problems) - 1} more this fix removes)" if fix is not None and len(problems) > 1 else ""
        report.fail(api, Context(node.lineno, node.col_offset),
                    f"With the layouts {function.node.name} attaches {shown}, {message}{more}. {advice}.",
                    errorcodes.PLAN)


def _keys(message: str, by_name: dict[str, Attachment]) -> list[str]:
    """The attachments a problem's message names (quoted), the one it is about first."""
    quoted = message.split('"')[1::2]
    return [name for name in dict.fromkeys(quoted) if name in by_name]


def _report_unchecked(api: TypeChecker, function: Function, found: list[World], judged: Judged) -> None:
    """Strict mode: each statement not followed, each region whose body is not judged and each attached
    layout no evaluated ``forward`` reaches, in this module."""
    if not state_of(api).settings.strict:
        return
    for where in dict.fromkeys(u for world in found for u in world.unevaluated):
        _boundary(api, Context(where.line, where.column),
                  f"The layouts {function.node.name} attaches are not all checked",
                  f"the checker does not follow {where.reason}")
    attached = {id(a.node): a for world in found for a in world.attachments.values()
                if isinstance(a.value, Config) and a.module == function.module}
    for statement, attachment in attached.items():
        if statement in judged.unchecked:
            _boundary(api, attachment.node, f"The layout attached to {attachment.written} on mesh axis {AXIS} is "
                      "not checked", judged.unchecked[statement])


def _boundary(api: TypeChecker, node: Context | ast.stmt, subject: str, why: str) -> None:
    """An ``spmd-untyped-boundary`` in strict mode."""
    if isinstance(node, ast.stmt):
        expression = placed(node)
        node = Context(expression.lineno, expression.col_offset)
    if state_of(api).settings.strict:
        report.fail(api, node, f"{subject}, {Boundary.UNCHECKED_LAYOUT.phrase}: {why}. Fix: {_BOUNDARY_FIX}.",
                    errorcodes.UNTYPED_BOUNDARY)
