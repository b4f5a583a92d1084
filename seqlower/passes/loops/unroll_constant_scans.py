"""A ``Scan`` of a trip count fixed at lowering time, unrolled (converters with neither ``Loop``
nor ``Scan``: onnx2torch, TVM).

tf2onnx writes the same ``while_loop`` for a fixed-length input as for any other, but its limit
is then a constant: the ``Range(0, N)`` that ``loop-to-scan`` scans over depends only on
constants. Such a ``Scan`` (forward, every scan axis 0) of ``1 <= N <= 256`` iterations becomes
N copies of its body, each reading row ``k`` of every scan input (``Gather(x, k, axis=0)``) and
the states the copy before it computed; the scan outputs are the rows joined by ``Concat`` of
their ``Unsqueeze``, the final states the last copy's. N is read from the scan input's static
shape or, when it is computed, by evaluating the constant expression that computes it (at most
:data:`_EXPRESSION_LIMIT` nodes, with onnx's reference evaluator). A Scan of zero iterations is
left (its empty scan outputs have a shape no copy computes).

``UnrollBoundedScans`` (``unroll-bounded-scans``, onnx2torch and TVM): a ``Scan`` over the
iteration numbers ``Range(0, N)`` that ``loop-to-scan`` wrote for a ``Loop`` whose count is a
run-time value between two constants, ``1 <= N <= K`` (``_bounds``; tf2onnx's
``bidirectional_dynamic_rnn`` with ``sequence_length`` runs ``min(T, max(1, max(lengths)))``
times, ``T`` a constant at fixed input shapes), becomes ``K`` copies. Copy ``k`` runs iteration
``min(k, N - 1)`` on the states it is given, and the next copy is given its results while
``k + 1 < N``, else the same states: past ``N`` the copies rerun iteration ``N - 1``, which the
original ran (so they cannot fail where it did not), and the last copy's states are its final
states. The scan outputs' rows are cut to ``N`` by a ``Slice``. A count not proven at least 1
(nothing to rerun), no bound up to 256, or a state not proven one static shape (the ``Where``
choosing between two iterations' states needs one) leaves the Scan, its reason recorded for the
target's check. tinygrad's row does not run it: tinygrad 0.14's ``OnnxRunner`` reads a
``Slice``'s bounds once per runner, so a second call with other lengths would get the first
call's row count.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._bounds import lower_bound, upper_bound
from seqlower.passes._induction import through_identity
from seqlower.passes._ir import (
    NO_LOOP,
    block,
    constant_int,
    int_attr,
    ints_attr,
    is_onnx,
    is_static,
    scans_in_scans,
)
from seqlower.passes._shared import initializers_as_constants, inline_copy
from seqlower.passes._trip_count import UNROLL_LIMIT, evaluate
from seqlower.passes._trip_counts import extreme
from seqlower.passes._types import TypeOracle

__all__ = ["UnrollConstantScans"]


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    opset: int
    trips: int  # copies of the body (a bounded count: its upper bound)
    states: int
    count: ir.Value | None = None  # a bounded count: the Scan's trip count, run-time


class UnrollConstantScans(NodeLoweringPass[_Plan]):
    """Every forward ``Scan`` over axis 0 whose trip count is a constant in [1, 256], as copies
    of its body."""

    op_type = "Scan"
    takes_all = False

    def __init__(self, *, bounded: bool = False, nested_only: bool = False) -> None:
        """``bounded``: instead, every forward ``Scan`` over the iteration numbers ``Range(0,
        N)`` (what ``loop-to-scan`` writes) whose run-time ``N`` is proven in ``[1, K]`` for a
        constant ``K`` up to 256, as ``K`` copies of its body that rerun the last iteration
        past ``N`` (module docstring). ``nested_only``: only the Scans inside another Scan's
        body (tract 0.23.9 computes one whose initial states come from the outer row wrong)."""
        super().__init__()
        self.bounded = bounded
        self.nested_only = nested_only
        self._nested: set[int] = set()

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if self.nested_only:
            self._nested = {id(node) for node in scans_in_scans(model)}
        return super().call(model)

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        if self.nested_only and id(site.node) not in self._nested:
            return None
        if self.bounded:
            return self._plan_bounded(site, types)
        found = _forward_scan(site)
        if found is None:
            return None
        node, body, states = found
        first = node.inputs[states]
        assert first is not None
        trips = _length(first, site.opset)
        if trips is None or not 1 <= trips <= UNROLL_LIMIT:
            return None
        return _Plan(node, body, site.opset, trips, states)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, base = ctx.node, ctx.base
        inputs: list[ir.Value] = list(node.inputs)  # type: ignore[arg-type]
        # The body's own initializers (tf2onnx keeps constants, some exporters weights, there):
        # one Constant each in the enclosing graph, read by every copy, not one per copy.
        weights = ctx.into(ctx.graph, pool=None, prefix=f"{base}_weights")
        inserted = list(initializers_as_constants(plan.body, weights, ctx.names))
        carried, rows = self._copies(plan, ctx, inputs, inserted)
        op = ctx.before()
        stacked = [
            op.Concat(
                *(op.unsqueeze(row, [0], hint=f"row_{j}") for row in column),
                axis=0,
                _hint=f"stacked_{j}",
            )
            for j, column in enumerate(rows)
        ]
        if plan.count is not None:  # a bounded count: the rows the original computes
            end = op.reshape(plan.count, op.int64s([1], hint="one_d"), hint="end")
            start = op.int64s([0], hint="start")
            stacked = [op.Slice(rows, start, end, start, _hint="rows") for rows in stacked]
        ours = {id(value) for n in [*inserted, *op.nodes] for value in n.outputs}
        finals = []
        for old, new in zip(node.outputs, [*carried, *stacked], strict=True):
            if id(new) not in ours:  # a state the body passes through: a value from outside
                new = op.Identity(new, _hint="state")
            new.type, new.shape = old.type or new.type, old.shape or new.shape
            finals.append(new)
        # The Scan's output names (the graph's, maybe) stay.
        ctx.replace(finals, rename=True, nodes=inserted)

    def _copies(
        self, plan: _Plan, ctx: Rewrite, inputs: list[ir.Value], inserted: list[ir.Node]
    ) -> tuple[list[ir.Value], list[list[ir.Value]]]:
        """One copy of the body per step, reading row k of each scanned input (their nodes
        added to ``inserted``); the final states and each scan output's rows."""
        if self.bounded:
            return self._bounded_copies(plan, ctx, inputs, inserted)
        states = plan.states
        carried = inputs[:states]
        rows: list[list[ir.Value]] = [[] for _ in ctx.node.outputs[states:]]
        for k in range(plan.trips):
            op = ctx.into(ctx.graph, prefix=f"{ctx.base}_{k}")
            index = op.int64s(k, hint="step")
            elements = [
                op.Gather(x, index, axis=0, _hint=f"row_{j}") for j, x in enumerate(inputs[states:])
            ]
            # Copies are named "step<k>_<original>": the exporter's names are long already.
            copied, results = inline_copy(ctx, plan.body, [*carried, *elements], f"step{k}")
            inserted += [*op.nodes, *copied]
            carried = results[:states]
            for j, result in enumerate(results[states:]):
                rows[j].append(result)
        return carried, rows

    def _plan_bounded(self, site: Site, types: TypeOracle) -> _Plan | None:
        found = _forward_scan(site)
        if found is None:
            return None
        node, body, states = found
        count = _iterations(node.inputs[states:])
        if count is None or evaluate(count, site.opset) is not None:
            return None  # not the iteration numbers, or a constant count (unrolled as such)
        low, high = lower_bound(count), upper_bound(count)
        why = None
        if high is None or not 1 <= high <= UNROLL_LIMIT:
            why = f"no constant bound up to {UNROLL_LIMIT} on its trip count is proven"
        elif low is None or low < 1:
            why = "its trip count is not proven at least 1 (no iteration to rerun past it)"
        else:
            why = _changing_state(node, body, states, types)
        if why is not None:
            block(node, why, NO_LOOP)
            return None
        assert high is not None
        return _Plan(node, body, site.opset, high, states, count)

    def _bounded_copies(
        self, plan: _Plan, ctx: Rewrite, inputs: list[ir.Value], inserted: list[ir.Node]
    ) -> tuple[list[ir.Value], list[list[ir.Value]]]:
        """Copy ``k`` runs iteration ``min(k, N - 1)`` on the states it was given; the next
        copy is given its results while ``k + 1 < N``, else the same states (a rerun of
        iteration ``N - 1``, which the original ran: it cannot fail, and gives its results)."""
        count, states, scanned = plan.count, plan.states, len(inputs) - plan.states
        assert count is not None
        op = ctx.into(ctx.graph, prefix=f"{ctx.base}_bound")
        last = op.Sub(count, op.int64s(1, hint="one"), _hint="last_iteration")
        inserted += op.nodes
        given = inputs[:states]
        body = plan.body
        kept = [through_identity(body.outputs[k], body) is body.inputs[k] for k in range(states)]
        rows: list[list[ir.Value]] = [[] for _ in ctx.node.outputs[states:]]
        results: list[ir.Value] = []
        for k in range(plan.trips):
            step = ctx.into(ctx.graph, prefix=f"{ctx.base}_{k}")
            index = step.int64s(k, hint="step")
            if k > 0:
                index = extreme(step, "Min", index, last, hint="iteration")
            copied, results = inline_copy(ctx, plan.body, [*given, *[index] * scanned], f"step{k}")
            inserted += [*step.nodes, *copied]
            for j, result in enumerate(results[states:]):
                rows[j].append(result)
            if k + 1 == plan.trips:
                break
            keep = ctx.into(ctx.graph, prefix=f"{ctx.base}_{k}")
            more = keep.Less(keep.int64s(k + 1, hint="next"), count, _hint="more")
            given = [
                old if same else keep.Where(more, new, old, _hint="state")
                for new, old, same in zip(results[:states], given, kept, strict=True)
            ]
            inserted += keep.nodes
        return results[:states], rows


