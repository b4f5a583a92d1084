"""``Loop`` bodies in the strict form OpenVINO's importer takes (target ``openvino``).

OpenVINO 2026.4.1 runs ``Loop`` — tf2onnx's ``while_loop``s included, as fast there as the
same loop as a ``Scan`` on small exports and 1.2-5.1x faster on larger RNNs
(``benchmarks/loop_scan.py``, ``benchmarks/openvino_loops.py``) — but its ONNX importer refuses
or mistranslates three things that are valid ONNX and common in exports:

- **a body input returned as a body output** (tf2onnx passes every loop-invariant state through
  so): each such output counts as one more body parameter, and the Loop fails with ``loop body
  graph canonical inputs size (16), does not match ... (11)``. The output becomes an
  ``Identity`` of the input.
- **the condition input read by anything but the condition output**: when the condition passes
  through, the importer drops that parameter from the body and a node still reading it fails
  (``Model references undeclared parameters``). The body only runs when that condition is true,
  so those reads take a constant ``true`` instead, which is exact.
- **untyped body inputs** (PyTorch's exporter leaves them untyped; ONNX allows it): values
  computed from them get no element type and ``Slice`` fails (``Element not supported``). The
  iteration number is an int64 scalar and the condition a bool scalar by definition; a state
  takes the type of the value that starts it, and its rank (the importer needs it: without it
  OpenVINO's plugin fails with ``unordered_map::at``), its dimensions left unknown, since they
  may change from one iteration to the next (ONNX's own inference passes no shape there). A
  state whose body output is declared with another rank keeps no rank.
- **paddle2onnx's layout**: body inputs named as the outer values that start them (valid in
  ONNX, whose scopes hold distinct values: the importer binds them to the outer values and
  finds ``canonical inputs size (1)``), renamed; and an iteration number and condition declared
  of shape ``[1]`` (ONNX gives the body scalars), declared scalars (the Loop's condition
  reshaped to one, whose shape ONNX's inference gives the body's): with the ``[1]`` the CPU
  plugin fails at run time (``Check 'to->getShape() == Shape(VectorDims{1})' failed at
  tensoriterator.cpp``) once the loop is otherwise strict.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._ir import graph_attr
from seqlower.passes._shared import names_defined, prepend, scalar_body_input
from seqlower.passes._types import TypeOracle

__all__ = ["StrictLoopBodies"]


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    opset: int
    #: Positions of body outputs that are body inputs.
    passed: list[int]
    #: Uses of the condition input other than the condition output's own ``Identity``.
    cond_reads: list[tuple[ir.Node, int]]
    #: Untyped body inputs, the type each gets and its shape (None: unknown).
    types: list[tuple[ir.Value, ir.TypeProtocol, ir.Shape | None]]
    #: Body inputs named as a value of the enclosing graph.
    shadowing: list[ir.Value]
    #: The iteration number and condition inputs declared with a shape other than a scalar's.
    unscalar: list[ir.Value]


class StrictLoopBodies(NodeLoweringPass[_Plan]):
    """Every ``Loop`` body: no input returned as an output, the condition input read only by the
    condition output, every input typed."""

    op_type = "Loop"
    takes_all = False
    repairs = True

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        body = graph_attr(node, "body")  # None for a function's attribute reference
        if body is None or len(body.inputs) < 2 or not body.outputs:
            return None
        inputs = {id(value) for value in body.inputs}
        passed = [k for k, value in enumerate(body.outputs) if id(value) in inputs]
        cond_in, cond_out = body.inputs[1], body.outputs[0]
        cond_reads = [
            (use.node, use.idx)
            for use in cond_in.uses()
            if not (use.node.op_type == "Identity" and use.node.outputs[0] is cond_out)
        ]
        typed: list[tuple[ir.Value, ir.TypeProtocol, ir.Shape | None]] = []
        scalars = (ir.TensorType(ir.DataType.INT64), ir.TensorType(ir.DataType.BOOL))
        for k, value in enumerate(body.inputs):
            if value.type is not None:
                continue
            if k < 2:
                typed.append((value, scalars[k], ir.Shape([])))
                continue
            start = node.inputs[k] if k < len(node.inputs) else None
            type_ = None if start is None else types.type_of(start)
            if start is None or type_ is None:
                continue
            typed.append((value, type_, _rank_of(start, body.outputs[k - 1], types)))
        outer = names_defined(node.graph)
        shadowing = [value for value in body.inputs if value.name in outer]
        unscalar = [
            value
            for value in body.inputs[:2]
            if value.type is not None and value.shape is not None and value.shape.rank() != 0
        ]
        if not (passed or cond_reads or typed or shadowing or unscalar):
            return None
        return _Plan(node, body, site.opset, passed, cond_reads, typed, shadowing, unscalar)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        body = plan.body
        op = ctx.into(body, pool=None)
        for value, type_, shape in plan.types:
            value.type, value.shape = type_, shape
        cond_shape = body.inputs[1].shape  # as declared: the shape its reads (made true) take
        _scalar_number_and_condition(ctx, plan)
        cond0 = ctx.node.inputs[1] if len(ctx.node.inputs) > 1 else None
        if cond0 is not None and body.inputs[1] in plan.unscalar:
            # ONNX's inference gives the body's condition the shape of the Loop's.
            outer = ctx.before()
            scalar = outer.reshape(cond0, outer.int64s([], hint="scalar"), hint="runs")
            scalar.type, scalar.shape = ir.TensorType(ir.DataType.BOOL), ir.Shape([])
            ctx.insert()
            ctx.node.replace_input_with(1, scalar)
        for value in plan.shadowing:
            value.name = ctx.names.fresh(f"{value.name}_in_body")
        if plan.cond_reads:
            ones = [1] * cond_shape.rank() if cond_shape is not None else []
            true = op.constant(np.ones(ones, dtype=bool), hint="running")
            for user, index in plan.cond_reads:
                user.replace_input_with(index, true)
            prepend(body, list(op.nodes))
        copies = ctx.into(body, pool=None)
        for k in plan.passed:
            value = body.outputs[k]
            copy = copies.Identity(value, _hint=f"{value.name or 'state'}_out")
            copy.type, copy.shape = value.type, value.shape
            body.outputs[k] = copy
        body.extend(copies.nodes)


def _rank_of(start: ir.Value, out: ir.Value, types: TypeOracle) -> ir.Shape | None:
    """The shape of a state of ``start``'s rank, every dimension unknown, unless the body's
    output for it is declared with another rank."""
    shape = start.shape or types.shape_of(start)
    if shape is None or (out.shape is not None and out.shape.rank() != shape.rank()):
        return None
    return ir.Shape([None] * shape.rank())


def _scalar_number_and_condition(ctx: Rewrite, plan: _Plan) -> None:
    """The body's iteration number and condition declared scalars where ``plan`` found them
    otherwise: the number's readers read it reshaped to its declared one-element shape; the
    condition, read only by the copy that returns it once strict, returned a scalar too."""
    body = plan.body
    if body.inputs[0] in plan.unscalar:
        scalar_body_input(ctx, body, 0, ir.DataType.INT64)
    cond_in = body.inputs[1]
    if cond_in in plan.unscalar:
        cond_in.shape = ir.Shape([])
        returns = body.outputs[0].producer()
        if returns is not None and returns.op_type == "Identity" and returns.inputs[0] is cond_in:
            body.outputs[0].shape = ir.Shape([])
