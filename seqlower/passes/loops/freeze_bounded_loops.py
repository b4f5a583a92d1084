"""A ``Loop`` that stops on data before a bound, as a ``Loop`` that runs to its bound with its
states frozen once the data says stop (target ``tract``, before ``loop-to-scan-fixed-states``).

``torch.while_loop`` iterations such as Sinkhorn's (``i < max_iter and err > tol``) or a greedy
decode's (``i < max_len and not eos``) stop on what the body computes, so no trip count is
known when they start and ``LoopToScan`` leaves them; tract has no ``Loop``. Their condition
is an ``And`` whose leaves are bounds on the iteration number (what ``LoopToScan`` reads) and
data, or data alone under ``M`` (a ``for`` loop with a ``break``). The Loop is rewritten to run
while the bounds hold (``M`` times, without any), with one more state, ``alive``
(the initial condition; then ``alive and data``), and every state that is not a counter or
passed through updated by ``Where(alive, new, old)``: once the data says stop, the states keep
the values they had, as in the original, and the remaining iterations change nothing. Its
trip count is then fixed when it starts (the bound), so ``LoopToScan`` makes it a ``Scan``. A
counter (the bound reads it) keeps stepping; where its final value is read, a frozen copy
gives it. The iterations after the stop still run the body on the frozen states (their
results are discarded), which costs time, and can raise where the body would fail on them.

Scan outputs would get one row per iteration of the bound, not per iteration run: a Loop whose
scan outputs are read is left, with that reason (``require-no-loop`` names it).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._emit import Emitter
from seqlower.passes._induction import Condition, passes_through
from seqlower.passes._ir import NO_LOOP, block, is_onnx
from seqlower.passes._types import TypeOracle

__all__ = ["FreezeBoundedLoops"]


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    opset: int
    bounds: list[ir.Value]  # the condition's leaves that bound the iteration number
    data: list[ir.Value]  # the others
    frozen: list[int]  # states updated only while alive
    counters: list[int]  # counters whose final value is read: a frozen copy gives it


class FreezeBoundedLoops(NodeLoweringPass[_Plan]):
    """Loops that stop on data before a bound: run to the bound, states frozen (module
    docstring)."""

    op_type = "Loop"
    takes_all = False

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        body = node.attributes["body"].as_graph() if "body" in node.attributes else None
        carried = len(node.inputs) - 2
        if (
            body is None
            or site.opset < 11
            or carried < 0
            or len(body.inputs) != carried + 2
            or len(body.outputs) < carried + 1
        ):
            return None
        cond_out = body.outputs[0]
        analysis = Condition(node, body, types)
        if passes_through(cond_out, body.inputs[1]) or analysis.terms(cond_out) is not None:
            return None  # its trip count is fixed when it starts: LoopToScan's already
        bounds: list[ir.Value] = []
        data: list[ir.Value] = []
        for leaf in _leaves(cond_out, body):
            if leaf is body.inputs[1]:
                continue  # the condition itself: true whenever an iteration runs
            terms = analysis.terms(leaf)
            if terms is not None and not terms:
                continue  # true on every iteration that runs
            (bounds if terms else data).append(leaf)
        m = node.inputs[0] if node.inputs else None
        if not data or not (bounds or m is not None):
            return None  # nothing stops it on data, or no bound (M or a counter's) to run to
        read = [v.name or "?" for v in node.outputs[carried:] if v.uses() or v.is_graph_output()]
        if read:
            why = (
                f"it stops on data before its bound and its scan outputs ({', '.join(read)}) "
                "are read: a Scan to the bound would give them a row per iteration of the "
                "bound, not per iteration run"
            )
            block(node, why, NO_LOOP)
            return None
        counters = [k for k in range(carried) if analysis.step(k) is not None]
        frozen = [
            k
            for k in range(carried)
            if k not in counters and not passes_through(body.outputs[1 + k], body.inputs[2 + k])
        ]
        read_counters = [
            k for k in counters if node.outputs[k].uses() or node.outputs[k].is_graph_output()
        ]
        return _Plan(node, body, site.opset, bounds, data, frozen, read_counters)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, body, names, base = ctx.node, plan.body, ctx.names, ctx.base
        carried = len(node.inputs) - 2
        outside, inside = ctx.before(), ctx.into(body)
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
            None,
            *node.inputs[2:],
            *extra.inits,
            body=body,
            _outputs=[*finals[:carried], *extra.finals, *finals[carried:]],
            _name=node.name,
            _doc_string=node.doc_string,
        )
        replaced = list(finals)
        for j, k in enumerate(plan.counters):  # a read counter: its value when the data stopped
            replaced[k] = extra.finals[1 + j]
        ctx.replace(replaced, rename=True)


@dataclasses.dataclass
class _Frozen:
    """What freezing adds to the loop: the body's outputs (frozen states), its condition (the
    bounds alone), the states it adds (``alive``, the read counters' copies) with their body
    outputs, initial values and final values."""

    outs: list[ir.Value]
    cond: ir.Value
    body_inputs: list[ir.Value]
    body_outs: list[ir.Value]
    inits: list[ir.Value]
    finals: list[ir.Value]


def _freeze(ctx: Rewrite, plan: _Plan, outside: Emitter, inside: Emitter) -> _Frozen:
    """The states carried as before while ``alive`` (the data condition held on every iteration
    so far), as they were once it fails; the counters read after the loop copied likewise."""
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
    for k in plan.frozen:
        new, old = outs[1 + k], body.inputs[2 + k]
        kept = inside.Where(alive, new, old, _hint=f"{old.name or k}_frozen")
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
    for k in plan.counters:
        counter = body.inputs[2 + k]
        copy = ir.Value(
            name=names.fresh(f"{counter.name or base}_stopped"),
            type=counter.type,
            shape=counter.shape,
        )
        kept = inside.Where(alive, outs[1 + k], copy, _hint=f"{copy.name}_next")
        kept.type, kept.shape = counter.type, counter.shape
        extra.body_inputs.append(copy)
        extra.body_outs.append(kept)
        extra.inits.append(node.inputs[2 + k])  # type: ignore[arg-type]
        extra.finals.append(
            ir.Value(name=names.fresh(f"{copy.name}_final"), type=copy.type, shape=copy.shape)
        )
    return extra


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
