"""A ``Loop`` that runs exactly ``M`` times, its scan outputs as states of ``M`` rows it writes
row by row (target ``iree``).

The Loops that run exactly ``M`` times
(a constant true initial condition the body passes through: what ``explicit-loop-counts``
writes where the count is known when the loop starts), whatever ``M``: each scan output becomes
a state of ``M`` zero rows (``Expand``, ``M`` read at run time) that iteration ``i`` writes row
``i`` of by ``ScatterND``, and is the scan output as it stands after the loop. torch-mlir converts
no Loop with scan outputs (llvm/torch-mlir#3988) but does one of states, so IREE then runs the
loop at dynamic shapes.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._induction import passes_through
from seqlower.passes._ir import constant_array, graph_attr, is_onnx, is_static
from seqlower.passes._shared import restate_loop_body
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["ScanOutputsAsRunTimeStates"]


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    opset: int
    rows: list[tuple[tuple[int, ...], np.dtype]]  # each scan output's row shape and type


class ScanOutputsAsRunTimeStates(NodeLoweringPass[_Plan]):
    """Every ``Loop`` that runs exactly ``M`` times with scan outputs of static rows, its scan
    outputs written by ``ScatterND`` into states of ``M`` rows preallocated at run time."""

    op_type = "Loop"
    takes_all = False
    repairs = True

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        body = graph_attr(node, "body")
        if body is None or len(node.inputs) < 2 or node.inputs[0] is None or site.opset < 11:
            return None  # no ScatterND before opset 11
        states = len(node.inputs) - 2
        scanned = body.outputs[1 + states :]
        if not scanned or len(body.outputs) != len(node.outputs) + 1:
            return None
        start = node.inputs[1]
        initial = None if start is None else constant_array(start)
        if start is not None and (initial is None or initial.size != 1 or not initial.all()):
            return None
        if not passes_through(body.outputs[0], body.inputs[1]):
            return None  # it may stop before M: its rows would be M
        rows = []
        for value in scanned:
            known = _state_read(node, body, value) or value
            shape = known.shape if known.shape is not None else types.shape_of(known)
            dtype = element_dtype(types.type_of(known))
            if dtype is None or not is_static(shape):
                return None
            rows.append((tuple(int(d) for d in shape), dtype.numpy()))  # type: ignore[arg-type]
        return _Plan(node, body, site.opset, rows)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, body, names = ctx.node, plan.body, ctx.names
        states = len(node.inputs) - 2
        op, inside = ctx.before(), ctx.into(body, pool="own")
        # M as a count of rows, at least 0 (a Loop of a negative M runs none); by Where, not
        # Max, which takes no int64 before opset 12.
        m = op.Reshape(node.inputs[0], op.int64s([1], hint="one_d"), _hint="count")
        none = op.int64s([0], hint="none")
        count = op.Where(op.Less(m, none, _hint="negative"), none, m, _hint="count")
        where = inside.Reshape(body.inputs[0], inside.int64s([1, 1], hint="at"), _hint="at")
        buffers, ins, outs = [], [], []
        for (shape, dtype), row in zip(plan.rows, body.outputs[1 + states :], strict=True):
            dims = op.Concat(count, op.int64s(list(shape), hint="row_shape"), axis=0, _hint="rows")
            buffers.append(op.Expand(op.constant(np.zeros((), dtype), hint="zero"), dims))
            # Typed from the plan: a body's untyped row (tf2onnx's) would leave the state
            # untyped, which IREE's importer cannot convert ('onnx.Loop not converted').
            typed = ir.TensorType(ir.DataType.from_numpy(dtype))
            held = ir.Value(name=names.fresh(f"{ctx.base}_rows"), type=typed)
            held.shape = ir.Shape([None, *shape])
            written = inside.ScatterND(
                held, where, inside.unsqueeze(row, [0], hint="row"), _hint="rows"
            )
            written.type, written.shape = typed, held.shape
            ins.append(held)
            outs.append(written)
        body.extend(inside.nodes)
        restate_loop_body(body, states, ins, outs)
        finals = [ir.Value(name=names.fresh(f"{v.name or ctx.base}_loop")) for v in node.outputs]
        for new, old in zip(finals, node.outputs, strict=True):
            new.type, new.shape = old.type, old.shape
        for new, held in zip(finals[states:], ins, strict=True):  # as typed as the states
            rank = None if held.shape is None else len(held.shape)
            if new.type is None or new.shape is None or len(new.shape) != rank:
                new.type, new.shape = held.type, held.shape
        del node.attributes["body"]
        op.Loop(
            *node.inputs, *buffers, body=body, _outputs=finals,
            _name=node.name or names.fresh("Loop"), _doc_string=node.doc_string,
        )  # fmt: skip
        ctx.replace(finals, rename=True)


def _state_read(node: ir.Node, body: ir.Graph, value: ir.Value) -> ir.Value | None:
    """The loop's initial value of the state ``value`` is (through ``Identity``s), when the
    body scans a state it received (ONNX's expanded ``Range``, untyped), else None: its type and
    shape are the rows'. A state whose shape changed between iterations would not fit its row
    of the buffer: ``ScatterND`` then fails at run time, which the check sees."""
    while is_onnx(value.producer(), "Identity"):
        value = value.producer().inputs[0]  # type: ignore[union-attr,assignment]
    if value.producer() is not None or value not in body.inputs[2:]:
        return None
    return node.inputs[2 + list(body.inputs[2:]).index(value)]
