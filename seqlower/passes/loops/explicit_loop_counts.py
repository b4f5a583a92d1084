"""Give every ``Loop`` an explicit trip count ``M`` and initial condition (target ``onnx2tf``).

onnx2tf 2.6.9's ``flatbuffer_direct`` backend writes a ``Loop`` as TFLite ops only when both
``M`` and ``cond`` are inputs: unrolled when both are constants (at most 1024 iterations, scan
outputs only when the body passes its condition through an ``Identity``), else as a TFLite
``WHILE`` when the loop carries states only; any other ``Loop`` becomes an ``ONNX_LOOP`` custom
op, which LiteRT cannot run. tf2onnx's ``while_loop``s and PyTorch's ``while_loop`` leave ``M``
empty.

A Loop whose trip count ``N`` seqlower derives (the condition analysis of
:mod:`~seqlower.passes.loops.loop_to_scan`: iteration ``i + 1`` runs iff ``i < bound``, a
bound computed before the loop) gets ``M = N``, ``cond = true`` and a body that passes its
condition through (``Identity``): it runs exactly N times, as before. Where N is a constant
after static shapes, ``loop-to-scan-constant`` then turns the loop into a Scan that
``unroll-constant-scans`` unrolls. A Loop whose condition depends on what the body computes
keeps its condition and, without ``M``, gets ``M = 2**31 - 1`` (TFLite narrows 64-bit integers
to 32 bits, so no larger bound is safe): a loop of more iterations than that would stop there,
which no model deployed on TFLite reaches. A Loop without ``cond`` (a for-loop: the body's
condition is ignored) gets ``cond = true`` and a body that passes it through. The small
constants of the enclosing graph a body reads are copied into it: onnx2tf does not see them as
constants from inside a ``WHILE`` body. Every other value it reads from outside is carried as a
loop state the body passes through unchanged (after the loop's own states): onnx2tf 2.6.9
gives a ``WHILE`` body no access to the enclosing subgraph's tensors, and LiteRT fails ("Input
tensor N lacks data ... (WHILE) failed to invoke"). A read whose type is unknown stays a read.
paddle2onnx's layout is made ONNX's (IREE 3.13.0 gets it wrong): the iteration number and a
replaced condition declared scalars (read as their ``[1]`` where the body reads them), body
inputs named as outer values renamed (IREE reads the outer value instead).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._emit import Emitter
from seqlower.passes._induction import Condition, Term, passes_through
from seqlower.passes._ir import constant_array, nodes_in
from seqlower.passes._shared import (
    names_defined,
    outer_reads,
    prepend,
    read_inside,
    remove_dead,
    scalar_body_input,
)
from seqlower.passes._trip_counts import trip_count
from seqlower.passes._types import TypeOracle

__all__ = ["ExplicitLoopCounts"]

#: The ``M`` written where the trip count is not known before the loop runs.
UNBOUNDED = 2**31 - 1
#: Outer constants up to this many elements read by a body are copied into it.
_COPIED_CONSTANT_SIZE = 64


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    opset: int
    terms: list[Term] | None  # the derived bound (None: not derived)
    explicit: bool  # M and cond given already, nothing tighter known: constants only
    constants: list[tuple[ir.Value, np.ndarray]]  # small outer constants the body reads
    # the type of each other outer read, in read order (None: unknown, left a read); the
    # values themselves are read again when rewriting: a loop rewritten before renews them
    carried: list[tuple[ir.TypeProtocol, ir.Shape | None] | None]


class ExplicitLoopCounts(NodeLoweringPass[_Plan]):
    """Every ``Loop`` with its trip count as ``M`` (derived where possible) and a ``cond``."""

    op_type = "Loop"
    takes_all = False
    repairs = True

    def __init__(self, *, carry_reads: bool = True) -> None:
        super().__init__()
        #: Whether the values the body reads from outside become states (onnx2tf's WHILE has
        #: no access to them; IREE's importer types a state whose shape is unknown rank 0).
        self.carry_reads = carry_reads

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        if "body" not in node.attributes:
            return None
        body = node.attributes["body"].as_graph()
        if body is None or len(body.inputs) < 2 or len(body.outputs) < 1:
            return None
        m = node.inputs[0] if node.inputs else None
        cond = node.inputs[1] if len(node.inputs) > 1 else None
        terms = None
        if not passes_through(body.outputs[0], body.inputs[1]):
            terms = Condition(node, body, types).terms(body.outputs[0])
            if terms is not None and not terms and m is None:
                return None  # a condition always true and no M: infinite, left as written
        constants = []
        carried: list[tuple[ir.TypeProtocol, ir.Shape | None] | None] = []
        for value in outer_reads(body, list(body.inputs)):
            array = constant_array(value)
            if array is not None and array.size <= _COPIED_CONSTANT_SIZE:
                constants.append((value, array))
            elif not self.carry_reads:
                carried.append(None)
            else:
                type_ = value.type or types.type_of(value)
                shape = value.shape or types.shape_of(value)
                carried.append(None if type_ is None else (type_, shape))
        explicit = terms is None and m is not None and cond is not None
        if terms is None and passes_through(body.outputs[0], body.inputs[1]) and m is None:
            return None  # an infinite loop (invalid for any runtime): left as written
        if explicit and not constants and not any(carried):
            return None  # explicit already, nothing tighter known, nothing read from outside
        return _Plan(node, body, site.opset, terms, explicit, constants, carried)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, body = ctx.node, plan.body
        if plan.constants:
            # onnx2tf 2.6.9 does not see an outer constant from inside a WHILE body: a Reshape
            # or Squeeze reading one becomes a custom op (ONNX_RESHAPE), a Less against one
            # compares with a float32 ('Comparison op input dtypes must be compatible').
            copies = ctx.into(body, pool="own")
            inside = {id(n) for n in nodes_in(body)}
            for value, array in plan.constants:
                copy = copies.constant(array, hint=f"{value.name}_inside")
                read_inside(body, value, copy, inside)
            prepend(body, list(copies.nodes))
        op = ctx.before()
        inputs = list(node.inputs)
        while len(inputs) < 2:
            inputs.append(None)
        m, cond = inputs[0], inputs[1]
        if not plan.explicit and (plan.terms is not None or cond is None):
            if plan.terms is not None:
                m = trip_count(op, node, plan.terms)  # cond0 included: zero when false
            cond = op.constant(np.array(True), hint="runs")
            _pass_condition_through(ctx, body)
        if m is None:
            m = op.int64s(UNBOUNDED, hint="max_trip_count")
        _onnx_layout(ctx, body)
        reads = outer_reads(body, list(body.inputs))  # the constants copied in are no more
        if any(plan.carried) and len(reads) == len(plan.carried):
            _carry_reads(ctx, plan, op, m, cond, reads)
            return
        ctx.insert()
        node.replace_input_with(0, m)
        node.replace_input_with(1, cond)


def _pass_condition_through(ctx: Rewrite, body: ir.Graph) -> None:
    """The body's condition output an ``Identity`` of its (scalar) condition input."""
    scalar_body_input(ctx, body, 1, ir.DataType.BOOL)
    inner = ctx.into(body, pool=None)
    passed = inner.Identity(body.inputs[1], _hint="cond_through")
    passed.type, passed.shape = ir.TensorType(ir.DataType.BOOL), ir.Shape([])
    body.extend(inner.nodes)
    body.outputs[0] = passed
    remove_dead(body)


