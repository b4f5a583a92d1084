"""Write ``Split`` with a sizes input as one ``Slice`` per piece (target ``onnx2torch``).

onnx2torch 1.5.15 converts ``Split`` only up to opset 13 (``no converter: Split-18``), and
models converted to its opset 18 — PyTorch's ``split``/``chunk`` exports, and the pieces the
sequence-free lowering of ``SplitToSequence`` writes — hold opset-18 ``Split``s. With the sizes
given as an input, piece k is ``Slice(x, start_k, start_k + size_k, [axis])``: constant bounds
for constant sizes, else the ``CumSum`` of the sizes (ends) minus the sizes (starts). A
``Split`` of opset 18 on without sizes (``num_outputs`` pieces of ``ceil(dim / n)``, the last
the rest) takes the sizes that gives where the split axis is static (``--overwrite-input-shape``
makes it so): onnx's version converter has no adapter for it below 18, and onnx2torch converts
as of 17. Other ``Split``s without sizes are left.

``split-by-shapes-as-slices`` (target ``tract``) takes only the ``Split``s whose sizes are run-time
values, their bounds added up one piece at a time: with declared facts tract 0.23.9 types no
``Split`` into sizes computed from a shape (PyTorch's ``split(x, [1, n - 1])``: 'Undetermined
symbol in expression: n+-1') nor a ``CumSum`` of them ('TDim is not a number'), and takes the
``Slice``s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import constant_array
from seqlower.passes._types import TypeOracle

__all__ = ["SplitAsSlices"]


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    opset: int
    axis: int
    sizes: np.ndarray | None  # constant sizes, else computed at run time


class SplitAsSlices(NodeLoweringPass[_Plan]):
    """Every ``Split`` with a sizes input (opset 13 on) as ``Slice``s, one per output."""

    op_type = "Split"
    takes_all = False

    def __init__(self, *, run_time_sizes_only: bool = False) -> None:
        """``run_time_sizes_only``: only the Splits whose sizes are run-time values, their
        bounds added up piece by piece (tract types no Split into sizes from a shape)."""
        super().__init__()
        self.run_time_sizes_only = run_time_sizes_only

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        if site.opset < 13 or node.inputs[0] is None:
            return None
        if self.run_time_sizes_only and (len(node.inputs) < 2 or node.inputs[1] is None):
            return None
        attr = node.attributes.get("axis")
        if attr is not None and (attr.is_ref() or attr.type != ir.AttributeType.INT):
            return None
        axis = 0 if attr is None else attr.as_int()
        if len(node.inputs) < 2 or node.inputs[1] is None:
            equal = _equal_sizes(node, axis, types) if site.opset >= 18 else None
            return None if equal is None else _Plan(node, site.opset, axis, equal)
        sizes = constant_array(node.inputs[1])
        if sizes is not None and sizes.size != len(node.outputs):
            return None  # invalid as written: leave it to fail where it did
        if sizes is not None and self.run_time_sizes_only:
            return None
        return _Plan(node, site.opset, axis, None if sizes is None else sizes.astype(np.int64))

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, names = ctx.node, ctx.names
        x = node.inputs[0]
        assert x is not None
        op = ctx.before()
        axes = op.int64s([plan.axis], hint="axis")
        bounds = self._bounds(plan, op, node)
        new_outputs = []
        for k, old in enumerate(node.outputs):
            begin, end = bounds(k)
            # The piece keeps the output's name, type and shape (it may be a graph output).
            piece = ir.Value(
                name=old.name or names.fresh(f"{node.name or 'Split'}_piece_{k}"),
                type=old.type,
                shape=old.shape,
            )
            new_outputs.append(op.Slice(x, begin, end, axes, _output=piece))
        ctx.replace(new_outputs)

    def _bounds(
        self, plan: _Plan, op: Emitter, node: ir.Node
    ) -> Callable[[int], tuple[ir.Value, ir.Value]]:
        """Piece k's start and end: constants for constant sizes; else from the run-time sizes,
        by ``CumSum`` or (``run_time_sizes_only``) added up one piece at a time."""
        if plan.sizes is not None:
            total = [int(t) for t in np.cumsum(plan.sizes)]
            return lambda k: (
                op.int64s([total[k] - int(plan.sizes[k])], hint=f"start_{k}"),  # type: ignore[index]
                op.int64s([total[k]], hint=f"end_{k}"),
            )
        sizes = node.inputs[1]
        assert sizes is not None
        if self.run_time_sizes_only:
            sizes_64 = op.Cast(sizes, to=ir.DataType.INT64.value, _hint="sizes")
            added = [op.int64s([0], hint="start_0")]
            for k in range(len(node.outputs)):
                piece = op.Gather(sizes_64, op.int64s([k], hint=f"piece_{k}"), axis=0)
                added.append(op.Add(added[-1], piece, _hint=f"end_{k}"))
            return lambda k: (added[k], added[k + 1])
        zero = op.int64s(0, hint="zero")
        sizes_64 = op.Cast(sizes, to=ir.DataType.INT64.value, _hint="sizes")
        ends = op.CumSum(sizes_64, zero, _hint="ends")
        # ends - sizes, not CumSum's exclusive=1 (onnx2torch 1.5.15 ignores it: DIFF).
        starts = op.Sub(ends, sizes_64, _hint="starts")

        def gathered(k: int) -> tuple[ir.Value, ir.Value]:
            index = op.int64s([k], hint=f"piece_{k}")
            begin = op.Gather(starts, index, axis=0, _hint=f"start_{k}")
            return begin, op.Gather(ends, index, axis=0, _hint=f"end_{k}")

        return gathered


def _equal_sizes(node: ir.Node, axis: int, types: TypeOracle) -> np.ndarray | None:
    """The piece sizes of an opset-18 ``Split`` into ``num_outputs`` along a static axis."""
    attr = node.attributes.get("num_outputs")
    if attr is None or attr.is_ref() or attr.type != ir.AttributeType.INT:
        return None
    count = attr.as_int()
    x = node.inputs[0]
    shape = None if x is None else types.shape_of(x)
    if (
        count != len(node.outputs)
        or count < 1
        or shape is None
        or not -len(shape) <= axis < len(shape)
    ):
        return None
    dim = shape[axis]
    if not isinstance(dim, int):
        return None
    chunk = -(-dim // count)
    sizes = [chunk] * (count - 1) + [dim - chunk * (count - 1)]
    return None if sizes[-1] < 0 else np.array(sizes, dtype=np.int64)
