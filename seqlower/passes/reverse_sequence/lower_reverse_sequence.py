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
  to int64 (faster there in onnxruntime, :func:`._reverse_plan.nd_rows`). No coordinate pairs, no
  ``Expand``/``Concat``; the index is computed on [B] and [T] vectors and combined over T*B
  in a few int32 passes (:func:`._reverse_index.row_index`).
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

from typing import Any

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._dims import DimProver
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import ints_attr, is_onnx
from seqlower.passes._types import TypeOracle, element_dtype
from seqlower.passes.reverse_sequence._reverse_index import (
    LengthsPart,
    computed_index,
    lengths_part,
    row_index,
    static_row_index,
)
from seqlower.passes.reverse_sequence._reverse_plan import Form, ReversePlan, nd_rows, plan_node
from seqlower.passes.reverse_sequence._reverse_rows import invalid_lengths, reverse_rows

__all__ = [
    "FORMS",
    "ONNXRUNTIME_LACKS",
    "LowerReverseSequence",
]

_INT64_MIN = -(2**63)  # a Slice end meaning "past the first element", stepping backwards


#: The general forms :class:`LowerReverseSequence` can be asked for (``form=``).
FORMS = ("gathernd", "gather")


#: Element types onnxruntime 1.32's ReverseSequence kernel does not take.
ONNXRUNTIME_LACKS = frozenset({ir.DataType.BFLOAT16, ir.DataType.COMPLEX64, ir.DataType.COMPLEX128})


class LowerReverseSequence(NodeLoweringPass[ReversePlan]):
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
    takes_handed_walk = True  # ``call`` only resets the run's state

    def __init__(self, form: str = "gathernd", *, gaps_only: bool = False) -> None:
        if form not in FORMS:
            raise ValueError(f"unknown ReverseSequence form {form!r}; known: {', '.join(FORMS)}")
        super().__init__()
        self.form = form
        self.gaps_only = gaps_only
        self.takes_all = not gaps_only
        self.forms: dict[str, int] = {}
        self._indices: dict[tuple[Any, ...], ir.Value] = {}
        self._lengths: dict[tuple[Any, ...], LengthsPart] = {}
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

    def plan(self, site: Site, types: TypeOracle) -> ReversePlan | None:
        if self.gaps_only:
            data = site.node.inputs[0] if site.node.inputs else None
            dtype = None if data is None else element_dtype(types.type_of(data))
            if dtype is not None and dtype not in ONNXRUNTIME_LACKS:
                return None  # onnxruntime's own kernel: kept
        return plan_node(site, types, self._dims, rows=self.form == "gather")

    def rewrite(self, plan: ReversePlan, ctx: Rewrite) -> None:
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

    def _reverse(self, emit: Emitter, plan: ReversePlan, result: ir.Value) -> None:
        """``result`` computed in the planned form."""
        data, lens = plan.node.inputs
        assert data is not None and lens is not None
        form = plan.form
        if form is Form.SLICE:
            _reverse_axis(emit, data, plan.time_axis, result)
        elif form is Form.COPY:
            emit.Identity(data, _hint="unchanged", _output=result)
        elif form is Form.ROWS:
            reverse_rows(emit, data, lens, plan, result)
        elif form is Form.CONSTANT:
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
            if form is Form.ELEMENTS:
                _gather_steps(emit, data, index, plan, result)
            elif form is Form.ROW_GATHER:
                _gather_rows(emit, data, index, plan, result)
            else:
                emit.GatherND(data, index, _hint="reversed", _output=result)

    def _run_time_index(
        self, emit: Emitter, data: ir.Value, lens: ir.Value, plan: ReversePlan
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
            shared = lengths_part(emit, data, lens, plan, shape)
            if plan.lengths_key is not None:
                self._lengths[plan.lengths_key] = shared
        if plan.form in (Form.ROW_GATHER, Form.ELEMENTS) and plan.static_index:
            index = static_row_index(emit, shared, plan)
        elif plan.form in (Form.ROW_GATHER, Form.ELEMENTS):
            index = row_index(emit, data, shared, plan, shape)
        else:
            index = computed_index(emit, data, shared, plan, shape)
        if plan.share_key is not None:
            self._indices[plan.share_key] = index
        return index


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


def _constant_index(emit: Emitter, plan: ReversePlan) -> ir.Value:
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
        if not nd_rows(plan):
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
    emit: Emitter, data: ir.Value, index: ir.Value, plan: ReversePlan, result: ir.Value
) -> None:
    """``data`` seen as [T*B, *slice] rows, gathered at the [T, B] or [B, T] row ``index``:
    int32 into ``Gather``, or int64 into ``GatherND`` (see :func:`._reverse_plan.nd_rows`)."""
    assert plan.slice_shape is not None
    shape = emit.int64s([-1, *plan.slice_shape], hint="row_shape")
    rows = emit.Reshape(data, shape, _hint="rows")
    if nd_rows(plan) and (plan.static_index or plan.form is Form.CONSTANT):
        emit.GatherND(rows, index, _hint="reversed", _output=result)  # int64 [T, B, 1] already
    elif nd_rows(plan):
        # Computed in int32 and widened last: tract 0.23.9 failed to evaluate a GatherND on
        # rows computed in int64 from symbolic sizes ('Undetermined symbol').
        index = emit.Cast(index, to=ir.DataType.INT64, _hint="rows64")
        coords = emit.unsqueeze(index, [2], hint="row_coords")
        emit.GatherND(rows, coords, _hint="reversed", _output=result)
    else:
        emit.Gather(rows, index, axis=0, _hint="reversed", _output=result)


def _gather_steps(
    emit: Emitter, data: ir.Value, index: ir.Value, plan: ReversePlan, result: ir.Value
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
