"""A float ``ReduceMean`` over axes that may be empty gives 0 there (target ``tract``).

ONNX leaves the mean of an empty set undefined; onnxruntime, OpenVINO and PyTorch give 0,
tract 0.23.9 gives NaN. PyTorch's ``embedding_bag(mode="mean")`` relies on it: an empty bag's
row is 0 in PyTorch and in onnxruntime, NaN on tract. The mean is kept and chosen by
``Where(Size(x) / Max(Size(mean), 1) > 0, mean, 0)``: the count of reduced elements is 0
exactly when the reduced axes are empty (with an empty result the choice does not matter), so
every other mean is the node's own. Only means whose reduced axes are not all known to be
positive are rewritten.

``empty-extremes-as-infinite`` (targets ``tract`` and ``openvino``) does the same for a float
``ReduceMax``/``ReduceMin``, whose value on an empty set ONNX says is -inf/+inf (onnxruntime's):
tract 0.23.9 and OpenVINO 2026.4.1 give -/+FLT_MAX, so PyTorch's ``embedding_bag(mode="max")``
of a bag whose offsets decrease (an empty slice) failed the check on both.

In a loop's body the count is read from the data instead, not from ``Size``:
``ReduceMax(Cast(Or(IsNaN(x), Not(IsNaN(x)))))`` over the same axes is 1 where the reduced
axes hold an element and at most 0 where they are empty (-inf, or -FLT_MAX on these runtimes).
tract 0.23.9 types a ``Scan`` body reading the ``Size`` of a state wrongly with declared facts
('inconsistent fact: body input 0 is unk,unk,4 ... (1+4*unk*unk>=0)'): TensorFlow's
``tf.while_loop`` halving until ``max(abs(v))`` is small (``tf_while_maximum_iterations`` of
``benchmarks/families/new_shapes.py``) failed to load there.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import ONNX_DOMAINS, reduced_axes
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["EmptyMeansAsZero"]

_FLOATS: dict[ir.DataType | None, type[np.floating]] = {
    ir.DataType.FLOAT: np.float32,
    ir.DataType.DOUBLE: np.float64,
    ir.DataType.FLOAT16: np.float16,
}


#: What each reduction gives on an empty set, where the runtime gives otherwise; and the hints
#: of the values its rewrite makes (the runtime's result, the empty one, the chosen one).
_EMPTY = {"ReduceMean": 0.0, "ReduceMax": -np.inf, "ReduceMin": np.inf}
_HINTS = {
    "ReduceMean": ("mean_or_nan", "empty_mean", "mean"),
    "ReduceMax": ("max_or_least", "empty_max", "max"),
    "ReduceMin": ("min_or_most", "empty_min", "min"),
}


@dataclasses.dataclass
class _Plan:
    dtype: type[np.floating]


class EmptyMeansAsZero(NodeLoweringPass[_Plan]):
    """Every float ``ReduceMean`` over an axis that may be empty, its result 0 where it is."""

    op_type = "ReduceMean"
    takes_all = False
    repairs = True
    takes_handed_walk = True  # ``call`` only notes the model's own graph

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self._top = model.graph
        return super().call(model)

    def __init__(self, *, extremes: bool = False) -> None:
        """``extremes``: instead, every float ``ReduceMax``/``ReduceMin`` over an axis that may
        be empty, -inf/+inf there (tract and OpenVINO give -/+FLT_MAX)."""
        super().__init__()
        self.reductions = ("ReduceMax", "ReduceMin") if extremes else ("ReduceMean",)
        self.op_type = self.reductions[0]

    def matches(self, node: ir.Node) -> bool:
        return node.op_type in self.reductions and node.domain in ONNX_DOMAINS

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        data = node.inputs[0] if node.inputs else None
        if data is None or not node.outputs or site.opset < 9:
            return None
        dtype = _FLOATS.get(element_dtype(types.type_of(data)))
        shape = data.shape or types.shape_of(data)
        if dtype is None:
            return None
        if shape is None:
            return _Plan(dtype)
        rank = shape.rank()
        axes = reduced_axes(node, rank)
        if axes == []:
            return None  # no reduction (noop_with_empty_axes, or of a scalar)
        # axes not known when lowering: rewritten if any axis may be empty (exact whatever
        # they are: the count is the run-time one)
        reduced = range(rank) if axes is None else axes
        if all(isinstance(shape[a], int) and shape[a] > 0 for a in reduced):  # type: ignore[operator]
            return None  # never empty
        return _Plan(dtype)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node = ctx.node
        data = node.inputs[0]
        assert data is not None
        op = ctx.before()
        hints = _HINTS[node.op_type]
        mean = op.build(node.op_type, node.inputs, node.attributes, hint=hints[0])
        if node.graph is getattr(self, "_top", None) or not isinstance(node.graph, ir.Graph):
            one = op.int64s(1, hint="one")
            count = op.Div(
                op.Size(data, _hint="elements"),
                op.Max(op.Size(mean, _hint="means"), one, _hint="means_or_one"),
                _hint="count",
            )
            some = op.Greater(count, op.int64s(0, hint="zero"), _hint="not_empty")
        else:  # in a body: from the data (module docstring)
            some = _present(op, node, data)
        empty = op.constant(np.array(_EMPTY[node.op_type], dtype=plan.dtype), hint=hints[1])
        chosen = op.Where(some, mean, empty, _hint=hints[2])
        (old,) = node.outputs
        mean.type = chosen.type = old.type
        mean.shape = chosen.shape = old.shape
        ctx.replace([chosen])


#: The attributes the reduction of ones takes from the node's.
_SAME = ("keepdims", "axes", "noop_with_empty_axes")


def _present(op: Emitter, node: ir.Node, data: ir.Value) -> ir.Value:
    """Where the reduced axes of ``data`` hold an element: the node's reduction (its axes and
    keepdims) of ones, above 0."""
    nan = op.IsNaN(data, _hint="nan")
    every = op.Or(nan, op.Not(nan, _hint="number"), _hint="every")
    ones = op.Cast(every, to=ir.DataType.FLOAT, _hint="ones")
    attributes = {k: v for k, v in node.attributes.items() if k in _SAME}
    inputs = [ones, *node.inputs[1:]]  # the axes input, from opset 18
    found = op.build("ReduceMax", inputs, attributes, hint="elements")
    return op.Greater(found, op.constant(np.array(0.0, np.float32), hint="zero"), _hint="not_empty")