def _iterations(scanned: Sequence[ir.Value | None]) -> ir.Value | None:
    """``N`` when every scan input is one ``Range(0, N, 1)`` of int64."""
    first = scanned[0] if scanned else None
    node = None if first is None else first.producer()
    if (
        node is None
        or not is_onnx(node, "Range")
        or any(value is not first for value in scanned)
        or len(node.inputs) != 3
        or constant_int(node.inputs[0]) != 0
        or constant_int(node.inputs[2]) != 1
    ):
        return None
    count = node.inputs[1]
    return count if count is not None and count.dtype == ir.DataType.INT64 else None


def _changing_state(node: ir.Node, body: ir.Graph, states: int, types: TypeOracle) -> str | None:
    """Why a state may not keep one shape (a ``Where`` between two iterations' states needs
    it), or None: each is passed through or has the same static shape in and out."""
    for k in range(states):
        inner, result, initial = body.inputs[k], body.outputs[k], node.inputs[k]
        if through_identity(result, body) is inner:
            continue
        before = None if initial is None else initial.shape or types.shape_of(initial)
        after = result.shape or types.shape_of(result)
        if not is_static(before) or not is_static(after) or list(before) != list(after):
            name = inner.name or str(k)
            return (
                f"its state {name} is not proven one static shape (a rerun keeps states by Where)"
            )
    return None


