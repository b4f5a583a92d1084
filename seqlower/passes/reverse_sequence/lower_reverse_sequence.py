"""Lower ``ReverseSequence`` into ``Slice`` or ``GatherND``, ops every runtime has.

tract, onnx2torch, candle, burn, QNN and TVM have no ``ReverseSequence``; all of them have
``Slice`` and ``GatherND``. Which form a node gets, from most to least common in real models:

- **One** ``Slice`` **with step -1** when every length is provably the node's own time length:
  tf2onnx writes ``tf.reverse`` and every Keras ``Bidirectional`` backward pass so, with lengths
  ``Expand(Gather(Shape(x), [t]), Gather(Shape(x), [b]))`` (see :mod:`._dims` for what counts
  as proof). Nothing to validate: the lengths cannot be out of range.
- Otherwise ``GatherND`` with an index ``[T, B, 2]`` (time-major) or ``[B, T, 2]`` of
  (time, batch) coordinates, output row (t, b) reading input row (src(t, b), b) with

      src(t, b) = len[b] - 1 - t   if t < len[b]
                = t                otherwise

  The index is computed from ``Shape``/``Range``/``Less``/``Where`` on [T, B], also for
  constant lengths: with a static T, runtimes fold it into a constant when loading (onnxruntime
  runs it as fast as a folded index), and a 3-D constant index of our own would be transposed
  by onnx2tf, which moves every 3-D constant to channels-last. ``GatherND`` moves whole
  trailing slices, as the native kernel does; it needs no ``Reshape``
  of the data (so no ``allowzero`` and no products of symbolic dimensions for tract to solve).
  Nodes of one graph with the same lengths value and provably the same dimensions share one
  computed index; with only the batch dimension proven equal they share the index's lengths
  part (the count check and the batch coordinates), and each computes its time-dependent rest.
- A static slice shape (every axis after the first two; not strings, no statically empty
  axis): the input seen as [T*B, *slice] rows (a ``Reshape``, which copies nothing) and one
  gather of whole rows at a [T, B] or [B, T] row index: ``Gather`` with an int32 index,
  or, time-major with slices of at most 64 elements, ``GatherND`` with the same rows widened
  to int64 (faster there in onnxruntime, :func:`_nd_rows`). No coordinate pairs, no
  ``Expand``/``Concat``; the index is computed on [B] and [T] vectors and combined over T*B
  in a few int32 passes (:func:`_row_index`).
- Lengths known when lowering (a constant, one per entry of a static batch axis) on a static
  time axis compute nothing at run time: all of them 0 or 1 is a copy (``Identity``), all equal
  to T one ``Slice``, others a constant index: the row index above when the slice shape is
  static (one 2-D constant, int32 for ``Gather``, int64 for ``GatherND``), else the
  ``GatherND`` pairs held as 2-D constants; shared by the graph's reversals with equal lengths
  wherever they are written. With only the lengths constant, the lengths part below is two
  constants; with only T static, the steps are.
- Lengths known only at run time on a static T and B (declared, proven, or known to shape
  inference where the proofs stop at an op they cannot see through): every part of the index
  that depends on shapes is a constant (batch coordinates, steps, row strides; no ``Shape``,
  ``Range`` or count check when the lengths are declared one per batch entry), and only the
  [B] lengths are read at run time, then combined with the constants over T*B in the gather's
  own index type (int64 [T, B, 1] for the ``GatherND`` rows, int32 for ``Gather``). issue 33:
  50 such reversals of a synthetic model lowered to 2445 nodes; with one shared index, 517.
- ``GatherElements`` along the time axis with the [T, B] source steps alone when each (time,
  batch) entry is one element (rank 2, or every later axis a static 1, squeezed around it):
  ``GatherND`` pays a fixed cost per slice, which dominates for one-element slices (2-3x
  slower in onnxruntime).

Lengths outside [0, T] and a lengths vector that is not one per batch entry fail at run time as
the native kernel does, through an out-of-range ``Gather`` on [B]-sized vectors (constant
lengths out of range fail when onnxruntime folds them, at load; a count known when lowering to
differ from a known batch size is refused: the node fails whenever it runs). Runtimes whose
``Gather`` does not fail on a bad index (OpenVINO returns zeros) cannot express that failure;
see the README.

Opset 10 has neither ``GatherND`` nor ``Range``: there the row ``Gather`` of
:mod:`._reverse_rows` is used.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._dims import Dim, DimProver, filled_vector
from seqlower.passes._emit import Emitter, fits_constant
from seqlower.passes._ir import ints_attr, is_onnx, onnx_producer, static_dim
from seqlower.passes._types import TypeOracle, element_dtype
from seqlower.passes._validate import check_lengths_count, validate_reverse_sequence
from seqlower.passes.reverse_sequence._reverse_rows import (
    invalid_lengths,
    reverse_rows,
)

__all__ = [
    "FORMS",
    "ONNXRUNTIME_LACKS",
    "LowerReverseSequence",
]

_INT64_MIN = -(2**63)  # a Slice end meaning "past the first element", stepping backwards


class _Form(enum.Enum):
    SLICE = "slice"  # proven full-length: one Slice with step -1
    COPY = "copy"  # constant lengths of 0 or 1: nothing moves
    CONSTANT = "constant"  # constant lengths and a static T: a constant index
    COMPUTED = "computed"  # lengths known at run time: a computed GatherND index
    ELEMENTS = "elements"  # the same, one element per step: a computed GatherElements index
    ROW_GATHER = "row_gather"  # the same, static slices: a Gather of [T*B, *slice] rows
    ROWS = "rows"  # opset 10: a row Gather (no GatherND or Range there)


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    opset: int
    form: _Form
    time_axis: int
    batch_axis: int
    lens: np.ndarray | None  # the lengths, when they are a constant
    time_size: int | None  # T, when static
    data_shape: tuple[int, ...] | None  # the input's whole shape, when static
    gather_elementwise: bool  # strings (or an unknown type): rows form gathers single elements
    batch_checked: bool  # the lengths are proven one per batch entry
    rank: int | None  # the input's rank, when known (the ELEMENTS form needs it)
    batch_size: int | None  # B, when static
    share_key: tuple[Any, ...] | None  # nodes with equal keys share a computed index
    lengths_key: tuple[Any, ...] | None  # ... and its lengths part (see _LengthsPart)
    elements: bool = False  # one element per (time, batch) entry: GatherElements
    slice_shape: tuple[int, ...] | None = None  # the static shape of one (time, batch) slice
    static_index: bool = False  # T and B static: only the lengths part is computed at run time


#: The general forms :class:`LowerReverseSequence` can be asked for (``form=``).
FORMS = ("gathernd", "gather")


#: Element types onnxruntime 1.32's ReverseSequence kernel does not take.
ONNXRUNTIME_LACKS = frozenset({ir.DataType.BFLOAT16, ir.DataType.COMPLEX64, ir.DataType.COMPLEX128})


class LowerReverseSequence(NodeLoweringPass[_Plan]):
    """Replace every ``ReverseSequence`` with a ``Slice`` or a ``GatherND`` (see the module
    docstring); the count of each form chosen is in :attr:`forms` after a run.

    ``form`` picks what lengths known only at run time get (a proven full-length reversal is
    one ``Slice`` either way): ``"gathernd"`` (the default) runs on every runtime seqlower
    targets, tract with symbolic shapes included; ``"gather"``, a row ``Gather`` of the input
    flattened to [T*B, ...] (the opset-10 form), is as fast or faster in onnxruntime (up to
    2.3x for slices of 8 floats; neither is within 1.1x of the native kernel for slices of 1
    or 8 floats), but its ``Flatten``/``Reshape`` are beyond tract and onnx2torch: it is for
    onnxruntime and OpenVINO.

    ``gaps_only`` lowers only the nodes onnxruntime cannot run, the others kept (its row).
    onnxruntime runs ``ReverseSequence`` natively for every tensor type but bfloat16, complex64
    and complex128 (``NOT_IMPLEMENTED``), and its kernel is faster than any decomposition:
    1.25-4.3x for slices of 1 or 8 elements (``benchmarks/reverse_sequence.py --inner``). So
    only the nodes whose data type onnxruntime lacks, or whose type is not known (asking may
    run ONNX's shape inference once; a node whose type stays unknown is lowered, which runs
    everywhere), are rewritten.
    """

    op_type = "ReverseSequence"

    def __init__(self, form: str = "gathernd", *, gaps_only: bool = False) -> None:
        if form not in FORMS:
            raise ValueError(f"unknown ReverseSequence form {form!r}; known: {', '.join(FORMS)}")
        super().__init__()
        self.form = form
        self.gaps_only = gaps_only
        self.takes_all = not gaps_only
        self.forms: dict[str, int] = {}
        self._indices: dict[tuple[Any, ...], ir.Value] = {}
        self._lengths: dict[tuple[Any, ...], _LengthsPart] = {}
        self._dims = DimProver()

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.forms = {}
        self._indices = {}
        self._lengths = {}
        self._dims = DimProver()
        try:
            return super().call(model)
        finally:
            # These hold values of the model: let them go.
            self._dims, self._indices, self._lengths = DimProver(), {}, {}

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        if self.gaps_only:
            data = site.node.inputs[0] if site.node.inputs else None
            dtype = None if data is None else element_dtype(types.type_of(data))
            if dtype is not None and dtype not in ONNXRUNTIME_LACKS:
                return None  # onnxruntime's own kernel: kept
        return self._plan_node(site, types)

    def _plan_node(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        time_axis, batch_axis, lens = validate_reverse_sequence(node)
        data, lens_value = node.inputs
        assert data is not None and lens_value is not None
        time_dim, batch_dim = self._dims.dim(data, time_axis), self._dims.dim(data, batch_axis)
        filled = filled_vector(lens_value, self._dims)
        form = _choose_form(site.opset, filled, time_dim, batch_dim, rows=self.form == "gather")
        # Sizes the proofs did not reach are taken from the declared or inferred shapes: a
        # static one makes the index's shape-derived parts constants (issue 33).
        time_dim = _static_size(types, data, time_axis, time_dim)
        batch_dim = _static_size(types, data, batch_axis, batch_dim)
        count = len(lens) if lens is not None else self._dims.dim(lens_value, 0)
        count = _static_size(types, lens_value, 0, count)
        check_lengths_count(node, batch_dim, count)
        time_size = time_dim if isinstance(time_dim, int) else None
        batch_checked = batch_dim is not None and count == batch_dim
        full_rank = None
        if form is _Form.COMPUTED:
            full_rank = self._dims.rank(data)
            # Static sizes past the proofs (_static_size): the rank from the same shape.
            if full_rank is None and isinstance(time_dim, int) and isinstance(batch_dim, int):
                shape = types.shape_of(data)
                full_rank = None if shape is None else len(shape)
        elements = full_rank is not None and _one_per_step(self._dims, data, full_rank)
        slice_shape = None
        if elements:
            form = _Form.ELEMENTS
        elif full_rank is not None:
            slice_shape = _static_slice(self._dims, types, data, full_rank)
            # A statically empty time or batch axis keeps GatherND: OpenVINO 2026.4.1 dies of
            # SIGFPE compiling a Gather along a static axis of size 0 (symbolic, it runs).
            empty = time_dim == 0 or batch_dim == 0
            if slice_shape is not None and not empty and _not_strings(types, data):
                form = _Form.ROW_GATHER
            else:
                slice_shape = None
        if form in _COMPUTED_FORMS and batch_checked:
            form = _constant_form(lens, time_size) or form
        if form not in (_Form.ROW_GATHER, _Form.CONSTANT):
            slice_shape = None
        batch_size = batch_dim if isinstance(batch_dim, int) else None
        static_index = form in _COMPUTED_FORMS and _static_sizes(time_size, batch_size)
        graph = node.graph
        share_key = lengths_key = None
        if form in (*_COMPUTED_FORMS, _Form.CONSTANT) and graph is not None:
            # Constant lengths are the same lengths wherever they are written (exporters write
            # one Constant per layer).
            lengths_id = id(lens_value) if lens is None else ("constant", lens.tobytes())
            lengths_key = (id(graph), lengths_id, time_axis, _key(batch_dim), form, elements)
            # A constant or static row index is int32 for Gather and int64 for GatherND: kept
            # apart (one computed from symbolic sizes is int32 for both, each GatherND node
            # widening it).
            keyed = static_index or form is _Form.CONSTANT
            row_op = _row_op(time_axis, slice_shape) if keyed else None
            share_key = (*lengths_key, _key(time_dim), row_op)
        # Only the row form needs the element type (strings are gathered one by one): asking for
        # it otherwise could start shape inference of the whole model for nothing.
        rows = form is _Form.ROWS
        dtype = element_dtype(types.type_of(data)) if rows else None
        return _Plan(
            node=node,
            opset=site.opset,
            form=form,
            time_axis=time_axis,
            batch_axis=batch_axis,
            lens=lens,
            time_size=time_size,
            data_shape=types.static_shape(data) if rows else None,
            gather_elementwise=rows and (dtype is None or dtype == ir.DataType.STRING),
            batch_checked=batch_checked,
            rank=full_rank,
            batch_size=batch_size,
            share_key=share_key,
            lengths_key=lengths_key,
            elements=elements,
            slice_shape=slice_shape,
            static_index=static_index,
        )

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node = ctx.node
        data = node.inputs[0]
        assert data is not None
        emit = ctx.before()
        old = node.outputs[0]
        # Constant lengths out of range: the model can only fail at run time, and the index
        # that makes it fail need not produce the input's shape.
        doomed = plan.lens is not None and bool(invalid_lengths(plan.lens, plan.time_size).any())
        result = ir.Value(
            name=old.name or ctx.names.fresh("ReverseSequence_out"),
            type=old.type or data.type,
            # ReverseSequence keeps the input's shape; saying so helps runtimes plan memory.
            shape=_copy(old.shape) if doomed else _output_shape(old.shape, data.shape),
            doc_string=old.doc_string,
            metadata_props=dict(old.metadata_props) or None,
        )
        self._reverse(emit, plan, result)
        self.forms[plan.form.value] = self.forms.get(plan.form.value, 0) + 1
        ctx.replace([result])

    def _reverse(self, emit: Emitter, plan: _Plan, result: ir.Value) -> None:
        """``result`` computed in the planned form."""
        data, lens = plan.node.inputs
        assert data is not None and lens is not None
        form = plan.form
        if form is _Form.SLICE:
            _reverse_axis(emit, data, plan.time_axis, result)
        elif form is _Form.COPY:
            emit.Identity(data, _hint="unchanged", _output=result)
        elif form is _Form.ROWS:
            reverse_rows(emit, data, lens, plan, result)
        elif form is _Form.CONSTANT:
            index = self._indices.get(plan.share_key) if plan.share_key else None
            if index is None:
                index = _constant_index(emit, plan)
                if plan.share_key is not None:
                    self._indices[plan.share_key] = index
            if plan.elements:
                _gather_steps(emit, data, index, plan, result)
            elif plan.slice_shape is not None:
                _gather_rows(emit, data, index, plan, result)
            else:
                emit.GatherND(data, index, _hint="reversed", _output=result)
        else:
            index = self._run_time_index(emit, data, lens, plan)
            if form is _Form.ELEMENTS:
                _gather_steps(emit, data, index, plan, result)
            elif form is _Form.ROW_GATHER:
                _gather_rows(emit, data, index, plan, result)
            else:
                emit.GatherND(data, index, _hint="reversed", _output=result)

    def _run_time_index(
        self, emit: Emitter, data: ir.Value, lens: ir.Value, plan: _Plan
    ) -> ir.Value:
        """The (time, batch) index for lengths known at run time, shared with the nodes of the
        graph whose keys are equal (and its lengths part with those of equal lengths keys)."""
        index = self._indices.get(plan.share_key) if plan.share_key else None
        if index is not None:
            return index
        # Before opset 15 every read of a dimension slices one Shape of the input.
        shape = None
        if emit.opset < 15 and not plan.static_index:
            shape = emit.Shape(data, _hint="shape")
        shared = self._lengths.get(plan.lengths_key) if plan.lengths_key else None
        if shared is None:
            shared = _lengths_part(emit, data, lens, plan, shape)
            if plan.lengths_key is not None:
                self._lengths[plan.lengths_key] = shared
        if plan.form in (_Form.ROW_GATHER, _Form.ELEMENTS) and plan.static_index:
            index = _static_row_index(emit, shared, plan)
        elif plan.form in (_Form.ROW_GATHER, _Form.ELEMENTS):
            index = _row_index(emit, data, shared, plan, shape)
        else:
            index = _computed_index(emit, data, shared, plan, shape)
        if plan.share_key is not None:
            self._indices[plan.share_key] = index
        return index


#: The forms whose index is computed at run time (unless the lengths are constants).
_COMPUTED_FORMS = (_Form.COMPUTED, _Form.ELEMENTS, _Form.ROW_GATHER)


def _reverse_axis(emit: Emitter, data: ir.Value, axis: int, result: ir.Value) -> None:
    """``data`` reversed along ``axis``: one ``Slice`` with step -1.

    tf2onnx's ``tf.reverse`` transposes the axis to the front, reverses, and transposes back.
    Reversing the transpose's input along the matching axis, then transposing, gives the same
    result and leaves ``Transpose(Transpose)`` for runtimes to cancel; onnx2tf returned wrong
    numbers for a negative-step ``Slice`` between two ``Transpose``s (1.28.8).
    """
    source, perm = data, None
    producer = data.producer()
    if is_onnx(producer, "Transpose"):
        assert producer is not None
        perm = ints_attr(producer, "perm")
    if perm is not None and axis < len(perm) and producer is not None and producer.inputs[0]:
        source, axis = producer.inputs[0], perm[axis]
    back = emit.int64s([-1], hint="backwards")
    end = emit.int64s([_INT64_MIN], hint="before_first")
    axes = emit.int64s([axis], hint="time_axis")
    if source is data or source is None:
        emit.Slice(data, back, end, axes, back, _hint="reversed", _output=result)
        return
    reversed_source = emit.Slice(source, back, end, axes, back, _hint="reversed")
    emit.Transpose(reversed_source, perm=perm, _hint="transposed", _output=result)


def _constant_form(lens: np.ndarray | None, time_size: int | None) -> _Form | None:
    """The form for lengths known when lowering, one per batch entry, on a static time axis:
    no index is computed at run time (issue 33: 2000 reversals of constant lengths wrote 6000
    ``Range`` and 6000 ``Shape`` for indices that are constants). None when the lengths are not
    constant, T is not static, a length is out of range (the model must fail at run time, as
    the computed index makes it) or the index would be too large to hold as a constant."""
    if lens is None or time_size is None or invalid_lengths(lens, time_size).any():
        return None
    if lens.size == 0 or (lens <= 1).all():
        return _Form.COPY
    if (lens == time_size).all():
        return _Form.SLICE
    # Equal lengths shorter than T too: reversing the head with two Slices and a Concat loaded
    # 1.1-1.6x slower in onnxruntime than a GatherND with a constant index shared by the model's
    # reversals, and ran no faster (200 reversals of [8, 4, 16] and [8, 8, 1], 20 of
    # [64, 32, 256]).
    return _Form.CONSTANT if fits_constant(time_size, lens.size) else None


def _constant_index(emit: Emitter, plan: _Plan) -> ir.Value:
    """Constant lengths that differ, on a static T: the source step of each (time, batch) entry
    is a constant [T, B] (or [B, T]). ``GatherElements`` takes it as it is; ``GatherND`` takes it
    with the batch coordinates beside it, both 2-D constants joined by ``Unsqueeze`` and
    ``Concat`` that runtimes fold when loading (onnx2tf moves a 3-D constant's last axis to the
    front, which would scramble a constant [T, B, 2] index)."""
    assert plan.lens is not None and plan.time_size is not None
    steps = np.arange(plan.time_size, dtype=np.int64)[:, None]
    lens = plan.lens[None, :]
    source = np.where(steps < lens, lens - 1 - steps, steps)  # [T, B]
    batches = np.broadcast_to(np.arange(lens.size, dtype=np.int64)[None, :], source.shape)
    if plan.slice_shape is not None:
        # Rows of [T*B, *slice]: one number an entry, int32 for Gather (GatherND takes int64).
        if plan.time_axis == 0:
            rows = source * lens.size + batches
        else:
            rows = (batches * plan.time_size + source).T
        if not _nd_rows(plan):
            return emit.constant(np.ascontiguousarray(rows, dtype=np.int32), hint="source_rows")
        # GatherND's [T, B, 1]: a 2-D constant (onnx2tf, above) unsqueezed once, for every
        # node sharing it.
        rows64 = emit.constant(np.ascontiguousarray(rows, dtype=np.int64), hint="source_rows")
        return emit.unsqueeze(rows64, [2], hint="row_coords")
    if plan.time_axis != 0:
        source, batches = source.T, batches.T
    src = emit.constant(np.ascontiguousarray(source), hint="source_steps")
    if plan.elements:
        return src
    pair = [src, emit.constant(np.ascontiguousarray(batches), hint="batch_coords")]
    if plan.time_axis != 0:
        pair.reverse()
    columns = [emit.unsqueeze(value, [2], hint="coordinate") for value in pair]
    return emit.Concat(*columns, axis=-1, _hint="index")


def _gather_rows(
    emit: Emitter, data: ir.Value, index: ir.Value, plan: _Plan, result: ir.Value
) -> None:
    """``data`` seen as [T*B, *slice] rows, gathered at the [T, B] or [B, T] row ``index``:
    int32 into ``Gather``, or int64 into ``GatherND`` (see :func:`_nd_rows`)."""
    assert plan.slice_shape is not None
    shape = emit.int64s([-1, *plan.slice_shape], hint="row_shape")
    rows = emit.Reshape(data, shape, _hint="rows")
    if _nd_rows(plan) and (plan.static_index or plan.form is _Form.CONSTANT):
        emit.GatherND(rows, index, _hint="reversed", _output=result)  # int64 [T, B, 1] already
    elif _nd_rows(plan):
        # Computed in int32 and widened last: tract 0.23.9 failed to evaluate a GatherND on
        # rows computed in int64 from symbolic sizes ('Undetermined symbol').
        index = emit.Cast(index, to=ir.DataType.INT64, _hint="rows64")
        coords = emit.unsqueeze(index, [2], hint="row_coords")
        emit.GatherND(rows, coords, _hint="reversed", _output=result)
    else:
        emit.Gather(rows, index, axis=0, _hint="reversed", _output=result)


#: The largest slice (elements) a time-major row reversal moves with ``GatherND``.
_ND_ROWS_MAX = 64


def _nd_rows(plan: _Plan) -> bool:
    return _row_op(plan.time_axis, plan.slice_shape) == "GatherND"


def _row_op(time_axis: int, slice_shape: tuple[int, ...] | None) -> str | None:
    """The op that gathers the rows: ``GatherND`` (int64 index) rather than ``Gather``
    (int32) time-major with slices of at most 64 elements. There each output row reads a row
    B rows away from its neighbour's source, and onnxruntime 1.32's ``GatherND`` (offsets
    computed first, then copied) ran 1.1-1.3x faster than its ``Gather`` (a division per row)
    on one thread: 2048x256x8, lengths a graph input, 1.33-1.46x native -> 1.10-1.17x;
    constant 1.24-1.38x -> 0.97-1.05x. Batch-major, or larger slices, ``Gather`` was as fast or
    faster (docs/measurements.md). None without a static slice shape (no row form)."""
    if slice_shape is None:
        return None
    small = int(np.prod(slice_shape)) <= _ND_ROWS_MAX
    return "GatherND" if time_axis == 0 and small else "Gather"


def _choose_form(
    opset: int,
    filled: tuple[Dim, Dim] | None,
    time_dim: Dim | None,
    batch_dim: Dim | None,
    rows: bool = False,
) -> _Form:
    if filled is not None and time_dim is not None and filled == (time_dim, batch_dim):
        return _Form.SLICE
    if opset < 11 or rows:
        return _Form.ROWS
    return _Form.COMPUTED


def _gather_steps(
    emit: Emitter, data: ir.Value, index: ir.Value, plan: _Plan, result: ir.Value
) -> None:
    """``GatherElements`` of [T, B] ``data`` at the [T, B] source steps; trailing 1s are
    squeezed first and restored after (onnxruntime's ``GatherElements`` runs 2-3x slower on
    [T, B, 1] than on [T, B]; ``Squeeze``/``Unsqueeze`` copy nothing there)."""
    assert plan.rank is not None
    ones = list(range(2, plan.rank))
    if not ones:
        emit.GatherElements(data, index, axis=plan.time_axis, _hint="reversed", _output=result)
        return
    flat = emit.squeeze(data, ones, hint="steps_only")
    reversed_ = emit.GatherElements(flat, index, axis=plan.time_axis, _hint="reversed")
    emit.unsqueeze(reversed_, ones, hint="restored", output=result)


def _one_per_step(dims: DimProver, data: ir.Value, rank: int) -> bool:
    """Whether every (time, batch) entry of ``data`` is one element: rank 2, or every axis after
    the first two a static 1. ``GatherElements`` then takes the [T, B] source steps as they are,
    with no batch coordinate: 2-2.5x faster than ``GatherND`` in onnxruntime, whose per-slice
    cost dominates for slices of one element."""
    return rank >= 2 and all(dims.dim(data, axis) == 1 for axis in range(2, rank))


def _static_slice(
    dims: DimProver, types: TypeOracle, data: ir.Value, rank: int
) -> tuple[int, ...] | None:
    """The shape of one (time, batch) slice of ``data`` when every axis after the first two is
    static and positive (so ``Reshape(data, [-1, *slice])`` needs no product of symbolic
    dimensions, which tract cannot always solve, and no zero, which ``Reshape`` reads as "copy"
    before opset 14), else None. The proofs first, then the declared or inferred shape (a
    reversal after an ``LSTM`` or a ``MatMul``: its slice is the hidden size)."""
    if rank <= 2:
        return None
    proven = [dims.dim(data, axis) for axis in range(2, rank)]
    sizes: list[object] = list(proven)
    if not all(isinstance(size, int) for size in proven):
        shape = types.shape_of(data)
        if shape is None or len(shape) != rank:
            return None
        sizes = [
            mine if isinstance(mine, int) else shape[axis] for axis, mine in enumerate(proven, 2)
        ]
    if not all(isinstance(size, int) and size > 0 for size in sizes):
        return None
    return tuple(size for size in sizes if isinstance(size, int))


def _not_strings(types: TypeOracle, data: ir.Value) -> bool:
    """Whether ``data`` is known not to hold strings: onnxruntime's ``Gather`` mishandles string
    slices of more than one element (see :mod:`._reverse_rows`)."""
    dtype = element_dtype(types.type_of(data))
    return dtype is not None and dtype != ir.DataType.STRING


def _static_size(types: TypeOracle, value: ir.Value, axis: int, dim: Dim | None) -> Dim | None:
    """``dim``, or the number the declared or inferred shape gives when the proofs stopped at
    the output of an ONNX node they cannot see through (a reduction's broadcast, a ``Loop``):
    shape inference may know the size there, and only there (never for a graph input's or a
    custom op's dimension, so a model of symbolic sizes starts no inference for it)."""
    if not isinstance(dim, tuple) or onnx_producer(dim[0]) is None:
        return dim
    for source, at in ((value, axis), dim):
        found = static_dim(types.shape_of(source), at)
        if found is not None:
            return found
    return dim


def _key(dim: Dim | None) -> Any:
    """A hashable stand-in for a dimension (values by identity)."""
    if isinstance(dim, tuple):
        return id(dim[0]), dim[1]
    return dim


@dataclasses.dataclass(frozen=True)
class _LengthsPart:
    """What a computed index needs of the lengths and the batch axis alone, whatever the time
    length: nodes of one graph with the same lengths value and a provably equal batch dimension
    share it (a bidirectional stack's reversals after a ``Loop`` or a cut whose time lengths no
    proof relates), so each computes only its time-dependent nodes."""

    lengths: ir.Value  # one per batch entry (count checked), a negative one moved out of range
    batches: ir.Value  # the batch coordinates, shaped for the layout like ``lengths``


def _lengths_part(
    emit: Emitter, data: ir.Value, lens: ir.Value, plan: _Plan, shape: ir.Value | None
) -> _LengthsPart:
    """The lengths gathered by the batch coordinates of ``data``'s batch axis (tract must see the
    same dimension on both sides of every broadcast, so the lengths' own shape is not used), a
    negative one moved to int32's largest value: past any time length, and out of range still
    for a runtime that narrows indices to 32 bits.

    A ``Gather`` at |len(lens) - B| from a one-element vector fails unless there is one length
    per batch entry; its result (0) is added to B, so no coordinate exists before the check has
    run. (A ``Reshape`` of the lengths to [B] would check in one node, but tract cannot analyse
    it for symbolic B.) A static B with the lengths known to be one per entry needs neither:
    the coordinates are a constant and the lengths are read as they are."""
    column = _column_axes(plan)[1]
    static_batch = bool(plan.batch_size) and fits_constant(plan.batch_size or 0)
    if plan.batch_checked and (plan.lens is not None or static_batch):
        # One length per entry of a static batch axis (not empty: OpenVINO 2026.4.1 broadcasts
        # an empty constant away, see _time_steps): the batch coordinates are a constant, and
        # so are the lengths when they are (else they are read as they are).
        count = plan.lens.size if plan.lens is not None else plan.batch_size
        assert count is not None
        shape_of = [count if axis not in column else 1 for axis in range(len(column) + 1)]
        if plan.lens is not None:
            past_any = np.where(plan.lens < 0, 2**31 - 1, plan.lens)
            lengths = emit.constant(past_any.reshape(shape_of), hint="lengths_by_batch")
        else:
            lengths = _unsqueezed(emit, _lengths_or_past(emit, lens), column, "lengths_by_batch")
        return _LengthsPart(
            lengths=lengths,
            batches=emit.constant(
                np.arange(count, dtype=np.int64).reshape(shape_of), hint="batches"
            ),
        )
    batch_1d = emit.dims(data, plan.batch_axis, plan.batch_axis + 1, hint="batch", shape=shape)
    zero = emit.int64s(0, hint="zero")
    one = emit.int64s(1, hint="one")
    if not plan.batch_checked:
        gap = emit.Abs(
            emit.Sub(emit.Shape(lens, _hint="lens_count"), batch_1d, _hint="gap"), _hint="gap"
        )
        checked = emit.Gather(
            emit.int64s([0], hint="zero_vec"),
            gap,
            axis=0,
            _hint="batch_checked",
            _node="fails_unless_one_length_per_batch_entry",
        )
        batch_1d = emit.Add(batch_1d, checked, _hint="batch")
    batch = emit.squeeze(batch_1d, [0], hint="batch_scalar")
    batches = emit.Range(zero, batch, one, _hint="batches")
    batches = _unsqueezed(emit, batches, column, "batches_column")
    lengths = emit.Gather(_lengths_or_past(emit, lens), batches, axis=0, _hint="lengths_by_batch")
    return _LengthsPart(lengths=lengths, batches=batches)


def _lengths_or_past(emit: Emitter, lens: ir.Value) -> ir.Value:
    """The lengths, a negative one moved past any time length (int32's largest value, out of
    range still for a runtime that narrows indices to 32 bits)."""
    zero = emit.int64s(0, hint="zero")
    past = emit.int64s(2**31 - 1, hint="past_any_time")
    return emit.Where(emit.Less(lens, zero, _hint="negative"), past, lens, _hint="lens_or_past")


def _computed_index(
    emit: Emitter, data: ir.Value, shared: _LengthsPart, plan: _Plan, shape: ir.Value | None
) -> ir.Value:
    """The GatherND coordinates computed at run time, for lengths known only then.

    Only ``Less``, ``Sub``, ``Where``, ``Expand`` and the final ``Concat`` touch T*B entries.
    The last step of each length is ``Range(-1, T)`` gathered at it: that fails unless every
    length is in [0, T] (the validation, on [B] values), and every later node reads it. The
    pieces carry a trailing 1 ([T, B, 1] or [B, T, 1]) so that the two coordinates stack
    with one ``Concat``. 13 nodes besides the shared part, where an index of its own took 27:
    the fewer nodes, the faster a large model lowers and loads. (``GatherND`` takes int64
    indices only; the row and element forms' int32 index is :func:`_row_index`.)
    """
    time_first = plan.time_axis == 0
    last, steps = _time_steps(emit, data, shared, plan, shape)
    # Steps past the last stay where they are, the others mirror. (Less with the branches
    # swapped, not LessOrEqual: onnx2torch 1.5.15 has no converter for LessOrEqual-16.)
    src = emit.Where(
        emit.Less(last, steps, _hint="past"),
        steps,
        emit.Sub(last, steps, _hint="mirrored"),
        _hint="source_step",
    )  # [T, B, 1] or [B, T, 1]
    if plan.static_index:
        assert plan.time_size is not None and plan.batch_size is not None
        sizes = [plan.time_size, plan.batch_size]
        index_shape = emit.int64s([*(sizes if time_first else sizes[::-1]), 1], hint="lead")
    else:
        index_shape = emit.Shape(src, _hint="lead")
    batch_coord = emit.Expand(shared.batches, index_shape, _hint="b")
    pair = [src, batch_coord] if time_first else [batch_coord, src]
    return emit.Concat(*pair, axis=-1, _hint="index")


def _time_steps(
    emit: Emitter, data: ir.Value, shared: _LengthsPart, plan: _Plan, shape: ir.Value | None
) -> tuple[ir.Value, ir.Value]:
    """Each batch entry's last step, ``len - 1`` shaped like the batch coordinates (``Range(-1,
    T)`` gathered at the lengths, which fails unless every length is in [0, T]), and the steps
    ``Range(0, T)`` shaped for the index's layout."""
    column = _column_axes(plan)[0]
    # A static T: the steps are constants. Not for T = 0: OpenVINO 2026.4.1 broadcasts an empty
    # constant away (Sub([1, 1], [0, 1, 1]) gives [1, 1]; tests/passes/test_reverse_sequence.py).
    # Nor past the bound on constants (a static T = 2e7 wrote 320 MB of steps, issue 42).
    if plan.time_size and fits_constant(plan.time_size + 1):
        last_steps = emit.constant(np.arange(-1, plan.time_size, dtype=np.int64), hint="last_steps")
        steps = emit.constant(
            np.arange(plan.time_size, dtype=np.int64).reshape(
                [plan.time_size if axis not in column else 1 for axis in range(len(column) + 1)]
            ),
            hint="steps",
        )
    else:
        time_1d = emit.dims(data, plan.time_axis, plan.time_axis + 1, hint="time", shape=shape)
        zero = emit.int64s(0, hint="zero")
        one = emit.int64s(1, hint="one")
        time = emit.squeeze(time_1d, [0], hint="time_scalar")
        last_steps = emit.Range(emit.int64s(-1, hint="minus_one"), time, one, _hint="last_steps")
        steps = _unsqueezed(
            emit, emit.Range(zero, time, one, _hint="steps"), column, "steps_column"
        )
    last = emit.Gather(
        last_steps,
        shared.lengths,
        axis=0,
        _hint="last",
        _node="fails_if_sequence_lens_out_of_range",
    )
    return last, steps


def _row_index(
    emit: Emitter, data: ir.Value, shared: _LengthsPart, plan: _Plan, shape: ir.Value | None
) -> ir.Value:
    """The row of ``data`` seen as [T*B, *slice] that output entry (t, b) reads, [T, B] or
    [B, T] like the output's first two axes: ``src * B + b`` time-major, ``b * T + src``
    batch-major; ``GatherElements``' source steps ``src`` themselves for one element a slice.

    ``src`` is ``len - 1 - t`` up to the last step and ``t`` past it: with ``d = t - (len - 1)``
    that is ``|d| + (d > 0) * (len - 1)``, five passes over T*B entries (``Sub``, ``Abs``, ``Less``,
    ``Cast``, ``Mul``, ``Add`` where ``Less`` writes bytes) in place of ``Where``, which
    onnxruntime runs at several times the cost of an ``Add``. Time-major, the row itself takes
    the same five: ``e = t*B - (len - 1)*B - b`` is <= 0 exactly up to the last step, and the
    row is ``|e| + (e > 0) * ((len - 1)*B + 2b)``; batch-major adds ``b*T`` once more. The
    per-batch and per-step parts are computed on [B] and [T] in int64 and narrowed to int32
    there (half the bytes over T*B; every runtime's gathers take int32): a ``Gather`` at
    ``count // 2**31`` from a one-element vector (count T, or (T + 1) * B for rows) fails first
    unless every number fits, unless static sizes prove it.
    """
    time_first = plan.time_axis == 0
    elements = plan.form is _Form.ELEMENTS
    last, steps = _time_steps(emit, data, shared, plan, shape)
    time_size = _size(emit, data, plan.time_axis, plan.time_size, shape, "time")
    if elements:
        count, stride = time_size, None
    else:
        batch_size = _size(emit, data, plan.batch_axis, plan.batch_size, shape, "batch")
        # (T + 1) * B: time-major's ((len - 1) * B + 2b) reaches past T*B where it is not used
        above = emit.Add(time_size, emit.int64s([1], hint="one_vec"), _hint="time_above")
        count = emit.Mul(above, batch_size, _hint="row_count")
        stride = batch_size if time_first else time_size  # rows between steps, or batches
    if not _fits_int32(plan):
        fits = emit.Gather(
            emit.int64s([0], hint="zero_vec"),
            emit.Div(count, emit.int64s([2**31], hint="int32_rows"), _hint="over_int32"),
            axis=0,
            _hint="fits",
            _node="fails_unless_index_fits_int32",
        )
        # Every number read goes through it. (tract 0.23.9 cannot declutter a Mul of a symbolic
        # dimension read by Shape, 'Undetermined symbol in expression': the check's Gather,
        # being data, keeps the stride opaque to it.)
        if stride is None:
            last = emit.Add(last, fits, _hint="last_checked")
        else:
            stride = emit.Add(stride, fits, _hint="stride")

    def narrow(value: ir.Value, hint: str) -> ir.Value:
        return emit.Cast(value, to=ir.DataType.INT32, _hint=hint)

    def mirror(lower: ir.Value, upper: ir.Value, add: ir.Value) -> ir.Value:
        """``|upper - lower| + (lower < upper) * add``."""
        past = emit.Cast(emit.Less(lower, upper, _hint="past"), to=ir.DataType.INT32)
        distance = emit.Abs(emit.Sub(upper, lower, _hint="from_last"), _hint="distance")
        return emit.Add(distance, emit.Mul(past, add, _hint="moved"), _hint="source")

    if elements or not time_first:
        last32 = narrow(last, "last32")
        src = mirror(last32, narrow(steps, "steps32"), last32)
        if elements:
            return src
        assert stride is not None
        batch_rows = narrow(emit.Mul(shared.batches, stride, _hint="batch_rows"), "batch_rows32")
        return emit.Add(src, batch_rows, _hint="source_rows")  # [B, T]
    assert stride is not None
    last_rows = emit.Mul(last, stride, _hint="last_rows")
    first = narrow(emit.Add(last_rows, shared.batches, _hint="first"), "first32")  # [B]
    step_rows = narrow(emit.Mul(steps, stride, _hint="step_rows"), "step_rows32")  # [T, 1]
    doubled = emit.Add(first, narrow(shared.batches, "batches32"), _hint="moved_rows")
    return mirror(first, step_rows, doubled)  # [T, B]


def _static_row_index(emit: Emitter, shared: _LengthsPart, plan: _Plan) -> ir.Value:
    """:func:`_row_index` for a static T and B: every part but the lengths' is a constant, so
    at run time only the per-batch [B] numbers are read off the lengths (one ``Gather`` of a
    constant, which fails unless every length is in [0, T]) and combined with the constant
    steps over T*B. Computed in the index's own type: int64 with a trailing 1 for the row
    ``GatherND``, which then takes it as it is, else int32."""
    assert plan.time_size is not None and plan.batch_size is not None
    time_size, batch = plan.time_size, plan.batch_size
    nd = plan.form is _Form.ROW_GATHER and _nd_rows(plan)
    dtype, to = (np.int64, ir.DataType.INT64) if nd else (np.int32, ir.DataType.INT32)
    last_steps = np.arange(-1, time_size, dtype=np.int64)
    steps = np.arange(time_size, dtype=np.int64)

    def constant(array: np.ndarray, hint: str) -> ir.Value:
        return emit.constant(np.ascontiguousarray(array, dtype=dtype), hint=hint)

    def mirror(lower: ir.Value, upper: ir.Value, add: ir.Value) -> ir.Value:
        """``|upper - lower| + (lower < upper) * add`` (see :func:`_row_index`)."""
        past = emit.Cast(emit.Less(lower, upper, _hint="past"), to=to)
        distance = emit.Abs(emit.Sub(upper, lower, _hint="from_last"), _hint="distance")
        return emit.Add(distance, emit.Mul(past, add, _hint="moved"), _hint="source")

    if plan.elements or plan.time_axis != 0:
        # src [T, B] or [B, T]: the lengths are [B] or [B, 1] (_column_axes), so is the last step
        last = _checked_gather(emit, constant(last_steps, "last_steps"), shared.lengths)
        step_shape = [time_size, 1] if plan.time_axis == 0 else [time_size]
        src = mirror(last, constant(steps.reshape(step_shape), "steps"), last)
        if plan.elements:
            return src
        batch_rows = np.arange(batch, dtype=np.int64)[:, None] * time_size
        return emit.Add(src, constant(batch_rows, "batch_rows"), _hint="source_rows")  # [B, T]
    # Time-major rows: the first row of each batch entry's reversal, (len - 1)*B + b, read off
    # a constant [T + 1] of (len - 1)*B; [B, 1] and [T, 1, 1] for GatherND's [T, B, 1].
    trail = [1] if nd else []
    batches = constant(np.arange(batch).reshape([batch, *trail]), "batch_rows")
    last_rows = _checked_gather(
        emit, constant((last_steps * batch).reshape([-1, *trail]), "last_rows"), shared.lengths
    )
    first = emit.Add(last_rows, batches, _hint="first")
    doubled = emit.Add(first, batches, _hint="moved_rows")
    step_rows = constant((steps * batch).reshape([time_size, 1, *trail]), "step_rows")
    return mirror(first, step_rows, doubled)  # [T, B] or [T, B, 1]


def _checked_gather(emit: Emitter, table: ir.Value, lengths: ir.Value) -> ir.Value:
    """``table`` (one entry per length 0..T, first axis) read at each length: the ``Gather``
    fails unless every length is in [0, T], as the kernel does (a negative one was moved
    past T)."""
    return emit.Gather(
        table, lengths, axis=0, _hint="last", _node="fails_if_sequence_lens_out_of_range"
    )


def _static_sizes(time_size: int | None, batch_size: int | None) -> bool:
    """Whether T and B are static and not 0 (OpenVINO 2026.4.1 broadcasts an empty constant
    away, see :func:`_time_steps`), small enough for constants of T + 1 and B entries (issue
    42), and every row number fits in int32: the index's shape parts are then constants (issue
    33)."""
    if not time_size or not batch_size:
        return False
    if not fits_constant(time_size + 1) or not fits_constant(batch_size):
        return False
    return (time_size + 1) * batch_size < 2**31


def _size(
    emit: Emitter,
    data: ir.Value,
    axis: int,
    static: int | None,
    shape: ir.Value | None,
    hint: str,
) -> ir.Value:
    """The size of ``data``'s ``axis`` as a one-element int64 vector (a constant when static)."""
    if static is not None:
        return emit.int64s([static], hint=f"{hint}_size")
    return emit.dims(data, axis, axis + 1, hint=f"{hint}_size", shape=shape)


def _fits_int32(plan: _Plan) -> bool:
    """Whether static sizes prove that every number :func:`_row_index` computes fits in int32:
    source steps up to T, row numbers up to (T + 1) * B."""
    if plan.form is _Form.ELEMENTS:
        return plan.time_size is not None and plan.time_size < 2**31
    if plan.time_size is None or plan.batch_size is None:
        return False
    return (plan.time_size + 1) * plan.batch_size < 2**31


def _column_axes(plan: _Plan) -> tuple[list[int], list[int]]:
    """The axes unsqueezed into the [T] steps and the [B] batch coordinates (and lengths) so
    that they broadcast to the index's layout: [T, B, 1] or [B, T, 1] pieces for ``GatherND``,
    [T, B] or [B, T] for ``GatherElements`` (time-, batch-major)."""
    time_first = plan.time_axis == 0
    if plan.form in (_Form.ELEMENTS, _Form.ROW_GATHER):
        return ([1], []) if time_first else ([], [1])
    return ([1, 2], [1]) if time_first else ([1], [1, 2])


def _unsqueezed(emit: Emitter, vector: ir.Value, axes: list[int], hint: str) -> ir.Value:
    return emit.unsqueeze(vector, axes, hint=hint) if axes else vector


def _copy(shape: ir.Shape | None) -> ir.Shape | None:
    return None if shape is None else shape.copy()


def _output_shape(declared: ir.Shape | None, data: ir.Shape | None) -> ir.Shape | None:
    """The declared output shape, its unknown dims completed with the input's static ones
    (ReverseSequence keeps the shape). Symbolic names are not copied: tract takes a name in a
    value's declared shape as a symbol of its own, which then clashes with the concrete sizes
    a deployment sets on the inputs."""
    if data is None or (declared is not None and len(declared) != len(data)):
        return _copy(declared)
    if declared is None:
        declared = ir.Shape([None] * len(data))
    dims = [
        mine if isinstance(mine, int) or mine.value is not None else _static_or_none(theirs)
        for mine, theirs in zip(declared, data, strict=True)
    ]
    return ir.Shape(dims)


def _static_or_none(dim: int | ir.SymbolicDim) -> int | None:
    return dim if isinstance(dim, int) else None
