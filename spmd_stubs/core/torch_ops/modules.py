"""torch.nn modules whose ``forward`` is one op of the table: the op, and what the module passes it.

A call ``module(x)`` of such a module is judged as its functional form, by
the op's own record (docs/spec.md#torchnn-modules): ``nn.Linear``'s
``self.up(x)`` is ``linear(x, self.up.weight, self.up.bias)``, with the
parameters' types as the receiver's class declares them.  Each form lists,
per parameter of the op in order, what the module passes there: the call's
argument (:data:`INPUT`), one of the module's attributes (by name), or
nothing the rule judges (:data:`NOT_AN_OPERAND`: ``layer_norm``'s
``normalized_shape``, a python value).  Parameters after the last listed
one are no operands either (``softmax``'s ``dim``, ``dropout``'s ``p``).

The modules' own settings (``dim``, ``normalized_shape``) are not read:
where the op's shard propagation rule needs them (global SPMD), it has none
for a module call, so the table lists no module whose op's rule would take
them from a default (tests/test_torch_modules.py).
"""

from __future__ import annotations

from dataclasses import dataclass

INPUT = "<input>"
"""The argument of the call ``module(x)``."""
NOT_AN_OPERAND = None
"""A parameter of the op the module passes a python value (a shape, a flag)."""


@dataclass(frozen=True)
class ModuleForm:
    """One torch module class: the op its ``forward`` computes, and its operands."""

    module: str
    """The class's full name (``torch.nn.modules.linear.Linear``)."""
    op: str | None
    """The op record's name; None for ``nn.Identity``, whose result is its input as it is."""
    operands: tuple[str | None, ...]
    """Per parameter of the op: :data:`INPUT`, an attribute of the module, or :data:`NOT_AN_OPERAND`."""

    @property
    def attributes(self) -> tuple[str, ...]:
        """The module's attributes that are operands (its parameters: ``weight``, ``bias``)."""
        return tuple(name for name in self.operands if name is not None and name != INPUT)


def _forms(module: str, words: str, *operands: str | None) -> list[ModuleForm]:
    """One form per ``Class:op`` word, for classes of ``torch.nn.modules.<module>`` sharing the operands."""
    return [ModuleForm(f"torch.nn.modules.{module}.{cls}", op, operands or (INPUT,))
            for cls, _, op in (word.partition(":") for word in words.split())]


MODULE_FORMS: tuple[ModuleForm, ...] = (
    *_forms("linear", "Linear:linear", INPUT, "weight", "bias"),
    ModuleForm("torch.nn.modules.linear.Identity", None, (INPUT,)),
    *_forms("sparse", "Embedding:embedding", INPUT, "weight"),
    *_forms("normalization", "LayerNorm:layer_norm", INPUT, NOT_AN_OPERAND, "weight", "bias"),
    *_forms("normalization", "RMSNorm:rms_norm", INPUT, NOT_AN_OPERAND, "weight"),
    *_forms("dropout", "Dropout:dropout Dropout1d:dropout1d Dropout2d:dropout2d AlphaDropout:alpha_dropout"
                       " FeatureAlphaDropout:feature_alpha_dropout"),
    *_forms("activation", "ReLU:relu Hardtanh:hardtanh GELU:gelu SiLU:silu Tanh:tanh Sigmoid:sigmoid Mish:mish"
                          " ELU:elu CELU:celu SELU:selu LeakyReLU:leaky_relu Hardsigmoid:hardsigmoid"
                          " Hardswish:hardswish Softplus:softplus Softsign:softsign Tanhshrink:tanhshrink"
                          " LogSigmoid:logsigmoid Threshold:threshold Softmax:softmax LogSoftmax:log_softmax"
                          " Softmin:softmin"),
)

BY_MODULE = {form.module: form for form in MODULE_FORMS}
"""A torch module class's full name -> its form (a subclass without its own ``forward`` is found by its MRO)."""

CONTAINERS = frozenset({"torch.nn.modules.container.Sequential"})
"""Modules whose ``forward`` runs items not known statically: their result is unknown."""