def _forward_scan(site: Site) -> tuple[ir.Node, ir.Graph, int] | None:
    """The node, its body and its state count, for a forward ``Scan`` (opset 9 on) over axis
    0 with every input given."""
    node = site.node
    if site.opset < 9 or "body" not in node.attributes:
        return None  # Scan-8 scans a batch with sequence lengths: another op
    body = node.attributes["body"].as_graph()
    scanned = int_attr(node, "num_scan_inputs")
    if body is None or scanned is None or not 0 < scanned <= len(node.inputs):
        return None
    for name in (
        "scan_input_axes",
        "scan_input_directions",
        "scan_output_axes",
        "scan_output_directions",
    ):
        values = ints_attr(node, name)
        if name in node.attributes and (values is None or any(values)):
            return None
    states = len(node.inputs) - scanned
    if len(body.inputs) != len(node.inputs) or len(body.outputs) != len(node.outputs):
        return None
    if any(value is None for value in node.inputs):
        return None
    return node, body, states


def _length(value: ir.Value, opset: int) -> int | None:
    """The length of ``value``'s first axis, if fixed: declared, or computed from constants."""
    shape = value.shape
    if shape is not None and len(shape) > 0 and isinstance(shape[0], int):
        return shape[0]
    array = evaluate(value, opset)
    if array is None or array.ndim == 0:
        return None
    return int(array.shape[0])
