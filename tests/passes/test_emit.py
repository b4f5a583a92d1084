"""The builder passes write replacements with (``op.Where(...)``): only ONNX ops exist on it."""

from __future__ import annotations

from collections import Counter

import onnx_ir as ir
import pytest

from seqlower.passes._base import NameGenerator
from seqlower.passes._emit import Emitter


def _emitter() -> Emitter:
    return Emitter(NameGenerator(Counter()), "test", 17)


def test_a_misspelt_op_fails_where_it_is_written() -> None:
    op = _emitter()
    with pytest.raises(AttributeError, match="Slcie"):
        op.Slcie  # noqa: B018
    with pytest.raises(AttributeError):
        op.not_an_op  # noqa: B018


def test_an_onnx_op_builds_a_named_node() -> None:
    op = _emitter()
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2]))
    y = op.Neg(x, _hint="negated")
    (node,) = op.nodes
    assert node.op_type == "Neg" and node.outputs[0] is y
    assert y.name == "test_negated"
