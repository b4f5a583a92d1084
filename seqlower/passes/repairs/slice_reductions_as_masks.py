"""A float reduction of a ``Slice`` by run-time bounds as a reduction of the whole axis with
the rows outside the bounds masked to the reduction's identity (targets ``tvm``, ``onnx2tf``).

PyTorch's ``embedding_bag`` reduces each bag's rows, ``Slice(weight, start, end)`` with the
bounds read from ``offsets``. TVM 0.27 compiles no ``Slice`` whose bounds are tensor values
that a ``Where`` then reads ("CodeGenVM cannot emit this Relax operator directly": an ``If``
of each bag made a ``Where`` by ``if-as-where``), and a ``Range`` of them neither. Along
an axis of static length ``N`` the slice's reduction is the reduction of every row, the rows
outside ``[start, end)`` replaced by the identity (0 for a sum, 1 for a product, -inf for a
max, +inf for a min) through ``Where(start' <= arange(N) < end', x, identity)``, ``start'`` and
``end'`` clamped as ``Slice`` does (a negative bound plus ``N``, then into ``[0, N]``). A mean
is that sum divided by ``max(end' - start', 1)`` (onnxruntime's mean of an empty slice is 0).
LiteRT 2.1.2 (onnx2tf's ``.tflite``) reduces an empty axis to arbitrary numbers, which
``pad-empty-reductions`` pads away for all but a mean: masked (``slice-means-as-masks``), the
axis is never empty (``embedding_bag(mode='mean')`` on offsets out of order, as the check
draws).
Only a ``Slice`` along one axis, step 1, of a float tensor of static length there, whose
reduction takes that axis (its axes constant), is rewritten; every shape is then static.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import ONNX_DOMAINS, NodeLoweringPass, Rewrite, Site
from seqlower.passes._emit import Emitter, fits_constant
from seqlower.passes._ir import constant_array, int_attr, ints_attr, is_onnx, reduced_axes
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["SliceReductionsAsMasks"]

#: Each reduction's identity; a mean sums (its count divides after).
IDENTITY = {
    "ReduceSum": 0.0,
    "ReduceMean": 0.0,
    "ReduceProd": 1.0,
    "ReduceMax": -np.inf,
    "ReduceMin": np.inf,
}
_FLOATS: dict[ir.DataType | None, type[np.floating]] = {
    ir.DataType.FLOAT: np.float32,
    ir.DataType.DOUBLE: np.float64,
}


@dataclasses.dataclass
class _Plan:
    axis: int  # the sliced axis, non-negative
    length: int  # its static length
    rank: int
    dtype: type[np.floating]


class SliceReductionsAsMasks(NodeLoweringPass[_Plan]):
    """A float reduction over the one axis a ``Slice`` by run-time bounds took, as a masked
    reduction of the whole axis (module docstring)."""

    op_type = "ReduceSum"  # and the others of IDENTITY (matches)
    takes_all = False

    def __init__(self, *, reductions: Sequence[str] | None = None) -> None:
        """``reductions``: the reductions rewritten (default: every one of IDENTITY). The
        means alone for onnx2tf: its sums, products, maxima and minima are padded by
        ``pad-empty-reductions``; LiteRT 2.1.2 gives the masked max of an empty slice as the
        lowest finite float, even through a ``Where`` of -inf."""
        super().__init__()
        self.reductions = tuple(IDENTITY) if reductions is None else tuple(reductions)
        self.op_type = self.reductions[0] if len(self.reductions) == 1 else "ReduceSum"

    def matches(self, node: ir.Node) -> bool:
        return node.op_type in self.reductions and node.domain in ONNX_DOMAINS

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        data = node.inputs[0] if node.inputs else None
        cut = None if data is None else data.producer()
        if not is_onnx(cut, "Slice") or len(cut.inputs) < 3 or site.opset < 13:
            return None
        if node.op_type == "ReduceMean" and site.opset < 18:
            return None  # its axes an attribute, ReduceSum's an input: not one node's form
        x, starts, ends = cut.inputs[0], cut.inputs[1], cut.inputs[2]
        axes = constant_array(cut.inputs[3]) if len(cut.inputs) > 3 else np.zeros(1, np.int64)
        steps = cut.inputs[4] if len(cut.inputs) > 4 else None
        shape = None if x is None else types.static_shape(x)
        dtype = None if x is None else _FLOATS.get(element_dtype(types.type_of(x)))
        if shape is None or dtype is None or axes is None or axes.size != 1:
            return None
        if steps is not None and (constant_array(steps) is None or constant_array(steps) != 1):
            return None
        given = len(cut.inputs) > 3 and cut.inputs[3] is not None  # else one per bound
        if not given and any(b is None or types.static_shape(b) != (1,) for b in (starts, ends)):
            return None
        if constant_array(starts) is not None and constant_array(ends) is not None:
            return None  # a constant Slice: the converter's
        axis = int(axes.reshape(-1)[0]) % len(shape)
        if axis not in (reduced_axes(node, len(shape)) or []):
            return None  # not reduced, or the axes not known when lowering
        if int_attr(node, "keepdims", 1) is None:
            return None  # a function's reference: not known
        return _Plan(axis, shape[axis], len(shape), dtype)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node = ctx.node
        cut = node.inputs[0].producer()  # type: ignore[union-attr]
        assert cut is not None
        x, starts, ends = cut.inputs[0], cut.inputs[1], cut.inputs[2]
        op = ctx.before()
        first, last, inside = _inside(op, starts, ends, plan)  # type: ignore[arg-type]
        identity = op.constant(np.array(IDENTITY[node.op_type], dtype=plan.dtype), hint="identity")
        masked = op.Where(inside, x, identity, _hint="masked")
        if node.op_type in ("ReduceSum", "ReduceProd"):
            node.replace_input_with(0, masked)
            ctx.insert()
            return
        span = op.Sub(last, first, _hint="span")
        dtype = ir.DataType.from_numpy(np.dtype(plan.dtype))
        result = _finished(op, node, masked, identity, span, dtype)
        result.type, result.shape = node.outputs[0].type, node.outputs[0].shape
        ctx.replace([result])


def _finished(
    op: Emitter,
    node: ir.Node,
    masked: ir.Value,
    identity: ir.Value,
    span: ir.Value,
    dtype: ir.DataType,
) -> ir.Value:
    """A mean: the masked sum divided by the count, at least 1 (onnxruntime's mean of an empty
    slice is 0). A max or min: the masked one, or its identity (+-inf) where the slice is empty
    (TVM 0.27 and LiteRT 2.1.2 start a max at the lowest finite float, not -inf)."""
    attributes: dict[str, Any] = {"keepdims": int_attr(node, "keepdims", 1) or 0}
    if "noop_with_empty_axes" in node.attributes:
        attributes["noop_with_empty_axes"] = int_attr(node, "noop_with_empty_axes", 0) or 0
    if ints_attr(node, "axes") is not None:
        attributes["axes"] = ints_attr(node, "axes")
    mean = node.op_type == "ReduceMean"  # opset 18 (plan): its axes an input, as ReduceSum's
    reduce = op.ReduceSum if mean else getattr(op, node.op_type)
    reduced = reduce(masked, *node.inputs[1:], _hint="reduced", **attributes)
    scalar = op.int64s([], hint="scalar")
    if mean:
        count = op.Max(span, op.int64s([1], hint="one"), _hint="count")
        size = op.Cast(count, to=dtype, _hint="size")
        return op.Div(reduced, op.Reshape(size, scalar, _hint="size_scalar"), _hint="mean")
    some = op.Greater(span, op.int64s([0], hint="none"), _hint="some")
    return op.Where(op.Reshape(some, scalar, _hint="some_scalar"), reduced, identity)


def _inside(
    op: Emitter, starts: ir.Value, ends: ir.Value, plan: _Plan
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """The bounds clamped as ``Slice`` clamps them, and whether each row along the axis is
    within them (shaped to broadcast against the data)."""
    length = op.int64s([plan.length], hint="length")
    zero = op.int64s([0], hint="zero")

    def clamped(bound: ir.Value, hint: str) -> ir.Value:
        negative = op.Less(bound, zero, _hint=f"{hint}_negative")
        back = op.Where(negative, op.Add(bound, length, _hint=f"{hint}_end"), bound)
        return op.Min(op.Max(back, zero, _hint=f"{hint}_low"), length, _hint=hint)

    first, last = clamped(starts, "first"), clamped(ends, "last")
    later = list(range(1, plan.rank - plan.axis))  # axes after the sliced one, to broadcast
    if fits_constant(plan.length):
        rows = np.arange(plan.length, dtype=np.int64).reshape([-1] + [1] * len(later))
        index = op.constant(rows, hint="rows")
    else:  # a long static axis: the row numbers computed at run time (a Range of a constant)
        count = op.arange(op.int64s(plan.length, hint="length_scalar"), hint="rows")
        index = op.unsqueeze(count, later, hint="rows") if later else count
    inside = op.And(
        op.GreaterOrEqual(index, first, _hint="from_first"),
        op.Less(index, last, _hint="before_last"),
        _hint="inside",
    )
    return first, last, inside
