"""onnxscript's map over the pieces of a split by run-time sizes as a ``Scan`` writing rows into
a buffer, for tract (target ``tract``, after ``scan-sequence-map``).

``ConcatFromSequence(SequenceMap(SplitToSequence(x, lens, axis=0)), axis=0)`` concatenates
pieces of different lengths: a ``Scan`` cannot stack them, and tract 0.23.9 has no ``Loop`` to
grow a tensor in. When every body output is proven (``_dims``, inside the body) either as long
as its piece (its other axes fixed) or of one shape for every piece, the concatenation of the
first kind has ``x``'s N rows, piece ``i`` at rows ``starts[i]:starts[i] + lens[i]``
(``starts = CumSum(lens) - lens``)::

    buffer = Scan(x, ..., zeros[N, ...], starts, lens) with body (..., buffer, start, size):
        rows = Range(start, start + size, 1)
        piece = Gather(x, rows)                     # the element
        ... the body ...
        buffer' = ScatterND(buffer, Unsqueeze(rows, 1), result)
        # the outputs of one shape: scan outputs, stacked as scan-sequence-map stacks them

The sizes are checked before the ``Scan``: non-negative, at least one, adding up to N, else an
out-of-range ``Gather`` fails the run, as the split (or the empty concatenation) fails it.

tract 0.23.9 runs a ``Scan`` body whose values change length from one iteration to the next,
but gives whatever reads a length (``Shape``, ``Size``, ``ReduceMean``'s divisor) the first
iteration's, computes a ``MatMul`` of the piece as if it had the first piece's rows (or aborts:
'assertion failed: index < dim'), reduces an empty piece's max to f32::MIN (ONNX: -inf) and
panics reducing an empty rank-1 tensor (``tests/passes/test_ragged_maps_as_scans.py`` keeps each
smallest model). So only bodies of vetted ops are taken (elementwise and broadcasting ops,
``ReduceSum``/``ReduceProd``, transposes, constant reshapes; no reduction of a rank-1 piece), and
each ``ReduceMean`` becomes ``ReduceSum`` divided by the count of the reduced axes, computed from
the piece's size (a value) and the outer shapes; an empty mean is 0, as in onnxruntime. int32
sizes are scanned as they are and cast in the body (tract types no ``Scan`` over a ``Cast`` to
int64). Other maps are left, the reason recorded (exit 2 before any check).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from seqlower._shape_rules import BROADCASTING, infer, transpose, unsqueeze
from seqlower.errors import describe_node
from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._dims import ELEMENTWISE, DimProver
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import (
    REDUCTIONS,
    block,
    constant_array,
    int_attr,
    ints_attr,
    is_onnx,
    rank_of,
    reduced_axes,
    subgraphs_of,
)
from seqlower.passes._shared import (
    body_of,
    concat_problem,
    concat_stacked,
    cut_interface,
    inline_copy,
    is_sequence,
    outer_reads_as_states,
    prepend,
    scan_outputs,
)
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["RaggedMapsAsScans"]

_INT64 = int(ir.DataType.INT64)
#: Reductions of the data alone (no count of what they reduce) that tract 0.23.9 gets right on
#: an empty piece (its ReduceMax gives f32::MIN there, not -inf).
_DATA_REDUCTIONS = frozenset({"ReduceSum", "ReduceProd"})
#: Ops tract 0.23.9 computes right in a Scan body whose values change length (module docstring).
_VETTED = (
    ELEMENTWISE
    | BROADCASTING
    | _DATA_REDUCTIONS
    | {"Constant", "CastLike", "Clip", "ReduceMean", "Transpose", "Squeeze"}
    | {"Unsqueeze", "Reshape"}
)
#: A dimension as long as the piece (the split axis of the element).
_PIECE = "piece"
Outer = int | tuple[ir.Value, int] | str  # static, an outer value's axis, or _PIECE


@dataclasses.dataclass
class _Output:
    rows: bool  # as long as the piece: written into a buffer; else one shape, stacked
    rank: int
    dims: list[frozenset[Outer]]
    dtype: ir.DataType | None


@dataclasses.dataclass
class _Mean:
    node: ir.Node
    counts: list[Outer]  # the reduced axes' lengths
    axes: list[int]


@dataclasses.dataclass
class _Plan:
    source: ir.Value
    sizes: ir.Value
    sizes_dtype: ir.DataType  # int32 or int64: the Scan scans them so, the body casts
    body: ir.Graph
    outputs: list[_Output]
    means: list[_Mean]
    whole: bool  # a row-wise body: run once on x, no Scan


class RaggedMapsAsScans(NodeLoweringPass[_Plan]):
    """A map over the pieces of ``SplitToSequence(x, lens)`` joined by ``ConcatFromSequence``,
    as a ``Scan`` over the pieces writing rows into a buffer (module docstring)."""

    op_type = "SequenceMap"
    takes_all = False

    def __init__(self, *, scans: bool = True) -> None:
        """``scans``: maps of other bodies than row-wise ones become Scans (and those left are
        named); else only the maps of a row-wise body are taken, run once on the whole tensor
        (no ``Scan``): for the converters, which run no ``Scan`` of a run-time count, placed
        before ``fold-sequence-ops`` (at fixed shapes it splits the tensor by the run-time sizes
        into a ``Split`` TVM and onnx2tf cannot convert)."""
        super().__init__()
        self.scans = scans

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        found = _ragged_split(node)
        if found is None or site.opset < 15:
            return None
        source, sizes = found
        sizes_dtype = element_dtype(types.type_of(sizes))
        if sizes_dtype not in (ir.DataType.INT32, ir.DataType.INT64):
            return None
        body = body_of(node)
        if len(body.inputs) != len(node.inputs) or len(body.outputs) != len(node.outputs):
            return None
        if any(v is None or (k and is_sequence(node, k, types)) for k, v in enumerate(node.inputs)):
            return None
        passed = {id(p): v for p, v in zip(body.inputs[1:], node.inputs[1:], strict=True) if v}
        dims = _BodyDims(body, source, passed)
        problem = _unvetted(body) or _shared_element(node) or _rank_one_reductions(body, dims)
        outputs: list[_Output] = []
        means: list[_Mean] = []
        if problem is None:
            problem = _plan_means(body, dims, means)
        for old, result in zip(node.outputs, body.outputs, strict=True):
            if problem is not None:
                break
            output = _plan_output(dims, result, types.type_of(old) or result.type)
            problem = _output_problem(old, result, output)
            if output is not None:
                outputs.append(output)
        if problem is not None:
            if self.scans:
                block(node, f"its pieces are of run-time sizes and {problem}")
            return None
        whole = all(o.rows for o in outputs) and _row_wise(body, dims)
        if not whole and not self.scans:
            return None
        return _Plan(source, sizes, sizes_dtype, body, outputs, means, whole)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        if plan.whole:
            _run_on_whole(ctx, plan)
            return
        op, body, names, base = ctx.before(), plan.body, ctx.names, ctx.base
        starts, sizes, rows = _checked_pieces(op, plan.source, plan.sizes, plan.sizes_dtype)
        scalar = ir.TensorType(plan.sizes_dtype)
        start = ir.Value(name=names.fresh(f"{base}_start"), type=scalar, shape=ir.Shape([]))
        size = ir.Value(name=names.fresh(f"{base}_size"), type=scalar, shape=ir.Shape([]))
        # The body's reads first: the means' rewrites take pooled constants they put in front.
        buffers, written, scanned, length = _body_interface(ctx, plan, start, size)
        for mean in plan.means:
            counts = [_outer_dim(op, d, length) for d in mean.counts]
            _sum_over_count(ctx.at(mean.node), counts, mean.axes)
        outer, states, state_outs = outer_reads_as_states(ctx, body, [*buffers, start, size])
        body.inputs.extend([*states, *buffers, start, size])
        body.outputs.extend([*state_outs, *written, *scanned])
        initial = [_buffer(op, o, rows) for o in plan.outputs if o.rows]
        finals = [ir.Value(name=names.fresh(f"{base}_{v.name}_final")) for v in outer]
        joined = [
            ir.Value(name=names.fresh(f"{base}_out"), type=_tensor(o.dtype)) for o in plan.outputs
        ]
        pairs = list(zip(plan.outputs, joined, strict=True))
        by_kind = [v for o, v in pairs if o.rows] + [v for o, v in pairs if not o.rows]
        del ctx.node.attributes["body"]
        scan = ctx.before(pool=None)
        scan.Scan(*outer, *initial, starts, sizes, body=body, num_scan_inputs=2,
                  _outputs=[*finals, *by_kind], _name=ctx.node.name or None,
                  _doc_string=ctx.node.doc_string)  # fmt: skip
        ctx.insert()
        _join(ctx, plan, joined)


def _body_interface(
    ctx: Rewrite, plan: _Plan, start: ir.Value, size: ir.Value
) -> tuple[list[ir.Value], list[ir.Value], list[ir.Value], ir.Value]:
    """The body reads piece ``start:start + size`` of ``x`` for its element, the tensors the map
    passed from outside, and writes its rows into buffers; returns the buffers (states), what
    it writes into them, its outputs of one shape (scan outputs) and the piece's int64 size.
    int32 sizes are cast here: tract 0.23.9 types no Scan over a Cast to int64 ('Impossible to
    unify I64 with TDim')."""
    body, names, base = plan.body, ctx.names, ctx.base
    reads, tail = ctx.into(body), ctx.into(body, pool=None)  # tail's constants go last
    if plan.sizes_dtype != ir.DataType.INT64:
        start = reads.Cast(start, to=_INT64, _hint="start64")
        size = reads.Cast(size, to=_INT64, _hint="size64")
    index = reads.Range(start, reads.Add(start, size, _hint="end"), reads.int64s(1, hint="one"))
    piece = reads.Gather(plan.source, index, axis=0, _hint="piece")
    swaps = {body.inputs[0]: piece, **dict(zip(body.inputs[1:], ctx.node.inputs[1:], strict=True))}
    results = cut_interface(body, swaps, list(body.outputs))  # type: ignore[arg-type]
    at = tail.unsqueeze(index, [1], hint="at")
    buffers, written, scanned = [], [], []
    for output, result in zip(plan.outputs, results, strict=True):
        if output.rows:
            buffer = ir.Value(name=names.fresh(f"{base}_buffer"), type=_tensor(output.dtype))
            buffers.append(buffer)
            written.append(tail.ScatterND(buffer, at, result, _hint="written"))
        else:
            scanned.append(result)
    scanned = scan_outputs(tail, body, scanned)
    prepend(body, reads.nodes)
    body.extend(tail.nodes)
    return buffers, written, scanned, size


#: Per axis, the dimensions that broadcast to it (static 1s left out: an empty set is 1).
Dims = list[frozenset[Outer]]


class _BodyDims:
    """The dimensions of a map body's values, each as the dimensions outside the body that
    broadcast to it (``_PIECE``: the piece's length, the element's axis 0; the element's other
    axes are the split tensor's, a tensor input's the tensor's). Unknown: None."""

    def __init__(self, body: ir.Graph, source: ir.Value, passed: dict[int, ir.Value]) -> None:
        self.body, self.source, self.passed = body, source, passed
        self.prover = DimProver()
        self.memo: dict[int, Dims | None] = {}

    def of(self, value: ir.Value) -> Dims | None:
        key = id(value)
        if key not in self.memo:
            self.memo[key] = None  # a cycle (none in a graph) stays unknown
            self.memo[key] = self._find(value)
        return self.memo[key]

    def _outer(self, value: ir.Value) -> Dims | None:
        array = constant_array(value)
        if array is not None:
            return _static_dims(array.shape)
        rank = self.prover.rank(value)
        if rank is None:
            return None
        found: Dims = []
        for axis in range(rank):
            dim = self.prover.dim(value, axis)
            if dim is None:
                return None
            found.append(frozenset() if dim == 1 else frozenset([dim]))
        return found

    def _find(self, value: ir.Value) -> Dims | None:
        if value is self.body.inputs[0]:
            outer = self._outer(self.source)
            return None if not outer else [frozenset([_PIECE]), *outer[1:]]
        if id(value) in self.passed:
            return self._outer(self.passed[id(value)])
        node = value.producer()
        if value.graph is not self.body:
            return self._outer(value)  # read from outside
        if node is None:
            return None
        array = constant_array(value)
        if array is not None:
            return _static_dims(array.shape)
        inputs = [self.of(v) if v is not None else None for v in node.inputs[:1]]
        first = inputs[0] if inputs else None
        op = node.op_type
        if op in ELEMENTWISE or op in ("CastLike", "Clip"):
            return first
        if op in BROADCASTING:
            shapes = [None if v is None else self.of(v) for v in node.inputs]
            found = infer(node, [None if d is None else tuple(d) for d in shapes], _UNION)
            return None if found is None else list(found)
        if first is None:
            return None
        if op in REDUCTIONS:
            if _reduced_axes(node, len(first)) is None:
                return None
            found = infer(node, [tuple(first)], _UNION)
            return None if found is None else list(found)
        if op == "Reshape":
            target = _static_target(node)
            return None if target is None else _static_dims(target)
        return _moved(node, first)


def _static_dims(shape: Sequence[int]) -> Dims:
    return [frozenset() if d == 1 else frozenset([int(d)]) for d in shape]


class _Union:
    """Each axis as the outer dimensions that broadcast to it, from any operand (static 1s
    left out: the empty set is 1)."""

    one: frozenset[Outer] = frozenset()

    def broadcast(self, dims: list[frozenset[Outer]]) -> frozenset[Outer] | None:
        return frozenset().union(*dims)

    def equal(self, dims: list[frozenset[Outer]]) -> frozenset[Outer] | None:
        return frozenset().union(*dims)

    def sum(self, dims: list[frozenset[Outer]]) -> frozenset[Outer] | None:
        return None

    def known(self, dim: frozenset[Outer]) -> int | None:
        number = next(iter(dim), None) if len(dim) == 1 else 1 if not dim else None
        return number if isinstance(number, int) else None

    def size(self, number: int) -> frozenset[Outer]:
        return frozenset() if number == 1 else frozenset([number])


_UNION = _Union()


def _moved(node: ir.Node, first: Dims) -> Dims | None:
    """Transpose, Squeeze and Unsqueeze: axes moved, removed or added (a squeezed axis is
    taken as 1: the body runs only where it is)."""
    op, axes = node.op_type, _constant_axes(node)
    if op == "Transpose":
        found = transpose(tuple(first), ints_attr(node, "perm") or None)
    elif op == "Squeeze" and axes:
        removed = {a % len(first) for a in axes}
        found = tuple(d for k, d in enumerate(first) if k not in removed)
    elif op == "Unsqueeze":
        found = unsqueeze(tuple(first), axes, _UNION)
    else:
        found = None
    return None if found is None else list(found)


def _ragged_split(node: ir.Node) -> tuple[ir.Value, ir.Value] | None:
    """``(x, lens)`` when the map's first input is ``SplitToSequence(x, lens, axis=0)`` with a
    1-D ``lens``."""
    sequence = node.inputs[0] if node.inputs else None
    split = None if sequence is None else sequence.producer()
    if not is_onnx(split, "SplitToSequence") or split is None or len(split.inputs) < 2:
        return None
    x, sizes = split.inputs[0], split.inputs[1]
    if x is None or sizes is None or rank_of(sizes) != 1:
        return None
    axis, rank = int_attr(split, "axis", 0), rank_of(x)
    if axis is None or rank is None or axis % max(rank, 1) != 0 or rank == 0:
        return None
    return x, sizes


def _unvetted(body: ir.Graph) -> str | None:
    for inner in body:
        if not is_onnx(inner) or inner.op_type not in _VETTED or subgraphs_of(inner):
            return (
                f"its body's {describe_node(inner)} is not among the ops tract 0.23.9 computes "
                "right on values whose length changes from one iteration to the next"
            )
        if inner.op_type == "Reshape" and _static_target(inner) is None:
            return f"its body's {describe_node(inner)} reshapes to a computed shape"
        if inner.op_type in ("Squeeze", "Unsqueeze") and _constant_axes(inner) is None:
            return f"its body's {describe_node(inner)} has computed axes"
    return None


def _rank_one_reductions(body: ir.Graph, dims: _BodyDims) -> str | None:
    """tract 0.23.9 panics reducing an empty rank-1 tensor ('attempt to divide by zero')."""
    for inner in body:
        source = inner.inputs[0] if inner.op_type in REDUCTIONS and inner.inputs else None
        found = None if source is None else dims.of(source)
        if found is not None and len(found) == 1 and _PIECE in found[0]:
            return (
                f"its body's {describe_node(inner)} reduces a rank-1 piece (tract 0.23.9 "
                "panics on an empty one)"
            )
    return None


def _shared_element(node: ir.Node) -> str | None:
    sequence = node.inputs[0]
    assert sequence is not None
    if len(sequence.uses()) != 1 or sequence.is_graph_output():
        return f"the sequence '{sequence.name}' is read elsewhere too"
    return None


def _plan_means(body: ir.Graph, dims: _BodyDims, means: list[_Mean]) -> str | None:
    """Each ``ReduceMean`` of the body: its reduced axes and their lengths outside the body."""
    for inner in body:
        if inner.op_type != "ReduceMean":
            continue
        source = None if inner.inputs[0] is None else dims.of(inner.inputs[0])
        axes = None if source is None else _reduced_axes(inner, len(source))
        if source is None or axes is None:
            return f"its body's {describe_node(inner)} reduces axes not known when lowering"
        if any(len(source[a]) > 1 for a in axes):
            return f"the lengths {describe_node(inner)} divides by are not proven"
        means.append(_Mean(inner, [next(iter(source[a]), 1) for a in axes], axes))
    return None


def _plan_output(
    dims: _BodyDims, result: ir.Value, type_: ir.TypeProtocol | None
) -> _Output | None:
    found = dims.of(result)
    if found is None:
        return None
    rows = bool(found) and found[0] == frozenset([_PIECE])
    return _Output(rows, len(found), found, element_dtype(type_))


def _output_problem(old: ir.Value, result: ir.Value, output: _Output | None) -> str | None:
    if output is None:
        return f"the shape of its body output '{result.name}' is not proven"
    if any(_PIECE in d for d in output.dims[1 if output.rows else 0 :]):
        return (
            f"its body output '{result.name}' is neither as long as its piece along axis 0 "
            "alone nor of one shape for every piece"
        )
    if output.rows and output.dtype is None:
        return f"the element type of its body output '{result.name}' is not known"
    if old.is_graph_output() or not old.uses():
        return f"its output '{old.name}' is not read by ConcatFromSequence alone"
    for use in old.uses():
        concat = use.node
        if not is_onnx(concat, "ConcatFromSequence") or use.idx != 0:
            return f"its output '{old.name}' is read by {describe_node(concat)}"
        problem = concat_problem(concat, output.rank)
        if problem:
            return f"{describe_node(concat)} {problem}"
        axis = (int_attr(concat, "axis", 0) or 0) % output.rank if output.rank else 0
        if output.rows and (int_attr(concat, "new_axis", 0) or axis):
            return f"{describe_node(concat)} joins pieces of run-time lengths along another axis"
    return None


def _reduced_axes(node: ir.Node, rank: int) -> list[int] | None:
    """A reduction's axes, normalized; None when not known when lowering (a run-time input,
    read as every axis before: a mean divided by the wrong count) or no reduction at all
    (``noop_with_empty_axes``: not taken)."""
    axes = reduced_axes(node, rank)
    return None if axes == [] and rank else axes


def _static_target(node: ir.Node) -> list[int] | None:
    """A ``Reshape``'s constant target when every entry is a positive size."""
    target = constant_array(node.inputs[1]) if len(node.inputs) > 1 else None
    if target is None or target.ndim != 1 or not (target > 0).all():
        return None
    return [int(d) for d in target]


def _constant_axes(node: ir.Node) -> list[int] | None:
    if len(node.inputs) > 1:
        array = constant_array(node.inputs[1])
        return None if array is None else [int(a) for a in array.reshape(-1)]
    return ints_attr(node, "axes")


def _tensor(dtype: ir.DataType | None) -> ir.TensorType | None:
    return None if dtype is None else ir.TensorType(dtype)


def _checked_pieces(
    op: Emitter, x: ir.Value, lens: ir.Value, dtype: ir.DataType
) -> tuple[ir.Value, ...]:
    """Where each piece starts and the sizes (of ``lens``'s type), and ``[N]``; an out-of-range
    ``Gather`` fails the run unless there is a piece, none is negative and they add up to N."""
    rows = op.dims(x, 0, 1, hint="rows")
    bad = _bad_sizes(op, lens, dtype, rows)
    zero_row = op.constant(np.zeros(1, dtype.numpy()), hint="zero_row")
    checked = op.Add(lens, op.Gather(zero_row, bad, _hint="zero_if_good"), _hint="sizes_checked")
    ends = op.CumSum(checked, op.int64s(0, hint="axis"), _hint="ends")
    starts = op.Sub(ends, checked, _hint="starts")
    for value in (checked, starts):  # lens's shape: the Scan's count, static at fixed shapes
        value.dtype = dtype
        value.shape = None if lens.shape is None else ir.Shape(lens.shape)
    return starts, checked, rows


def _bad_sizes(op: Emitter, lens: ir.Value, dtype: ir.DataType, rows: ir.Value) -> ir.Value:
    """1 unless there is a piece, none is negative and they add up to ``rows``, else 0."""
    sizes = lens if dtype == ir.DataType.INT64 else op.Cast(lens, to=_INT64, _hint="sizes")
    rows = op.Cast(rows, to=_INT64, _hint="row_count")  # a tensor for TVM: its Equal takes no shape
    total = op.ReduceSum(sizes, keepdims=1, _hint="total")
    # negative sizes counted (no Abs: LiteRT has no int64 one)
    negative = op.Cast(op.Less(sizes, op.int64s(0, hint="zero")), to=_INT64, _hint="negative")
    none = op.Equal(op.ReduceSum(negative, keepdims=1), op.int64s([0], hint="zero"), _hint="none")
    good = op.And(
        op.And(op.Equal(total, rows, _hint="adds_up"), none, _hint="sizes_ok"),
        op.Greater(op.Shape(sizes, _hint="count"), op.int64s([0], hint="zero"), _hint="any"),
        _hint="good",
    )
    return op.Cast(op.Not(good, _hint="bad"), to=_INT64, _hint="bad_int")


def _outer_dim(op: Emitter, dim: Outer, size: ir.Value) -> ir.Value:
    """A dimension as an int64 scalar: the piece's size, a constant, or read from a shape
    outside the body."""
    if dim == _PIECE:
        return size
    if isinstance(dim, int):
        return op.int64s(dim, hint="length")
    assert isinstance(dim, tuple)
    return op.Gather(op.Shape(dim[0], _hint="shape"), op.int64s(dim[1], hint="axis"), _hint="dim")


def _sum_over_count(ctx: Rewrite, counts: list[ir.Value], axes: list[int]) -> None:
    """``ReduceMean`` (``ctx.node``) as ``ReduceSum`` over the count of what it reduces (at
    least 1: an empty mean is 0, as onnxruntime gives)."""
    op, mean = ctx.before(), ctx.node
    source = mean.inputs[0]
    assert source is not None
    keepdims = int_attr(mean, "keepdims", 1)
    total = op.ReduceSum(source, op.int64s(axes, hint="axes"), keepdims=keepdims, _hint="sum")
    count = counts[0]
    for other in counts[1:]:
        count = op.Mul(count, other, _hint="count")
    count = op.Max(count, op.int64s(1, hint="one"), _hint="count_or_one")
    ctx.replace([op.Div(total, op.CastLike(count, total, _hint="divisor"), _hint="mean")])


def _buffer(op: Emitter, output: _Output, rows: ir.Value) -> ir.Value:
    """Zeros of the joined output's shape: N rows (every row is written), each other axis the
    broadcast of the dimensions that make it (as the body's ops broadcast them)."""
    parts = [rows]
    for broadcast in output.dims[1:]:
        lengths = [_length(op, d) for d in _in_order(broadcast)] or [op.int64s([1], hint="length")]
        length = lengths[0]
        for other in lengths[1:]:
            ones = op.ConstantOfShape(length, value=ir.Tensor(np.zeros(1, np.int64)), _hint="ones")
            length = op.Shape(op.Expand(ones, other, _hint="broadcast"), _hint="length")
        parts.append(length)
    shape = parts[0] if len(parts) == 1 else op.Concat(*parts, axis=0, _hint="buffer_shape")
    assert output.dtype is not None
    zero = ir.Tensor(np.zeros(1, dtype=output.dtype.numpy()))
    return op.ConstantOfShape(shape, value=zero, _hint="buffer")


def _in_order(dims: frozenset[Outer]) -> list[Outer]:
    """``dims`` in an order of the model's own (numbers, then outer values by name and axis):
    a frozenset of values iterates in the order of their addresses, which differ from run to
    run, and the lowered bytes with it."""

    def key(dim: Outer) -> tuple[int, str, int]:
        if isinstance(dim, int):
            return (0, "", dim)
        if isinstance(dim, tuple):
            return (1, dim[0].name or "", dim[1])
        return (2, dim, 0)

    return sorted(dims, key=key)


def _length(op: Emitter, dim: Outer) -> ir.Value:
    """A dimension outside the body (never the piece's) as a 1-D length."""
    if isinstance(dim, int):
        return op.int64s([dim], hint="length")
    assert isinstance(dim, tuple)
    value, axis = dim
    return op.dims(value, axis, axis + 1, hint="length")


def _row_wise(body: ir.Graph, dims: _BodyDims) -> bool:
    """Whether every node of the body is elementwise or broadcasting and every value made from
    the piece keeps its rows on axis 0 alone: row r of each result is then computed from row r
    of the piece (and outer values), so the body gives the same rows on the whole of x."""
    for inner in body:
        if inner.op_type not in ELEMENTWISE | BROADCASTING | {"Constant", "CastLike", "Clip"}:
            return False
        for value in inner.outputs:
            found = dims.of(value)
            if found is None or any(_PIECE in d for d in found[1:]):
                return False
            if found and _PIECE in found[0] and found[0] != frozenset([_PIECE]):
                return False
    return True


def _run_on_whole(ctx: Rewrite, plan: _Plan) -> None:
    """A row-wise body run once on ``x`` (through a ``Where`` that keeps it, or an out-of-range
    ``Gather`` that fails the run when the sizes are bad), its results the joined outputs."""
    op = ctx.before()
    rows = op.dims(plan.source, 0, 1, hint="rows")
    bad = _bad_sizes(op, plan.sizes, plan.sizes_dtype, rows)
    keep = op.Gather(op.constant(np.array([True]), hint="true_row"), bad, _hint="keep")
    checked = op.Where(keep, plan.source, plan.source, _hint="checked")
    arguments = [checked, *ctx.node.inputs[1:]]
    nodes, results = inline_copy(ctx, plan.body, arguments, ctx.base)  # type: ignore[arg-type]
    for inner in nodes:  # the body's shapes were a piece's
        for value in inner.outputs:
            if inner.op_type != "Constant":
                value.shape = None
    ctx.insert()  # the check, then the body reading it
    ctx.insert(nodes)
    _join(ctx, plan, results)


def _join(ctx: Rewrite, plan: _Plan, joined: list[ir.Value]) -> None:
    """Each ``ConcatFromSequence`` of the map's outputs reads the buffer or the stacked results;
    the map goes."""
    for output, old, value in zip(plan.outputs, ctx.node.outputs, joined, strict=True):
        for use in list(old.uses()):
            concat = ctx.at(use.node)
            if not output.rows:
                concat_stacked(concat, value, output.rank)
                continue
            copy = concat.before().Identity(value, _hint="joined")
            copy.type, copy.shape = (
                use.node.outputs[0].type or value.type,
                use.node.outputs[0].shape,
            )
            concat.replace([copy], rename=True)
    ctx.remove()
