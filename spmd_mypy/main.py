"""The plugin class: maps mypy's hook lookups to the feature modules.

Every hook runs behind :func:`guarded`: an unexpected exception becomes an
``spmd-internal`` error on the expression and the result mypy would have
given without the plugin, never a mypy crash.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import traceback
from typing import Any, Callable, TypeVar

from mypy.errors import CompileError
from mypy.nodes import MypyFile, TypeInfo
from mypy.options import Options
from mypy.plugin import (
    AnalyzeTypeContext,
    AttributeContext,
    ClassDefContext,
    FunctionContext,
    FunctionSigContext,
    MethodContext,
    MethodSigContext,
    Plugin,
    ReportConfigContext,
)
from mypy.plugins.default import DefaultPlugin
from mypy.semanal import SemanticAnalyzer
from mypy.types import AnyType, TypeOfAny

from spmd_mypy import (
    autograd,
    backward,
    calls,
    collectives,
    config,
    differentiable_collectives,
    errorcodes,
    function_bodies,
    polymorphism,
    raw_collectives,
    report,
    scalars,
    signatures,
    untyped_boundaries,
    wrappers,
)
from spmd_mypy.annotations import SHARD, SPMD_TENSOR, analyze_spmd_tensor, forget_source, shard_outside_tensor
from spmd_mypy.collectives import (
    COLLECTIVES_MODULE,
    DECLARING,
    FROM_LOCAL,
    MEGATRON_MODULE,
    TYPED_OPS,
)
from spmd_mypy.configurations import pruning, unset_flags
from spmd_mypy.global_mode import boundaries, refine, regions
from spmd_mypy.gradients import FUNCTION
from spmd_mypy.ops import ATTRIBUTE_PREFIX, FUNCTION_MODULES, METHOD_PREFIX, RETURN_TYPES
from spmd_mypy.raw_collectives import UNTYPED, UNTYPED_MODULES
from spmd_mypy.representation import TENSOR, add_hidden_parameter, use_modules
from spmd_stubs import core
from spmd_stubs.core.torch_ops import TENSOR_ATTRIBUTES

Context = TypeVar("Context")


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

_AUTOGRAD = {
    "torch.autograd.backward": ("tensors", "grad_tensors", "torch.autograd.backward()"),
    "torch.autograd.grad": ("outputs", "grad_outputs", "torch.autograd.grad()"),
}
_STANDARD = frozenset({"_typeshed", "typing_extensions", "mypy_extensions", *sys.stdlib_module_names})


def _installed(module: str, path: str) -> bool:
    """Whether ``module`` is the standard library's or an installed package's (mypy keeps those silent).

    Asked for every module of every run (torch's 1,200 included, :meth:`SpmdPlugin.report_config_data`),
    so the path is split as a string, not parsed into a ``Path``.
    """
    if module.partition(".")[0] in _STANDARD:
        return True
    parts = path.replace("\\", "/").split("/")
    return "site-packages" in parts or "dist-packages" in parts


_NO_POLYMORPHISM = ("torch.", "builtins.", "typing.", "spmd_stubs.collectives.", "spmd_stubs.types.")


_TENSOR_CLASSES = ("Tensor", "TensorBase")
"""The classes that define torch's tensor operators (``torch._tensor.Tensor`` and its base)."""


def _operator_on_union(fullname: str) -> str | None:
    """``__rmul__`` where mypy asks for ``"__rmul__ of TensorBase"``: a reflected operator on a union of tensors.

    mypy names a method after its receiver's class, and a union has none, so it
    asks for the callee's own name instead.  It calls a reflected operator on a
    union when the right operand is one (``x * y`` after a branch join of y),
    and tries that before ``x.__mul__(y)``; unhooked, it succeeds with torch's
    unknown ``Tensor`` and no rule is judged.
    """
    method, _, owner = fullname.partition(" of ")
    return method if owner in _TENSOR_CLASSES and calls.is_reflected(method) else None


_INFERRED = ("default_return_type", "default_attr_type", "default_signature")
"""Where a hook's context holds what mypy inferred without the plugin."""


def _fallback(ctx: Any) -> Any:
    """What mypy would have inferred without the plugin."""
    for attribute in _INFERRED:
        if hasattr(ctx, attribute):
            return getattr(ctx, attribute)
    return AnyType(TypeOfAny.from_error)


def guarded(hook: Callable[[Context], Any]) -> Callable[[Context], Any]:
    """Run ``hook``; on an unexpected exception report ``spmd-internal`` and fall back."""

    @functools.wraps(hook)
    def run(ctx: Context) -> Any:
        try:
            return hook(ctx)
        except Exception as error:  # noqa: BLE001 -- a plugin must never crash mypy
            where = traceback.extract_tb(error.__traceback__)[-1]
            message = (
                f"SPMD checker internal error ({type(error).__name__}: {error} at "
                f"{where.filename.rpartition('/')[2]}:{where.lineno}); this expression is treated as "
                "unknown. Please report it."
            )
            api, context = getattr(ctx, "api", None), getattr(ctx, "context", None) or getattr(ctx, "cls", None)
            if api is not None and context is not None:
                api.fail(message, context, code=errorcodes.INTERNAL)
            return _fallback(ctx)

    return run


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


def _load_config(options: Options) -> config.Config:
    """The ``[spmd_mypy]`` settings; a bad one stops mypy with a message naming it, the way mypy
    reports its own bad settings (a CompileError), not as a crash."""
    try:
        return config.load(options.config_file)
    except config.ConfigError as error:
        raise CompileError([f"{options.config_file}: error: {error}"]) from None


Hook = Callable[[Any], Any]


def _after(theirs: Hook, ours: Hook) -> Hook:
    """``ours`` on what mypy's default plugin made of the call, in place of mypy's own inference."""

    def run(ctx: Any) -> Any:
        field = next(attribute for attribute in _INFERRED if hasattr(ctx, attribute))
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
        self.config = _load_config(options)
        if self.config.configurations and options.num_workers:
            raise CompileError([f"{options.config_file}: error: [spmd_mypy] configurations need mypy's "
                                "num_workers = 0: its parallel workers analyse modules the plugin cannot decide "
                                "flags in first. spmd-check runs the configurations in parallel instead "
                                "(docs/checker.md#configurations)"])
        report.show_fixes(self.config.show_fixes)
        if self.config.allow_redefinition and _may_allow_redefinition(options):
            options.allow_redefinition = True
        self._mypys = DefaultPlugin(options)
        self._flag_tests = pruning.FlagTests(self.config.configurations)

    def set_modules(self, modules: dict[str, MypyFile]) -> None:
        super().set_modules(modules)
        self._mypys.set_modules(modules)
        use_modules(modules)

    def _chained(self, lookup: str, fullname: str, ours: Hook | None) -> Hook | None:
        theirs = getattr(self._mypys, lookup)(fullname)
        if ours is None or theirs is None:
            return ours  # None: mypy asks its default plugin next
        return _after(theirs, ours)

    def get_additional_deps(self, file: MypyFile) -> list[tuple[int, str, int]]:
        """Called whenever mypy parses a module (a daemon edit included): per-module state is stale, and
        the configuration's flags decide the module's conditions before it is analysed."""
        regions.forget(file)
        forget_source(file)
        if not _installed(file.fullname, file.path):
            active = self.config.configuration
            try:
                pruning.prune(file, dict(active.flags) if active is not None else {})
            except Exception as error:  # noqa: BLE001 -- a plugin must never crash mypy
                # no hook context here to report on: say it once, and the module is checked undecided
                print(f"spmd_mypy: {file.path}: the configuration's flags could not be decided "
                      f"({type(error).__name__}: {error}); every branch is checked. Please report it.",
                      file=sys.stderr)
        return []

    def report_config_data(self, ctx: ReportConfigContext) -> dict[str, Any]:
        """Invalidates mypy's cache when the checker's code or (for user modules) its config changes.

        mypy reports nothing in the standard library and in installed
        packages (torch, numpy), so a change of ``[spmd_mypy]`` cannot change
        what it says there and leaves their (expensive) cache entries valid.
        """
        data: dict[str, Any] = {"fingerprint": FINGERPRINT}
        if not _installed(ctx.id, ctx.path):
            data.update(self.config.as_dict())
            if self._flag_tests.found_in(ctx.path):
                # A module whose conditions the flags decide must be parsed through the path that asks the
                # plugin first (get_additional_deps): mypy re-parses a module whose imports changed without
                # asking.  What is checked never equals what was written, so mypy parses it afresh every
                # run; what is written is constant, so its interface hash, and its dependents, stay fresh.
                data["flags_decided"] = "when checking" if ctx.is_check else "when parsed"
        return data

    def get_customize_class_mro_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
        return guarded(add_hidden_parameter) if fullname == TENSOR else None

    @functools.lru_cache(maxsize=None)
    def get_type_analyze_hook(self, fullname: str) -> Callable[[AnalyzeTypeContext], Any] | None:
        if fullname == SPMD_TENSOR:
            # strict mode wraps the boundaries of every module that writes an SPMD type
            return guarded(_after_analysis(analyze_spmd_tensor, self._wrap) if self.config.strict
                           else analyze_spmd_tensor)
        if fullname == SHARD:
            return guarded(shard_outside_tensor)
        return None

    @functools.lru_cache(maxsize=None)
    def get_function_hook(self, fullname: str) -> Hook | None:
        return self._chained("get_function_hook", fullname, self._function_hook(fullname))

    def _function_hook(self, fullname: str) -> Callable[[FunctionContext], Any] | None:
        module, _, name = fullname.rpartition(".")
        module += "."
        if module == COLLECTIVES_MODULE and name in TYPED_OPS:
            return guarded(collectives.collective_hook(name))
        if module == MEGATRON_MODULE and name in collectives.megatron():
            return guarded(collectives.megatron_hook(collectives.megatron()[name]))
        if fullname in DECLARING:
            return guarded(collectives.declaring_hook(DECLARING[fullname]))
        if fullname == FROM_LOCAL:
            return guarded(collectives.from_local_hook)
        if fullname in regions.REGIONS:
            return guarded(boundaries.region_hook)
        if module == refine.OPS_MODULE and name in refine.SPMD_OPS:
            return guarded(refine.spmd_op_hook(name, self.config))
        if fullname in _AUTOGRAD:
            return guarded(backward.autograd_hook(*_AUTOGRAD[fullname]))
        if module == differentiable_collectives.MODULE and name in differentiable_collectives.DIFFERENTIABLE:
            return guarded(differentiable_collectives.differentiable_hook(name, self.config.groups))
        if fullname == wrappers.RETURNED:
            return guarded(function_bodies.returned_hook(self.config.strict))
        if fullname == wrappers.CALLED_VALUE:
            return guarded(untyped_boundaries.called_value_hook)
        if fullname == wrappers.ASSIGNED:
            return guarded(untyped_boundaries.assigned_hook)
        if module in UNTYPED_MODULES and name in UNTYPED:
            return guarded(raw_collectives.untyped_collective_hook(fullname, self.config.groups))
        if module in FUNCTION_MODULES:
            return guarded(calls.function_hook(name, self.config))
        return self._boundary_hook(fullname)

    def _boundary_hook(self, fullname: str) -> Callable[[Any], Any] | None:
        """Strict mode: a call of a function or method outside torch, checked for parameters that forget types."""
        if not self.config.strict or fullname.startswith(_NO_POLYMORPHISM):
            return None
        return guarded(untyped_boundaries.call_hook(fullname))

    def _wrap(self, analyzer: SemanticAnalyzer) -> None:
        """Have the module's returns (and, strict, untyped third-party calls) wrapped for their hooks;
        not in the standard library's or installed packages' modules, where mypy reports nothing."""
        if _installed(analyzer.cur_mod_id, analyzer.cur_mod_node.path):
            return
        strict = self.config.strict
        wrappers.schedule(analyzer, wrappers.Wrapping(
            returns=lambda function: function_bodies.wraps_returns(function)
            or (strict and untyped_boundaries.forgets_return(function)),
            called_values=strict,
            assigned_to=untyped_boundaries.has_plain_tensor if strict else None,
        ))

    @functools.lru_cache(maxsize=None)
    def get_function_signature_hook(self, fullname: str) -> Hook | None:
        return self._chained("get_function_signature_hook", fullname, self._function_signature_hook(fullname))

    def _function_signature_hook(self, fullname: str) -> Callable[[FunctionSigContext], Any] | None:
        module, _, name = fullname.rpartition(".")
        if f"{module}." == MEGATRON_MODULE and name in collectives.megatron():
            return guarded(collectives.megatron_signature)
        if fullname.startswith(_NO_POLYMORPHISM):
            return None
        return guarded(signatures.signature_hook)

    @functools.lru_cache(maxsize=None)
    def get_method_signature_hook(self, fullname: str) -> Hook | None:
        return self._chained("get_method_signature_hook", fullname, self._method_signature_hook(fullname))

    def _method_signature_hook(self, fullname: str) -> Callable[[MethodSigContext], Any] | None:
        number_operator = scalars.operator_of(fullname)
        if number_operator is not None:
            return guarded(scalars.signature_hook(number_operator, self.config))
        if fullname.startswith(_NO_POLYMORPHISM):
            return None
        return guarded(signatures.signature_hook)

    @functools.lru_cache(maxsize=None)
    def get_method_hook(self, fullname: str) -> Hook | None:
        return self._chained("get_method_hook", fullname, self._method_hook(fullname))

    def _method_hook(self, fullname: str) -> Callable[[MethodContext], Any] | None:
        if fullname.startswith(METHOD_PREFIX):
            name = fullname[len(METHOD_PREFIX) :]
            if name == "backward":
                return guarded(backward.backward_method)
            return guarded(calls.method_hook(name, self.config))
        union_operator = _operator_on_union(fullname)
        if union_operator is not None:
            return guarded(calls.method_hook(union_operator, self.config))
        if fullname.endswith(".__call__") and not fullname.startswith(("builtins.", "typing.")):
            return guarded(polymorphism.module_call_hook(self.config.strict))
        return self._boundary_hook(fullname)

    @functools.lru_cache(maxsize=None)
    def get_attribute_hook(self, fullname: str) -> Hook | None:
        return self._chained("get_attribute_hook", fullname, self._attribute_hook(fullname))

    def get_base_class_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
        if fullname != FUNCTION and not self._autograd_function_class(fullname):
            return None
        return guarded(_after_analysis(autograd.after_signatures(guarded(autograd.check_backward)), self._wrap))

    def _autograd_function_class(self, fullname: str) -> bool:
        """Whether ``fullname`` is a class derived from ``torch.autograd.Function`` (a user's own base).

        mypy asks for a base class hook by the direct bases' names only, and
        takes the first plugin's, so only such names get this plugin's hook.
        """
        found = self.lookup_fully_qualified(fullname)
        return found is not None and isinstance(found.node, TypeInfo) and found.node.has_base(FUNCTION)

    @functools.lru_cache(maxsize=None)
    def get_class_attribute_hook(self, fullname: str) -> Hook | None:
        ours = guarded(autograd.apply_attribute) if fullname.endswith(".apply") else None
        return self._chained("get_class_attribute_hook", fullname, ours)

    def _attribute_hook(self, fullname: str) -> Callable[[AttributeContext], Any] | None:
        owner, _, name = fullname.rpartition(".")
        if owner == unset_flags.FLAGS_CLASS:
            check = unset_flags.flag_hook(name, self.config.configurations)
            return guarded(check) if check is not None else None
        if fullname.startswith(RETURN_TYPES):
            return guarded(calls.named_field)
        if not fullname.startswith(ATTRIBUTE_PREFIX):
            return None
        name = fullname[len(ATTRIBUTE_PREFIX) :]
        if name == "grad":
            return guarded(backward.grad_attribute)
        if name in TENSOR_ATTRIBUTES:
            return guarded(calls.attribute_hook(TENSOR_ATTRIBUTES[name], name, self.config))
        return None


def _after_analysis(hook: Callable[[Any], Any], wrap: Callable[[SemanticAnalyzer], None]) -> Callable[[Any], Any]:
    """``hook``, then the current module's wrappers scheduled (:mod:`spmd_mypy.wrappers`)."""

    def run(ctx: Any) -> Any:
        result = hook(ctx)
        analyzer = getattr(ctx.api, "api", ctx.api)  # a type analyser's semantic analyser, or the analyser itself
        if isinstance(analyzer, SemanticAnalyzer):
            wrap(analyzer)
        return result

    return run


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point: outside the supported mypy releases, one error naming them and the fix."""
    from spmd_mypy.versions import require_mypy

    require_mypy(version)
    return SpmdPlugin