def _onnx_layout(ctx: Rewrite, body: ir.Graph) -> None:
    """The iteration number a scalar, no body input named as an outer value (IREE 3.13.0 reads
    the outer value instead)."""
    scalar_body_input(ctx, body, 0, ir.DataType.INT64)
    outer = names_defined(ctx.node.graph)
    for value in body.inputs:
        if value.name in outer:
            value.name = ctx.names.fresh(f"{value.name}_in_body")


def _carry_reads(
    ctx: Rewrite,
    plan: _Plan,
    op: Emitter,
    m: ir.Value,
    cond: ir.Value | None,
    reads: list[ir.Value],
) -> None:
    """The Loop rebuilt with the typed ``reads`` as states after its own, which the body
    passes through (``Identity``) and reads instead of the outer values."""
    node, body, names, base = ctx.node, plan.body, ctx.names, ctx.base
    passes = ctx.into(body, pool=None)
    inside = {id(n) for n in nodes_in(body)}
    carried = [(v, *t) for v, t in zip(reads, plan.carried, strict=True) if t is not None]
    states_in, states_out = [], []
    for value, type_, shape in carried:
        state = ir.Value(name=names.fresh(f"{base}_{value.name}_state"), type=type_, shape=shape)
        out = passes.Identity(state, _hint=f"{value.name}_through")
        out.type, out.shape = type_, shape
        read_inside(body, value, state, inside)
        states_in.append(state)
        states_out.append(out)
    body.extend(passes.nodes)
    k = len(node.inputs) - 2  # the loop's own states
    inputs, outputs = list(body.inputs), list(body.outputs)
    body.inputs.clear()
    body.inputs.extend([*inputs, *states_in])
    body.outputs.clear()
    body.outputs.extend([*outputs[: 1 + k], *states_out, *outputs[1 + k :]])
    finals = [
        ir.Value(name=names.fresh(f"{v.name or base}_loop"), type=v.type, shape=v.shape)
        for v in node.outputs
    ]
    unread = [ir.Value(name=names.fresh(f"{base}_{v.name}_final")) for v, _, _ in carried]
    del node.attributes["body"]
    op.Loop(
        m,
        cond,
        *node.inputs[2:],
        *(value for value, _, _ in carried),
        body=body,
        _outputs=[*finals[:k], *unread, *finals[k:]],
        _name=node.name or names.fresh("Loop"),
        _doc_string=node.doc_string,
    )
    ctx.replace(finals, rename=True)
