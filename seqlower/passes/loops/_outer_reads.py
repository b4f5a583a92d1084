"""The values a Loop body reads from outside, as ``LoopToScan`` passes them to the Scan: a
state passed through unchanged (OpenVINO's Scan takes no outer-scope reads), a scan input
when read only as row ``i``, a small constant copied in, or a read kept as it is."""

from __future__ import annotations

import onnx_ir as ir

from seqlower._graphs import subgraphs_of
from seqlower.passes._base import Rewrite, rewire
from seqlower.passes._emit import Emitter
from seqlower.passes._induction import through_identity
from seqlower.passes._ir import constant_array, is_onnx, nodes_in
from seqlower.passes._shared import outer_reads, prepend, read_inside, remove_dead
from seqlower.passes.loops._scan_body import Extra
from seqlower.passes.loops._scan_plan import ScanPlan

__all__ = ["carry_outer_reads", "graphs_in_loop_bodies"]

_INLINED_CONSTANT_SIZE = 64  # outer constants up to this many elements are copied into a body


def carry_outer_reads(
    ctx: Rewrite,
    plan: ScanPlan,
    emit: Emitter,
    count: ir.Value,
    kept: list[int],
    results: list[ir.Value],
    *,
    keep_reads: bool,
    rows_as_scan_inputs: bool,
) -> Extra:
    """Every value the body reads from outside becomes a state passed through (OpenVINO's
    Scan takes no outer reads), or a scan input when read only as row i (with
    ``rows_as_scan_inputs``), or stays a read (``keep_reads``) unless it also starts a state
    (tract panics on those)."""
    node, body = ctx.node, plan.body
    iteration = body.inputs[0]
    states = [body.inputs[2 + k] for k in kept]
    invariant = _invariant_states(node, body, kept, results)
    inside = {id(n) for n in nodes_in(body)}
    passes = ctx.into(body, pool=None)
    constants = ctx.into(body, pool="own")
    extra = Extra()
    initials = {id(v) for v in node.inputs[2:] if v is not None}
    for value in outer_reads(body, [iteration, *states]):
        target = invariant.get(id(value))
        reads = None
        if rows_as_scan_inputs and target is None:
            reads = _rows_read(value, body, iteration, inside)
        if reads and id(value) not in initials:
            _scan_rows(ctx, emit, extra, body, value, reads, count)
            continue
        if target is None and keep_reads and id(value) not in initials:
            continue
        array = constant_array(value) if target is None else None
        if array is not None and array.size <= _INLINED_CONSTANT_SIZE:
            # A small constant (a Reshape target, axes) is copied in, not carried: tract
            # needs such inputs constant ("Scan ... shape input is variable").
            target = constants.constant(array, hint=f"{value.name}_inside")
        if target is None:
            target = _pass_through(ctx, plan, passes, extra, value)
        read_inside(body, value, target, inside)
    if extra.scanned:
        remove_dead(body)  # the index computations of the rows now scanned
    prepend(body, list(constants.nodes))
    body.extend(passes.nodes)
    return extra


def _invariant_states(
    node: ir.Node, body: ir.Graph, kept: list[int], results: list[ir.Value]
) -> dict[int, ir.Value]:
    """The states the Loop passes through already, by the id of their outer initial value: an
    outer read of that value reads the state instead of carrying one more."""
    return {
        id(node.inputs[2 + k]): body.inputs[2 + k]
        for k in kept
        if through_identity(results[1 + k], body) is body.inputs[2 + k]
        and node.inputs[2 + k] is not None
    }


def _scan_rows(
    ctx: Rewrite,
    emit: Emitter,
    extra: Extra,
    body: ir.Graph,
    value: ir.Value,
    reads: list[ir.Node],
    count: ir.Value,
) -> None:
    """``value``, read only as row i (a TensorArray read), as a scan input over its first N
    rows, so nothing is copied per iteration (onnxruntime copies every carried state)."""
    element = ir.Value(name=ctx.names.fresh(f"{ctx.base}_{value.name}_row"))
    element.type = reads[0].outputs[0].type or value.type
    element.shape = None if value.shape is None else ir.Shape(value.shape[1:])
    for gather in reads:
        row = gather.outputs[0]
        rewire(row, element)
        body.remove(gather, safe=True)
    count_1d = emit.unsqueeze(count, [0], hint="trips_1d")
    extra.scanned.append(emit.slice(value, 0, count_1d, 0, hint=f"{value.name}_rows"))
    extra.elements.append(element)


def _pass_through(
    ctx: Rewrite, plan: ScanPlan, passes: Emitter, extra: Extra, value: ir.Value
) -> ir.Value:
    """A state that passes ``value`` through unchanged, typed as planned; returns what the
    body reads for it."""
    type_, shape = plan.types.get(id(value), (None, None))
    target = ir.Value(
        name=ctx.names.fresh(f"{ctx.base}_{value.name}"),
        type=value.type or type_,
        shape=value.shape or shape,
    )
    out = passes.Identity(target, _hint=f"{value.name}_out")
    out.type, out.shape = target.type, target.shape
    extra.states.append(target)
    extra.outs.append(out)
    extra.inits.append(value)
    return target


def _rows_read(
    value: ir.Value, body: ir.Graph, iteration: ir.Value, inside: set[int]
) -> list[ir.Node] | None:
    """The body's ``Gather(value, i, axis=0)`` nodes when that is the only way the body reads
    ``value`` (``i`` the iteration number, through ``Cast``/``Identity``), else None."""
    gathers: list[ir.Node] = []
    for use in value.uses():
        node = use.node
        if id(node) not in inside:
            continue  # a read outside the loop
        if node.graph is not body or not is_onnx(node, "Gather") or use.idx != 0:
            return None
        axis = node.attributes.get("axis")
        if axis is not None and axis.as_int() != 0:
            return None
        index = node.inputs[1]
        while index is not None and index is not iteration:
            producer = index.producer()
            if not is_onnx(producer, "Cast", "Identity") or producer is None:
                return None
            index = producer.inputs[0]
        if index is None:
            return None
        gathers.append(node)
    if any(v is value for v in body.outputs):
        return None
    return gathers or None


def graphs_in_loop_bodies(model: ir.Model) -> set[int]:
    """The ids of the graphs nested (at any depth) in a Loop, Scan or SequenceMap body."""
    found: set[int] = set()

    def walk(graph: ir.Graph | ir.Function, inside: bool) -> None:
        if inside:
            found.add(id(graph))
        for node in graph:
            looping = inside or is_onnx(node, "Loop", "Scan", "SequenceMap")
            for subgraph in subgraphs_of(node):
                walk(subgraph, looping)

    walk(model.graph, False)
    for function in model.functions.values():
        walk(function, False)
    return found
