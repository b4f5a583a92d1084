"""A ``Loop`` whose trip count is fixed when it starts, as a ``Scan`` (for runtimes without Loop).

tract has no ``Loop`` at all, but runs ``Scan``; OpenVINO runs both (its target keeps Loops,
made strict by :class:`~seqlower.passes.targets.strict_loop_bodies.StrictLoopBodies`). The loops
tf2onnx writes for ``tf.while_loop`` (Keras ``Bidirectional``/``TimeDistributed``,
``tf.map_fn``, ``bidirectional_dynamic_rnn``) stop on a condition that is
known when the loop starts::

    ..., ys = Loop(M, cond0, c0, limit, ...) with body (i, cond_in, c, limit_in, ...) ->
        c1 = Add(c, 1)
        go = And(Less(Cast<float>(i), Cast<float>(max)),          # optional, tf2onnx v1 RNNs
                 Less(Cast<float>(c1), Cast<float>(limit_in)))
        -> (go, c1, limit_in, ..., y)                             # y: a TensorArray write

Every ``And`` leaf is ``Less``/``LessOrEqual``/``Greater``/``GreaterOrEqual`` of an
*iteration-linear* side (the iteration number, a counter state that steps by one from its
initial value, either plus a constant, through integer-to-any ``Cast``s) and a *loop-invariant*
integer side (an outer-scope value or a state the body passes through, through ``Cast``s), so
iteration ``i + 1`` runs iff ``i < bound`` for a bound computed before the loop. The trip count is
then ``N = min(M, max(bound + 1, 1))`` (without ``M``: the second term; a condition the body passes
through unchanged: ``M``), zero when the initial condition is false. (Comparisons through a float
``Cast`` are taken as exact: they are for counts below 2**24.)

The rewrite is the form both tract and OpenVINO accept: a ``Scan`` whose scan input is
``Range(0, N)`` (the iteration number, read where the Loop read ``i``); a counter is computed
from it (``start + i``) instead of carried, its final value ``start + N`` outside; the Loop's
other states; then every outer-scope read of the body (and of graphs in it) as a state passed
through unchanged (OpenVINO's Scan takes no outer-scope reads; tract panics when one value is
both), the Loop's scan outputs as scan outputs. What tract needs besides: the condition's nodes
removed and no input nobody reads (it drops it, then fails its own check): a state the body
never reads becomes a scan output whose last row is its final value (or goes, when nothing
reads it), and when nothing reads the iteration number a state ``Max(k, i)`` does (OpenVINO
ran such a Scan once); distinct body outputs, a scan output the body also reads copied by an
``Identity``; body inputs and outputs typed without symbolic dimension names (``Impossible to
unify Sym(unk__1392) with Val(4)``); loops of one graph whose trip counts are computed alike (a
bidirectional layer's two directions) sharing one ``Range``, so tract gives their outputs one
length; a loop nested in another loop's body keeping its outer reads as reads (tract gives a
nested pass-through state its first value on every outer iteration). A loop whose trip count
depends on what the body computes stays, with the reason recorded for the target's check
(:class:`~seqlower.passes.targets.require_no_loop.RequireNoLoop`).

No runtime runs a ``Scan`` of zero iterations correctly (onnxruntime and OpenVINO fail, tract
returns a wrong state shape): the README lists it among the limits. ``LoopToScanRows`` also
turns ``Gather(x, i)`` reads into scan inputs over ``x[:N]``, which onnxruntime runs as fast
as the Loop (it copies every carried state per iteration), but tract cannot analyse that
computed ``Slice`` and OpenVINO returned wrong numbers for it on two test loops: onnxruntime only.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
import onnx
import onnx_ir as ir

from seqlower._graphs import subgraphs_of
from seqlower.passes._base import NameGenerator, NodeLoweringPass, Site
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import (
    NO_LOOP,
    block,
    blocked,
    constant_array,
    constant_int,
    is_onnx,
    nodes_in,
)
from seqlower.passes._shared import outer_reads, prepend, read_inside
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = [
    "LoopToScan",
    "LoopToScanRows",
    "strip_symbolic",
]

_INTS = frozenset(
    {
        ir.DataType.INT8,
        ir.DataType.INT16,
        ir.DataType.INT32,
        ir.DataType.INT64,
        ir.DataType.UINT8,
        ir.DataType.UINT16,
        ir.DataType.UINT32,
        ir.DataType.UINT64,
    }
)


@dataclasses.dataclass(frozen=True)
class _Linear:
    """``base + offset + i`` at iteration ``i``; ``base`` an outer value (None: 0)."""

    base: ir.Value | None
    offset: int


@dataclasses.dataclass(frozen=True)
class _Term:
    """Iteration ``i`` continues while ``i < limit - linear.base - linear.offset + extra``."""

    linear: _Linear
    limit: ir.Value  # an outer integer value, or one the body computes from such (hoisted)
    extra: int  # 1 for LessOrEqual


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    opset: int
    terms: list[_Term] | None  # None: the condition is passed through (the trip count is M)
    counters: list[int]  # carried values that start from the Loop's input and step by one
    types: dict[int, tuple[ir.TypeProtocol | None, ir.Shape | None]]  # of the outer reads
    constant_count: int | None = None  # M evaluated at planning (LoopToScanConstant)


class LoopToScan(NodeLoweringPass):
    """Loops whose trip count is fixed when they start, as Scans over ``Range(0, N)``."""

    op_type = "Loop"
    takes_all = False
    #: Whether an outer value the body reads only as row ``i`` (a TensorArray read,
    #: ``Gather(x, i)``) becomes a scan input over its first N rows instead of a carried state.
    #: onnxruntime copies every carried state on every iteration, so this form is what makes the
    #: Scan as fast as the Loop there; tract cannot analyse the computed ``Slice`` when N depends
    #: on data, so the targets use the portable form.
    rows_as_scan_inputs: ClassVar[bool] = False
    #: Whether every value the body reads from outside is carried as a pass-through state
    #: (OpenVINO's Scan takes no outer-scope reads); otherwise only those that also start a
    #: state are (tract panics on those), and the rest stay reads, which onnxruntime does not
    #: copy on every iteration.
    outer_reads_as_states: ClassVar[bool] = True

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self._model = model
        self._shapes: dict[str, ir.Shape] | None = None
        self._in_loops = _graphs_in_loop_bodies(model)
        self._trip_counts: dict[tuple[int, Any], tuple[ir.Value, ir.Value]] = {}
        return super().call(model)

    def _inferred_shape(self, value: ir.Value) -> ir.Shape | None:
        """The shape ONNX's inference gives ``value`` (by name; names are unique in a valid
        model), run at most once per pass run; tract needs the rank of every state."""
        if self._shapes is None:
            self._shapes = _infer_shapes(self._model)
        return self._shapes.get(value.name or "")

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        if site.opset < 11 or "body" not in node.attributes:
            # Scan's opset-9 form exists, but Range (the scan input) needs opset 11.
            _block(node, f"Loop at opset {site.opset}: Range, the scan input, needs opset 11")
            return None
        body = node.attributes["body"].as_graph()
        if body is None or len(body.inputs) < 2 or len(body.outputs) < 1:
            return None
        carried = len(node.inputs) - 2
        if len(body.inputs) != carried + 2 or len(body.outputs) < carried + 1:
            return None
        for value in body.inputs[2:]:
            type_ = value.type or types.type_of(value)
            if type_ is not None and not isinstance(type_, ir.TensorType):
                # Scan's states are tensors (a sequence a Loop builds is StackLoopSequences').
                _block(node, f"it carries '{value.name}', a {type_}, and a Scan carries tensors")
                return None
        m = node.inputs[0] if node.inputs else None
        analysis = _Condition(node, body, types)
        cond_out = body.outputs[0]
        terms: list[_Term] | None
        if _passes_through(cond_out, body.inputs[1]):
            terms = None
            if m is None:
                _block(
                    node,
                    "its trip count is not fixed when it starts: no M and a condition "
                    "the body passes through",
                )
                return None
        else:
            terms = analysis.terms(cond_out)
            if terms is None:
                _block(
                    node,
                    "its trip count is not fixed when it starts: the condition "
                    f"'{cond_out.name}' depends on what the body computes ({analysis.why})",
                )
                return None
        counters = [k for k in range(carried) if analysis.is_counter(k)]
        reads = outer_reads(body, list(body.inputs))
        reads += [node.inputs[2 + k] for k in counters]  # type: ignore[misc]
        known = {
            id(v): (types.type_of(v), types.shape_of(v) or self._inferred_shape(v)) for v in reads
        }
        return _Plan(node, body, site.opset, terms, counters, known)

    def rewrite(self, plan: _Plan, names: NameGenerator) -> None:
        node, body = plan.node, plan.body
        graph = node.graph
        assert graph is not None
        base = node.name or "Loop"
        emit = Emitter(names, base, plan.opset, self.constant_pool(graph))
        count, iterations = self._iterations(emit, graph, plan)
        carried = len(node.inputs) - 2
        iteration = body.inputs[0]
        outer_finals = _counters_from_iterations(plan, names, base, emit, count)
        results = list(body.outputs)
        _remove_dead(body, keep=results)
        kept = [k for k in range(carried) if k not in plan.counters]
        dropped, last_rows, unchanged = _unread_states(node, body, kept)
        for k in unchanged:  # its final value is where it started
            start = node.inputs[2 + k]
            assert start is not None
            final = emit.Identity(start, _hint="unchanged")
            final.type, final.shape = start.type, start.shape
            outer_finals[k] = final
        states = [body.inputs[2 + k] for k in kept]
        scan_outs = [*results[carried + 1 :], *(results[1 + k] for k in last_rows)]
        body.outputs.clear()
        body.outputs.extend([*(results[1 + k] for k in kept), *scan_outs])
        _remove_dead(body)
        extra = self._carry_outer_reads(plan, names, base, emit, count, kept, results)
        body.inputs.clear()
        if iteration.uses() or not extra.scanned:
            if not iteration.uses():
                _read_iteration(plan, names, base, emit, extra, iteration)
            extra.scanned.append(iterations)
            extra.elements.append(iteration)
        body.inputs.extend([*states, *extra.states, *extra.elements])
        outputs_now = list(body.outputs)
        body.outputs.clear()
        body.outputs.extend([*outputs_now[: len(kept)], *extra.outs, *outputs_now[len(kept) :]])
        _distinct_outputs(
            body, Emitter(names, base, plan.opset), len(body.outputs) - len(scan_outs)
        )
        for k, state in zip(kept, states, strict=True):
            if state.type is None:  # PyTorch leaves the body's inputs untyped; tract needs types
                state.type = node.inputs[2 + k].type  # type: ignore[union-attr]
        for value in [*body.inputs, *body.outputs]:
            strip_symbolic(value)
        _replace_by_scan(
            _Replacement(node, graph, body, results, kept, dropped, last_rows, outer_finals),
            names,
            base,
            emit,
            Emitter(names, base, plan.opset, self.constant_pool(graph)),
            extra,
        )

    def _iterations(self, emit: Emitter, graph: ir.Graph, plan: _Plan) -> tuple[ir.Value, ir.Value]:
        """The trip count and ``Range(0, count)``. Loops of one graph whose trip counts are
        computed alike (a bidirectional layer's two directions) share one Range: tract gives
        each Range of a data-dependent length its own symbol and then cannot join the two
        directions' outputs."""
        key = (id(graph), _trip_count_key(plan.node, plan.terms))
        shared = self._trip_counts.get(key)
        if shared is not None:
            return shared
        count = _trip_count(emit, plan.node, plan.terms)
        iterations = emit.arange(count, hint="iterations")
        iterations.shape = ir.Shape([None])
        self._trip_counts[key] = (count, iterations)
        return count, iterations

    def _carry_outer_reads(
        self,
        plan: _Plan,
        names: NameGenerator,
        base: str,
        emit: Emitter,
        count: ir.Value,
        kept: list[int],
        results: list[ir.Value],
    ) -> _Extra:
        """Every value the body reads from outside becomes a state passed through (OpenVINO's
        Scan takes no outer reads), or a scan input when read only as row i (``rows``)."""
        node, body = plan.node, plan.body
        iteration = body.inputs[0]
        states = [body.inputs[2 + k] for k in kept]
        # A state of an outer value the Loop passes through already is reused.
        invariant = {
            id(node.inputs[2 + k]): body.inputs[2 + k]
            for k in kept
            if _through_identity(results[1 + k], body) is body.inputs[2 + k]
            and node.inputs[2 + k] is not None
        }
        inside = {id(n) for n in nodes_in(body)}
        passes = Emitter(names, base, plan.opset)
        constants = Emitter(names, base, plan.opset, {})
        extra = _Extra()
        # Outer reads stay reads where the form allows it (tract's), and always in a loop nested
        # in another loop's body (which OpenVINO cannot run as a Scan anyway): tract gives a
        # nested Scan's pass-through state its first value on every outer iteration. Only
        # values that also start a state (tract panics on those) are carried then.
        keep_reads = id(node.graph) in self._in_loops or not self.outer_reads_as_states
        initials = {id(v) for v in node.inputs[2:] if v is not None}
        for value in outer_reads(body, [iteration, *states]):
            target = invariant.get(id(value))
            reads = None
            if self.rows_as_scan_inputs and target is None:
                reads = _rows_read(value, body, iteration, inside)
            if reads and id(value) not in initials:
                # Read only as row i (a TensorArray read): a scan input over its first N rows, so
                # nothing is copied per iteration (onnxruntime copies every carried state).
                element = ir.Value(name=names.fresh(f"{base}_{value.name}_row"))
                element.type = reads[0].outputs[0].type or value.type
                element.shape = None if value.shape is None else ir.Shape(value.shape[1:])
                for gather in reads:
                    row = gather.outputs[0]
                    row.replace_all_uses_with(element, replace_graph_outputs=True)
                    body.remove(gather, safe=True)
                count_1d = emit.unsqueeze(count, [0], hint="trips_1d")
                extra.scanned.append(emit.slice(value, 0, count_1d, 0, hint=f"{value.name}_rows"))
                extra.elements.append(element)
                continue
            if target is None and keep_reads and id(value) not in initials:
                continue
            array = constant_array(value) if target is None else None
            if array is not None and array.size <= _INLINED_CONSTANT_SIZE:
                # A small constant (a Reshape target, axes) is copied in, not carried: tract
                # needs such inputs constant ("Scan ... shape input is variable").
                target = constants.constant(array, hint=f"{value.name}_inside")
            if target is None:
                type_, shape = plan.types.get(id(value), (None, None))
                target = ir.Value(
                    name=names.fresh(f"{base}_{value.name}"),
                    type=value.type or type_,
                    shape=value.shape or shape,
                )
                out = passes.Identity(target, _hint=f"{value.name}_out")
                out.type, out.shape = target.type, target.shape
                extra.states.append(target)
                extra.outs.append(out)
                extra.inits.append(value)
            read_inside(body, value, target, inside)
        if extra.scanned:
            _remove_dead(body)  # the index computations of the rows now scanned
        prepend(body, list(constants.nodes))
        body.extend(passes.nodes)
        return extra


@dataclasses.dataclass
class _Extra:
    """What a rewrite adds to the Scan: pass-through states (their body outputs and outer
    initial values) and scan inputs (their per-iteration elements in the body)."""

    states: list[ir.Value] = dataclasses.field(default_factory=list)
    outs: list[ir.Value] = dataclasses.field(default_factory=list)
    inits: list[ir.Value] = dataclasses.field(default_factory=list)
    scanned: list[ir.Value] = dataclasses.field(default_factory=list)
    elements: list[ir.Value] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _Replacement:
    """The Loop being replaced and what the rewrite decided about its carried values."""

    node: ir.Node
    graph: ir.Graph
    body: ir.Graph
    results: list[ir.Value]  # the body's outputs as they were
    kept: list[int]  # carried values that stay states
    dropped: set[int]  # carried values nothing reads, gone
    last_rows: list[int]  # carried values the body never reads: their final value is a last row
    outer_finals: dict[int, ir.Value]  # carried values computed outside (counters, last rows)


def _counters_from_iterations(
    plan: _Plan, names: NameGenerator, base: str, emit: Emitter, count: ir.Value
) -> dict[int, ir.Value]:
    """Type the iteration number, read the condition as true, and read each counter from the
    iteration number; returns the counters' final values, computed outside the loop."""
    node, body = plan.node, plan.body
    iteration, cond_in = body.inputs[0], body.inputs[1]
    iteration.type = ir.TensorType(ir.DataType.INT64)
    iteration.shape = ir.Shape([])
    inner = Emitter(names, base, plan.opset)
    # The body runs only while the condition holds: a read of cond_in is a read of true.
    if cond_in.uses():
        cond_in.replace_all_uses_with(inner.constant(np.array(True), hint="cond_true"))
    # A counter is its start plus the iteration number: read from the scan input, it needs
    # no state (tract discards a state input no node reads, then fails), and its final
    # value is its start plus the trip count.
    outer_finals: dict[int, ir.Value] = {}
    for k in plan.counters:
        state, start = body.inputs[2 + k], node.inputs[2 + k]
        assert start is not None
        dtype = state.dtype or start.dtype or ir.DataType.INT64  # PyTorch leaves states untyped
        step = iteration
        if dtype != ir.DataType.INT64:
            step = inner.Cast(iteration, to=dtype.value, _hint="counter_step")
        if constant_int(start) == 0:  # no state to carry the start (tf2onnx's counters)
            counter = inner.Identity(step, _hint=f"{state.name}_now")
        else:
            counter = inner.Add(start, step, _hint=f"{state.name}_now")
        counter.type, counter.shape = state.type or ir.TensorType(dtype), ir.Shape([])
        state.replace_all_uses_with(counter, replace_graph_outputs=True)
        trips = count
        if dtype != ir.DataType.INT64:
            trips = emit.Cast(count, to=dtype.value, _hint="counter_trips")
        outer_finals[k] = emit.Add(start, trips, _hint=f"{state.name}_final")
    prepend(body, list(inner.nodes))
    return outer_finals


def _unread_states(
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
        if body.inputs[2 + k].uses():
            continue
        kept.remove(k)
        old = node.outputs[k]
        if not (old.uses() or old.is_graph_output()):
            dropped.add(k)
        elif body.outputs[1 + k] is body.inputs[2 + k]:
            unchanged.append(k)
        else:
            last_rows.append(k)
    return dropped, last_rows, unchanged


def _read_iteration(
    plan: _Plan,
    names: NameGenerator,
    base: str,
    emit: Emitter,
    extra: _Extra,
    iteration: ir.Value,
) -> None:
    """Nothing reads the iteration number: OpenVINO then runs the Scan once and tract drops
    the scan input and fails, so a state reads it (Max(k, i), the last iteration's number at
    the end; nothing reads that)."""
    body = plan.body
    reader = Emitter(names, base, plan.opset)
    seen = ir.Value(
        name=names.fresh(f"{base}_last_iteration"),
        type=ir.TensorType(ir.DataType.INT64),
        shape=ir.Shape([]),
    )
    latest = _extreme(reader, "Max", seen, iteration, "last_iteration")
    latest.type, latest.shape = seen.type, seen.shape
    body.extend(reader.nodes)
    extra.states.append(seen)
    extra.outs.append(latest)
    extra.inits.append(emit.int64s(0, hint="first_iteration"))


def _replace_by_scan(
    loop: _Replacement,
    names: NameGenerator,
    base: str,
    emit: Emitter,
    after: Emitter,
    extra: _Extra,
) -> None:
    """Put the Scan in the Loop's place: its outputs take the Loop outputs' names and uses."""
    node, results, kept, last_rows = loop.node, loop.results, loop.kept, loop.last_rows
    carried = len(node.inputs) - 2
    finals = [ir.Value(name=names.fresh(f"{base}_{v.name}_final")) for v in extra.inits]
    # Shapes from the body (the exporter's declarations of the Loop's outputs may be wrong:
    # tf2onnx declares a scan output with the rank of one iteration's piece).
    new_outputs = {
        j: ir.Value(
            name=names.fresh(f"{old.name or base}_scan"),
            type=old.type or results[1 + j].type,
            shape=_output_shape(results[1 + j], stacked=j >= carried),
        )
        for j, old in enumerate(node.outputs)
        if j not in loop.outer_finals and j not in loop.dropped
    }
    for k in last_rows:
        rows = new_outputs[k]
        rows.name = names.fresh(f"{base}_{results[1 + k].name}_rows")
        rows.shape = _output_shape(results[1 + k], stacked=True)
        last = after.int64s(-1, hint="last")
        loop.outer_finals[k] = after.Gather(rows, last, axis=0, _hint="final")
        loop.outer_finals[k].shape = _output_shape(results[1 + k], stacked=False)
        del new_outputs[k]
        new_outputs[len(node.outputs) + k] = rows
    del node.attributes["body"]
    emit.Scan(
        *(node.inputs[2 + k] for k in kept),
        *extra.inits,
        *extra.scanned,
        body=loop.body,
        num_scan_inputs=len(extra.scanned),
        _outputs=[
            *(new_outputs[k] for k in kept),
            *finals,
            *(new_outputs[j] for j in range(carried, len(node.outputs))),
            *(new_outputs[len(node.outputs) + k] for k in last_rows),
        ],
        _name=names.fresh(f"{base}_scan"),
        _doc_string=node.doc_string,
    )
    loop.graph.insert_before(node, [*emit.nodes, *after.nodes])
    for j, old in enumerate(node.outputs):
        if j in loop.dropped:
            continue
        new = new_outputs.get(j) or loop.outer_finals[j]
        if new.type is None:
            new.type = old.type
        if old.is_graph_output() and old.shape is not None:
            new.shape = old.shape  # the graph's interface, as declared
        elif j in loop.outer_finals and j not in last_rows and new.shape is None:
            new.shape = ir.Shape([])  # a counter
        name = old.name
        old.replace_all_uses_with(new, replace_graph_outputs=True)
        old.name = None
        new.name = name
    loop.graph.remove(node, safe=True)


def strip_symbolic(value: ir.Value) -> None:
    """Forget the symbolic names in ``value``'s shape (unknown dimensions stay unknown)."""
    shape = value.shape
    if shape is not None and any(isinstance(d, ir.SymbolicDim) for d in shape):
        value.shape = ir.Shape([d if isinstance(d, int) else None for d in shape])


def _infer_shapes(model: ir.Model) -> dict[str, ir.Shape]:
    try:
        proto = onnx.shape_inference.infer_shapes(
            ir.serde.serialize_model(model), check_type=False, strict_mode=False
        )
    except Exception:  # best effort: a state without a shape is declared without one
        return {}
    shapes: dict[str, ir.Shape] = {}
    graphs = [proto.graph]
    while graphs:
        graph = graphs.pop()
        for info in [*graph.value_info, *graph.input, *graph.output]:
            if info.type.HasField("tensor_type") and info.type.tensor_type.HasField("shape"):
                dims = [
                    d.dim_value if d.HasField("dim_value") else None
                    for d in info.type.tensor_type.shape.dim
                ]
                shapes.setdefault(info.name, ir.Shape(dims))
        for node in graph.node:
            graphs += [a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH]
            graphs += [g for a in node.attribute for g in a.graphs]
    return shapes


def _output_shape(result: ir.Value, *, stacked: bool) -> ir.Shape | None:
    shape = result.shape
    if shape is None:
        return None
    dims = [d if isinstance(d, int) else None for d in shape]
    return ir.Shape([None, *dims] if stacked else dims)


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


def _graphs_in_loop_bodies(model: ir.Model) -> set[int]:
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


def _through_identity(value: ir.Value, body: ir.Graph) -> ir.Value:
    """What ``value`` copies through the body's ``Identity`` nodes (itself when none)."""
    producer = value.producer()
    while is_onnx(producer, "Identity") and producer is not None and producer.graph is body:
        source = producer.inputs[0]
        if source is None:
            break
        value, producer = source, source.producer()
    return value


def _passes_through(cond_out: ir.Value, cond_in: ir.Value) -> bool:
    value = cond_out
    while value is not cond_in:
        producer = value.producer()
        if is_onnx(producer, "Identity") and producer is not None:
            value = producer.inputs[0]  # type: ignore[assignment]
            continue
        array = None if producer is None else _bool_constant(value)
        return array is True
    return True


def _bool_constant(value: ir.Value) -> bool | None:
    array = constant_array(value)
    if array is None or array.size != 1:
        return None
    return bool(array.reshape(()))


class _Condition:
    """Reads a Loop body's condition as ``And`` of bounds on the iteration number."""

    _COMPARE: ClassVar[dict[str, tuple[int, int]]] = {
        "Less": (0, 0),
        "LessOrEqual": (0, 1),
        "Greater": (1, 0),
        "GreaterOrEqual": (1, 1),
    }

    def __init__(self, node: ir.Node, body: ir.Graph, types: TypeOracle) -> None:
        self.types = types
        self.node = node
        self.body = body
        self.inputs = list(body.inputs)
        self.carried = len(node.inputs) - 2
        self.why = ""
        self._body_ids = {id(v) for v in body.inputs}

    def terms(self, cond: ir.Value) -> list[_Term] | None:
        producer = cond.producer()
        if is_onnx(producer, "Identity") and producer is not None and producer.graph is self.body:
            return self.terms(producer.inputs[0])  # type: ignore[arg-type]
        if is_onnx(producer, "And") and producer is not None and producer.graph is self.body:
            found: list[_Term] = []
            for operand in producer.inputs:
                if operand is None:
                    return None
                sub = self.terms(operand)
                if sub is None:
                    return None
                found += sub
            return found
        if (
            producer is not None
            and producer.graph is self.body
            and is_onnx(producer, *self._COMPARE)
        ):
            side, extra = self._COMPARE[producer.op_type]
            a, b = producer.inputs[side], producer.inputs[1 - side]
            if a is None or b is None:
                return None
            linear = self.linear(a)
            limit = self.invariant(b)
            if linear is None:
                self.why = f"'{a.name}' does not step by one per iteration"
                return None
            if limit is None:
                self.why = f"'{b.name}' is not fixed when the loop starts"
                return None
            return [_Term(linear, limit, extra)]
        self.why = f"'{cond.name}' is not an And of comparisons with the iteration number"
        return None

    def _dtype(self, value: ir.Value) -> ir.DataType | None:
        return value.dtype or element_dtype(self.types.type_of(value))

    def _inside(self, value: ir.Value) -> bool:
        producer = value.producer()
        if producer is None:
            return id(value) in self._body_ids or (
                value.is_initializer() and value.graph is self.body
            )
        return producer.graph is self.body

    def linear(self, value: ir.Value) -> _Linear | None:
        producer = value.producer()
        if value is self.inputs[0]:
            return _Linear(None, 0)
        if id(value) in self._body_ids:
            k = self.inputs.index(value) - 2
            if k >= 0 and self.is_counter(k):
                return _Linear(self.node.inputs[2 + k], 0)
            return None
        if producer is None or producer.graph is not self.body:
            return None
        if is_onnx(producer, "Identity"):
            return self.linear(producer.inputs[0])  # type: ignore[arg-type]
        if is_onnx(producer, "Cast"):
            source = producer.inputs[0]
            if source is None or self._dtype(source) not in _INTS:
                return None
            return self.linear(source)
        if is_onnx(producer, "Add", "Sub") and len(producer.inputs) == 2:
            a, b = producer.inputs
            step = _step(b)
            if step is not None and a is not None:
                inner = self.linear(a)
                sign = 1 if producer.op_type == "Add" else -1
                return None if inner is None else _Linear(inner.base, inner.offset + sign * step)
            step = _step(a)
            if step is not None and b is not None and producer.op_type == "Add":
                inner = self.linear(b)
                return None if inner is None else _Linear(inner.base, inner.offset + step)
        return None

    def is_counter(self, k: int) -> bool:
        """Whether carried value ``k`` starts from the Loop's input and steps by one."""
        state = self.inputs[2 + k]
        if self._dtype(state) not in _INTS or self.node.inputs[2 + k] is None:
            return False
        out = self.body.outputs[1 + k]
        producer = out.producer()
        while is_onnx(producer, "Identity") and producer is not None:
            producer = producer.inputs[0].producer()  # type: ignore[union-attr]
        if not is_onnx(producer, "Add") or producer is None or producer.graph is not self.body:
            return False
        a, b = producer.inputs
        return (a is state and _step(b) == 1) or (b is state and _step(a) == 1)

    def invariant(self, value: ir.Value) -> ir.Value | None:
        """The outer integer value ``value`` equals at every iteration, if there is one (or a
        float constant of an integer value: tf2onnx's ``Cast<float>(limit)`` once folded at fixed
        input shapes)."""
        if _integral_float(value):
            return value
        if not self._inside(value):
            return value if self._dtype(value) in _INTS else None
        if id(value) in self._body_ids:
            outer = self._pass_through(value)
            return outer if outer is not None and self._dtype(outer) in _INTS else None
        producer = value.producer()
        if is_onnx(producer, "Cast", "Identity") and producer is not None:
            source = producer.inputs[0]
            if source is None or self._dtype(source) not in _INTS:
                return None
            return self.invariant(source)
        if self._dtype(value) in _INTS and self._hoistable(value):
            return value  # the body recomputes it from outer values: computed once, before
        return None

    def _hoistable(self, value: ir.Value, depth: int = 0) -> bool:
        """Whether the body computes ``value`` from outer values, pass-through states and
        constants only, through ops without side effects (PyTorch's ``while_loop`` recomputes
        its limit, ``Squeeze(Shape(xs, 0, 1))``, inside the body on every iteration)."""
        if depth > _HOIST_DEPTH:
            return False
        if not self._inside(value) or constant_array(value) is not None:
            return True
        if id(value) in self._body_ids:
            return self._pass_through(value) is not None
        producer = value.producer()
        if producer is None or producer.graph is not self.body:
            return False
        if not is_onnx(producer, *_HOISTABLE) or producer.outputs[0] is not value:
            return False
        return all(v is None or self._hoistable(v, depth + 1) for v in producer.inputs)

    def _pass_through(self, value: ir.Value) -> ir.Value | None:
        """The Loop input a body input equals at every iteration (a state passed through)."""
        k = self.inputs.index(value) - 2
        if k >= 0 and _through_identity(self.body.outputs[1 + k], self.body) is value:
            return self.node.inputs[2 + k]
        return None


#: Ops a loop-invariant limit is recomputed with inside a body (no side effects, no subgraphs).
_HOISTABLE = frozenset(
    {
        "Identity", "Cast", "Shape", "Size", "Squeeze", "Unsqueeze", "Reshape", "Gather",
        "Slice", "Concat", "Add", "Sub", "Mul", "Div", "Min", "Max", "Neg", "Abs", "Constant",
    }
)  # fmt: skip
_HOIST_DEPTH = 32
_INLINED_CONSTANT_SIZE = 64  # outer constants up to this many elements are copied into a body

#: Ops whose output has the shape of their first input: ``Shape`` of their output is ``Shape`` of
#: that input, for telling trip counts computed alike.
_SHAPE_OF_FIRST = frozenset(
    {"ReverseSequence", "Identity", "Cast", "Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Not"}
)


def _trip_count_key(node: ir.Node, terms: list[_Term] | None) -> Any:
    """A value equal for two Loops whose trip counts are computed alike from the same values."""
    memo: dict[int, Any] = {}

    def key(value: ir.Value | None, depth: int = 0) -> Any:
        if value is None:
            return None
        if id(value) in memo:
            return memo[id(value)]
        array = constant_array(value)
        producer = value.producer()
        result: Any
        if array is not None:
            result = ("const", array.dtype.str, array.shape, array.tobytes())
        elif producer is None or depth > 32 or producer.graph is not node.graph:
            result = ("value", id(value))
        else:
            attributes = tuple(
                sorted((name, repr(attr.value)) for name, attr in producer.attributes.items())
            )
            if is_onnx(producer, "Shape"):
                inputs = (shape_key(producer.inputs[0], depth + 1),)
            else:
                inputs = tuple(key(v, depth + 1) for v in producer.inputs)
            result = (
                producer.domain,
                producer.op_type,
                attributes,
                list(producer.outputs).index(value),
                inputs,
            )
        memo[id(value)] = result
        return result

    def shape_key(value: ir.Value | None, depth: int) -> Any:
        """The key of what decides ``value``'s shape: through shape-keeping ops, and through
        ``Transpose`` (keeping its permutation)."""
        producer = None if value is None else value.producer()
        if producer is not None and producer.graph is node.graph and depth <= 32:
            if is_onnx(producer, *_SHAPE_OF_FIRST):
                return shape_key(producer.inputs[0], depth + 1)
            if is_onnx(producer, "Transpose"):
                perm = producer.attributes.get("perm")
                return (
                    "Transpose",
                    repr(perm.value if perm else None),
                    shape_key(producer.inputs[0], depth + 1),
                )
        return key(value, depth)

    m = node.inputs[0] if node.inputs else None
    cond0 = node.inputs[1] if len(node.inputs) > 1 else None
    term_keys = None
    if terms is not None:
        term_keys = tuple(
            sorted(
                (
                    repr(key(t.limit)),
                    repr(key(t.linear.base)),
                    t.linear.offset,
                    t.extra,
                )
                for t in terms
            )
        )
    return (repr(key(m)), repr(key(cond0)), term_keys)


def _trip_count(emit: Emitter, node: ir.Node, terms: list[_Term] | None) -> ir.Value:
    """The Loop's trip count as an int64 scalar, computed before it."""
    m = node.inputs[0] if node.inputs else None
    scalar = emit.int64s([], hint="scalar")
    count: ir.Value | None = None
    if m is not None:
        count = emit.reshape(m, scalar, hint="max_trip_count")
    if terms is not None:
        bound: ir.Value | None = None
        hoisted: dict[int, ir.Value] = {}
        body = node.attributes["body"].as_graph()
        for j, term in enumerate(terms):
            limit = _int64(emit, _hoist(emit, node, body, term.limit, hoisted), f"limit_{j}")
            shift = term.extra - term.linear.offset
            if term.linear.base is not None:
                limit = emit.Sub(
                    limit, _int64(emit, term.linear.base, f"start_{j}"), _hint=f"span_{j}"
                )
            # iteration i + 1 runs while i < limit + shift, so i + 1 iterations while i < that.
            value = emit.Add(limit, emit.int64s(shift + 1, hint="shift"), _hint=f"runs_{j}")
            bound = value if bound is None else _extreme(emit, "Min", bound, value, "runs")
        assert bound is not None
        bound = _extreme(emit, "Max", bound, emit.int64s(1, hint="one"), "at_least_one")
        count = bound if count is None else _extreme(emit, "Min", count, bound, "trips")
    assert count is not None
    count = emit.reshape(count, scalar, hint="trip_count")
    cond0 = node.inputs[1] if len(node.inputs) > 1 else None
    if cond0 is not None:
        cond0 = emit.reshape(cond0, scalar, hint="runs_at_all")
        count = emit.Where(cond0, count, emit.int64s(0, hint="zero"), _hint="trips")
    count = _extreme(emit, "Max", count, emit.int64s(0, hint="zero"), "trip_count")
    count.dtype = ir.DataType.INT64
    count.shape = ir.Shape([])
    return count


def _step(value: ir.Value | None) -> int | None:
    """A constant integer step, also as PyTorch writes it: ``CastLike(1, counter)`` (the
    counter is an integer, or the comparison it feeds is refused as not stepping by one)."""
    if value is None:
        return None
    producer = value.producer()
    if is_onnx(producer, "CastLike") and producer is not None and producer.inputs[0] is not None:
        return constant_int(producer.inputs[0])
    return constant_int(value)


def _hoist(
    emit: Emitter, node: ir.Node, body: ir.Graph, value: ir.Value, done: dict[int, ir.Value]
) -> ir.Value:
    """``value`` computed before the Loop: a body value ``_Condition._hoistable`` accepted is
    rebuilt from the Loop's inputs with the same ops; an outer value is itself."""
    if id(value) in done:
        return done[id(value)]
    producer = value.producer()
    inside = (producer.graph is body) if producer is not None else value.graph is body
    result = value
    if value in body.inputs:
        outer = node.inputs[list(body.inputs).index(value)]
        assert outer is not None  # a pass-through state, checked when planning
        result = outer
    elif inside and (array := constant_array(value)) is not None:
        result = emit.constant(array, hint=f"{value.name}_outside")
    elif inside and producer is not None:
        inputs = [None if v is None else _hoist(emit, node, body, v, done) for v in producer.inputs]
        result = getattr(emit, producer.op_type)(
            *inputs, **dict(producer.attributes), _hint=f"{value.name}_outside"
        )
        if value.dtype is not None:
            result.dtype = value.dtype
    done[id(value)] = result
    return result


def _extreme(emit: Emitter, op: str, a: ir.Value, b: ir.Value, hint: str) -> ir.Value:
    """``Min``/``Max`` of two int64 values (int64 ``Min``/``Max`` exist from opset 12; before,
    a ``Where`` on ``Less``)."""
    if emit.opset >= 12:
        return getattr(emit, op)(a, b, _hint=hint)
    less = emit.Less(a, b, _hint=f"{hint}_less")
    first, second = (a, b) if op == "Min" else (b, a)
    return emit.Where(less, first, second, _hint=hint)


def _int64(emit: Emitter, value: ir.Value, hint: str) -> ir.Value:
    flat = emit.reshape(value, emit.int64s([], hint="scalar"), hint=hint)
    if value.dtype == ir.DataType.INT64:
        return flat
    return emit.Cast(flat, to=ir.DataType.INT64.value, _hint=f"{hint}_int64")


def _remove_dead(body: ir.Graph, keep: list[ir.Value] | None = None) -> None:
    """Remove the body's nodes whose outputs nothing reads (the condition, mostly); ``keep``:
    values to keep besides the body's outputs."""
    outputs = {id(v) for v in [*body.outputs, *(keep or [])]}
    for node in reversed(list(body)):
        if any(v.uses() or id(v) in outputs for v in node.outputs):
            continue
        body.remove(node, safe=True)


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


class LoopToScanRows(LoopToScan):
    """Loops as Scans (as ``LoopToScan``), TensorArray reads as scan inputs (onnxruntime)."""

    rows_as_scan_inputs = True


class LoopToScanReads(LoopToScan):
    """Loops as Scans (as ``LoopToScan``), outer reads left as reads where a runtime takes
    them (tract), so onnxruntime copies nothing extra per iteration."""

    outer_reads_as_states = False


def _integral_float(value: ir.Value) -> bool:
    """A one-element float constant holding an integer (exact in float32: below 2**24)."""
    array = constant_array(value)
    if array is None or array.size != 1 or array.dtype.kind != "f":
        return False
    number = float(array.reshape(()))
    return number.is_integer() and abs(number) < 2**24


def _block(node: ir.Node, reason: str) -> None:
    """Why the Loop stays a Loop, for ``require-no-loop`` to name (unless a pass before, which
    knows more, said: ``freeze-bounded-loops``)."""
    if blocked(node, NO_LOOP) is None:
        block(node, reason, NO_LOOP)


class LoopToScanConstant(LoopToScanReads):
    """Loops as Scans (as ``LoopToScanReads``) only where ``M`` is a constant the body's
    condition does not shorten and ``unroll-constant-scans`` unrolls (1 to 256 iterations):
    the converters that lack Scan but run Loops of an explicit count (onnx2tf, after
    ``explicit-loop-counts``) keep their other Loops. A loop whose count is the length of
    another one's result becomes constant only once that one is unrolled: the onnx2tf row runs
    the pair twice (stacked RNNs of two layers)."""

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        from seqlower.passes.targets.unroll_constant_scans import UNROLL_LIMIT, evaluate

        node = site.node
        body = node.attributes["body"].as_graph() if "body" in node.attributes else None
        m = node.inputs[0] if node.inputs else None
        if body is None or m is None or len(body.inputs) < 2 or len(body.outputs) < 1:
            return None
        if not _passes_through(body.outputs[0], body.inputs[1]):
            return None
        # Shapes as ONNX infers them: a stacked RNN's second layer counts the rows the first
        # one, unrolled by the previous run of these passes, computes.
        count = evaluate(m, site.opset, self._inferred_shape)
        if count is None or count.size != 1 or not 1 <= int(count.reshape(-1)[0]) <= UNROLL_LIMIT:
            return None
        plan = super().plan(site, types)
        if plan is not None:
            plan.constant_count = int(count.reshape(-1)[0])
        return plan

    def rewrite(self, plan: _Plan, names: NameGenerator) -> None:
        # The count as a constant: unroll-constant-scans reads the Scan's length from it (it
        # does not infer the shapes this count was evaluated with).
        graph = plan.node.graph
        assert graph is not None and plan.constant_count is not None
        emit = Emitter(names, plan.node.name or "Loop", plan.opset, self.constant_pool(graph))
        count = emit.int64s(plan.constant_count, hint="constant_count")
        graph.insert_before(plan.node, emit.nodes)
        plan.node.replace_input_with(0, count)
        super().rewrite(plan, names)
