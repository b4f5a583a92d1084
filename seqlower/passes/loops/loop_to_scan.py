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
from typing import Any

import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._emit import Emitter
from seqlower.passes._induction import passes_through
from seqlower.passes._shared import remove_dead
from seqlower.passes._trip_count import UNROLL_LIMIT, evaluate
from seqlower.passes._trip_counts import extreme, trip_count, trip_count_key
from seqlower.passes._types import TypeOracle
from seqlower.passes.loops._outer_reads import carry_outer_reads, graphs_in_loop_bodies
from seqlower.passes.loops._scan_body import (
    Extra,
    counters_from_iterations,
    read_iteration,
    scan_body,
    unread_states,
)
from seqlower.passes.loops._scan_plan import LoopShapes, ScanPlan, plan_loop
from seqlower.passes.loops._zero_trips import (
    first_iteration_safe,
    guard_by_if,
    guard_iteration,
    masked,
)

__all__ = ["LoopToScan"]


class LoopToScan(NodeLoweringPass[ScanPlan]):
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
    #: Whether a Loop that may run none runs as a Scan of at least one iteration, its results
    #: masked when the Loop runs none, its body proven safe on iteration 0 or run under an
    #: ``If`` on the count (tract's zero-iteration Scan returns wrong states; onnxruntime and
    #: OpenVINO fail on it).
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
        self._shapes = LoopShapes(model)
        self._in_loops = graphs_in_loop_bodies(model)
        self._trip_counts: dict[tuple[int, Any, bool], tuple[ir.Value, ir.Value]] = {}
        self._masks: dict[int, tuple[ir.Value, ir.Value]] = {}  # by the Range: (ran, rows)
        return super().call(model)

    def _plan_constant(self, site: Site, types: TypeOracle) -> ScanPlan | None:
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
        count = evaluate(m, site.opset, self._shapes.inferred)
        if count is None or count.size != 1 or not 1 <= int(count.reshape(-1)[0]) <= UNROLL_LIMIT:
            return None
        plan = self._plan_loop(site, types)
        if plan is not None:
            plan.constant_count = int(count.reshape(-1)[0])
        return plan

    def plan(self, site: Site, types: TypeOracle) -> ScanPlan | None:
        if self.constant_counts:
            return self._plan_constant(site, types)
        return self._plan_loop(site, types)

    def _plan_loop(self, site: Site, types: TypeOracle) -> ScanPlan | None:
        return plan_loop(
            site,
            types,
            self._shapes,
            grown_states=self.grown_states,
            guards_zero_trips=self.guards_zero_trips,
        )

    def rewrite(self, plan: ScanPlan, ctx: Rewrite) -> None:
        if plan.constant_count is not None:
            # The count as a constant: unroll-constant-scans reads the Scan's length from it
            # (it does not infer the shapes this count was evaluated with).
            count = ctx.before().int64s(plan.constant_count, hint="constant_count")
            ctx.insert()
            ctx.node.replace_input_with(0, count)
        self._rewrite_loop(plan, ctx)

    def _rewrite_loop(self, plan: ScanPlan, ctx: Rewrite) -> None:
        node, body = ctx.node, plan.body
        emit = ctx.before()
        count, iterations = self._iterations(emit, ctx.graph, plan)
        carried = len(node.inputs) - 2
        iteration = body.inputs[0]
        mask = self._masks.get(id(iterations))
        starts, scanned_rows = first_iteration_safe(
            ctx, emit, plan.once, node, body, (count, iterations), mask
        )
        outer_finals = counters_from_iterations(ctx, plan, emit, count, starts)
        results = list(body.outputs)
        remove_dead(body, keep=results)
        kept = [k for k in range(carried) if k not in plan.counters]
        dropped, last_rows, unchanged = unread_states(node, body, kept)
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
                read_iteration(ctx, plan, emit, extra, iteration)
            extra.scanned.append(iterations)
            extra.elements.append(iteration)
        scan_body(ctx, plan, extra, states, kept, len(scan_outs))
        if plan.once is not None and plan.once.body_guard is not None:
            assert mask is not None
            guard = plan.once.body_guard
            zero_rows = [guard[j] for j in (*range(carried, len(node.outputs)), *last_rows)]
            guard_iteration(ctx, body, mask[0], zero_rows)
        loop = _Replacement(node, body, results, kept, dropped, last_rows, outer_finals)
        loop.mask = mask
        scan = _replace_by_scan(ctx, loop, emit, ctx.after(), extra)
        if plan.guarded is not None:
            guard_by_if(ctx, plan.guarded, scan, count, iterations, len(node.outputs) - carried)

    def _iterations(
        self, emit: Emitter, graph: ir.Graph, plan: ScanPlan
    ) -> tuple[ir.Value, ir.Value]:
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

    def _carry_outer_reads(
        self,
        ctx: Rewrite,
        plan: ScanPlan,
        emit: Emitter,
        count: ir.Value,
        kept: list[int],
        results: list[ir.Value],
    ) -> Extra:
        # Outer reads stay reads where the form allows it (tract's), and always in a loop nested
        # in another loop's body (which OpenVINO cannot run as a Scan anyway): tract gives a
        # nested Scan's pass-through state its first value on every outer iteration. Only
        # values that also start a state (tract panics on those) are carried then.
        keep_reads = id(ctx.node.graph) in self._in_loops or not self.outer_reads_as_states
        return carry_outer_reads(
            ctx,
            plan,
            emit,
            count,
            kept,
            results,
            keep_reads=keep_reads,
            rows_as_scan_inputs=self.rows_as_scan_inputs,
        )


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


