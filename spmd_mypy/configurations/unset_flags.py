"""``spmd-configuration``: an ``spmd.flags`` read of a flag no configuration sets.

``Activation = Tensor[S[0, tp]] if spmd.flags.sequence_paralel else ...``
would otherwise silently be the union of both types in every
configuration.  Reported only where configurations are declared: without
them every flag is undecided by design.
"""

from __future__ import annotations

from typing import Callable

from mypy.plugin import AttributeContext
from mypy.types import Type

from spmd_mypy import errorcodes, report
from spmd_mypy.configurations.declared import Configuration, flag_names


def flag_hook(flag: str, configurations: tuple[Configuration, ...]) -> Callable[[AttributeContext], Type] | None:
    """The check of ``spmd.flags.<flag>``; None where a configuration sets the flag (or none is declared)."""
    declared = flag_names(configurations)
    if not configurations or flag in declared:
        return None

    def check(ctx: AttributeContext) -> Type:
        report.fail(
            ctx.api, ctx.context,
            f"no configuration sets the flag spmd.flags.{flag}: every configuration takes the union of the types it "
            f"chooses between. Fix: set {flag} in the configurations of [spmd_mypy] "
            f"(docs/checker.md#configurations), or name a flag they set: {', '.join(declared)}.",
            errorcodes.CONFIGURATION,
        )
        return ctx.default_attr_type

    return check
