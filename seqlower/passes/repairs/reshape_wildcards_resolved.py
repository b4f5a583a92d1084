"""A ``Reshape`` to a shape computed at run time that holds a -1: the -1 computed before it
(target ``iree``).

IREE 3.13.0 fails to run such a ``Reshape`` ('shape element count overflows device size', or
'OUT_OF_RANGE' with a length of -1 times the other sizes): tf2onnx writes every Keras
``TimeDistributed`` layer so, back from ``[-1, 6]`` to ``[-1, T, 6]`` with ``T`` read from the
input's shape (``tests/targets/test_iree.py``). It runs the same ``Reshape`` to a shape without a
-1. So the shape's 0s are first made the input's sizes they copy (``allowzero=0``), then the -1
becomes the input's element count over the product of the others: what the ``Reshape`` computes,
exactly, wherever it does not fail. Only shapes known to hold a -1 change: an element a
constant, or a constant part of a ``Concat`` (through a ``Cast`` from int32).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._ir import constant_array, int_attr, is_onnx
from seqlower.passes._types import TypeOracle

__all__ = ["ReshapeWildcardsResolved"]

#: Element types a Cast to int64 keeps every shape's value of.
_INTEGERS = frozenset({ir.DataType.INT32, ir.DataType.INT64})


class ReshapeWildcardsResolved(NodeLoweringPass[bool]):
    """Every ``Reshape`` to a computed shape holding a constant -1 gets that -1 (and its 0s)
    computed (module docstring)."""

    op_type = "Reshape"
    takes_all = False
    repairs = True

    def plan(self, site: Site, types: TypeOracle) -> bool | None:
        node = site.node
        shape = node.inputs[1] if len(node.inputs) == 2 else None
        if shape is None or node.inputs[0] is None or constant_array(shape) is not None:
            return None
        return True if _holds_minus_one(shape, types) else None

    def rewrite(self, plan: bool, ctx: Rewrite) -> None:
        node = ctx.node
        data, shape = node.inputs[0], node.inputs[1]
        assert data is not None and shape is not None
        op = ctx.before()
        if not int_attr(node, "allowzero", 0):  # a 0 copies the input's size there
            length = op.Shape(shape, _hint="length")
            pad = op.ConstantOfShape(length, value=ir.tensor(np.zeros(1, np.int64)), _hint="pad")
            sizes = op.Concat(op.Shape(data), pad, axis=0, _hint="sizes")
            firsts = op.Slice(sizes, op.int64s([0], hint="start"), length, _hint="copied")
            shape = op.Where(op.Equal(shape, op.int64s(0, hint="zero")), firsts, shape)
        wildcard = op.Equal(shape, op.int64s(-1, hint="minus_one"), _hint="wildcard")
        others = op.Where(wildcard, op.int64s(1, hint="one"), shape, _hint="others")
        known = op.ReduceProd(others, keepdims=0, _hint="known")
        fill = op.Div(op.Size(data, _hint="count"), known, _hint="fill")
        resolved = op.Where(wildcard, fill, shape, _hint="resolved")
        resolved.dtype = ir.DataType.INT64
        ctx.insert()
        node.replace_input_with(1, resolved)


def _holds_minus_one(shape: ir.Value, types: TypeOracle) -> bool:
    """Whether the shape holds a constant -1: it is one, or a ``Concat`` of one (through a
    ``Cast`` from int32)."""
    array = constant_array(shape)
    if array is not None:
        return bool((array == -1).any())
    node = shape.producer()
    if node is not None and is_onnx(node, "Cast") and node.inputs[0] is not None:
        source = types.type_of(node.inputs[0])
        if source is not None and source.dtype in _INTEGERS:  # the same values (tf2onnx's)
            return _holds_minus_one(node.inputs[0], types)
    if node is not None and is_onnx(node, "Concat"):
        return any(v is not None and _holds_minus_one(v, types) for v in node.inputs)
    return False
