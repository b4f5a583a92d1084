"""What ``LoopToScan`` does for a Loop that may run no iteration (no runtime runs a zero-length
``Scan`` right): run it at least once, its results masked, when its body is proven safe on
iteration 0 (``_first_iteration``: counters from 0, padded row reads), else guard the Scan by
an ``If`` on the count whose other branch gives what a Loop of no iteration returns (a count of
shapes, states of static shapes), else run it at least once with its body under an ``If`` on
the count (any body)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower._graphs import subgraphs_of
from seqlower.passes._base import Rewrite, rewire
from seqlower.passes._emit import Emitter, fits_constant
from seqlower.passes._first_iteration import (
    FirstIteration,
    GuardDim,
    GuardedRow,
    RowRead,
    Shapes,
    first_iteration,
)
from seqlower.passes._induction import Term
from seqlower.passes._ir import constant_array, graph_attr, is_onnx
from seqlower.passes._shared import outer_reads
from seqlower.passes._trip_count import evaluate
from seqlower.passes._trip_counts import extreme
from seqlower.passes._types import TypeOracle

__all__ = [
    "first_iteration_safe",
    "guard_by_if",
    "guard_iteration",
    "masked",
    "runs",
    "zero_trip_form",
]

#: The shape ONNX's inference gives a value (``LoopShapes.inferred``).
Inferred = Callable[[ir.Value], ir.Shape | None]
#: The row shape of each scan output, for an ``If``'s branch of zero iterations.
EmptyRows = list[tuple[int, ...]]


def runs(node: ir.Node, terms: list[Term] | None, opset: int, shapes: Inferred) -> bool:
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


def zero_trip_form(
    node: ir.Node,
    body: ir.Graph,
    terms: list[Term] | None,
    counters: list[int],
    unit: list[int],
    types: TypeOracle,
    inferred: Inferred,
    symbolic: Shapes,
) -> tuple[FirstIteration | None, EmptyRows | None] | str:
    """How a Loop that may run none becomes a Scan: run at least once (what makes its body
    safe on iteration 0; ``unit``: the counters stepping by one), else guarded by an ``If``
    (the row shapes of its empty scan outputs); or why neither is proven."""
    found = first_iteration(node, types, unit, symbolic)
    if not isinstance(found, str):
        found.in_place = _unknown_rows(found, node, body, terms) is not None
        return found, None
    rows = _empty_rows(node, body, counters, terms, inferred)
    if not isinstance(rows, str) and _static_states(node, inferred):
        return None, rows
    guarded = _guarded_rows(node, body, counters, types, inferred, symbolic)
    if isinstance(guarded, str) and not isinstance(rows, str):
        return None, rows
    if isinstance(guarded, str):
        return (
            "its trip count may be 0 and tract runs no Scan of zero iterations right "
            "(it returns wrong states), but the Scan of at least one iteration that "
            f"replaces it then runs the body on iteration 0, where {found}; an "
            f"If on the count cannot give its results when it runs none ({rows}), and "
            f"the body under an If on it cannot give a row when it runs none: {guarded} "
            "(--overwrite-input-shape with the input shapes may prove it)"
        )
    return FirstIteration(body_guard=guarded), None


def _static_states(node: ir.Node, inferred: Inferred) -> bool:
    """Whether every state read after the loop has a static shape. tract 0.23.9 types no
    ``If`` around the Scan that gives a state of a size not known when lowering, with declared
    facts ('Source node without a determined fact': tf2onnx's ``tf.foldr``, ``tf_foldr`` of
    ``benchmarks/families/new_shapes.py``); the body under an If on the count it types."""
    for k, out in enumerate(node.outputs[: len(node.inputs) - 2]):
        if not (out.uses() or out.is_graph_output()):
            continue
        initial = node.inputs[2 + k]
        shape = None if initial is None else initial.shape or inferred(initial)
        if shape is None or not all(isinstance(d, int) for d in shape):
            return False
    return True


def _guarded_rows(
    node: ir.Node,
    body: ir.Graph,
    counters: list[int],
    types: TypeOracle,
    inferred: Inferred,
    symbolic: Shapes,
) -> dict[int, GuardedRow] | str:
    """The row shape and element type of each Loop output the guarded body's other branch
    writes a zero row for (``guard_iteration``), by Loop output: every scan output, and every
    state the body never reads whose final value is read (a last scanned row); a state's own
    where known. A size unknown when lowering is read from a state or an outer value ONNX's
    inference gives the same symbol (a batch). Or why one has none: tract 0.23.9 runs an
    ``If`` only when both branches' outputs have one fact."""
    carried = len(node.inputs) - 2
    rows: dict[int, GuardedRow] = {}
    sources = _size_sources(node, body, symbolic)
    for j, out in enumerate(node.outputs):
        result = body.outputs[1 + j]
        state = j < carried
        needed = not state or (
            j not in counters
            and not body.inputs[2 + j].uses()
            and (out.uses() or out.is_graph_output())
        )
        found: tuple[GuardDim, ...] | None = None
        skip = 0 if state else 1
        candidates = ((result.shape, 0), (inferred(result), 0), (out.shape, skip))
        for shape, cut in (*candidates, (_branch_shape(result), 0)):
            dims = None if shape is None else list(shape)[cut:]
            if dims is not None and all(isinstance(d, int) for d in dims):
                found = tuple(int(d) for d in dims)  # type: ignore[arg-type]
                break
        outer = symbolic(out)
        named = symbolic(result) or (None if outer is None else outer[skip:])
        if found is None and named is not None:
            found = _sized_row(named, sources)
        type_ = result.type or out.type or types.type_of(result)
        if found is not None and type_ is not None and type_.dtype != ir.DataType.STRING:
            rows[j] = found, type_.dtype
        elif needed:
            what = "scan output" if not state else "last row of its state"
            return f"the {what} '{out.name}' is of a {type_} of a shape not known when lowering"
    return rows


