"""ReverseSequence as a row ``Gather``: for opset 10, which has no ``GatherND`` or ``Range``.

View the input as rows: the first two axes flattened, every other axis kept, so each row is one
(time, batch) slice. Output row (t, b) is input row (src(t, b), b), so one ``Gather`` along axis 0
of ``Flatten(x, axis=2)`` moves whole contiguous rows. Three forms, from most to least folded:

- ``sequence_lens`` constant and T static: the whole index is a constant.
- ``sequence_lens`` constant, T dynamic: a constant index for the first max(len) time steps and
  an untouched tail (``Slice`` + ``Concat``).
- otherwise: the index is computed (``Range`` has a ``NonZero`` stand-in at opset 10), and
  lengths outside [0, T] make a ``Reshape`` of it fail.

onnxruntime's ``Gather`` mishandles string slices of more than one element, so string rows are
gathered one element at a time (transposed). Known limits, opset 10 only: before opset 14
``Reshape`` reads a 0 in a computed shape as "copy this dimension", so an input whose second axis
is empty, or (rank >= 4) an axis after the third, fails at run time instead of returning an empty
tensor; the ``NonZero`` and data-dependent ``Reshape`` do not run on tract or onnx2torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
import onnx_ir as ir

from seqlower.passes._emit import Emitter, fits_constant
from seqlower.passes._ir import rank_of

__all__ = ["RowPlan", "invalid_lengths", "reverse_rows"]

# Far past any row count: where a constant length is negative, the index points here.
_OUT_OF_RANGE = 2**62


class RowPlan(Protocol):
    time_axis: int
    batch_axis: int
    lens: np.ndarray | None
    time_size: int | None
    data_shape: tuple[int, ...] | None
    gather_elementwise: bool


def reverse_rows(
    emit: Emitter, data: ir.Value, lens: ir.Value, plan: RowPlan, result: ir.Value
) -> None:
    """Emit the reversal of ``data`` into ``result`` with a row ``Gather``."""
    rows = _Rows(emit, data, plan)
    # The index is folded into a constant only within the bound on constants: past it, a head
    # of max(len) steps when that is smaller, else the computed index. Constant lengths longer
    # than any plausible T (invalid, but legal to write) must not make the model huge either.
    batch = 0 if plan.lens is None else len(plan.lens)
    if (
        plan.lens is not None
        and plan.time_size is not None
        and fits_constant(plan.time_size, batch)
    ):
        index = _row_index(plan.lens, plan.time_size, plan.time_axis, plan.time_size)
        rows.gather(emit.constant(index, hint="index"), output=result)
    elif plan.lens is not None and fits_constant(_head_steps(plan.lens), batch):
        _head_and_tail(emit, rows, plan.lens, plan.time_axis, result)
    else:
        rows.gather(_computed_index(emit, rows, lens, plan.time_axis), output=result)


class _Rows:
    """The input seen as rows, one per (t, b) slice: [T*B, P] or [T*B, *rest] (:attr:`keeps_rest`).

    ``Flatten`` needs no shape computation and, unlike ``Reshape`` before opset 14, handles
    empty axes. Dimensions are read with ``Shape(start, end)`` from opset 15 (one op each), with
    ``Shape`` + ``Slice`` before; each is emitted only if a rewrite asks for it, and a fully
    static input shape needs none.
    """

    def __init__(self, emit: Emitter, data: ir.Value, plan: RowPlan) -> None:
        self.emit = emit
        self.data = data
        self.plan = plan
        self.elementwise = plan.gather_elementwise
        self._made: dict[str, ir.Value] = {}

    def _once(self, key: str, make: Callable[[], ir.Value]) -> ir.Value:
        if key not in self._made:
            self._made[key] = make()
        return self._made[key]

    def _dims(self, start: int, end: int | None, hint: str) -> ir.Value:
        """Dimensions ``start`` to ``end`` of the input, as a 1-D tensor."""
        emit, static = self.emit, self.plan.data_shape
        if static is not None:
            return emit.int64s(list(static[start:end]), hint=hint)
        # Before opset 15 every read slices one shared Shape of the input.
        shape = None
        if emit.opset < 15:
            shape = self._once("shape", lambda: emit.Shape(self.data, _hint="shape"))
        return emit.dims(self.data, start, end, hint=hint, shape=shape)

    @property
    def time_1d(self) -> ir.Value:
        """T as a 1-element tensor."""
        axis = self.plan.time_axis
        return self._once("time_1d", lambda: self._dims(axis, axis + 1, f"dim_{axis}"))

    @property
    def batch_1d(self) -> ir.Value:
        """B as a 1-element tensor."""
        axis = self.plan.batch_axis
        return self._once("batch_1d", lambda: self._dims(axis, axis + 1, f"dim_{axis}"))

    @property
    def lead(self) -> ir.Value:
        """The first two dimensions ([T, B] or [B, T]), the shape of a full row index."""
        return self._once("lead", lambda: self._dims(0, 2, "lead_dims"))

    @property
    def rest(self) -> ir.Value:
        """The dimensions after the first two, as a 1-D tensor (empty for rank 2)."""
        return self._once("rest", lambda: self._dims(2, None, "rest_dims"))

    @property
    def shape(self) -> ir.Value:
        """The whole input shape (the output's too)."""
        return self._once("data_shape", lambda: self._dims(0, None, "data_shape"))

    @property
    def keeps_rest(self) -> bool:
        """Whether rows keep the axes after the first two ([T*B, *rest], a ``Reshape``) rather
        than flattening them ([T*B, P], ``Flatten``).

        A Gather from [T*B, *rest] writes the output in its final shape for any rank, while
        [T*B, P] needs a reshape of the output afterwards, which onnxruntime does as a copy;
        but that ``Reshape`` of the input needs ``allowzero`` (opset 14) to be safe with empty
        axes. Rank 3 flattens anyway (one op, nothing to reshape); strings always flatten, to
        gather single elements from the transposed [P, T*B] matrix.
        """
        return not self.elementwise and self.emit.opset >= 14 and rank_of(self.data) != 3

    def flat(self) -> ir.Value:
        """The input as rows, [T*B, *rest] or [T*B, P] (see :attr:`keeps_rest`)."""

        def make() -> ir.Value:
            emit = self.emit
            if not self.keeps_rest:
                return emit.Flatten(self.data, axis=2, _hint="rows")
            static = self.plan.data_shape
            if static is not None:
                shape = emit.int64s([static[0] * static[1], *static[2:]], hint="rows_shape")
            else:
                count = emit.ReduceProd(self.lead, keepdims=1, _hint="row_count")
                shape = emit.Concat(count, self.rest, axis=0, _hint="rows_shape")
            return emit.reshape(self.data, shape, hint="rows")

        return self._once("flat", make)

    def gather(
        self,
        index: ir.Value,
        lead: list[int] | None = None,
        source: ir.Value | None = None,
        output: ir.Value | None = None,
    ) -> ir.Value:
        """Rows ``index`` of ``source`` (default: all the input's rows) in the output's layout.

        ``index`` is 2-D: the input's first two axes (``lead`` None), or the constant ``lead``.
        A ``source`` given is flattened, [rows, P].
        """
        emit = self.emit
        rows = self.flat() if source is None else source
        keeps_rest = self.keeps_rest and source is None
        if keeps_rest or (not self.elementwise and rank_of(self.data) == 3):
            return emit.Gather(rows, index, axis=0, _hint="gathered", _output=output)
        if self.elementwise:
            # onnxruntime's Gather keeps only the first string of each multi-element slice;
            # gathering along the last axis of the transposed [P, rows] matrix moves single
            # elements, and transposing back gives [*index.shape, P].
            columns = emit.Transpose(rows, perm=[1, 0], _hint="columns")
            picked = emit.Gather(columns, index, axis=1, _hint="picked")
            flat_output = output if rank_of(self.data) == 3 else None
            gathered = emit.Transpose(picked, perm=[1, 2, 0], _hint="gathered", _output=flat_output)
            if flat_output is not None:
                return gathered
        else:
            gathered = emit.Gather(rows, index, axis=0, _hint="picked")
        # [*index.shape, P] back to [*index.shape, *rest]. Before opset 14 a 0 in the shape
        # copies the same axis of [*index.shape, P], which is right for the first three axes.
        if lead is None:
            shape = self.shape
        else:
            shape = emit.Concat(
                emit.int64s(lead, hint="head_lead"), self.rest, axis=0, _hint="head_shape"
            )
        return emit.reshape(gathered, shape, hint="gathered", output=output)


def _source_time(lens: np.ndarray, steps: int) -> np.ndarray:
    """src[t, b] for t < steps, as [steps, B]: reversed inside each length, identity after it."""
    t = np.arange(steps, dtype=np.int64)[:, None]
    lengths = lens[None, :]
    return np.where(t < lengths, lengths - 1 - t, t)


def _row_index(
    lens: np.ndarray,
    steps: int,
    time_axis: int,
    time_size: int | None,
    batch_stride: int | None = None,
) -> np.ndarray:
    """Source rows for the first ``steps`` time steps, shaped [steps, B] or [B, steps].

    Source rows are t*B + b (time-major) or b*stride + t (batch-major; the stride, by default
    ``steps``, is the number of time steps per batch in the rows gathered from; 0 gives just
    the time offsets). Lengths below 0, or above ``time_size`` when it is known, point past
    every row so that Gather fails at run time.
    """
    batch = lens.shape[0]
    src = _source_time(lens, steps)
    b = np.arange(batch, dtype=np.int64)[None, :]
    invalid = invalid_lengths(lens, time_size)
    if time_axis == 0:
        index = np.where(invalid[None, :], _OUT_OF_RANGE, src * batch + b)
    else:
        stride = steps if batch_stride is None else batch_stride
        index = np.where(invalid[:, None], _OUT_OF_RANGE, (b * stride + src).T)
    if invalid.any() and index.size == 0:
        index = np.full((1, 1), _OUT_OF_RANGE, dtype=np.int64)  # still fail with no rows at all
    return index


def invalid_lengths(lens: np.ndarray, time_size: int | None) -> np.ndarray:
    """Which constant lengths are out of range: below 0, or above T when T is known."""
    invalid = lens < 0
    if time_size is not None:
        invalid |= lens > time_size
    return invalid


def _head_steps(lens: np.ndarray) -> int:
    """The time steps a constant head must cover: max(len), and at least one when a length is
    negative, so that its out-of-range index is gathered."""
    return max(int(lens.max(initial=0)), int((lens < 0).any()))


def _head_and_tail(
    emit: Emitter, rows: _Rows, lens: np.ndarray, time_axis: int, result: ir.Value
) -> None:
    """Constant lengths, unknown T: reverse the first max(len) steps, keep the rest as it is."""
    batch = lens.shape[0]
    steps = _head_steps(lens)
    if steps == 0:  # every length is 0: nothing moves
        emit.Identity(rows.data, _hint="out", _output=result)
        return
    lead = [steps, batch] if time_axis == 0 else [batch, steps]
    if time_axis == 0:
        # Rows are t*B + b: the first steps*B rows hold every reversed element. A length above
        # T makes its first index (len-1)*B + b >= T*B, past the last row.
        index = emit.constant(_row_index(lens, steps, time_axis, None), hint="head_index")
        head = rows.gather(index, lead)
    else:
        # Batch-major: the first `steps` steps of each batch, [B, T', ...] with T' = min(T,
        # steps), as rows b*T' + t. Each batch's index reaches b*T' + steps - 1, so when T is
        # below a length (T' < steps) the last batch's points past the last row.
        head_data = emit.slice(rows.data, 0, steps, 1, hint="head")
        head_time = emit.dims(head_data, 1, 2, hint="head_steps")
        starts = emit.constant(np.arange(batch, dtype=np.int64)[:, None], hint="head_batches")
        offsets = emit.constant(_row_index(lens, steps, time_axis, None, 0), hint="head_offsets")
        index = emit.Add(
            emit.Mul(starts, head_time, _hint="head_starts"), offsets, _hint="head_index"
        )
        head_rows = emit.Flatten(head_data, axis=2, _hint="head_rows")
        head = rows.gather(index, lead, source=head_rows)
    tail = emit.slice(rows.data, steps, None, time_axis, hint="tail")
    emit.Concat(head, tail, axis=time_axis, _hint="out", _output=result)


def _computed_index(emit: Emitter, rows: _Rows, lens: ir.Value, time_axis: int) -> ir.Value:
    """The row index computed at run time, for lengths known only then.

    Start from the identity index k, [0 .. T*B) shaped like the first two axes. Time-major,
    k = t*B + b: a reversed row (len-1-t)*B + b is c - k with c = (len-1)*B + 2b, and t < len
    exactly when k < e = len*B + b. Batch-major, k = b*T + t: the reversed row is c - k with
    c = 2bT + len - 1, and t < len when k < e = bT + len. So c and e are per-batch vectors and
    only three ops (Less, Sub, Where) touch all T*B entries.

    The per-batch b (time-major) or b*T (batch-major) is k's first time step, so no second
    arange is needed; with T = 0 that slice is empty and broadcasting keeps everything empty.

    Lengths outside [0, T]: their count is added to the length of k, so reshaping k to [T, B]
    fails at run time, on every runtime and for every T (0 included), as the native kernel
    does; nothing computed from those lengths is ever used.
    """
    time_first = time_axis == 0
    batch_1d = rows.batch_1d
    # Reshape (not a no-op) so that a sequence_lens of the wrong length fails, as natively.
    if time_first:  # [B], broadcast along the last axis of [T, B]
        lengths = emit.reshape(lens, batch_1d, hint="lengths")
    else:  # [B, 1]
        column = emit.Concat(batch_1d, emit.int64s([1], hint="one"), axis=0, _hint="col")
        lengths = emit.reshape(lens, column, hint="lengths")
    negative = emit.Less(lengths, emit.int64s(0, hint="zero"), _hint="negative")
    too_long = emit.Greater(lengths, rows.time_1d, _hint="too_long")
    invalid = emit.Or(negative, too_long, _hint="invalid")
    invalid_count = emit.ReduceSum(
        emit.Cast(invalid, to=int(ir.DataType.INT64), _hint="invalid_int"),
        keepdims=0,
        _hint="invalid_count",
    )
    count = emit.Add(
        emit.ReduceProd(rows.lead, keepdims=0, _hint="row_count"),
        invalid_count,
        _hint="checked_row_count",
    )
    k = emit.reshape(
        emit.arange(count, hint="row_numbers"),
        rows.lead,
        hint="identity_index",
        node_name="fails_if_sequence_lens_out_of_range",
    )
    first = emit.slice(k, 0, 1, time_axis, hint="first_rows")  # b: [1, B]; b*T: [B, 1]
    if time_first:
        e = emit.Add(emit.Mul(lengths, batch_1d, _hint="len_rows"), first, _hint="end")
        c = emit.Sub(emit.Add(e, first, _hint="end_b"), batch_1d, _hint="mirror")
    else:
        e = emit.Add(first, lengths, _hint="end")
        c = emit.Sub(
            emit.Add(e, first, _hint="end_b"), emit.int64s(1, hint="one_scalar"), _hint="mirror"
        )
    inside = emit.Less(k, e, _hint="inside")
    reversed_row = emit.Sub(c, k, _hint="reversed_row")
    return emit.Where(inside, reversed_row, k, _hint="index")
