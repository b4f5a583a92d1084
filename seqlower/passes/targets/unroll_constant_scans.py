"""A ``Scan`` of a trip count fixed at lowering time, unrolled (converters with neither ``Loop``
nor ``Scan``: onnx2torch, TVM).

tf2onnx writes the same ``while_loop`` for a fixed-length input as for any other, but its limit
is then a constant: the ``Range(0, N)`` that ``loop-to-scan`` scans over depends only on
constants. Such a ``Scan`` (forward, every scan axis 0) of ``1 <= N <= 256`` iterations becomes
N copies of its body, each reading row ``k`` of every scan input (``Gather(x, k, axis=0)``) and
the states the copy before it computed; the scan outputs are the rows joined by ``Concat`` of
their ``Unsqueeze``, the final states the last copy's. N is read from the scan input's static
shape or, when it is computed, by evaluating the constant expression that computes it (at most
:data:`_EXPRESSION_LIMIT` nodes, with onnx's reference evaluator). A Scan of zero iterations is
left (its empty scan outputs have a shape no copy computes).
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._ir import int_attr, ints_attr
from seqlower.passes._shared import initializers_as_constants, inline_copy
from seqlower.passes._trip_count import UNROLL_LIMIT, evaluate
from seqlower.passes._types import TypeOracle

__all__ = ["UnrollConstantScans"]


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    opset: int
    trips: int
    states: int


class UnrollConstantScans(NodeLoweringPass[_Plan]):
    """Every forward ``Scan`` over axis 0 whose trip count is a constant in [1, 256], as copies
    of its body."""

    op_type = "Scan"
    takes_all = False

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        if site.opset < 9 or "body" not in node.attributes:
            return None  # Scan-8 scans a batch with sequence lengths: another op
        body = node.attributes["body"].as_graph()
        scanned = int_attr(node, "num_scan_inputs")
        if body is None or scanned is None or not 0 < scanned <= len(node.inputs):
            return None
        for name in (
            "scan_input_axes",
            "scan_input_directions",
            "scan_output_axes",
            "scan_output_directions",
        ):
            values = ints_attr(node, name)
            if name in node.attributes and (values is None or any(values)):
                return None
        states = len(node.inputs) - scanned
        if len(body.inputs) != len(node.inputs) or len(body.outputs) != len(node.outputs):
            return None
        if any(value is None for value in node.inputs):
            return None
        first = node.inputs[states]
        assert first is not None
        trips = _length(first, site.opset)
        if trips is None or not 1 <= trips <= UNROLL_LIMIT:
            return None
        return _Plan(node, body, site.opset, trips, states)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, base = ctx.node, ctx.base
        inputs: list[ir.Value] = list(node.inputs)  # type: ignore[arg-type]
        # The body's own initializers (tf2onnx keeps constants, some exporters weights, there):
        # one Constant each in the enclosing graph, read by every copy, not one per copy.
        weights = ctx.into(ctx.graph, pool=None, prefix=f"{base}_weights")
        inserted = list(initializers_as_constants(plan.body, weights, ctx.names))
        carried, rows = self._copies(plan, ctx, inputs, inserted)
        op = ctx.before()
        stacked = [
            op.Concat(
                *(op.unsqueeze(row, [0], hint=f"row_{j}") for row in column),
                axis=0,
                _hint=f"stacked_{j}",
            )
            for j, column in enumerate(rows)
        ]
        ours = {id(value) for n in [*inserted, *op.nodes] for value in n.outputs}
        finals = []
        for old, new in zip(node.outputs, [*carried, *stacked], strict=True):
            if id(new) not in ours:  # a state the body passes through: a value from outside
                new = op.Identity(new, _hint="state")
            new.type, new.shape = old.type or new.type, old.shape or new.shape
            finals.append(new)
        # The Scan's output names (the graph's, maybe) stay.
        ctx.replace(finals, rename=True, nodes=inserted)

    def _copies(
        self, plan: _Plan, ctx: Rewrite, inputs: list[ir.Value], inserted: list[ir.Node]
    ) -> tuple[list[ir.Value], list[list[ir.Value]]]:
        """One copy of the body per step, reading row k of each scanned input (their nodes
        added to ``inserted``); the final states and each scan output's rows."""
        states = plan.states
        carried = inputs[:states]
        rows: list[list[ir.Value]] = [[] for _ in ctx.node.outputs[states:]]
        for k in range(plan.trips):
            op = ctx.into(ctx.graph, prefix=f"{ctx.base}_{k}")
            index = op.int64s(k, hint="step")
            elements = [
                op.Gather(x, index, axis=0, _hint=f"row_{j}") for j, x in enumerate(inputs[states:])
            ]
            # Copies are named "step<k>_<original>": the exporter's names are long already.
            copied, results = inline_copy(ctx, plan.body, [*carried, *elements], f"step{k}")
            inserted += [*op.nodes, *copied]
            carried = results[:states]
            for j, result in enumerate(results[states:]):
                rows[j].append(result)
        return carried, rows


def _length(value: ir.Value, opset: int) -> int | None:
    """The length of ``value``'s first axis, if fixed: declared, or computed from constants."""
    shape = value.shape
    if shape is not None and len(shape) > 0 and isinstance(shape[0], int):
        return shape[0]
    array = evaluate(value, opset)
    if array is None or array.ndim == 0:
        return None
    return int(array.shape[0])
