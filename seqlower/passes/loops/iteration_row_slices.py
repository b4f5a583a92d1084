"""A ``Loop`` body's ``Slice(x, i, i+1)`` at the iteration number as one row, for tract.

ONNX's ``test_loop11`` adds ``x[i:i+1]`` to a state on iteration ``i`` of a ``Loop`` whose trip
count is a graph input. The slice is one row while ``i < len(x)`` and empty after, so once the
``Loop`` is a ``Scan`` tract 0.23.9 cannot give the state one size ('Output mismatch after
rewiring expansion ... expected 1 got range_0', ``tests/passes/test_run_time_slices.py``). As
``Unsqueeze(Gather(x, i, axis), axis)`` the row has a static size; the ``Gather`` fails when
``i >= len(x)``, exactly where the slice would be empty (``i`` is never negative).

That failure is exact only where the original fails too, so the rewrite is done only when it
is proven: ``len(x)`` is static and at least 1 (iteration 0's slice is one row), and the slice
reaches a scan output of the Loop through ``Identity`` and broadcasting ops whose other
operands are at least 1 long on that axis at iteration 0 (the Loop's initial state, outer or
static values). Then the scan output is at least 1 long there on iteration 0 and empty (or
the broadcast fails) on the first iteration whose slice is empty, and ONNX's ``Loop`` fails on
scan outputs whose shape changes across iterations (onnxruntime: 'Inconsistent shape in loop
output'). Other slices are left to ``run-time-slices-as-gathers``.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._ir import (
    constant_array,
    constant_int,
    graph_attr,
    ints_attr,
    is_onnx,
    model_nodes,
)
from seqlower.passes._types import TypeOracle

__all__ = ["IterationRowSlices"]

#: Broadcasting ops: an operand empty along an axis makes the result empty there or fails.
_BROADCASTING = frozenset(
    {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Mod", "Where", "Equal", "Less",
     "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "PRelu", "BitShift"}
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class _Plan:
    axis: int
    shape: tuple[int, ...]  # the row's (x's, with 1 at axis; -1 unknown)
    type: ir.TypeProtocol | None


class IterationRowSlices(NodeLoweringPass[_Plan]):
    """``Slice(x, i, i+1)`` at a Loop's iteration number -> ``Unsqueeze(Gather(x, i))``, where
    an empty slice is proven to fail the Loop (module docstring)."""

    op_type = "Slice"
    takes_all = False

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self._loops: dict[int, ir.Node] = {}
        for node in model_nodes(model):
            body = graph_attr(node, "body") if is_onnx(node, "Loop") else None
            if body is not None:
                self._loops[id(body)] = node
        return super().call(model)

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        loop = self._loops.get(id(node.graph))
        if loop is None or site.opset < 10 or not 3 <= len(node.inputs) <= 5:
            return None
        body = node.graph
        assert body is not None
        x, starts, ends = node.inputs[0], node.inputs[1], node.inputs[2]
        iteration = body.inputs[0] if body.inputs else None
        if x is None or iteration is None or _element(starts) is not iteration:
            return None
        if not _successor(ends, iteration):
            return None
        shape = x.shape or types.shape_of(x)
        axes = constant_array(node.inputs[3]) if len(node.inputs) > 3 else None
        steps = constant_array(node.inputs[4]) if len(node.inputs) > 4 else None
        if shape is None or (len(node.inputs) > 3 and (axes is None or axes.size != 1)):
            return None
        if len(node.inputs) > 4 and (steps is None or steps.size != 1 or int(steps.flat[0]) != 1):
            return None
        rank = len(shape)
        axis = 0 if axes is None else int(axes.flat[0])
        axis = axis + rank if axis < 0 else axis
        dims = [d if isinstance(d, int) else -1 for d in shape]
        if not 0 <= axis < rank or dims[axis] < 1:
            return None
        if not _fails_when_empty(node.outputs[0], axis - rank, loop, types):
            return None
        row = tuple(1 if k == axis else d for k, d in enumerate(dims))
        return _Plan(axis, row, node.outputs[0].type or types.type_of(x))

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        op = ctx.before()
        x, iteration = ctx.node.inputs[0], ctx.graph.inputs[0]
        assert x is not None
        row = op.Gather(x, iteration, axis=plan.axis, _hint="row")
        out = op.unsqueeze(row, [plan.axis], hint="rows")
        out.type = plan.type
        out.shape = ir.Shape([None if d < 0 else d for d in plan.shape])
        ctx.replace([out])


def _element(value: ir.Value | None) -> ir.Value | None:
    """The scalar a 1-element ``value`` holds when made by ``Unsqueeze(s, [0])`` or
    ``Reshape(s, [1])`` of a scalar ``s`` (through ``Identity``)."""
    while value is not None and is_onnx(value.producer(), "Identity"):
        value = value.producer().inputs[0]  # type: ignore[union-attr]
    node = None if value is None else value.producer()
    if node is None or not node.inputs or node.inputs[0] is None:
        return None
    scalar = node.inputs[0]
    if scalar.shape is not None and scalar.shape.rank() != 0:
        return None
    if is_onnx(node, "Unsqueeze"):
        axes = ints_attr(node, "axes")
        if axes is None and len(node.inputs) > 1:
            array = constant_array(node.inputs[1])
            axes = None if array is None else [int(a) for a in array.reshape(-1)]
        return scalar if axes in ([0], [-1]) else None
    if is_onnx(node, "Reshape") and len(node.inputs) > 1:
        target = constant_array(node.inputs[1])
        return scalar if target is not None and target.reshape(-1).tolist() == [1] else None
    return None


def _successor(value: ir.Value | None, iteration: ir.Value) -> bool:
    """Whether the 1-element ``value`` is ``iteration + 1``: ``[i + 1]`` or ``[i] + 1``."""
    for candidate, of in ((_element(value), iteration), (value, None)):
        node = None if candidate is None else candidate.producer()
        if not is_onnx(node, "Add") or len(node.inputs) != 2:
            continue
        a, b = node.inputs
        for term, one in ((a, b), (b, a)):
            start = term if of is not None else _element(term)
            if start is iteration and constant_int(one) == 1:
                return True
    return False


def _fails_when_empty(value: ir.Value, axis: int, loop: ir.Node, types: TypeOracle) -> bool:
    """Whether ``value`` (one row along ``axis``, counted from the end, on iteration 0) reaches
    a scan output of ``loop`` keeping that axis at least 1 long on iteration 0 and empty or
    failing when it is empty."""
    body = value.graph
    if body is None:
        return False
    carried = len(loop.inputs) - 2
    if any(value is out for out in body.outputs[1 + carried :]):
        return True
    for use in value.uses():
        node = use.node
        if node.graph is not body or len(node.outputs) != 1:
            continue
        if is_onnx(node, "Identity"):
            if _fails_when_empty(node.outputs[0], axis, loop, types):
                return True
            continue
        if not is_onnx(node, *_BROADCASTING):
            continue
        others = [v for k, v in enumerate(node.inputs) if k != use.idx]
        if all(_first_dim(v, axis, loop, types) for v in others) and _fails_when_empty(
            node.outputs[0], axis, loop, types
        ):
            return True
    return False


def _first_dim(value: ir.Value | None, axis: int, loop: ir.Node, types: TypeOracle) -> bool:
    """Whether ``value`` is at least 1 long along ``axis`` (from the end; a missing axis
    broadcasts as 1) on iteration 0: a state input of ``loop`` by its initial value, else a
    value whose static shape says so (read from outside, a constant)."""
    if value is None:
        return False
    body = graph_attr(loop, "body")
    if body is not None and value in body.inputs[2:]:
        value = loop.inputs[list(body.inputs).index(value)]
    elif value.graph is body and value.producer() is not None and constant_array(value) is None:
        return False  # computed per iteration
    if value is None:
        return False
    shape = value.shape or types.shape_of(value)
    if shape is None:
        return False
    if -axis > len(shape):
        return True
    dim = shape[axis]
    return isinstance(dim, int) and dim >= 1
