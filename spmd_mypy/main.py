"""The plugin class: its settings and state for one build, and mypy's hook lookups answered from the
tables of :mod:`spmd_mypy.hooks`, each answer kept for the build.

Every hook runs behind :func:`spmd_mypy.hooks.guarded`: an unexpected
exception becomes an ``spmd-internal`` error on the expression and the
result mypy would have given without the plugin, never a mypy crash.
"""

from __future__ import annotations

import hashlib
import os
import sys
from typing import Any, Callable

from mypy.build import PRI_LOW
from mypy.errors import CompileError
from mypy.nodes import MypyFile, TypeInfo
from mypy.options import Options
from mypy.plugin import ClassDefContext, Plugin, ReportConfigContext
from mypy.plugins.default import DefaultPlugin

from spmd_mypy import config, hooks, layouts, plans, raw_collectives, rebinding, runtime_classes
from spmd_mypy.build_state import BuildState
from spmd_mypy.configurations import pruning
from spmd_mypy.fullnames import AUTOGRAD_FUNCTION, MODULE
from spmd_mypy.hooks import Hook, HookTable, installed
from spmd_mypy.layouts.program import owner_modules
from spmd_mypy.parse_rewrites import ParseRewrite
from spmd_mypy.representation import InternedValues
from spmd_mypy.sources import SourceFiles
from spmd_mypy.spmd_types_api import narrowing
from spmd_stubs import core


def _code_version() -> str:
    """A hash of every source file the verdicts depend on: the plugin and the whole core.

    mypy only fingerprints the plugin's entry module, so without this a change
    of a rule anywhere else would leave users' cached verdicts stale.  Every
    run computes it on import: the files are listed with ``os.walk`` and read
    with ``open``, not through ``Path`` objects (half the time).
    """
    roots = (os.path.dirname(__file__), os.path.dirname(core.__file__))
    files = sorted(os.path.join(folder, name) for root in roots for folder, _, names in os.walk(root)
                   for name in names if name.endswith(".py"))
    digest = hashlib.sha256()
    for file in files:
        with open(file, "rb") as source:
            digest.update(source.read())
    return digest.hexdigest()[:16]


FINGERPRINT = _code_version()
"""The checker's code version, in every module's cache metadata."""


def _may_allow_redefinition(options: Options) -> bool:
    """Turning on ``allow_redefinition`` changes nothing the user decided, and mypy accepts it.

    mypy refuses it beside ``--allow-redefinition-old`` and without
    ``local_partial_types``; a user's own setting in ``[mypy]`` wins.
    """
    return (
        not options.allow_redefinition
        and not getattr(options, "allow_redefinition_old", False)
        and options.local_partial_types
        and not config.user_decides_redefinition(options.config_file)
    )


def _load_config(options: Options) -> tuple[config.Config, str | None]:
    """The ``[spmd_mypy]`` settings, or the defaults and the error that stops the build (a bad setting:
    one message naming it, the way mypy reports its own bad settings)."""
    try:
        settings = config.load(options.config_file)
    except config.ConfigError as error:
        return config.Config(), f"{options.config_file}: error: {error}"
    unknown = [f"{name}: {target}" for name, target in settings.collectives
               if target.rpartition(".")[2] not in raw_collectives.UNTYPED]
    if unknown:
        section = f"[tool.{config.SECTION}]" if str(options.config_file).endswith(".toml") else f"[{config.SECTION}]"
        return settings, (f"{options.config_file}: error: {section} collectives: {', '.join(unknown)} names no "
                          f"torch.distributed collective the checker types; the collectives are "
                          f"{', '.join(sorted(raw_collectives.UNTYPED))}")
    if settings.configurations and options.num_workers:
        return settings, (f"{options.config_file}: error: [spmd_mypy] configurations need mypy's num_workers = 0: "
                          "its parallel workers analyse modules the plugin cannot decide flags in first. "
                          "spmd-check runs the configurations in parallel instead (docs/checker.md#configurations)")
    return settings, None