def _branch_shape(value: ir.Value) -> ir.Shape | None:
    """A static shape one branch of the ``If`` that computes ``value`` gives it (PyTorch's
    ``embedding_bag``: an empty bag's ``[1, 3]`` zeros, the other a sum ONNX does not size):
    the zero row is masked away, so only tract's facts of the two branches need agree, and
    the check proves they do."""
    node = value.producer()
    if node is None or not is_onnx(node, "If"):
        return None
    k = node.outputs.index(value)
    for name in ("then_branch", "else_branch"):
        branch = graph_attr(node, name)
        shape = None if branch is None or len(branch.outputs) <= k else branch.outputs[k].shape
        if shape is not None and all(isinstance(d, int) for d in shape):
            return shape
    return None


#: A value the body reads (a state, an outer value), its stand-in outside the body (a state's
#: initial value), and its shape as ONNX's inference with data propagation gives it.
Source = tuple[ir.Value, ir.Value, tuple[int | str | None, ...]]


def _size_sources(node: ir.Node, body: ir.Graph, symbolic: Shapes) -> list[Source]:
    """The states (which keep their shape in a Scan) and the values the body reads from
    outside, with their shapes (a state's as the body declares it when none is inferred)."""
    initials = {id(v) for v in node.inputs[2:] if v is not None}
    pairs = [(s, v) for s, v in zip(body.inputs[2:], node.inputs[2:], strict=True) if v is not None]
    pairs += [(v, v) for v in outer_reads(body, list(body.inputs)) if id(v) not in initials]
    found: list[Source] = []
    for inside, outside in pairs:
        shape = symbolic(outside)
        if shape is None and inside.shape is not None:  # as the body declares it
            shape = tuple(d if isinstance(d, int) else None for d in inside.shape)
        if shape is not None:
            found.append((inside, outside, shape))
    return found


