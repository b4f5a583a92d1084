"""Pad a float reduction's input by one element of its identity (target ``onnx2tf``).

LiteRT 2.1.2 (onnx2tf 2.6.9's ``.tflite``) reduces an empty axis to arbitrary numbers, where
ONNX (and onnxruntime) gives the reduction's identity: ``ReduceSum`` 0, ``ReduceMax`` -inf.
An axis is empty when a ``Slice`` with run-time bounds selects nothing, as PyTorch's
``embedding_bag`` does for an empty bag (its ``If`` guards that bag, yet inputs the check
draws reach it with bounds out of order). Padding each reduced axis at its end with one
element of the identity (0 for a sum, 1 for a product, -inf for a max, +inf for a min) gives
the same result on every input, and never an empty axis. Only reductions of a float tensor of
known rank over constant axes whose lengths are not known to be positive are padded.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import ONNX_DOMAINS, NodeLoweringPass, Rewrite, Site
from seqlower.passes._ir import reduced_axes
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["PadEmptyReductions"]

#: Each reduction's identity: what one more element of it leaves unchanged.
IDENTITY = {"ReduceSum": 0.0, "ReduceProd": 1.0, "ReduceMax": -np.inf, "ReduceMin": np.inf}
_FLOATS: dict[ir.DataType | None, type[np.floating]] = {
    ir.DataType.FLOAT: np.float32,
    ir.DataType.DOUBLE: np.float64,
}


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    opset: int
    axes: list[int]  # the reduced axes, non-negative
    rank: int
    dtype: type[np.floating]


class PadEmptyReductions(NodeLoweringPass[_Plan]):
    """Every float ``ReduceSum``/``ReduceProd``/``ReduceMax``/``ReduceMin`` over an axis that
    may be empty, its input padded by one identity element on each reduced axis."""

    op_type = "ReduceSum"  # and the others of IDENTITY (matches)
    takes_all = False
    repairs = True

    def matches(self, node: ir.Node) -> bool:
        return node.op_type in IDENTITY and node.domain in ONNX_DOMAINS

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        data = node.inputs[0] if node.inputs else None
        if data is None or site.opset < 11:
            return None
        dtype = _FLOATS.get(element_dtype(types.type_of(data)))
        shape = data.shape or types.shape_of(data)
        if dtype is None or shape is None:
            return None
        rank = shape.rank()
        axes = reduced_axes(node, rank)
        if axes is None:
            return None  # axes not known when lowering: which to pad is not known
        if all(isinstance(shape[a], int) and shape[a] > 0 for a in axes):  # type: ignore[operator]
            return None  # never empty
        return _Plan(node, site.opset, axes, rank, dtype)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node = ctx.node
        data = node.inputs[0]
        assert data is not None
        op = ctx.before()
        pads = np.zeros(2 * plan.rank, dtype=np.int64)
        for axis in plan.axes:
            pads[plan.rank + axis] = 1  # one element at the end
        value = np.array(IDENTITY[node.op_type], dtype=plan.dtype)
        padded = op.Pad(
            data,
            op.constant(pads, hint="pads"),
            op.constant(value, hint="identity"),
            _hint="padded",
        )
        padded.type = data.type
        ctx.insert()
        node.replace_input_with(0, padded)
