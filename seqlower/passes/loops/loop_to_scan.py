"""A ``Loop`` whose trip count is fixed when it starts, as a ``Scan`` (for runtimes without Loop).

tract has no ``Loop`` at all, but runs ``Scan``; OpenVINO runs both (its target keeps Loops,
made strict by :class:`~seqlower.passes.loops.strict_loop_bodies.StrictLoopBodies`). The loops
tf2onnx writes for ``tf.while_loop`` (Keras ``Bidirectional``/``TimeDistributed``,
``tf.map_fn``, ``bidirectional_dynamic_rnn``) stop on a condition that is
known when the loop starts, as do Paddle's ``while i < n`` and jax2onnx's loops: the induction
analysis (``_induction.py``) reads the condition as bounds on counters and computes the trip
count ``N`` before the loop.

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
(:class:`~seqlower.passes.checks.require_no_loop.RequireNoLoop`).

No runtime runs a ``Scan`` of zero iterations correctly (onnxruntime and OpenVINO fail, tract
returns a wrong state shape): the README lists it among the limits. ``rows_as_scan_inputs`` also
turns ``Gather(x, i)`` reads into scan inputs over ``x[:N]``, which onnxruntime runs as fast
as the Loop (it copies every carried state per iteration), but tract cannot analyse that
computed ``Slice`` and OpenVINO returned wrong numbers for it on two test loops: onnxruntime only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from seqlower._graphs import subgraphs_of
from seqlower.passes._base import NodeLoweringPass, Rewrite, Site, rewire
from seqlower.passes._emit import Emitter, fits_constant
from seqlower.passes._first_iteration import FirstIteration, RowRead, first_iteration
from seqlower.passes._induction import (
    Condition,
    Term,
    extreme,
    passes_through,
    through_identity,
    trip_count,
    trip_count_key,
)
from seqlower.passes._ir import (
    NO_LOOP,
    block,
    blocked,
    constant_array,
    constant_int,
    is_onnx,
    nodes_in,
    strip_symbolic,
)
from seqlower.passes._shared import outer_reads, prepend, read_inside, remove_dead
from seqlower.passes._trip_count import UNROLL_LIMIT, evaluate
from seqlower.passes._types import TypeOracle

__all__ = ["LoopToScan"]


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    opset: int
    terms: list[Term] | None  # None: the condition is passed through (the trip count is M)
    counters: list[int]  # integer states that step by a constant: read from the iteration number
    steps: dict[int, int]  # their steps
    types: dict[int, tuple[ir.TypeProtocol | None, ir.Shape | None]]  # of the outer reads
    constant_count: int | None = None  # M evaluated at planning (``constant_counts``)
    #: Run as a Scan of at least one iteration, its results masked when it runs none, with
    #: what makes the body safe on that iteration (``_first_iteration``); None: as it is.
    once: FirstIteration | None = None
    #: Run as a Scan of exactly the trip count inside an ``If`` on ``count > 0``, whose other
    #: branch gives the initial states and empty scan outputs of these row shapes (by Loop scan
    #: output): a Loop that may run none whose body is not proven safe on iteration 0.
    guarded: list[tuple[int, ...]] | None = None


class LoopToScan(NodeLoweringPass[_Plan]):
    """Loops whose trip count is fixed when they start, as Scans over ``Range(0, N)``."""

    op_type = "Loop"
    takes_all = False
    #: Whether an outer value the body reads only as row ``i`` (a TensorArray read,
    #: ``Gather(x, i)``) becomes a scan input over its first N rows instead of a carried state.
    #: onnxruntime copies every carried state on every iteration, so this form is what makes the
    #: Scan as fast as the Loop there; tract cannot analyse the computed ``Slice`` when N depends
    #: on data, so the targets use the portable form.
    rows_as_scan_inputs: bool
    #: Whether every value the body reads from outside is carried as a pass-through state
    #: (OpenVINO's Scan takes no outer-scope reads); otherwise only those that also start a
    #: state are (tract panics on those), and the rest stay reads, which onnxruntime does not
    #: copy on every iteration.
    outer_reads_as_states: bool
    #: Whether a state the body grows by ``Concat`` is carried (the rows that unroll constant
    #: Scans afterwards, where it may); tract's keeps such a Loop, named.
    grown_states: bool
    #: Whether a Loop whose body cannot fail on iteration 0 runs as a Scan of at least one
    #: iteration, its results masked when the Loop runs none (tract's zero-iteration Scan
    #: returns wrong states; onnxruntime and OpenVINO fail on it).
    guards_zero_trips: bool

    #: Whether only Loops whose ``M`` is a constant the body's condition does not shorten, and
    #: that ``unroll-constant-scans`` unrolls (1 to 256 iterations), become Scans: the converters
    #: that lack Scan but run Loops of an explicit count (onnx2tf, after ``explicit-loop-counts``)
    #: keep their other Loops. A loop whose count is the length of another one's result becomes
    #: constant only once that one is unrolled: the onnx2tf row runs the pair twice (stacked RNNs
    #: of two layers).
    constant_counts: bool

    def __init__(
        self,
        *,
        rows_as_scan_inputs: bool = False,
        outer_reads_as_states: bool = True,
        grown_states: bool = True,
        guards_zero_trips: bool = False,
        constant_counts: bool = False,
    ) -> None:
        super().__init__()
        self.rows_as_scan_inputs = rows_as_scan_inputs
        self.outer_reads_as_states = outer_reads_as_states
        self.grown_states = grown_states
        self.guards_zero_trips = guards_zero_trips
        self.constant_counts = constant_counts

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self._model = model
        self._shapes: dict[str, ir.Shape] | None = None
        self._symbols: dict[str, tuple[int | str | None, ...]] | None = None
        self._in_loops = _graphs_in_loop_bodies(model)
        self._trip_counts: dict[tuple[int, Any, bool], tuple[ir.Value, ir.Value]] = {}
        self._masks: dict[int, tuple[ir.Value, ir.Value]] = {}  # by the Range: (ran, rows)
        return super().call(model)

    def _plan_constant(self, site: Site, types: TypeOracle) -> _Plan | None:
        """The plan of a Loop of a constant count (``constant_counts``), that count in it."""
        node = site.node
        body = node.attributes["body"].as_graph() if "body" in node.attributes else None
        m = node.inputs[0] if node.inputs else None
        if body is None or m is None or len(body.inputs) < 2 or len(body.outputs) < 1:
            return None
        if not passes_through(body.outputs[0], body.inputs[1]):
            return None
        # Shapes as ONNX infers them: a stacked RNN's second layer counts the rows the first
        # one, unrolled by the previous run of these passes, computes.
        count = evaluate(m, site.opset, self._inferred_shape)
        if count is None or count.size != 1 or not 1 <= int(count.reshape(-1)[0]) <= UNROLL_LIMIT:
            return None
        plan = self._plan_loop(site, types)
        if plan is not None:
            plan.constant_count = int(count.reshape(-1)[0])
        return plan

    def _inferred_shape(self, value: ir.Value) -> ir.Shape | None:
        """The shape ONNX's inference gives ``value`` (by name; names are unique in a valid
        model), run at most once per pass run; tract needs the rank of every state."""
        if self._shapes is None:
            self._shapes = _infer_shapes(self._model)
        return self._shapes.get(value.name or "")

    def _symbolic_shape(self, value: ir.Value) -> tuple[int | str | None, ...] | None:
        """The shape ONNX's inference with data propagation gives ``value`` in a copy without
        the exporter's value_info (whose symbolic names need not agree), a dimension's name
        the same for the same size (a batch dimension of an input and of zeros computed from
        its shape); else its sizes as declared or inferred, the rest unknown (None)."""
        if self._symbols is None:
            self._symbols = _infer_symbols(self._model)
        shape = self._symbols.get(value.name or "")
        if shape is not None:
            return shape
        declared = value.shape or self._inferred_shape(value)
        return (
            None if declared is None else tuple(d if isinstance(d, int) else None for d in declared)
        )

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        if self.constant_counts:
            return self._plan_constant(site, types)
        return self._plan_loop(site, types)

    def _plan_loop(self, site: Site, types: TypeOracle) -> _Plan | None:
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
        analysis = Condition(node, body, types)
        cond_out = body.outputs[0]
        terms: list[Term] | None
        if passes_through(cond_out, body.inputs[1]):
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
            if not terms and m is None:
                _block(node, "its trip count is not fixed: no M and a condition always true")
                return None
        steps = {
            k: step
            for k in range(carried)
            if (step := analysis.step(k)) is not None and analysis.is_integer(k)
        }
        counters = sorted(steps)
        unit = [k for k in counters if steps[k] == 1]  # what the first iteration's proof reads
        grown = None if self.grown_states else _grown_state(body, carried)
        if grown is not None:
            _block(
                node,
                f"its state '{grown}' grows by a Concat each iteration, and a Scan's states keep "
                "their shape (onnxruntime preallocates them, tract fixes their facts)",
            )
            return None
        for k in range(carried):
            ranks = self._ranks(node.inputs[2 + k], body.outputs[1 + k], types)
            if k not in steps and ranks is not None and body.inputs[2 + k].uses():
                _block(
                    node,
                    f"its state '{body.inputs[2 + k].name}' starts of rank {ranks[0]} and the "
                    f"body returns it of rank {ranks[1]} (Paddle's placeholder states), and a "
                    "Scan's states keep their shape",
                )
                return None
        reads = outer_reads(body, list(body.inputs))
        reads += [node.inputs[2 + k] for k in counters]  # type: ignore[misc]
        known = {
            id(v): (types.type_of(v), types.shape_of(v) or self._inferred_shape(v)) for v in reads
        }
        once = None
        if self.guards_zero_trips and not _runs(node, terms, site.opset, self._inferred_shape):
            found = first_iteration(node, types, unit, self._symbolic_shape)
            if not isinstance(found, str):
                found.in_place = _unknown_rows(found, node, body, terms) is not None
            if isinstance(found, str):
                rows = self._empty_rows(node, body, counters, terms)
                if isinstance(rows, str):
                    _block(
                        node,
                        "its trip count may be 0 and tract runs no Scan of zero iterations right "
                        "(it returns wrong states), but the Scan of at least one iteration that "
                        f"replaces it then runs the body on iteration 0, where {found}, and an "
                        f"If on the count cannot give its results when it runs none: {rows} "
                        "(--overwrite-input-shape with the input shapes may prove it)",
                    )
                    return None
                plan = _Plan(node, body, site.opset, terms, counters, steps, known)
                plan.guarded = rows
                return plan
            once = found
        return _Plan(node, body, site.opset, terms, counters, steps, known, once=once)

    def _ranks(
        self, start: ir.Value | None, result: ir.Value, types: TypeOracle
    ) -> tuple[int, int] | None:
        """The ranks of a state's initial value and of the body's value for it, when both are
        known and differ (a state the body never reads is no Scan state: its last row)."""
        if start is None:
            return None
        first = start.shape or types.shape_of(start) or self._inferred_shape(start)
        then = result.shape or self._inferred_shape(result)
        if first is None or then is None or first.rank() == then.rank():
            return None
        return first.rank(), then.rank()

    def _empty_rows(
        self, node: ir.Node, body: ir.Graph, counters: list[int], terms: list[Term] | None
    ) -> list[tuple[int, ...]] | str:
        """The row shape of each scan output, static (what an ``If``'s branch for zero
        iterations gives them: ``[0, *row]``), or why there is none: a count computed from
        values, not shapes only (tract 0.23.9 types no ``If`` whose branches' lengths come
        from values: 'Source node without a determined fact'), or a state the body never reads
        whose final value is read (a last scanned row, of no row then)."""
        sources = [*node.inputs[:2], *(v for t in terms or [] for v in (t.limit, t.value.start))]
        if not all(_from_shapes(v, node, body) for v in sources):
            return "its count is computed from values, not shapes only"
        carried = len(node.inputs) - 2
        for k in range(carried):
            if k in counters or body.inputs[2 + k].uses():
                continue
            final = node.outputs[k]
            if final.uses() or final.is_graph_output():
                return f"its state '{body.inputs[2 + k].name}' is never read"
        rows: list[tuple[int, ...]] = []
        for j, out in enumerate(node.outputs[carried:]):
            result = body.outputs[1 + carried + j]
            found = None
            for shape, skip in (
                (result.shape, 0),
                (self._inferred_shape(result), 0),
                (out.shape, 1),
                (self._inferred_shape(out), 1),
            ):
                dims = None if shape is None else list(shape)[skip:]
                if dims is not None and all(isinstance(d, int) for d in dims):
                    found = tuple(int(d) for d in dims)  # type: ignore[arg-type]
                    break
            if found is None:
                return f"the rows of its scan output '{out.name}' are of a size not known"
            rows.append(found)
        return rows

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        if plan.constant_count is not None:
            # The count as a constant: unroll-constant-scans reads the Scan's length from it
            # (it does not infer the shapes this count was evaluated with).
            count = ctx.before().int64s(plan.constant_count, hint="constant_count")
            ctx.insert()
            ctx.node.replace_input_with(0, count)
        self._rewrite_loop(plan, ctx)

    def _rewrite_loop(self, plan: _Plan, ctx: Rewrite) -> None:
        node, body = ctx.node, plan.body
        emit = ctx.before()
        count, iterations = self._iterations(emit, ctx.graph, plan)
        carried = len(node.inputs) - 2
        iteration = body.inputs[0]
        starts, scanned_rows = self._first_iteration_safe(ctx, emit, plan, iterations)
        outer_finals = _counters_from_iterations(ctx, plan, emit, count, starts)
        results = list(body.outputs)
        remove_dead(body, keep=results)
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
        remove_dead(body)
        extra = self._carry_outer_reads(ctx, plan, emit, count, kept, results)
        for rows, element in scanned_rows:
            extra.scanned.append(rows)
            extra.elements.append(element)
        body.inputs.clear()
        if iteration.uses() or not extra.scanned:
            if not iteration.uses():
                _read_iteration(ctx, plan, emit, extra, iteration)
            extra.scanned.append(iterations)
            extra.elements.append(iteration)
        _scan_body(ctx, plan, extra, states, kept, len(scan_outs))
        loop = _Replacement(node, body, results, kept, dropped, last_rows, outer_finals)
        loop.mask = self._masks.get(id(iterations))
        scan = _replace_by_scan(ctx, loop, emit, ctx.after(), extra)
        if plan.guarded is not None:
            _guard_by_if(ctx, plan, scan, count, iterations, len(node.outputs) - carried)

    def _iterations(self, emit: Emitter, graph: ir.Graph, plan: _Plan) -> tuple[ir.Value, ir.Value]:
        """The trip count and ``Range(0, count)``. Loops of one graph whose trip counts are
        computed alike (a bidirectional layer's two directions) share one Range: tract gives
        each Range of a data-dependent length its own symbol and then cannot join the two
        directions' outputs."""
        key = (id(graph), trip_count_key(plan.node, plan.terms), plan.once is not None)
        shared = self._trip_counts.get(key)
        if shared is not None:
            return shared
        count = trip_count(emit, plan.node, plan.terms)
        if plan.once is not None:  # at least one iteration; the results masked (_masked)
            ran = emit.Greater(count, emit.int64s(0, hint="none"), _hint="runs")
            rows = emit.arange(count, hint="rows")
            rows.shape = ir.Shape([None])
            # Max, not Where(ran, count, 1): tract 0.23.9 gave that 0 after a Where on a
            # constant false condition (a count folded to 0: tests/passes/test_zero_trip_rows.py).
            once = emit.int64s(1, hint="once")
            at_least_once = extreme(emit, "Max", count, once, "at_least_once")
            iterations = emit.arange(at_least_once, hint="iterations")
            self._masks[id(iterations)] = (ran, rows)
        else:
            iterations = emit.arange(count, hint="iterations")
        iterations.shape = ir.Shape([None])
        self._trip_counts[key] = (count, iterations)
        return count, iterations

    def _first_iteration_safe(
        self, ctx: Rewrite, emit: Emitter, plan: _Plan, iterations: ir.Value
    ) -> tuple[dict[int, ir.Value], list[tuple[ir.Value, ir.Value]]]:
        """The repairs that make the body safe on the iteration a Scan run at least once adds
        (``_first_iteration``), applied only when the Loop runs none: the counters' starts 0
        (returned by counter); each row read of a value of unknown length a scan input over
        its rows, padded (returned: the rows and the body's element)."""
        if plan.once is None or not (plan.once.rows or plan.once.starts):
            return {}, []
        ran = self._masks[id(iterations)][0]
        starts: dict[int, ir.Value] = {}
        for k in sorted(plan.once.starts):
            start = plan.node.inputs[2 + k]
            assert start is not None and start.dtype is not None
            zero = emit.constant(np.zeros((), start.dtype.numpy()), hint="zero_start")
            starts[k] = _like(emit.Where(ran, start, zero, _hint="safe_start"), start)
        padded: dict[int, ir.Value] = {}
        scanned: dict[tuple[int, int | None, tuple[int, ...]], tuple[ir.Value, ir.Value]] = {}
        for read in plan.once.rows:
            x = read.node.inputs[0]
            assert x is not None
            key = (id(x), read.counter, read.index)
            if plan.once.in_place and None in read.row:
                if key not in scanned:
                    scanned[key] = self._indices(ctx, emit, read, iterations, starts, ran)
                if id(x) not in padded:  # x and a zero row (in place), or its padded rows
                    appended = padded[id(x)] = _appended(emit, x, read)
                    appended.type = ir.TensorType(read.dtype)
                    appended.shape = ir.Shape([None, *read.row])
                read.node.replace_input_with(0, padded[id(x)])
                read.node.replace_input_with(1, scanned[key][1])
                continue
            if key not in scanned:
                if id(x) not in padded:
                    padded[id(x)] = _padded(emit, x, read, ran)
                positions = _positions(emit, read, iterations, starts)
                if read.index:  # an index of one element: [i], [[i]]...
                    target = emit.int64s([-1, *read.index], hint="index_shape")
                    positions = emit.reshape(positions, target, hint="indices")
                row = (*read.index, *read.row)
                rows = emit.Gather(padded[id(x)], positions, axis=0, _hint=f"{x.name}_rows")
                rows.type, rows.shape = ir.TensorType(read.dtype), ir.Shape([None, *row])
                element = ir.Value(
                    name=ctx.names.fresh(f"{ctx.base}_{x.name}_row"),
                    type=ir.TensorType(read.dtype),
                    shape=ir.Shape(row),
                )
                scanned[key] = (rows, element)
            rewire(read.node.outputs[0], scanned[key][1])
            plan.body.remove(read.node, safe=True)
        return starts, list(scanned.values())

    def _indices(
        self,
        ctx: Rewrite,
        emit: Emitter,
        read: RowRead,
        iterations: ir.Value,
        starts: dict[int, ir.Value],
        ran: ir.Value,
    ) -> tuple[ir.Value, ir.Value]:
        """A scan input of the rows the body reads of ``x`` with a zero row appended, and its
        element, for rows of a size unknown when lowering over a count from values: tract
        0.23.9 types no scan input of such rows, nor an outer read whose length comes from
        values ('Source node without a determined fact'), but an outer read of ``x`` and a zero
        row. Its indices: ``i`` (or the counter) where the Loop runs, shifted one further from
        the rows where out of ``x``'s (so the zero row is never read there: the Gather fails
        where the original's does), and the zero row's where it runs none."""
        x = read.node.inputs[0]
        assert x is not None
        positions = _positions(emit, read, iterations, starts)
        length = emit.squeeze(emit.dims(x, 0, 1, hint="row_count"), [0], hint="rows")
        zero = emit.int64s(0, hint="zero")
        int64 = ir.DataType.INT64.value
        past = emit.Cast(
            emit.GreaterOrEqual(positions, length, _hint="past"), to=int64, _hint="past"
        )
        before = emit.Cast(emit.Less(positions, zero, _hint="before"), to=int64, _hint="before")
        shifted = emit.Sub(emit.Add(positions, past, _hint="shifted"), before, _hint="shifted")
        indices = emit.Where(ran, shifted, length, _hint=f"{x.name}_indices")
        if read.index:  # an index of one element: [i], [[i]]...
            target = emit.int64s([-1, *read.index], hint="index_shape")
            indices = emit.reshape(indices, target, hint="indices")
        # int32: tract 0.23.9 types no Scan over int64s computed from a shape ('Impossible to
        # unify I64 with TDim'), and Gather takes either
        indices = emit.Cast(indices, to=ir.DataType.INT32.value, _hint=f"{x.name}_indices")
        indices.type = ir.TensorType(ir.DataType.INT32)
        indices.shape = ir.Shape([None, *read.index])
        element = ir.Value(
            name=ctx.names.fresh(f"{ctx.base}_{x.name}_index"),
            type=ir.TensorType(ir.DataType.INT32),
            shape=ir.Shape(read.index),
        )
        return indices, element

    def _carry_outer_reads(
        self,
        ctx: Rewrite,
        plan: _Plan,
        emit: Emitter,
        count: ir.Value,
        kept: list[int],
        results: list[ir.Value],
    ) -> _Extra:
        """Every value the body reads from outside becomes a state passed through (OpenVINO's
        Scan takes no outer reads), or a scan input when read only as row i (``rows``)."""
        node, body, names, base = ctx.node, plan.body, ctx.names, ctx.base
        iteration = body.inputs[0]
        states = [body.inputs[2 + k] for k in kept]
        # A state of an outer value the Loop passes through already is reused.
        invariant = {
            id(node.inputs[2 + k]): body.inputs[2 + k]
            for k in kept
            if through_identity(results[1 + k], body) is body.inputs[2 + k]
            and node.inputs[2 + k] is not None
        }
        inside = {id(n) for n in nodes_in(body)}
        passes = ctx.into(body, pool=None)
        constants = ctx.into(body, pool="own")
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
                    rewire(row, element)
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
            remove_dead(body)  # the index computations of the rows now scanned
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
    body: ir.Graph
    results: list[ir.Value]  # the body's outputs as they were
    kept: list[int]  # carried values that stay states
    dropped: set[int]  # carried values nothing reads, gone
    last_rows: list[int]  # carried values the body never reads: their final value is a last row
    outer_finals: dict[int, ir.Value]  # carried values computed outside (counters, last rows)
    mask: tuple[ir.Value, ir.Value] | None = None  # ran at all, Range(0, N): run at least once


def _scan_body(
    ctx: Rewrite,
    plan: _Plan,
    extra: _Extra,
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


def _counters_from_iterations(
    ctx: Rewrite, plan: _Plan, emit: Emitter, count: ir.Value, starts: dict[int, ir.Value]
) -> dict[int, ir.Value]:
    """Type the iteration number, read the condition as true, and read each counter from the
    iteration number (from ``starts[k]`` in the body, when given: ``_first_iteration_safe``);
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
    ctx: Rewrite, plan: _Plan, emit: Emitter, extra: _Extra, iteration: ir.Value
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


def _replace_by_scan(
    ctx: Rewrite, loop: _Replacement, emit: Emitter, after: Emitter, extra: _Extra
) -> ir.Node:
    """Put the Scan in the Loop's place: its outputs take the Loop outputs' names and uses."""
    node, results, kept, last_rows = loop.node, loop.results, loop.kept, loop.last_rows
    names, base = ctx.names, ctx.base
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
    first = emit.Scan(
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
    replacements: list[ir.Value | None] = []
    for j, old in enumerate(node.outputs):
        if j in loop.dropped:
            replacements.append(None)
            continue
        new = new_outputs.get(j) or loop.outer_finals[j]
        if new.type is None:
            new.type = old.type
        if old.is_graph_output() and old.shape is not None:
            new.shape = old.shape  # the graph's interface, as declared
        elif j in loop.outer_finals and j not in last_rows and new.shape is None and new.type:
            new.shape = ir.Shape([])  # a counter (typed: a shape alone is not written, warned)
        replacements.append(new)
    if loop.mask is not None:
        replacements = _masked(loop, after, replacements)
    ctx.replace(replacements, rename=True)
    scan = first.producer()
    assert scan is not None
    return scan


def _guard_by_if(
    ctx: Rewrite,
    plan: _Plan,
    scan: ir.Node,
    count: ir.Value,
    iterations: ir.Value,
    stacked: int,
) -> None:
    """The Scan (of exactly ``count`` iterations) moved into the then-branch of an ``If`` on
    ``count > 0``, whose else-branch gives the Loop's results when it runs none: each state its
    initial value, each scan output ``[0, *row]`` zeros; the If's outputs take the Scan's
    names and readers. No runtime runs a Scan of zero iterations right, and a body that may
    fail on an iteration the Loop never runs is then never run."""
    assert plan.guarded is not None
    graph, names = scan.graph, ctx.names
    assert isinstance(graph, ir.Graph)
    outer = ctx.into(graph, pool=None)
    runs = outer.Greater(count, outer.int64s(0, hint="none"), _hint="runs")
    states = len(scan.outputs) - stacked
    initials = [v for v in scan.inputs[:states]]
    otherwise = ctx.into(graph, pool=None, prefix=f"{ctx.base}_none")  # the else-branch's
    firsts = otherwise.Mul(iterations, otherwise.int64s(0, hint="zero"), _hint="first_rows")
    empty: list[ir.Value] = []
    for j, out in enumerate(scan.outputs):
        if j < states:
            initial = initials[j]
            assert initial is not None
            value = otherwise.Identity(initial, _hint=f"{out.name}_initial")
        else:
            # count (that is 0) rows of zeros: tract 0.23.9 wants both branches' facts alike,
            # and gives a Gather of Range(0, count) the Scan's own length
            row = plan.guarded[j - states]
            dtype = out.dtype or ir.DataType.FLOAT
            zeros = otherwise.constant(np.zeros((1, *row), dtype.numpy()), hint="zero_row")
            value = otherwise.Gather(zeros, firsts, axis=0, _hint=f"{out.name}_empty")
        value.type, value.shape = out.type, out.shape
        empty.append(value)
    results = []
    for out in scan.outputs:
        result = ir.Value(name=out.name, type=out.type, shape=out.shape)
        out.name = names.fresh(f"{out.name}_ran")
        rewire(out, result)
        results.append(result)
    then_graph = ir.Graph([], list(scan.outputs), nodes=[], name=names.fresh(f"{ctx.base}_ran"))
    else_graph = ir.Graph([], empty, nodes=otherwise.nodes, name=names.fresh(f"{ctx.base}_none"))
    branch = outer.If(
        runs,
        then_branch=then_graph,
        else_branch=else_graph,
        _outputs=results,
        _name=names.fresh(f"{ctx.base}_if_runs"),
    )
    del branch
    graph.insert_before(scan, outer.nodes)
    graph.remove(scan)
    then_graph.append(scan)


def _masked(
    loop: _Replacement, after: Emitter, replacements: list[ir.Value | None]
) -> list[ir.Value | None]:
    """The results of a Scan run at least once as the Loop's: a state's final value its
    initial one when the Loop runs no iteration, scan outputs their first N rows."""
    assert loop.mask is not None
    ran, rows = loop.mask
    carried = len(loop.node.inputs) - 2
    masked: list[ir.Value | None] = []
    for j, new in enumerate(replacements):
        computed = j in loop.outer_finals and j not in loop.last_rows  # counters, unchanged
        if new is not None and j >= carried:
            raw, new = new, _like(after.Gather(new, rows, axis=0, _hint="ran_rows"), new)
            if raw.shape is not None:  # N rows, or one when N is 0
                raw.shape = ir.Shape([None, *raw.shape[1:]])
        elif new is not None and not computed:
            initial = loop.node.inputs[2 + j]
            assert initial is not None
            new = _like(after.Where(ran, new, initial, _hint="ran_state"), new)
        masked.append(new)
    return masked


def _padded(emit: Emitter, x: ir.Value, read: RowRead, ran: ir.Value) -> ir.Value:
    """``x`` with one zero row appended when the Loop runs none (``ran`` false), else ``x``:
    a zero row appended (``_appended``), then the first ``len(x) + (not ran)`` rows taken by a
    ``Gather`` of a ``Range`` (tract types no ``ConstantOfShape`` or ``Pad`` of a size computed
    from values)."""
    appended = _appended(emit, x, read)
    extra = emit.Cast(emit.Not(ran, _hint="ran_none"), to=ir.DataType.INT64.value, _hint="pad")
    length = emit.squeeze(emit.dims(x, 0, 1, hint="pad_length"), [0], hint="length")
    rows = emit.arange(emit.Add(length, extra, _hint="padded_length"), hint="padded_rows")
    rows.shape = ir.Shape([None])
    padded = emit.Gather(appended, rows, axis=0, _hint=f"{x.name}_padded")
    padded.type, padded.shape = ir.TensorType(read.dtype), ir.Shape([None, *read.row])
    return padded


def _appended(emit: Emitter, x: ir.Value, read: RowRead) -> ir.Value:
    """``x`` with one zero row appended: a constant, or a ``ConstantOfShape`` of ``x``'s row
    shape (tract 0.23.9 evaluates no ``Pad`` of a bool mask)."""
    if all(isinstance(d, int) for d in read.row) and fits_constant(*(d or 0 for d in read.row)):
        zeros = np.zeros((1, *(d or 0 for d in read.row)), read.dtype.numpy())
        row = emit.constant(zeros, hint=f"{x.name}_pad")
    else:
        one = emit.int64s([1], hint="one_row")
        shape = emit.Concat(one, emit.dims(x, 1, hint="row_shape"), axis=0, _hint="pad_shape")
        zero = ir.Tensor(np.zeros(1, read.dtype.numpy()))
        row = emit.ConstantOfShape(shape, value=zero, _hint=f"{x.name}_pad")
    return emit.Concat(x, row, axis=0, _hint=f"{x.name}_appended")


def _positions(
    emit: Emitter, read: RowRead, iterations: ir.Value, starts: dict[int, ir.Value]
) -> ir.Value:
    """The rows of ``x`` the body reads, one per iteration: the iteration numbers, or a
    counter's, from its start (made int64)."""
    if read.counter is None:
        return iterations
    start = starts[read.counter]
    if start.dtype != ir.DataType.INT64:
        start = emit.Cast(start, to=ir.DataType.INT64.value, _hint="start_64")
    return emit.Add(iterations, start, _hint="positions")


def _like(value: ir.Value, model: ir.Value) -> ir.Value:
    value.type, value.shape = model.type, model.shape
    return value


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


def _infer_symbols(model: ir.Model) -> dict[str, tuple[int | str | None, ...]]:
    """Every value's shape by name as ONNX infers it with data propagation, the model's own
    value_info dropped first (``LoopToScan._symbolic_shape``)."""
    proto = ir.serde.serialize_model(model)
    graphs = [proto.graph]
    while graphs:
        graph = graphs.pop()
        del graph.value_info[:]
        for node in graph.node:
            graphs += [a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH]
            graphs += [g for a in node.attribute for g in a.graphs]
    try:
        proto = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
    except Exception:  # best effort: no names, the declared sizes only
        return {}
    shapes: dict[str, tuple[int | str | None, ...]] = {}
    graphs = [proto.graph]
    while graphs:
        graph = graphs.pop()
        for info in [*graph.value_info, *graph.input, *graph.output]:
            if info.type.HasField("tensor_type") and info.type.tensor_type.HasField("shape"):
                shapes.setdefault(
                    info.name,
                    tuple(
                        d.dim_value
                        if d.HasField("dim_value")
                        else (d.dim_param if d.HasField("dim_param") else None)
                        for d in info.type.tensor_type.shape.dim
                    ),
                )
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


_INLINED_CONSTANT_SIZE = 64  # outer constants up to this many elements are copied into a body


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


def _grown_state(body: ir.Graph, carried: int) -> str | None:
    """The name of a state the body returns as a ``Concat`` of itself (through ``Identity``s),
    or None."""
    for k in range(carried):
        value = body.outputs[1 + k]
        while is_onnx(value.producer(), "Identity"):
            value = value.producer().inputs[0]  # type: ignore[union-attr,assignment]
        producer = value.producer()
        if is_onnx(producer, "Concat") and body.inputs[2 + k] in producer.inputs:
            return body.inputs[2 + k].name or f"state {k}"
    return None


def _runs(
    node: ir.Node,
    terms: list[Term] | None,
    opset: int,
    shapes: Callable[[ir.Value], ir.Shape | None],
) -> bool:
    """Whether the Loop is known to run at least once: its condition true when it starts (a
    constant, or computed from constants and static shapes) and M, when given, at least 1. A
    loop whose trip count the body's condition sets (``terms``) runs once whenever it starts
    (``trip_count``: at least one)."""
    m = node.inputs[0] if node.inputs else None
    if m is None and terms is None:
        return False
    if m is not None:
        count = evaluate(m, opset, shapes)
        if count is None or count.size != 1 or int(count.reshape(-1)[0]) < 1:
            return False
    cond = node.inputs[1] if len(node.inputs) > 1 else None
    if cond is None:
        return True
    value = evaluate(cond, opset, shapes)
    return value is not None and value.size == 1 and bool(value.reshape(-1)[0])


def _unknown_rows(
    found: FirstIteration, node: ir.Node, body: ir.Graph, terms: list[Term] | None
) -> str | None:
    """The value whose rows, of a size unknown when lowering, the guard would scan over a trip
    count computed from values (not shapes only), or None."""
    rows = [r for r in found.rows if None in r.row]
    if not rows:
        return None
    sources = [*node.inputs[:2], *((t.limit, t.value.start) for t in terms or [])]
    flat = [v for item in sources for v in (item if isinstance(item, tuple) else (item,))]
    if all(_from_shapes(v, node, body) for v in flat):
        return None
    x = rows[0].node.inputs[0]
    return None if x is None else x.name


def _from_shapes(value: ir.Value | None, node: ir.Node, body: ir.Graph) -> bool:
    """Whether ``value`` is computed from constants and shapes only (a body state by its
    initial value), through at most a few hundred nodes."""
    pending, seen = [value], 0
    while pending:
        current = pending.pop()
        if current is None or constant_array(current) is not None:
            continue
        if current in body.inputs[2:]:
            pending.append(node.inputs[list(body.inputs).index(current)])
            continue
        producer = current.producer()
        seen += 1
        if producer is None or seen > 300 or subgraphs_of(producer):
            return False
        if not is_onnx(producer, "Shape", "Size"):
            pending += producer.inputs
    return True


def _block(node: ir.Node, reason: str) -> None:
    """Why the Loop stays a Loop, for ``require-no-loop`` to name (unless a pass before, which
    knows more, said: ``freeze-bounded-loops``)."""
    if blocked(node, NO_LOOP) is None:
        block(node, reason, NO_LOOP)