def _sized_row(
    named: tuple[int | str | None, ...], sources: list[Source]
) -> tuple[GuardDim, ...] | None:
    """A row of ``named`` sizes, each unknown one read from a source's dimension of the same
    symbol; else from a source of the same rank whose sizes agree, known where the row's are
    (tf2onnx names a body's declared outputs apart from the state they mask: the check
    proves tract's facts of the two branches alike)."""
    by_symbol = {
        d: (inside, outside, axis)
        for inside, outside, shape in reversed(sources)
        for axis, d in enumerate(shape)
        if isinstance(d, str)
    }
    picked = [d if isinstance(d, int) else by_symbol.get(d or "") for d in named]
    if all(d is not None for d in picked):
        return tuple(picked)  # type: ignore[arg-type]
    for inside, outside, shape in sources:
        if len(shape) == len(named) and all(
            n == d if isinstance(n, int) else not isinstance(d, int)
            for n, d in zip(named, shape, strict=True)
        ):
            return tuple(
                n if isinstance(n, int) else (inside, outside, axis) for axis, n in enumerate(named)
            )
    return None


def _empty_rows(
    node: ir.Node,
    body: ir.Graph,
    counters: list[int],
    terms: list[Term] | None,
    inferred: Inferred,
) -> EmptyRows | str:
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
    rows: EmptyRows = []
    for j, out in enumerate(node.outputs[carried:]):
        result = body.outputs[1 + carried + j]
        found = None
        for shape, skip in (
            (result.shape, 0),
            (inferred(result), 0),
            (out.shape, 1),
            (inferred(out), 1),
        ):
            dims = None if shape is None else list(shape)[skip:]
            if dims is not None and all(isinstance(d, int) for d in dims):
                found = tuple(int(d) for d in dims)  # type: ignore[arg-type]
                break
        if found is None:
            return f"the rows of its scan output '{out.name}' are of a size not known"
        rows.append(found)
    return rows


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
    return rows[0].source.name


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


def first_iteration_safe(
    ctx: Rewrite,
    emit: Emitter,
    once: FirstIteration | None,
    loop: ir.Node,
    body: ir.Graph,
    counted: tuple[ir.Value, ir.Value],
    mask: tuple[ir.Value, ir.Value] | None,
) -> tuple[dict[int, ir.Value], list[tuple[ir.Value, ir.Value]]]:
    """The repairs that make the body safe on the iteration a Scan run at least once adds
    (``_first_iteration``), applied only when the Loop runs none (``mask``: whether it runs;
    ``counted``: the trip count and the iteration numbers): the counters' starts 0 (returned by
    counter); each row read of a value of unknown length a scan input over its rows, padded
    (returned: the rows and the body's element)."""
    count, iterations = counted
    if once is None or not (once.rows or once.starts or once.guards):
        return {}, []
    assert mask is not None
    ran = mask[0]
    _guard_indices(ctx, body, once.guards, ran)
    starts: dict[int, ir.Value] = {}
    for k in sorted(once.starts):
        start = loop.inputs[2 + k]
        assert start is not None and start.dtype is not None
        zero = emit.constant(np.zeros((), start.dtype.numpy()), hint="zero_start")
        starts[k] = _like(emit.Where(ran, start, zero, _hint="safe_start"), start)
    padded: dict[int, ir.Value] = {}
    scanned: dict[tuple[int, int | None, tuple[int, ...]], tuple[ir.Value, ir.Value]] = {}
    for read in once.rows:
        x = read.source
        key = (id(x), read.counter, read.index)
        if once.in_place and None in read.row:
            if key not in scanned:
                scanned[key] = _indices(ctx, emit, read, iterations, starts, ran)
            if id(x) not in padded:  # x and a zero row (in place), or its padded rows
                appended = padded[id(x)] = _appended(emit, x, read)
                appended.type = ir.TensorType(read.dtype)
                appended.shape = ir.Shape([None, *read.row])
            read.node.replace_input_with(0, padded[id(x)])
            read.node.replace_input_with(1, scanned[key][1])
            continue
        if key not in scanned:
            if id(x) not in padded:
                padded[id(x)] = _padded(emit, x, read, count)
            scanned[key] = _scanned_rows(ctx, emit, read, padded[id(x)], iterations, starts)
        rewire(read.node.outputs[0], scanned[key][1])
        body.remove(read.node, safe=True)
    return starts, list(scanned.values())


