"""The Loop's body made a ``Scan``'s by ``LoopToScan``: the iteration number a scan input, the
condition read as true, counters read from the iteration number, states the body never reads
out of the states, then the interface in Scan's order (states, carried outer reads, scan
inputs), its outputs distinct and typed without symbolic dimension names (tract's needs)."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import Rewrite, rewire
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import constant_int, is_onnx, strip_symbolic
from seqlower.passes._shared import prepend
from seqlower.passes._trip_counts import extreme
from seqlower.passes.loops._scan_plan import ScanPlan

__all__ = ["Extra", "counters_from_iterations", "read_iteration", "scan_body", "unread_states"]


@dataclasses.dataclass
class Extra:
    """What a rewrite adds to the Scan: pass-through states (their body outputs and outer
    initial values) and scan inputs (their per-iteration elements in the body)."""

    states: list[ir.Value] = dataclasses.field(default_factory=list)
    outs: list[ir.Value] = dataclasses.field(default_factory=list)
    inits: list[ir.Value] = dataclasses.field(default_factory=list)
    scanned: list[ir.Value] = dataclasses.field(default_factory=list)
    elements: list[ir.Value] = dataclasses.field(default_factory=list)


def scan_body(
    ctx: Rewrite,
    plan: ScanPlan,
    extra: Extra,
    states: list[ir.Value],
    kept: list[int],
    scanned: int,
) -> None:
    """The body's interface as the Scan's: the kept states, then the outer reads carried, then
    the scan inputs; outputs distinct, every input typed, no symbolic dimension names."""
    node, body = ctx.node, plan.body
    body.inputs.extend([*states, *extra.states, *extra.elements])
    outputs_now = list(body.outputs)
    body.outputs.clear()
    body.outputs.extend([*outputs_now[: len(kept)], *extra.outs, *outputs_now[len(kept) :]])
    _distinct_outputs(body, ctx.into(body, pool=None), len(body.outputs) - scanned)
    for k, state in zip(kept, states, strict=True):
        if state.type is None:  # PyTorch leaves the body's inputs untyped; tract needs types
            state.type = node.inputs[2 + k].type  # type: ignore[union-attr]
    for value in [*body.inputs, *body.outputs]:
        strip_symbolic(value)


def _distinct_outputs(body: ir.Graph, emit: Emitter, first_scanned: int) -> None:
    """An ``Identity`` for each body output that is a body input or an earlier output (tract
    asserts that a graph's outputs are distinct outlets), and for each scan output the body also
    reads (tract's stacking of a scan output leaks into the body's other readers: ``Unifying
    shapes ?,?,5 and 4,5``)."""
    seen = {id(v) for v in body.inputs}
    outputs = list(body.outputs)
    for j, value in enumerate(outputs):
        read = j >= first_scanned and bool(value.uses())
        if id(value) in seen or value.producer() is None or read:
            copy = emit.Identity(value, _hint=f"{value.name}_out")
            copy.type, copy.shape = value.type, value.shape
            outputs[j] = copy
        seen.add(id(outputs[j]))
    body.extend(emit.nodes)
    body.outputs.clear()
    body.outputs.extend(outputs)


def counters_from_iterations(
    ctx: Rewrite, plan: ScanPlan, emit: Emitter, count: ir.Value, starts: dict[int, ir.Value]
) -> dict[int, ir.Value]:
    """Type the iteration number, read the condition as true, and read each counter from the
    iteration number (from ``starts[k]`` in the body, when given: ``first_iteration_safe``);
    returns the counters' final values, computed outside the loop."""
    node, body = plan.node, plan.body
    iteration, cond_in = body.inputs[0], body.inputs[1]
    iteration.type = ir.TensorType(ir.DataType.INT64)
    iteration.shape = ir.Shape([])
    inner = ctx.into(body, pool=None)
    # The body runs only while the condition holds: a read of cond_in is a read of true.
    if cond_in.uses():
        rewire(cond_in, inner.constant(np.array(True), hint="cond_true"), graph_outputs=False)
    # A counter is its start plus its step times the iteration number: read from the scan
    # input, it needs no state (tract discards a state input no node reads, then fails), and
    # its final value is its start plus the step times the trip count.
    outer_finals: dict[int, ir.Value] = {}
    for k in plan.counters:
        state, start = body.inputs[2 + k], node.inputs[2 + k]
        assert start is not None
        dtype = state.dtype or start.dtype or ir.DataType.INT64  # PyTorch leaves states untyped
        by = plan.steps[k]
        step = iteration
        if by != 1:
            step = inner.Mul(iteration, inner.int64s(by, hint="step"), _hint="counter_moved")
        if dtype != ir.DataType.INT64:
            step = inner.Cast(step, to=dtype.value, _hint="counter_step")
        shape = state.shape if state.shape is not None else start.shape
        if constant_int(start) == 0 and shape is not None and len(shape) == 0:
            counter = inner.Identity(step, _hint=f"{state.name}_now")  # tf2onnx's counters
        else:  # a start of shape [1] (Paddle's) gives the counter its shape
            counter = inner.Add(starts.get(k, start), step, _hint=f"{state.name}_now")
        counter.type = state.type or ir.TensorType(dtype)
        counter.shape = ir.Shape([]) if shape is None else shape
        rewire(state, counter)
        trips = count
        if by != 1:
            trips = emit.Mul(count, emit.int64s(by, hint="step"), _hint="counter_moves")
        if dtype != ir.DataType.INT64:
            trips = emit.Cast(trips, to=dtype.value, _hint="counter_trips")
        outer_finals[k] = emit.Add(start, trips, _hint=f"{state.name}_final")
    prepend(body, list(inner.nodes))
    return outer_finals


def unread_states(
    node: ir.Node, body: ir.Graph, kept: list[int]
) -> tuple[set[int], list[int], list[int]]:
    """A state the body never reads (tf2onnx's RNN "output" state; tract's declutter drops
    such an input and then fails) leaves ``kept``: dropped when nothing reads its final value,
    else its final value is the initial one when the body returns the input itself (a
    loop-invariant state once its condition is gone: third list), and otherwise a scan output
    whose last row is the final value (second list)."""
    dropped: set[int] = set()
    last_rows: list[int] = []
    unchanged: list[int] = []
    for k in list(kept):
        passed = _passed_through(body, k)
        if body.inputs[2 + k].uses() and not passed:
            continue
        kept.remove(k)
        old = node.outputs[k]
        if not (old.uses() or old.is_graph_output()):
            dropped.add(k)
        elif passed or body.outputs[1 + k] is body.inputs[2 + k]:
            unchanged.append(k)
        else:
            last_rows.append(k)
    return dropped, last_rows, unchanged


def _passed_through(body: ir.Graph, k: int) -> bool:
    """Whether state ``k`` is read only by the ``Identity`` nodes that return it unchanged
    (jax2onnx's scanned inputs once their row reads are scan inputs: tract's declutter drops
    such a state's input, not its output, and then fails)."""
    value, chain = body.outputs[1 + k], []
    while value is not body.inputs[2 + k]:
        producer = value.producer()
        if not is_onnx(producer, "Identity") or producer.graph is not body:
            return False
        if producer.inputs[0] is None:
            return False
        chain.append(producer)
        value = producer.inputs[0]
    if not chain:
        return False
    nodes = {id(n) for n in chain}
    inner = [n.inputs[0] for n in chain]  # the state, and what the chain passes on
    if any(v is not body.inputs[2 + k] and v.is_graph_output() for v in inner if v is not None):
        return False
    return all(id(use.node) in nodes for v in inner if v is not None for use in v.uses())


def read_iteration(
    ctx: Rewrite, plan: ScanPlan, emit: Emitter, extra: Extra, iteration: ir.Value
) -> None:
    """Nothing reads the iteration number: OpenVINO then runs the Scan once and tract drops
    the scan input and fails, so a state reads it (Max(k, i), the last iteration's number at
    the end; nothing reads that)."""
    body = plan.body
    reader = ctx.into(body, pool=None)
    seen = ir.Value(
        name=ctx.names.fresh(f"{ctx.base}_last_iteration"),
        type=ir.TensorType(ir.DataType.INT64),
        shape=ir.Shape([]),
    )
    latest = extreme(reader, "Max", seen, iteration, "last_iteration")
    latest.type, latest.shape = seen.type, seen.shape
    body.extend(reader.nodes)
    extra.states.append(seen)
    extra.outs.append(latest)
    extra.inits.append(emit.int64s(0, hint="first_iteration"))