def _after(theirs: Hook, ours: Hook) -> Hook:
    """``ours`` on what mypy's default plugin made of the call, in place of mypy's own inference."""

    def run(ctx: Any) -> Any:
        field = hooks.inferred_field(ctx)
        assert field is not None  # every kind of hook mypy's default plugin also answers has one
        return ours(ctx._replace(**{field: theirs(ctx)}))

    return run


class SpmdPlugin(Plugin):
    """The checker's hooks, each after mypy's own default hook for the same name.

    mypy asks the plugins in order and takes the first hook it gets, so a
    hook of this plugin would otherwise hide the default plugin's
    (``dataclasses.replace``, ``functools.partial(...)(...)``, singledispatch).
    """

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        # A bad setting stops the build when it starts (set_modules), not here: mypy's daemon constructs
        # the plugin again on every `dmypy run` to compare plugins, where an exception kills the daemon.
        self.config, self._stop = _load_config(options)
        self.build_state = BuildState(self.config, InternedValues(), SourceFiles(options.native_parser))
        # the plugin's choice of mypy's redefinition, without its leak out of branches that return
        self._rebindings: ParseRewrite | None = None
        if self.config.allow_redefinition and _may_allow_redefinition(options):
            options.allow_redefinition = True
            self._rebindings = rebinding.shadowing(options, self.build_state.sources)
        self._narrowing = narrowing.narrowing(options, self.build_state.sources)
        self._mypys = DefaultPlugin(options)
        self._flag_tests = pruning.FlagTests(self.config.configurations)
        self._answers: dict[tuple[str, str], Hook | None] = {}

    def set_modules(self, modules: dict[str, MypyFile]) -> None:
        """Called as a build starts (once its modules are parsed): a bad setting stops it here."""
        if self._stop is not None:
            raise CompileError([self._stop])
        super().set_modules(modules)
        self._mypys.set_modules(modules)
        self.build_state.values.modules = modules

    def _answer(self, lookup: str, fullname: str, table: HookTable) -> Hook | None:
        """The table's hook for ``fullname``, after the default plugin's for the same name; kept for the build."""
        key = (lookup, fullname)
        if key not in self._answers:
            ours = table.lookup(fullname, self.config)
            theirs = getattr(self._mypys, lookup)(fullname)
            self._answers[key] = ours if ours is None or theirs is None else _after(theirs, ours)
        return self._answers[key]

    def get_additional_deps(self, file: MypyFile) -> list[tuple[int, str, int]]:
        """Called whenever mypy parses a module (a daemon edit included): per-module state is stale, the
        configuration's flags decide the module's conditions before it is analysed, a module that owns a
        sub-module declared in ``modules`` depends on its class's (:mod:`spmd_mypy.runtime_classes`), and one
        that attaches layouts on the modules beside it that build what it attaches to (:mod:`spmd_mypy.layouts`)."""
        self.build_state.forget(file)
        if installed(file.fullname, file.path):
            return []
        active = self.config.configuration
        try:
            pruning.prune(file, dict(active.flags) if active is not None else {})
        except Exception as error:  # noqa: BLE001 -- a plugin must never crash mypy
            # no hook context here to report on: say it once, and the module is checked undecided
            print(f"spmd_mypy: {file.path}: the configuration's flags could not be decided "
                  f"({type(error).__name__}: {error}); every branch is checked. Please report it.",
                  file=sys.stderr)
        self._narrowing.parsed(file)
        if self._rebindings is not None:
            self._rebindings.parsed(file)
        attaches = layouts.attaches_layouts(file, self.build_state.sources)
        if attaches or plans.mentions_plans(file, self.build_state.sources):
            self.build_state.plan_paths.add(file.path)
        owners = owner_modules(file, self.build_state.sources) if attaches else []
        return runtime_classes.additional_deps(file, self.config.modules) + [(PRI_LOW, name, -1) for name in owners]

    def report_config_data(self, ctx: ReportConfigContext) -> dict[str, Any]:
        """Invalidates mypy's cache when the checker's code or (for user modules) its config changes.

        mypy reports nothing in the standard library and in installed
        packages (torch, numpy), so a change of ``[spmd_mypy]`` cannot change
        what it says there and leaves their (expensive) cache entries valid.
        """
        data: dict[str, Any] = {"fingerprint": FINGERPRINT}
        if not installed(ctx.id, ctx.path):
            data.update(self.config.as_dict())
            if self._flag_tests.found_in(ctx.path):
                # A module whose conditions the flags decide must be parsed through the path that asks the
                # plugin first (get_additional_deps): mypy re-parses a module whose imports changed without
                # asking.  What is checked never equals what was written, so mypy parses it afresh every
                # run; what is written is constant, so its interface hash, and its dependents, stay fresh.
                data["flags_decided"] = "when checking" if ctx.is_check else "when parsed"
            if self._rebindings is not None:
                data.update(self._rebindings.cache_data(ctx.path, ctx.is_check))
            data.update(self._narrowing.cache_data(ctx.path, ctx.is_check))
            if not ctx.is_check and ctx.path in self.build_state.plan_paths:
                # its plans or attached layouts are checked against other modules' sources (spmd_mypy.plans,
                # spmd_mypy.layouts): never a valid entry
                data["dtensor_plans"] = "checked every run"
        return data

    def get_customize_class_mro_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
        return hooks.CLASS_MROS.lookup(fullname, self.config)

    def get_type_analyze_hook(self, fullname: str) -> Hook | None:
        key = ("get_type_analyze_hook", fullname)
        if key not in self._answers:  # no default plugin hook of this kind to chain after
            self._answers[key] = hooks.TYPE_ANALYSES.lookup(fullname, self.config)
        return self._answers[key]

    def get_function_hook(self, fullname: str) -> Hook | None:
        """The table's hook; a call of a function of a module that attaches layouts (or mentions plans) also
        checks the setter it is in (:mod:`spmd_mypy.layouts`)."""
        hook = self._answer("get_function_hook", fullname, hooks.FUNCTIONS)
        module = self.build_state.values.modules.get(fullname.rpartition(".")[0])
        if module is None or module.path not in self.build_state.plan_paths:
            return hook
        setter = hooks.guarded(layouts.sharding_config_hook)
        return _after(setter, hook) if hook is not None else setter

    def get_function_signature_hook(self, fullname: str) -> Hook | None:
        return self._answer("get_function_signature_hook", fullname, hooks.FUNCTION_SIGNATURES)

    def get_method_signature_hook(self, fullname: str) -> Hook | None:
        return self._answer("get_method_signature_hook", fullname, hooks.METHOD_SIGNATURES)

    def get_method_hook(self, fullname: str) -> Hook | None:
        return self._answer("get_method_hook", fullname, hooks.METHODS)

    def get_attribute_hook(self, fullname: str) -> Hook | None:
        return self._answer("get_attribute_hook", fullname, hooks.ATTRIBUTES)

    def get_class_attribute_hook(self, fullname: str) -> Hook | None:
        return self._answer("get_class_attribute_hook", fullname, hooks.CLASS_ATTRIBUTES)

    def get_base_class_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
        """Classes derived from ``torch.autograd.Function`` and from ``torch.nn.Module`` (a user's own base too).

        mypy asks for a base class hook by the direct bases' names only, and
        takes the first plugin's, so only such names get this plugin's hook.
        """
        found = self.lookup_fully_qualified(fullname)
        info = found.node if found is not None and isinstance(found.node, TypeInfo) else None
        if fullname == AUTOGRAD_FUNCTION or (info is not None and info.has_base(AUTOGRAD_FUNCTION)):
            return hooks.autograd_function_class(self.config)
        if fullname == MODULE or (info is not None and info.has_base(MODULE)):
            return hooks.MODULE_CLASS
        return None


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point: outside the supported mypy releases, one error naming them and the fix."""
    from spmd_mypy.versions import require_mypy

    require_mypy(version)
    return SpmdPlugin