def _replace_by_scan(
    ctx: Rewrite, loop: _Replacement, emit: Emitter, after: Emitter, extra: Extra
) -> ir.Node:
    """Put the Scan in the Loop's place: its outputs take the Loop outputs' names and uses."""
    node, kept, last_rows = loop.node, loop.kept, loop.last_rows
    carried = len(node.inputs) - 2
    finals = [ir.Value(name=ctx.names.fresh(f"{ctx.base}_{v.name}_final")) for v in extra.inits]
    new_outputs = _scan_outputs(ctx, loop, after)
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
        _name=ctx.names.fresh(f"{ctx.base}_scan"),
        _doc_string=node.doc_string,
    )
    replacements = _loop_results(loop, new_outputs)
    if loop.mask is not None:
        computed = set(loop.outer_finals) - set(last_rows)  # counters, unchanged states
        replacements = masked(after, node, loop.mask, computed, replacements)
    ctx.replace(replacements, rename=True)
    scan = first.producer()
    assert scan is not None
    return scan


def _scan_outputs(ctx: Rewrite, loop: _Replacement, after: Emitter) -> dict[int, ir.Value]:
    """The Scan's outputs by the Loop output each stands for (a state whose final value is a
    last row by ``len(node.outputs) + k``, its final value then a ``Gather`` of that row);
    shapes from the body (the exporter's declarations of the Loop's outputs may be wrong:
    tf2onnx declares a scan output with the rank of one iteration's piece)."""
    node, results, names, base = loop.node, loop.results, ctx.names, ctx.base
    carried = len(node.inputs) - 2
    new_outputs = {
        j: ir.Value(
            name=names.fresh(f"{old.name or base}_scan"),
            type=old.type or results[1 + j].type,
            shape=_output_shape(results[1 + j], stacked=j >= carried),
        )
        for j, old in enumerate(node.outputs)
        if j not in loop.outer_finals and j not in loop.dropped
    }
    for k in loop.last_rows:
        rows = new_outputs[k]
        rows.name = names.fresh(f"{base}_{results[1 + k].name}_rows")
        rows.shape = _output_shape(results[1 + k], stacked=True)
        last = after.int64s(-1, hint="last")
        loop.outer_finals[k] = after.Gather(rows, last, axis=0, _hint="final")
        loop.outer_finals[k].shape = _output_shape(results[1 + k], stacked=False)
        del new_outputs[k]
        new_outputs[len(node.outputs) + k] = rows
    return new_outputs


def _loop_results(loop: _Replacement, new_outputs: dict[int, ir.Value]) -> list[ir.Value | None]:
    """What replaces each Loop output (None: nothing reads it), typed: a graph output keeps
    its declared shape."""
    replacements: list[ir.Value | None] = []
    for j, old in enumerate(loop.node.outputs):
        if j in loop.dropped:
            replacements.append(None)
            continue
        new = new_outputs.get(j) or loop.outer_finals[j]
        if new.type is None:
            new.type = old.type
        if old.is_graph_output() and old.shape is not None:
            new.shape = old.shape  # the graph's interface, as declared
        elif j in loop.outer_finals and j not in loop.last_rows and new.shape is None and new.type:
            new.shape = ir.Shape([])  # a counter (typed: a shape alone is not written, warned)
        replacements.append(new)
    return replacements


def _output_shape(result: ir.Value, *, stacked: bool) -> ir.Shape | None:
    shape = result.shape
    if shape is None:
        return None
    dims = [d if isinstance(d, int) else None for d in shape]
    return ir.Shape([None, *dims] if stacked else dims)
