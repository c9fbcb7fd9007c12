"""The torch module forms (spmd_stubs.core.torch_ops.modules): each names a real torch class and a real op."""

from __future__ import annotations

import importlib
import inspect

import pytest

from spmd_stubs.core.torch_ops import OPS, REQUIRED
from spmd_stubs.core.torch_ops.modules import BY_MODULE, INPUT, MODULE_FORMS, ModuleForm


def _torch_class(fullname: str) -> type:
    module, _, name = fullname.rpartition(".")
    found = getattr(importlib.import_module(module), name)
    assert isinstance(found, type)
    return found


@pytest.mark.parametrize("form", MODULE_FORMS, ids=lambda f: f.module.rpartition(".")[2])
def test_form_names_the_class_that_defines_forward(form: ModuleForm) -> None:
    """The plugin finds a form by the class that defines ``forward`` (a subclass without one keeps it)."""
    assert "forward" in vars(_torch_class(form.module))


@pytest.mark.parametrize("form", [f for f in MODULE_FORMS if f.op is not None], ids=lambda f: f.op)
def test_form_passes_the_op_its_parameters_in_order(form: ModuleForm) -> None:
    """The input is the op's first parameter, each attribute a parameter the forward passes it."""
    assert form.op in OPS
    assert form.operands[0] == INPUT and INPUT not in form.operands[1:]
    for attribute in form.attributes:
        assert f"self.{attribute}" in inspect.getsource(_torch_class(form.module).forward)
    record = OPS[form.op]
    if record.bias is not None and "bias" in form.operands:
        assert form.operands.index("bias") == record.bias


@pytest.mark.parametrize("form", [f for f in MODULE_FORMS if f.op is not None], ids=lambda f: f.op)
def test_no_shape_rule_reads_a_module_setting_from_a_default(form: ModuleForm) -> None:
    """A module's settings (softmax's dim) are not read: the op's shape rule must not take them from a default."""
    shape = OPS[str(form.op)].shape
    assert shape is None or all(param.default is REQUIRED for param in shape.params)


def test_forms_are_keyed_by_class() -> None:
    assert len(BY_MODULE) == len(MODULE_FORMS)
    assert BY_MODULE["torch.nn.modules.linear.Linear"].operands == (INPUT, "weight", "bias")
