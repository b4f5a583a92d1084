"""A ``Scan`` whose length is known only at run time, with scan outputs, as a ``Loop`` of that
many iterations (target ``iree``).

IREE 3.13.0 runs such a Scan but returns one row per scan output (``(1, 6, 10)`` for
``(4, 6, 10)``, no error); one of a static length it runs right (and the row unrolls it). A
``Loop`` whose ``M`` is the length, its condition true and passed through, with the Scan's
states, each scan input read by ``Gather`` at the iteration (from the end for a reverse one)
and the Scan's scan outputs computes the same; ``scan-outputs-as-run-time-states`` then writes
those into states of ``M`` rows, which IREE runs right at dynamic shapes. Scan outputs stacked
on another axis or in reverse stay a Scan (named by ``require-iree-loops``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site, rewire
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import graph_attr, int_attr, ints_attr
from seqlower.passes._shared import prepend
from seqlower.passes._types import TypeOracle

__all__ = ["ScansAsLoops"]


@dataclasses.dataclass
class _Plan:
    body: ir.Graph
    states: int
    #: Each scan input's axis (made non-negative) and direction (1: read from the end).
    axes: list[int]
    directions: list[int]


class ScansAsLoops(NodeLoweringPass[_Plan]):
    """Every ``Scan`` of a run-time length with scan outputs (on axis 0, forward) as a
    ``Loop`` of that count reading its scan inputs by ``Gather``."""

    op_type = "Scan"
    takes_all = False

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        body = graph_attr(node, "body")
        scanned = int_attr(node, "num_scan_inputs")
        if site.opset < 9 or body is None or scanned is None or scanned < 1:
            return None  # opset 8's batch axis: lower-scan-8's
        states = len(node.inputs) - scanned
        if states < 0 or len(body.outputs) <= states or len(body.inputs) != len(node.inputs):
            return None  # no scan output: IREE's states are right
        if any(ints_attr(node, "scan_output_axes") or []) or any(
            ints_attr(node, "scan_output_directions") or []
        ):
            return None
        axes = list(ints_attr(node, "scan_input_axes") or [0] * scanned)
        directions = list(ints_attr(node, "scan_input_directions") or [0] * scanned)
        for k, value in enumerate(node.inputs[states:]):
            shape = None if value is None else (value.shape or types.shape_of(value))
            if shape is None:
                return None
            axes[k] += len(shape) if axes[k] < 0 else 0
            if not 0 <= axes[k] < len(shape) or isinstance(shape[axes[k]], int):
                return None  # a static length: IREE runs it right, the row unrolls it
        return _Plan(body, states, axes, directions)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, body, states, names = ctx.node, plan.body, plan.states, ctx.names
        op = ctx.before()
        first = node.inputs[states]
        assert first is not None
        count = op.Reshape(
            op.dims(first, plan.axes[0], plan.axes[0] + 1, hint="length"),
            op.int64s([], hint="scalar"),
            _hint="count",
        )
        last = op.Sub(count, op.int64s(1, hint="one"), _hint="last")
        i = ir.Value(name=names.fresh(f"{ctx.base}_i"), type=ir.TensorType(ir.DataType.INT64))
        cond = ir.Value(name=names.fresh(f"{ctx.base}_cond"), type=ir.TensorType(ir.DataType.BOOL))
        i.shape, cond.shape = ir.Shape([]), ir.Shape([])
        inside = ctx.into(body, pool="own")
        passed = inside.Identity(cond, _hint="cond_through")
        passed.type, passed.shape = cond.type, cond.shape
        for k, value in enumerate(list(body.inputs[states:])):
            _read_at(inside, value, node.inputs[states + k], plan, k, i, last)
        prepend(body, list(inside.nodes))
        kept = list(body.inputs[:states])
        body.inputs.clear()
        body.inputs.extend([i, cond, *kept])
        outputs = list(body.outputs)
        body.outputs.clear()
        body.outputs.extend([passed, *outputs])
        finals = [ir.Value(name=names.fresh(f"{v.name or ctx.base}_loop")) for v in node.outputs]
        for new, old in zip(finals, node.outputs, strict=True):
            new.type, new.shape = old.type, old.shape
        del node.attributes["body"]
        runs = op.constant(np.array(True), hint="runs")
        op.Loop(
            count, runs, *node.inputs[:states], body=body, _outputs=finals,
            _name=node.name or names.fresh("Loop"), _doc_string=node.doc_string,
        )  # fmt: skip
        ctx.replace(finals, rename=True)


def _read_at(
    inside: Emitter,
    value: ir.Value,
    scanned: ir.Value | None,
    plan: _Plan,
    k: int,
    i: ir.Value,
    last: ir.Value,
) -> None:
    """The body's scan input ``value`` replaced by row ``i`` (``last - i`` for a reverse one)
    of ``scanned``, read from outside."""
    assert scanned is not None
    at = i if plan.directions[k] == 0 else inside.Sub(last, i, _hint="from_end")
    row = inside.Gather(scanned, at, axis=plan.axes[k], _hint="row")
    row.type, row.shape = value.type, value.shape
    rewire(value, row)