def _guard_indices(
    ctx: Rewrite, body: ir.Graph, gathers: list[tuple[ir.Node, ir.DataType]], ran: ir.Value
) -> None:
    """Each ``Gather`` at a computed index reads ``Where(ran, index, 0)``: the original index
    on every iteration that runs, 0 (in range: ``_first_iteration`` proved the axis not empty)
    on the one a Loop of no iteration runs, whose results are masked."""
    for gather, dtype in gathers:
        index = gather.inputs[1]
        assert index is not None
        inside = ctx.into(body, pool=None)
        zero = inside.constant(np.zeros((), dtype.numpy()), hint="guarded_zero")
        safe = _like(inside.Where(ran, index, zero, _hint=f"{index.name}_guarded"), index)
        body.insert_before(gather, inside.nodes)
        gather.replace_input_with(1, safe)


def _scanned_rows(
    ctx: Rewrite,
    emit: Emitter,
    read: RowRead,
    padded: ir.Value,
    iterations: ir.Value,
    starts: dict[int, ir.Value],
) -> tuple[ir.Value, ir.Value]:
    """A scan input of the rows the body reads of ``x`` (``padded``: with a zero row where the
    Loop runs none), and its element."""
    x = read.source
    positions = _positions(emit, read, iterations, starts)
    if read.index:  # an index of one element: [i], [[i]]...
        target = emit.int64s([-1, *read.index], hint="index_shape")
        positions = emit.reshape(positions, target, hint="indices")
    row = (*read.index, *read.row)
    rows = emit.Gather(padded, positions, axis=0, _hint=f"{x.name}_rows")
    rows.type, rows.shape = ir.TensorType(read.dtype), ir.Shape([None, *row])
    element = ir.Value(
        name=ctx.names.fresh(f"{ctx.base}_{x.name}_row"),
        type=ir.TensorType(read.dtype),
        shape=ir.Shape(row),
    )
    return rows, element


def _indices(
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
    x = read.source
    positions = _positions(emit, read, iterations, starts)
    length = emit.squeeze(emit.dims(x, 0, 1, hint="row_count"), [0], hint="rows")
    zero = emit.int64s(0, hint="zero")
    int64 = ir.DataType.INT64.value
    past = emit.Cast(emit.GreaterOrEqual(positions, length, _hint="past"), to=int64, _hint="past")
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


def _padded(emit: Emitter, x: ir.Value, read: RowRead, count: ir.Value) -> ir.Value:
    """``x`` with one zero row appended when the Loop runs none (``count`` 0: the Scan run
    once reads row 0) and ``x`` has none, else ``x``: a zero row appended (``_appended``), then
    the first ``max(len(x), 1 - count)`` rows taken by a ``Gather`` of a ``Range`` (tract types
    no ``ConstantOfShape`` or ``Pad`` of a size computed from values; it types this length with
    the model's declared facts when the count is symbolic, not ``len(x) + (count == 0)``)."""
    appended = _appended(emit, x, read)
    length = emit.squeeze(emit.dims(x, 0, 1, hint="pad_length"), [0], hint="length")
    once = emit.Sub(emit.int64s(1, hint="one"), count, _hint="pad")
    rows = emit.arange(extreme(emit, "Max", length, once, "padded_length"), hint="padded_rows")
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


def masked(
    after: Emitter,
    loop: ir.Node,
    mask: tuple[ir.Value, ir.Value],
    computed: set[int],
    replacements: list[ir.Value | None],
) -> list[ir.Value | None]:
    """The results of a Scan run at least once as the Loop's: a state's final value its
    initial one when the Loop runs no iteration (but those ``computed`` outside: counters,
    unchanged states), scan outputs their first N rows (``mask``: ran at all, Range(0, N))."""
    ran, rows = mask
    carried = len(loop.inputs) - 2
    masked: list[ir.Value | None] = []
    for j, new in enumerate(replacements):
        if new is not None and j >= carried:
            raw, new = new, _like(after.Gather(new, rows, axis=0, _hint="ran_rows"), new)
            if raw.shape is not None:  # N rows, or one when N is 0
                raw.shape = ir.Shape([None, *raw.shape[1:]])
        elif new is not None and j not in computed:
            initial = loop.inputs[2 + j]
            assert initial is not None
            new = _like(after.Where(ran, new, initial, _hint="ran_state"), new)
        masked.append(new)
    return masked


def guard_by_if(
    ctx: Rewrite,
    guarded: EmptyRows,
    scan: ir.Node,
    count: ir.Value,
    iterations: ir.Value,
    stacked: int,
) -> None:
    """The Scan (of exactly ``count`` iterations) moved into the then-branch of an ``If`` on
    ``count > 0``, whose else-branch gives the Loop's results when it runs none: each state its
    initial value, each scan output ``[0, *row]`` zeros; the If's outputs take the Scan's
    names and readers (``guarded``: the scan outputs' row shapes). No runtime runs a Scan of
    zero iterations right, and a body that may fail on an iteration the Loop never runs is then
    never run."""
    graph, names = scan.graph, ctx.names
    assert isinstance(graph, ir.Graph)
    outer = ctx.into(graph, pool=None)
    ran = outer.Greater(count, outer.int64s(0, hint="none"), _hint="runs")
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
            row = guarded[j - states]
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
        ran,
        then_branch=then_graph,
        else_branch=else_graph,
        _outputs=results,
        _name=names.fresh(f"{ctx.base}_if_runs"),
    )
    del branch
    graph.insert_before(scan, outer.nodes)
    graph.remove(scan)
    then_graph.append(scan)


