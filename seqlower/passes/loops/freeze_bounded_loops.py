"""A ``Loop`` that stops on data before a bound, as a ``Loop`` that runs to its bound with its
states frozen once the data says stop (target ``tract``, before ``loop-to-scan-fixed-states``).

``torch.while_loop`` iterations such as Sinkhorn's (``i < max_iter and err > tol``) or a greedy
decode's (``i < max_len and not eos``) stop on what the body computes, so no trip count is
known when they start and ``LoopToScan`` leaves them; tract has no ``Loop``. Their condition
is an ``And`` whose leaves are bounds on the iteration number (what ``LoopToScan`` reads) and
data, or data alone under ``M`` (a ``for`` loop with a ``break``). The Loop is rewritten to run
while the bounds hold (``M`` times, without any), with one more state, ``alive`` (the initial
condition; then ``alive and data``), and every state that is not a counter, passed through or
read by nothing updated by ``Where(alive, new, old)``: once the data says stop, the states keep
the values they had, as in the original, and the remaining iterations change nothing. Its trip
count is then fixed when it starts (the bound), so ``LoopToScan`` makes it a ``Scan``. A
counter (the bound reads it) keeps stepping. The iterations after the stop still run the body on
the frozen states (their results are discarded), which costs time, and can raise where the body
would fail on them.

Where a counter's final value or a scan output is read, one more state counts the iterations
the original runs (``ran``: plus one per iteration that starts ``alive``). A counter's final
value is then ``start + step * ran``, computed after the loop (a frozen copy carried in the loop
would mix tract's types: it types an int64 ``Cast`` as a size); scan outputs get one row per
iteration of the bound, the rows after the stop computed from the frozen states, and a ``Slice``
keeps the first ``ran`` rows of each, the original's. ``M`` of 2**31 - 1 or more (jax2onnx's and
TorchScript's "no M") is no bound: a Loop bounded by nothing else is left.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._emit import Emitter
from seqlower.passes._induction import Condition, Term, passes_through
from seqlower.passes._ir import constant_array, is_onnx, loop_body
from seqlower.passes._trip_counts import initial_bounds
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["FreezeBoundedLoops"]


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    opset: int
    bounds: list[ir.Value]  # the condition's leaves that bound the iteration number
    data: list[ir.Value]  # the others
    frozen: list[tuple[int, ir.DataType | None]]  # states updated only while alive, their types
    counters: list[tuple[int, int, ir.DataType]]  # read counters: (state, step, dtype)
    rows: bool  # scan outputs are read: their rows of the iterations the original runs
    terms: list[Term]  # the bounds' terms


class FreezeBoundedLoops(NodeLoweringPass[_Plan]):
    """Loops that stop on data before a bound: run to the bound, states frozen (module
    docstring)."""

    op_type = "Loop"
    takes_all = False

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        body = loop_body(node)
        carried = len(node.inputs) - 2
        if body is None or site.opset < 11:
            return None
        cond_out = body.outputs[0]
        analysis = Condition(node, body, types)
        if passes_through(cond_out, body.inputs[1]) or analysis.terms(cond_out) is not None:
            return None  # its trip count is fixed when it starts: LoopToScan's already
        bounds: list[ir.Value] = []
        data: list[ir.Value] = []
        bound_terms: list[Term] = []
        for leaf in _leaves(cond_out, body):
            if leaf is body.inputs[1]:
                continue  # the condition itself: true whenever an iteration runs
            terms = analysis.terms(leaf)
            if terms is not None and not terms:
                continue  # true on every iteration that runs
            (bounds if terms else data).append(leaf)
            bound_terms += terms or []
        m = node.inputs[0] if node.inputs else None
        if _unbounded(m):
            m = None  # "no M" as jax2onnx and TorchScript write it
        if not data or not (bounds or m is not None):
            return None  # nothing stops it on data, or no bound (M or a counter's) to run to
        rows = any(v.uses() or v.is_graph_output() for v in node.outputs[carried:])
        counters = [k for k in range(carried) if analysis.step(k) is not None]
        frozen = [
            (k, element_dtype(types.type_of(body.inputs[2 + k])))
            for k in range(carried)
            if k not in counters
            and not passes_through(body.outputs[1 + k], body.inputs[2 + k])
            and not _unread(node, body, k)
        ]
        read_counters = []
        for k in counters:
            if node.outputs[k].uses() or node.outputs[k].is_graph_output():
                start = node.inputs[2 + k]
                dtype = None if start is None else element_dtype(types.type_of(start))
                ranks = {len(v.shape) for v in (body.outputs[1 + k], start) if v and v.shape}
                if dtype is None or len(ranks) > 1:
                    return None  # start + step * ran would not have the rank the body gives
                read_counters.append((k, analysis.step(k) or 0, dtype))
        return _Plan(node, body, site.opset, bounds, data, frozen, read_counters, rows, bound_terms)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, body, names, base = ctx.node, plan.body, ctx.names, ctx.base
        carried = len(node.inputs) - 2
        outside, inside = ctx.before(), ctx.into(body)
        start = _bounds_at_start(outside, plan)  # read from the Loop as it is
        extra = _freeze(ctx, plan, outside, inside)
        outs = extra.outs
        body.extend(inside.nodes)
        body.outputs.clear()
        body.outputs.extend(
            [extra.cond, *outs[1 : 1 + carried], *extra.body_outs, *outs[1 + carried :]]
        )
        inputs = list(body.inputs)
        body.inputs.clear()
        body.inputs.extend([*inputs, *extra.body_inputs])
        finals = [ir.Value(name=names.fresh(f"{v.name or base}_loop")) for v in node.outputs]
        for new, old in zip(finals, node.outputs, strict=True):
            new.type, new.shape = old.type, old.shape
        del node.attributes["body"]
        outside.Loop(
            node.inputs[0],
            start,
            *node.inputs[2:],
            *extra.inits,
            body=body,
            _outputs=[*finals[:carried], *extra.finals, *finals[carried:]],
            _name=node.name,
            _doc_string=node.doc_string,
        )
        replaced = _read_after(ctx.after(), plan, finals, extra.finals[-1])
        ctx.replace(replaced, rename=True)


def _bounds_at_start(emit: Emitter, plan: _Plan) -> ir.Value | None:
    """The frozen Loop's initial condition: the parts of the original's that are its bounds
    on the values before the first step (None: none, it starts). A loop the bounds do not let
    start runs no iteration, as the original; run once, frozen, its body would run on states
    the original never computes on (PyTorch's decode into a buffer of ``max_len`` rows: a
    ``ScatterND`` into no row)."""
    cond0 = plan.node.inputs[1]
    leaves = [] if cond0 is None else initial_bounds(cond0, plan.node, plan.terms)
    if not leaves:
        return None
    cond = leaves[0]
    for leaf in leaves[1:]:
        cond = emit.And(cond, leaf, _hint="bounds_at_start")
    return cond


@dataclasses.dataclass
class _Frozen:
    """What freezing adds to the loop: the body's outputs (frozen states), its condition (the
    bounds alone), the states it adds (``alive``, then ``ran`` where read) with their body
    outputs, initial values and final values."""

    outs: list[ir.Value]
    cond: ir.Value
    body_inputs: list[ir.Value]
    body_outs: list[ir.Value]
    inits: list[ir.Value]
    finals: list[ir.Value]


def _freeze(ctx: Rewrite, plan: _Plan, outside: Emitter, inside: Emitter) -> _Frozen:
    """The states carried as before while ``alive`` (the data condition held on every iteration
    so far), as they were once it fails; ``ran`` counting the iterations that start alive."""
    node, body, names, base = ctx.node, plan.body, ctx.names, ctx.base
    scalar = outside.int64s([], hint="scalar")
    cond0 = node.inputs[1]
    alive0 = (
        outside.constant(np.array(True), hint="alive_start")
        if cond0 is None
        else outside.reshape(cond0, scalar, hint="alive_start")
    )
    alive = ir.Value(
        name=names.fresh(f"{base}_alive"), type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([])
    )
    data = plan.data[0]
    for leaf in plan.data[1:]:
        data = inside.And(data, leaf, _hint="data")
    still = inside.And(
        alive,
        inside.reshape(data, inside.int64s([], hint="scalar"), hint="data_scalar"),
        _hint="alive_next",
    )
    outs = list(body.outputs)
    for k, dtype in plan.frozen:
        new, old = outs[1 + k], body.inputs[2 + k]
        kept = _select(inside, alive, new, old, dtype, f"{old.name or k}_frozen")
        kept.type, kept.shape = new.type or old.type, new.shape
        outs[1 + k] = kept
    if plan.bounds:
        cond = plan.bounds[0]
        for leaf in plan.bounds[1:]:
            cond = inside.And(cond, leaf, _hint="bounds")
    else:  # bounded by M alone: run M iterations
        cond = inside.constant(np.array(True), hint="to_the_bound")
    final = ir.Value(name=names.fresh(f"{base}_alive_final"), type=alive.type, shape=alive.shape)
    extra = _Frozen(outs, cond, [alive], [still], [alive0], [final])
    if plan.counters or plan.rows:  # the iterations the original runs: those that start alive
        ran = ir.Value(
            name=names.fresh(f"{base}_ran"),
            type=ir.TensorType(ir.DataType.INT64),
            shape=ir.Shape([]),
        )
        one = inside.Where(  # tract types an int64 Cast of a bool as a size: no Add to ran
            alive, inside.int64s(1, hint="one"), inside.int64s(0, hint="zero"), _hint="alive_one"
        )
        more = inside.Add(ran, one, _hint="ran_next")
        more.type, more.shape = ran.type, ran.shape
        extra.body_inputs.append(ran)
        extra.body_outs.append(more)
        extra.inits.append(outside.int64s(0, hint="ran_start"))
        extra.finals.append(
            ir.Value(name=names.fresh(f"{ran.name}_final"), type=ran.type, shape=ran.shape)
        )
    return extra


def _read_after(
    emit: Emitter, plan: _Plan, finals: list[ir.Value], ran: ir.Value
) -> list[ir.Value]:
    """What replaces the Loop's outputs: its finals, but for a read counter ``start + step *
    ran`` and for a read scan output its first ``ran`` rows (``ran``: the iterations the
    original runs)."""
    node = plan.node
    carried = len(node.inputs) - 2
    replaced = list(finals)
    for k, step, dtype in plan.counters:
        start = node.inputs[2 + k]
        assert start is not None
        steps = ran
        if dtype != ir.DataType.INT64:
            steps = emit.Cast(steps, to=dtype.value, _hint="ran_as_counter")
        if step != 1:
            steps = emit.Mul(steps, emit.constant(np.array(step, dtype.numpy()), hint="step"))
        stopped = emit.Add(start, steps, _hint=f"{finals[k].name}_stopped")
        stopped.type, stopped.shape = finals[k].type, finals[k].shape
        replaced[k] = stopped
    if plan.rows:
        ends = emit.reshape(ran, emit.int64s([1], hint="one"), hint="ran")
        for k in range(carried, len(finals)):
            if node.outputs[k].uses() or node.outputs[k].is_graph_output():
                rows = emit.slice(finals[k], 0, ends, 0, hint=f"{finals[k].name}_ran")
                rows.type, rows.shape = finals[k].type, node.outputs[k].shape
                replaced[k] = rows
    return replaced


def _unread(node: ir.Node, body: ir.Graph, k: int) -> bool:
    """Whether nothing reads state ``k``: not the body, not after the loop (Paddle's
    placeholder states, a scalar 0 the body returns as a ``[1, 4]``): freezing it would read
    it, and a Scan keeps no state that changes rank; ``LoopToScan`` drops it."""
    final = node.outputs[k]
    return not (body.inputs[2 + k].uses() or final.uses() or final.is_graph_output())


def _select(
    emit: Emitter,
    alive: ir.Value,
    new: ir.Value,
    old: ir.Value,
    dtype: ir.DataType | None,
    hint: str,
) -> ir.Value:
    """``Where(alive, new, old)``; for a bool state ``alive and new or not alive and old``
    (onnxruntime 1.32 has no bool ``Where``, and the check runs what tract is given there)."""
    if dtype == ir.DataType.BOOL:
        keep = emit.And(emit.Not(alive, _hint="stopped"), old, _hint=f"{hint}_old")
        return emit.Or(emit.And(alive, new, _hint=f"{hint}_new"), keep, _hint=hint)
    return emit.Where(alive, new, old, _hint=hint)


#: ``M`` from which a Loop is taken as unbounded (``INT32_MAX``, ``INT64_MAX``: "no M").
_NO_BOUND = 2**31 - 1


def _unbounded(m: ir.Value | None) -> bool:
    """Whether ``M`` is a constant of :data:`_NO_BOUND` or more."""
    array = constant_array(m)
    return array is not None and array.size == 1 and int(array.reshape(())) >= _NO_BOUND


#: An ``And`` tree's nodes, and the one-element reshapes of Paddle's ``[1]`` conditions.
_THROUGH = ("And", "Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten")


def _leaves(cond: ir.Value, body: ir.Graph) -> list[ir.Value]:
    """The operands of the ``And`` tree (through ``Identity`` and one-element reshapes) the
    body computes ``cond`` by."""
    producer = cond.producer()
    if producer is not None and producer.graph is body and is_onnx(producer, *_THROUGH):
        found: list[ir.Value] = []
        operands = producer.inputs if producer.op_type == "And" else producer.inputs[:1]
        for operand in operands:
            if operand is None:
                return [cond]
            found += _leaves(operand, body)
        return found
    return [cond]
