"""A ``Slice`` by run-time starts/ends as a ``Gather`` of a ``Range`` per axis, for tract.

tract 0.23.9 loads no ``Slice`` whose starts or ends are computed from tensor values (a graph
input, a ``Scan`` body's row, ``Gather`` of data: ONNX's ``test_loop11`` slices ``x[i:i+1]``,
PyTorch's ``embedding_bag`` its weight rows by its offsets): 'Symbol points to an invalid (dead
?) SymbolScope' (``tests/passes/test_slice_bounds.py``). It runs, along each sliced axis,
``Gather(x, Range(start, end, step), axis)``, with ``start``/``end`` worked out as ONNX's
``Slice`` does: a negative bound counts from the end (``+ dim``), then both are clamped to
``[0, dim]`` for a positive step and ``[-1, dim - 1]`` for a negative one, and an empty range
stays empty. The bounds are clamped in float64 (exact: dimensions are far below 2**53, and a
bound beyond them rounds to one still beyond): tract computes integer arithmetic that mixes a
shape with run-time values as symbolic dimensions, and gets it wrong at the extremes
(``Range(0, Min(e, Size(x)), 1)`` is one row for ``e = INT64_MAX``); it also runs
``Range(s, e, k)`` with ``e`` on the wrong side of ``s`` wrongly (rows for a negative step,
a panic for a positive one), so ``e`` is moved to ``s`` first when the range is empty.

A ``Slice`` by constant bounds that reverses a whole axis of a size not known when lowering
(``starts`` -1 or the largest int32/int64, ``ends`` the smallest, step -1: PyTorch's ``flip``,
the reversal ``lower-reverse-sequence`` writes for tf2onnx's ``Bidirectional``) loads on tract
with concrete input facts but not with the model's declared ones ('Streaming dimensions with
strides are not supported for now': tract 0.23.9 types no step but 1 over a symbolic size). It
becomes ``Gather(x, (n - 1) - Range(0, n, 1), axis)`` with ``n`` the axis' size from ``Shape``,
which tract types as ``n`` rows either way (``Range(n - 1, -1, -1)`` it does not: it computes
its length as if the step were unsigned). An axis longer than 2**31 - 1 elements with an int32
extreme as its bound is taken as reversed whole (no runtime holds such a tensor).

Left for ``require-shape-slice-bounds`` to name, with the reason recorded: axes or steps that
are not constants, a zero step, negative axes of an unknown rank, and bounds of an unknown
length.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import (
    block,
    constant_array,
    ints_attr,
    is_onnx,
    rank_of,
    runtime_source,
    static_dim,
)
from seqlower.passes._shared import prepend
from seqlower.passes._trip_count import evaluate
from seqlower.passes._types import TypeOracle

__all__ = ["RunTimeSlicesAsGathers"]

#: The check that names a Slice this pass leaves (see :func:`_ir.block`).
CHECK = "require-shape-slice-bounds"


@dataclasses.dataclass(frozen=True)
class _Plan:
    axes: list[int]
    steps: list[int]
    #: The bounds' length is known only at run time (at most ``len(axes)``: the rank, or
    #: less when it is shown to be): they are padded to that with whole-axis bounds.
    padded: bool = False
    #: The bounds are constants and the Slice reverses whole axes of sizes not static (in
    #: ``axes``, step -1 each); the other sliced axes are kept in a Slice (``kept``).
    reversal: bool = False
    kept: tuple[list[int], list[int], list[int], list[int]] | None = None
    #: Axes every reader squeezes (so the original runs only where they hold one row): read
    #: at one index, which tract types as one row.
    single: frozenset[int] = frozenset()
    #: Axes whose own bounds are constants (the run-time ones are others'): (start, end).
    fixed: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)


class RunTimeSlicesAsGathers(NodeLoweringPass[_Plan]):
    """``Slice`` by run-time starts/ends -> per axis ``Gather(x, Range(s', e', step))``."""

    op_type = "Slice"
    takes_all = False

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        if site.opset < 10 or len(node.inputs) < 3:
            return None  # bounds as attributes: constants
        starts, ends = node.inputs[1], node.inputs[2]
        runtime: dict[int, ir.Value | None] = {}
        if not any(v is not None and runtime_source(v, runtime) for v in (starts, ends)):
            return _reversal(node, types)  # else known at load time: tract runs the Slice
        axes_in = node.inputs[3] if len(node.inputs) > 3 else None
        steps_in = node.inputs[4] if len(node.inputs) > 4 else None
        axes = None if axes_in is None else constant_array(axes_in)
        steps = None if steps_in is None else constant_array(steps_in)
        count = _bound_count(types, starts, ends, axes, steps)
        reason = None
        if axes_in is not None and axes is None:
            reason = f"its axes '{axes_in.name}' are not constant"
        elif steps_in is not None and steps is None:
            reason = f"its steps '{steps_in.name}' are not constant"
        rank = None if node.inputs[0] is None else _rank(node.inputs[0], types)
        padded = count is None and rank is not None and axes_in is None and steps_in is None
        if padded:
            assert rank is not None
            lengths = [_length_bound(v, types) for v in (starts, ends) if v is not None]
            count = min([rank, *(n for n in lengths if n is not None)])
        elif count is None:
            reason = "the number of its bounds and its data's rank are unknown"
        if reason is not None:
            block(node, reason, CHECK)
            return None
        assert count is not None
        axis_list = list(range(count)) if axes is None else [int(a) for a in axes.reshape(-1)]
        step_list = [1] * count if steps is None else [int(k) for k in steps.reshape(-1)]
        if any(a < 0 for a in axis_list):
            if rank is None:
                block(node, "it has negative axes and its data's rank is unknown", CHECK)
                return None
            axis_list = [a + rank if a < 0 else a for a in axis_list]
        if 0 in step_list or len(set(axis_list)) != count or len(step_list) != count:
            block(node, "its axes or steps are not valid (a zero step, a repeated axis)", CHECK)
            return None
        single = _squeezed(node, axis_list, step_list, rank, site.opset)
        firsts, lasts = (_entries(v, count, site.opset) for v in (starts, ends))
        fixed = {
            a: (s, e)
            for a, s, e in zip(axis_list, firsts, lasts, strict=True)
            if s is not None and e is not None
        }
        return _Plan(axis_list, step_list, padded, single=single, fixed=fixed)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        op = ctx.before()
        x, starts, ends = ctx.node.inputs[0], ctx.node.inputs[1], ctx.node.inputs[2]
        assert x is not None and starts is not None and ends is not None
        if plan.reversal:
            _reverse(op, x, plan, ctx)
            return
        firsts = _per_axis(ctx, op, starts, plan, 0.0, "start")
        lasts = _per_axis(ctx, op, ends, plan, 2.0**62, "end")
        shape = op.Shape(x, _hint="shape")
        y = x
        for axis, step, first, last in zip(plan.axes, plan.steps, firsts, lasts, strict=True):
            if axis in plan.fixed:  # constant bounds: a Slice tract types
                bounds = zip((*plan.fixed[axis], axis, step), _PARTS, strict=True)
                y = op.Slice(y, *(op.int64s([v], hint=h) for v, h in bounds))
                continue
            dim = op.Cast(
                op.Gather(shape, op.int64s(axis, hint="axis"), _hint="axis_dim"),
                to=ir.DataType.DOUBLE,
                _hint="dim",
            )
            start, end = _clamped(op, dim, step, first, last)
            if axis in plan.single:  # one row, at its start (the Squeeze after it needs one)
                at = op.Cast(start, to=ir.DataType.INT64, _hint="row")
                y = op.unsqueeze(op.Gather(y, at, axis=axis, _hint="row"), [axis], hint="one")
                continue
            index = op.Range(
                op.Cast(start, to=ir.DataType.INT64, _hint="first"),
                op.Cast(end, to=ir.DataType.INT64, _hint="stop"),
                op.int64s(step, hint="step"),
                _hint="rows",
            )
            y = op.Gather(y, index, axis=axis, _hint="sliced")
        y.type, y.shape = ctx.node.outputs[0].type, ctx.node.outputs[0].shape
        ctx.replace([y])


def _rank(value: ir.Value, types: TypeOracle) -> int | None:
    """``value``'s rank, declared or inferred (paddle2onnx declares no shape for the ``Range``
    whose row its ``for`` reads by a ``Slice`` then a ``Squeeze``)."""
    declared = rank_of(value)
    if declared is not None:
        return declared
    shape = types.shape_of(value)
    return None if shape is None else len(shape)


def _entries(bound: ir.Value | None, count: int, opset: int) -> list[int | None]:
    """Each of ``bound``'s ``count`` entries that is a constant (a ``Concat`` of one-element
    pieces, some computed from constants, or the ``Add`` of two such: jax2onnx's
    ``dynamic_slice`` of a table row, ends the starts plus constant sizes)."""
    if bound is None:
        return [None] * count
    whole = evaluate(bound, opset)
    if whole is not None and whole.size == count:
        return [int(v) for v in whole.reshape(-1)]
    producer = bound.producer()
    if producer is not None and is_onnx(producer, "Add") and len(producer.inputs) == 2:
        left, right = (_entries(v, count, opset) for v in producer.inputs)  # ends = starts + sizes
        return [None if a is None or b is None else a + b for a, b in zip(left, right, strict=True)]
    if producer is None or not is_onnx(producer, "Concat") or len(producer.inputs) != count:
        return [None] * count
    pieces = [None if v is None else evaluate(v, opset) for v in producer.inputs]
    return [None if p is None or p.size != 1 else int(p.reshape(-1)[0]) for p in pieces]


def _squeezed(
    node: ir.Node, axes: list[int], steps: list[int], rank: int | None, opset: int
) -> frozenset[int]:
    """The sliced axes (a positive step) that every reader of the Slice removes with a
    ``Squeeze`` of constant axes: the original runs only where each holds exactly one row, the
    first, at its clamped start (tf2onnx's ``x[i]``, a ``Slice`` of step 10**9 then a
    ``Squeeze``; jax2onnx's, of step 1)."""
    out = node.outputs[0]
    if rank is None or out.is_graph_output() or not out.uses():
        return frozenset()
    squeezed: set[int] | None = None
    for reader, _ in out.uses():
        if not is_onnx(reader, "Squeeze"):
            return frozenset()
        if opset >= 13:
            given = reader.inputs[1] if len(reader.inputs) > 1 else None
            array = None if given is None else constant_array(given)
            listed = None if array is None else [int(a) for a in array.reshape(-1)]
        else:
            listed = ints_attr(reader, "axes")
        if not listed:
            return frozenset()  # no axes: it keeps an axis of 0 rows
        removed = {a + rank if a < 0 else a for a in listed}
        squeezed = removed if squeezed is None else squeezed & removed
    assert squeezed is not None  # the Slice has readers
    return frozenset(a for a, k in zip(axes, steps, strict=True) if k > 0 and a in squeezed)


#: Bounds that make a step -1 take a whole axis: starts at or past its last element (-1, or the
#: largest int32/int64) and ends before its first (the smallest int32/int64).
_LAST = frozenset({-1, 2**31 - 1, 2**63 - 1})
_BEFORE_FIRST = frozenset({-(2**31), -(2**63)})


def _reversal(node: ir.Node, types: TypeOracle) -> _Plan | None:
    """The plan for a ``Slice`` by constant bounds that reverses whole axes of sizes not known
    when lowering (module docstring), None for any other."""
    if len(node.inputs) < 5 or node.inputs[0] is None:
        return None
    arrays = [constant_array(v) for v in node.inputs[1:5]]
    if any(a is None or a.dtype.kind not in "iu" for a in arrays):
        return None
    starts, ends, axes, steps = ([int(v) for v in a.reshape(-1)] for a in arrays if a is not None)
    if not len(starts) == len(ends) == len(axes) == len(steps) or len(set(axes)) != len(axes):
        return None
    shape = node.inputs[0].shape or types.shape_of(node.inputs[0])
    if min(axes, default=0) < 0:  # counted from the end: the rank must be known
        if shape is None or min(axes) < -len(shape):
            return None
        axes = [a + len(shape) if a < 0 else a for a in axes]
        if len(set(axes)) != len(axes):
            return None
    reversed_axes, kept = [], ([], [], [], [])  # type: ignore[var-annotated]
    for s, e, a, k in zip(starts, ends, axes, steps, strict=True):
        if k == -1 and s in _LAST and e in _BEFORE_FIRST and static_dim(shape, a) is None:
            reversed_axes.append(a)
        else:
            for part, v in zip(kept, (s, e, a, k), strict=True):
                part.append(v)
    if not reversed_axes:
        return None
    return _Plan(reversed_axes, [-1] * len(reversed_axes), reversal=True, kept=kept)


def _reverse(op: Emitter, x: ir.Value, plan: _Plan, ctx: Rewrite) -> None:
    """``x`` with ``plan.axes`` reversed by Gathers (module docstring), its other sliced axes
    by a Slice of constant bounds."""
    y = x
    assert plan.kept is not None
    if plan.kept[0]:
        y = op.Slice(x, *(op.int64s(v, hint=h) for v, h in zip(plan.kept, _PARTS, strict=True)))
    shape = op.Shape(x, _hint="shape")
    zero, one = op.int64s(0, hint="zero"), op.int64s(1, hint="one")
    for axis in plan.axes:
        n = op.Gather(shape, op.int64s(axis, hint="axis"), _hint="axis_dim")
        steps = op.Range(zero, n, one, _hint="steps")
        index = op.Sub(op.Sub(n, one, _hint="last"), steps, _hint="backwards")
        y = op.Gather(y, index, axis=axis, _hint="reversed")
    y.type, y.shape = ctx.node.outputs[0].type, ctx.node.outputs[0].shape
    ctx.replace([y])


_PARTS = ("starts", "ends", "axes", "steps")


def _clamped(
    op: Emitter, dim: ir.Value, step: int, first: ir.Value, last: ir.Value
) -> tuple[ir.Value, ir.Value]:
    """One axis' start and end as ONNX (and onnxruntime) clamp them: a negative one plus
    ``dim``, then ``[0, dim]`` for a positive step, ``[0, dim - 1]`` (start) and
    ``[-1, dim - 1]`` (end) for a negative one; an empty range's end moved to its start (tract
    runs ``Range(s, e, k)`` with ``e`` past ``s`` wrongly)."""
    zero = op.constant(np.array(0.0), hint="zero")
    low = op.constant(np.array(-1.0 if step < 0 else 0.0), hint="low")
    high = op.Add(dim, low, _hint="high")

    def clamp(bound: ir.Value, low: ir.Value, hint: str) -> ir.Value:
        back = op.Where(
            op.Less(bound, zero, _hint=f"{hint}_negative"),
            op.Add(bound, dim, _hint=f"{hint}_from_end"),
            bound,
            _hint=f"{hint}_from_start",
        )
        return op.Min(op.Max(back, low, _hint=f"{hint}_low"), high, _hint=hint)

    start = clamp(first, zero, "start")
    end = (op.Max if step > 0 else op.Min)(clamp(last, low, "end"), start, _hint="end_kept")
    return start, end


def _per_axis(
    ctx: Rewrite, op: Emitter, bound: ir.Value, plan: _Plan, pad: float, hint: str
) -> list[ir.Value]:
    """``bound``'s entries as float64 scalars, one per sliced axis (an end of INT64_MAX with a
    negative step as INT64_MIN: onnxruntime 1.32 slices to the first element so, where ONNX
    says "clamped to dim - 1"). Computed where ``bound`` is when it is read from an enclosing
    graph: tract 0.23.9 cannot type an ``If`` branch that reads a value whose length is known
    only at run time ('Source node without a determined fact'), and reads the scalars."""
    graph = bound.graph
    outer = graph is not None and graph is not ctx.graph
    emit = ctx.into(graph, pool=None) if outer and graph is not None else op
    value = emit.Cast(bound, to=ir.DataType.DOUBLE, _hint=f"{hint}_f")
    if plan.padded:  # ConstantOfShape fails for bounds longer than len(axes)
        count = emit.Shape(bound, _hint=f"{hint}_count")
        filler = emit.ConstantOfShape(
            emit.Sub(emit.int64s([len(plan.axes)], hint="rank"), count, _hint=f"{hint}_rest"),
            value=ir.Tensor(np.array([pad])),
            _hint=f"{hint}_filler",
        )
        value = emit.Concat(value, filler, axis=0, _hint=f"{hint}_padded")
    backwards = [k < 0 for k in plan.steps]
    if pad > 0 and any(backwards):  # ends
        wide = emit.Cast(bound, to=ir.DataType.INT64, _hint=f"{hint}_wide")
        # INT64_MAX as the one value within 512 of 2**63 (all of which are 2**63 as float64)
        # that is 1023 modulo 1024: tract 0.23.9 compares int64 values with the constant
        # INT64_MAX wrongly (-1 equals it) and adds to it saturating.
        residue = emit.Mod(wide, emit.int64s(1024, hint="block"), _hint=f"{hint}_residue")
        top = emit.And(
            emit.GreaterOrEqual(value, emit.constant(np.array(2.0**63), hint="top"), _hint="high"),
            emit.Equal(residue, emit.int64s(1023, hint="block_end"), _hint="block_end"),
            _hint="at_top",
        )
        value = emit.Where(
            emit.And(top, emit.constant(np.array(backwards), hint="backwards"), _hint="to_first"),
            emit.constant(np.array(-(2.0**62)), hint="before_first"),
            value,
            _hint=f"{hint}_ends",
        )
    scalars = [
        emit.Gather(value, emit.int64s(k, hint="bound"), _hint=hint) for k in range(len(plan.axes))
    ]
    for scalar in scalars:  # declared: alike-branches-as-where selects between such scalars
        scalar.type, scalar.shape = ir.TensorType(ir.DataType.DOUBLE), ir.Shape([])
    if outer and graph is not None:
        producer = bound.producer()
        if producer is not None and producer.graph is graph:
            graph.insert_after(producer, emit.nodes)
        else:
            prepend(graph, emit.nodes)
    return scalars


def _bound_count(
    types: TypeOracle,
    starts: ir.Value | None,
    ends: ir.Value | None,
    axes: np.ndarray | None,
    steps: np.ndarray | None,
) -> int | None:
    """How many axes the Slice slices: from its constant axes or steps, else the static length
    of its starts or ends (declared or inferred)."""
    for known in (axes, steps):
        if known is not None:
            return int(known.size)
    for value in (starts, ends):
        shape = None if value is None else types.shape_of(value)
        if shape is not None and len(shape) == 1 and isinstance(shape[0], int):
            return shape[0]
    return None


def _length_bound(value: ir.Value, types: TypeOracle, depth: int = 0) -> int | None:
    """An upper bound of the length of the 1-D ``value`` (None: not known): its static shape,
    a ``Reshape`` to a constant length (``[-1]`` of a scalar: 1), elementwise ops of such, or
    a one-axis ``Slice`` whose ends are its starts plus a constant ``c`` (``x[i:i+1]``: at
    most ``ceil(c / step)`` rows, however the bounds are clamped)."""
    shape = types.shape_of(value)
    if shape is not None and len(shape) == 1 and isinstance(shape[0], int):
        return shape[0]
    if shape is not None and len(shape) == 0:
        return 1
    node = value.producer()
    if node is None or depth > 8 or not is_onnx(node):
        return None
    inputs = [v for v in node.inputs if v is not None]
    if node.op_type == "Reshape" and len(inputs) == 2:
        target = constant_array(inputs[1])
        if target is not None and target.size == 1:
            if int(target.reshape(-1)[0]) >= 0:
                return int(target.reshape(-1)[0])
            return _length_bound(inputs[0], types, depth + 1)  # [-1]: as many as it holds
        return None
    if node.op_type in _ELEMENTWISE and inputs:
        bounds = [_length_bound(v, types, depth + 1) for v in inputs]
        return None if None in bounds else max(b for b in bounds if b is not None)
    if node.op_type == "Slice" and len(inputs) >= 3:
        return _slice_length_bound(node, types, depth)
    return None


#: Elementwise ops (broadcasting): their result is no longer than their longest input.
_ELEMENTWISE = frozenset({"Add", "Sub", "Mul", "Div", "Cast", "CastLike", "Identity", "Neg"})


def _slice_length_bound(node: ir.Node, types: TypeOracle, depth: int) -> int | None:
    """How many rows a ``Slice`` of a 1-D tensor returns at most (see :func:`_length_bound`)."""
    data, starts, ends = node.inputs[0], node.inputs[1], node.inputs[2]
    steps = constant_array(node.inputs[4]) if len(node.inputs) > 4 else np.array([1])
    bound = None if data is None else _length_bound(data, types, depth + 1)
    add = ends.producer() if ends is not None else None
    if steps is None or steps.size != 1 or int(steps.reshape(-1)[0]) <= 0 or add is None:
        return bound
    if not is_onnx(add, "Add") or starts not in add.inputs:
        return bound
    other = add.inputs[1] if add.inputs[0] is starts else add.inputs[0]
    while other is not None and is_onnx(other.producer(), "Cast", "CastLike"):
        other = other.producer().inputs[0]  # type: ignore[union-attr]
    c = constant_array(other)
    if c is None or c.size != 1 or c.dtype.kind not in "iu" or int(c.reshape(-1)[0]) < 0:
        return bound
    step = int(steps.reshape(-1)[0])
    rows = -(-int(c.reshape(-1)[0]) // step)
    return rows if bound is None else min(rows, bound)