def guard_iteration(ctx: Rewrite, body: ir.Graph, ran: ir.Value, rows: list[GuardedRow]) -> None:
    """The Scan's ``body`` (of ``Max(count, 1)`` iterations) moved into the then-branch of an
    ``If`` on ``ran`` (the Loop runs at all), whose else-branch passes every state on and
    writes a zero row of each static shape ``rows`` for each scan output: the iteration a Loop
    of no iteration runs computes nothing, so any body is exact, and its results are masked
    after. tract 0.23.9 runs such an ``If`` (its condition read from outside, both branches
    of one fact), not one around the Scan whose outputs' lengths come from values."""
    names = ctx.names
    states = len(body.outputs) - len(rows)
    nodes = list(body)
    body.remove(nodes)
    outer = ctx.into(body, pool=None)
    otherwise = ctx.into(body, pool=None, prefix=f"{ctx.base}_skipped")
    empty: list[ir.Value] = []
    for j, out in enumerate(body.outputs):
        if j < states:
            value = otherwise.Identity(body.inputs[j], _hint=f"{out.name}_passed")
        else:
            value = _zero_row(otherwise, body, *rows[j - states])
        value.type, value.shape = out.type, out.shape
        empty.append(value)
    results = [
        ir.Value(name=names.fresh(f"{out.name}_guarded"), type=out.type, shape=out.shape)
        for out in body.outputs
    ]
    ran_outputs = list(body.outputs)
    body.outputs.clear()
    then_graph = ir.Graph([], ran_outputs, nodes=nodes, name=names.fresh(f"{ctx.base}_iteration"))
    else_graph = ir.Graph([], empty, nodes=otherwise.nodes, name=names.fresh(f"{ctx.base}_none"))
    outer.If(
        ran,
        then_branch=then_graph,
        else_branch=else_graph,
        _outputs=results,
        _name=names.fresh(f"{ctx.base}_if_ran"),
    )
    body.extend(outer.nodes)
    body.outputs.extend(results)


def _zero_row(
    emit: Emitter, body: ir.Graph, row: tuple[GuardDim, ...], dtype: ir.DataType
) -> ir.Value:
    """Zeros of ``row``: a constant, or a ``ConstantOfShape`` of sizes read where unknown."""
    sizes = [d for d in row if isinstance(d, int)]
    if len(sizes) == len(row) and fits_constant(*sizes):
        return emit.constant(np.zeros(tuple(sizes), dtype.numpy()), hint="zero_row")
    pieces = []
    for d in row:
        if isinstance(d, int):
            pieces.append(emit.int64s([d], hint="row_size"))
        else:
            inside, outside, axis = d
            source = inside if inside in body.inputs else outside
            pieces.append(emit.dims(source, axis, axis + 1, hint="row_size"))
    shape = pieces[0] if len(pieces) == 1 else emit.Concat(*pieces, axis=0, _hint="row_shape")
    zero = ir.Tensor(np.zeros(1, dtype.numpy()))
    return emit.ConstantOfShape(shape, value=zero, _hint="zero_row")
