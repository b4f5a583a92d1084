"""The ``ReverseSequence`` index ``LowerReverseSequence`` computes at run time, for lengths
known only then: the lengths part (the count check, the batch coordinates), shared by the
graph's nodes of equal lengths, then ``GatherND`` coordinates, or the int32 rows of the
row ``Gather`` (and ``GatherElements``' source steps), constants where the sizes are static."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._emit import Emitter, fits_constant
from seqlower.passes.reverse_sequence._reverse_plan import Form, ReversePlan, nd_rows

__all__ = ["LengthsPart", "computed_index", "lengths_part", "row_index", "static_row_index"]


@dataclasses.dataclass(frozen=True)
class LengthsPart:
    """What a computed index needs of the lengths and the batch axis alone, whatever the time
    length: nodes of one graph with the same lengths value and a provably equal batch dimension
    share it (a bidirectional stack's reversals after a ``Loop`` or a cut whose time lengths no
    proof relates), so each computes only its time-dependent nodes."""

    lengths: ir.Value  # one per batch entry (count checked), a negative one moved out of range
    batches: ir.Value  # the batch coordinates, shaped for the layout like ``lengths``


def lengths_part(
    emit: Emitter, data: ir.Value, lens: ir.Value, plan: ReversePlan, shape: ir.Value | None
) -> LengthsPart:
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
        return LengthsPart(
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
    return LengthsPart(lengths=lengths, batches=batches)


def _lengths_or_past(emit: Emitter, lens: ir.Value) -> ir.Value:
    """The lengths, a negative one moved past any time length (int32's largest value, out of
    range still for a runtime that narrows indices to 32 bits)."""
    zero = emit.int64s(0, hint="zero")
    past = emit.int64s(2**31 - 1, hint="past_any_time")
    return emit.Where(emit.Less(lens, zero, _hint="negative"), past, lens, _hint="lens_or_past")


def computed_index(
    emit: Emitter, data: ir.Value, shared: LengthsPart, plan: ReversePlan, shape: ir.Value | None
) -> ir.Value:
    """The GatherND coordinates computed at run time, for lengths known only then.

    Only ``Less``, ``Sub``, ``Where``, ``Expand`` and the final ``Concat`` touch T*B entries.
    The last step of each length is ``Range(-1, T)`` gathered at it: that fails unless every
    length is in [0, T] (the validation, on [B] values), and every later node reads it. The
    pieces carry a trailing 1 ([T, B, 1] or [B, T, 1]) so that the two coordinates stack
    with one ``Concat``. 13 nodes besides the shared part, where an index of its own took 27:
    the fewer nodes, the faster a large model lowers and loads. (``GatherND`` takes int64
    indices only; the row and element forms' int32 index is :func:`row_index`.)
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
    emit: Emitter, data: ir.Value, shared: LengthsPart, plan: ReversePlan, shape: ir.Value | None
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


def row_index(
    emit: Emitter, data: ir.Value, shared: LengthsPart, plan: ReversePlan, shape: ir.Value | None
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
    last, steps = _time_steps(emit, data, shared, plan, shape)
    last, stride = _checked_stride(emit, data, plan, shape, last)
    return _source_rows(emit, shared, plan, last, steps, stride)


def _checked_stride(
    emit: Emitter, data: ir.Value, plan: ReversePlan, shape: ir.Value | None, last: ir.Value
) -> tuple[ir.Value, ir.Value | None]:
    """The rows between two steps (time-major) or two batch entries (None for the source steps
    alone), and each entry's last step; one of them read through a ``Gather`` that fails unless
    every number :func:`row_index` computes fits in int32 (unless static sizes prove it)."""
    time_size = _size(emit, data, plan.time_axis, plan.time_size, shape, "time")
    if plan.form is Form.ELEMENTS:
        count, stride = time_size, None
    else:
        batch_size = _size(emit, data, plan.batch_axis, plan.batch_size, shape, "batch")
        # (T + 1) * B: time-major's ((len - 1) * B + 2b) reaches past T*B where it is not used
        above = emit.Add(time_size, emit.int64s([1], hint="one_vec"), _hint="time_above")
        count = emit.Mul(above, batch_size, _hint="row_count")
        stride = batch_size if plan.time_axis == 0 else time_size  # rows between steps, or batches
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
    return last, stride


def _source_rows(
    emit: Emitter,
    shared: LengthsPart,
    plan: ReversePlan,
    last: ir.Value,
    steps: ir.Value,
    stride: ir.Value | None,
) -> ir.Value:
    """The rows (or source steps) from each entry's last step and the steps, in int32 over
    T*B (see :func:`row_index`)."""
    elements = plan.form is Form.ELEMENTS

    def narrow(value: ir.Value, hint: str) -> ir.Value:
        return emit.Cast(value, to=ir.DataType.INT32, _hint=hint)

    def mirror(lower: ir.Value, upper: ir.Value, add: ir.Value) -> ir.Value:
        """``|upper - lower| + (lower < upper) * add``."""
        past = emit.Cast(emit.Less(lower, upper, _hint="past"), to=ir.DataType.INT32)
        distance = emit.Abs(emit.Sub(upper, lower, _hint="from_last"), _hint="distance")
        return emit.Add(distance, emit.Mul(past, add, _hint="moved"), _hint="source")

    if elements or plan.time_axis != 0:
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


def static_row_index(emit: Emitter, shared: LengthsPart, plan: ReversePlan) -> ir.Value:
    """:func:`row_index` for a static T and B: every part but the lengths' is a constant, so
    at run time only the per-batch [B] numbers are read off the lengths (one ``Gather`` of a
    constant, which fails unless every length is in [0, T]) and combined with the constant
    steps over T*B. Computed in the index's own type: int64 with a trailing 1 for the row
    ``GatherND``, which then takes it as it is, else int32."""
    assert plan.time_size is not None and plan.batch_size is not None
    time_size, batch = plan.time_size, plan.batch_size
    nd = plan.form is Form.ROW_GATHER and nd_rows(plan)
    dtype, to = (np.int64, ir.DataType.INT64) if nd else (np.int32, ir.DataType.INT32)
    last_steps = np.arange(-1, time_size, dtype=np.int64)
    steps = np.arange(time_size, dtype=np.int64)

    def constant(array: np.ndarray, hint: str) -> ir.Value:
        return emit.constant(np.ascontiguousarray(array, dtype=dtype), hint=hint)

    def mirror(lower: ir.Value, upper: ir.Value, add: ir.Value) -> ir.Value:
        """``|upper - lower| + (lower < upper) * add`` (see :func:`row_index`)."""
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


def _fits_int32(plan: ReversePlan) -> bool:
    """Whether static sizes prove that every number :func:`row_index` computes fits in int32:
    source steps up to T, row numbers up to (T + 1) * B."""
    if plan.form is Form.ELEMENTS:
        return plan.time_size is not None and plan.time_size < 2**31
    if plan.time_size is None or plan.batch_size is None:
        return False
    return (plan.time_size + 1) * plan.batch_size < 2**31


def _column_axes(plan: ReversePlan) -> tuple[list[int], list[int]]:
    """The axes unsqueezed into the [T] steps and the [B] batch coordinates (and lengths) so
    that they broadcast to the index's layout: [T, B, 1] or [B, T, 1] pieces for ``GatherND``,
    [T, B] or [B, T] for ``GatherElements`` (time-, batch-major)."""
    time_first = plan.time_axis == 0
    if plan.form in (Form.ELEMENTS, Form.ROW_GATHER):
        return ([1], []) if time_first else ([], [1])
    return ([1, 2], [1]) if time_first else ([1], [1, 2])


def _unsqueezed(emit: Emitter, vector: ir.Value, axes: list[int], hint: str) -> ir.Value:
    return emit.unsqueeze(vector, axes, hint=hint) if axes else vector
