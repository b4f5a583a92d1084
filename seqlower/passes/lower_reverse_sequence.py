"""Lower ``ReverseSequence`` into a row ``Gather``.

Runtimes without a ``ReverseSequence`` kernel (it appears in every TF-origin bidirectional RNN)
all have ``Gather``. View the input as rows: the first two axes flattened, every other axis
kept, so each row is one (time, batch) slice. Output row (t, b) is input row (src(t, b), b) with

    src(t, b) = len[b] - 1 - t   if t < len[b]
              = t                otherwise

so one ``Gather`` along axis 0 moves whole contiguous rows, the same memory traffic as the native
kernel. The index is shaped like the first two axes, so the Gather writes the output in its final
shape with no reshape copy, and it has only T*B entries. Three forms, from most to least folded:

- ``sequence_lens`` constant and T static: the whole index is a constant.
- ``sequence_lens`` constant, T dynamic: a constant index for the first max(len) time steps and
  an untouched tail (``Slice`` + ``Concat``); no ``Range`` or ``Where`` at run time.
- otherwise: the index is computed from ``Shape``/``Range``/``Less``/``Where``.

Lengths outside [0, T] make the index point past the last row, so ``Gather`` fails at run time as
the native kernel does, instead of returning data. onnxruntime's ``Gather`` mishandles string
slices of more than one element, so string rows are gathered one element at a time (transposed).

Known limit: before opset 14, ``Reshape`` reads a 0 in a computed shape as "copy this dimension",
so an input with an empty batch axis (B = 0, T > 0) or an empty trailing axis fails at run time
there instead of returning an empty tensor.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower.errors import InvalidNodeError
from seqlower.passes._base import NameGenerator, NodeLoweringPass, Site
from seqlower.passes._emit import Emitter
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["LowerReverseSequence"]

_INT64 = ir.DataType.INT64
_INT64_MAX = np.iinfo(np.int64).max
# Far past any row count: where a constant length is negative, the index points here.
_OUT_OF_RANGE = 2**62


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    opset: int
    time_axis: int
    batch_axis: int
    lens: np.ndarray | None  # the lengths, when they are a constant
    time_size: int | None  # T, when static
    data_shape: tuple[int, ...] | None  # the input's whole shape, when static
    gather_elementwise: bool  # strings (or an unknown type): gather one element at a time


class LowerReverseSequence(NodeLoweringPass):
    """Replace every ``ReverseSequence`` with a ``Gather`` of rows (see the module docstring)."""

    op_type = "ReverseSequence"

    def plan(self, site: Site, types: TypeOracle) -> _Plan:
        node = site.node
        if len(node.inputs) != 2 or any(v is None for v in node.inputs):
            raise InvalidNodeError(node, "ReverseSequence takes exactly two inputs")
        if len(node.outputs) != 1:
            raise InvalidNodeError(node, "ReverseSequence has exactly one output")
        time_axis = _int_attribute(node, "time_axis", 0)
        batch_axis = _int_attribute(node, "batch_axis", 1)
        if {time_axis, batch_axis} != {0, 1}:
            raise InvalidNodeError(
                node,
                f"time_axis={time_axis} and batch_axis={batch_axis}: one must be 0 and the other 1",
            )
        data, lens_value = node.inputs
        assert data is not None and lens_value is not None
        data_type = types.type_of(data)
        rank = _rank(data)
        if rank is not None and rank < 2:
            raise InvalidNodeError(node, f"input '{data.name}' has rank {rank}; it must be >= 2")
        lens_rank = _rank(lens_value)
        if lens_rank is not None and lens_rank != 1:
            raise InvalidNodeError(
                node, f"sequence_lens '{lens_value.name}' has rank {lens_rank}; it must be 1"
            )
        lens = _constant(lens_value)
        if lens is not None and lens.ndim != 1:
            raise InvalidNodeError(
                node, f"sequence_lens '{lens_value.name}' has rank {lens.ndim}; it must be 1"
            )
        dtype = element_dtype(data_type)
        return _Plan(
            node=node,
            opset=site.opset,
            time_axis=time_axis,
            batch_axis=batch_axis,
            lens=None if lens is None else lens.astype(np.int64),
            time_size=_static_dim(data, time_axis),
            data_shape=types.static_shape(data),
            gather_elementwise=dtype is None or dtype == ir.DataType.STRING,
        )

    def rewrite(self, plan: _Plan, names: NameGenerator) -> None:
        node = plan.node
        graph = node.graph
        assert graph is not None
        data, lens = node.inputs
        assert data is not None and lens is not None
        emit = Emitter(names, node.name or "ReverseSequence", plan.opset, self.constant_pool(graph))
        old = node.outputs[0]
        result = ir.Value(
            name=old.name or names.fresh("ReverseSequence_out"),
            type=old.type or data.type,
            shape=old.shape,
            doc_string=old.doc_string,
            metadata_props=dict(old.metadata_props) or None,
        )
        rows = _Rows(emit, data, plan)
        if plan.lens is not None and plan.time_size is not None:
            index = _row_index(plan.lens, plan.time_size, plan.time_axis, plan.time_size)
            rows.gather(emit.constant(index, hint="index"), output=result)
        elif plan.lens is not None:
            _head_and_tail(emit, rows, plan.lens, plan.time_axis, result)
        else:
            rows.gather(_computed_index(emit, rows, lens, plan.time_axis), output=result)

        graph.insert_before(node, emit.nodes)
        old.replace_all_uses_with(result, replace_graph_outputs=True)
        graph.remove(node, safe=True)


class _Rows:
    """The input seen as rows: the time and batch axes flattened into one, others kept.

    Dimensions are read with ``Shape(start, end)`` from opset 15 (one op each), with
    ``Shape`` + ``Gather``/``Slice`` before; each is emitted only if a rewrite asks for it, and
    a fully static input shape needs none.
    """

    def __init__(self, emit: Emitter, data: ir.Value, plan: _Plan) -> None:
        self.emit = emit
        self.data = data
        self.plan = plan
        self.elementwise = plan.gather_elementwise
        self._made: dict[str, ir.Value] = {}

    def _once(self, key: str, make: Callable[[], ir.Value]) -> ir.Value:
        if key not in self._made:
            self._made[key] = make()
        return self._made[key]

    def _dim(self, axis: int) -> ir.Value:
        """Dimension ``axis`` as a 1-element tensor."""
        emit, plan = self.emit, self.plan
        if plan.data_shape is not None:
            return emit.int64s([plan.data_shape[axis]], hint=f"dim_{axis}")
        if emit.opset >= 15:
            return emit.op(
                "Shape", [self.data], {"start": axis, "end": axis + 1}, hint=f"dim_{axis}"
            )
        return emit.slice(self.shape, axis, axis + 1, 0, hint=f"dim_{axis}")

    def _scalar(self, axis: int) -> ir.Value:
        emit = self.emit
        if self.plan.data_shape is not None:
            return emit.int64s(self.plan.data_shape[axis], hint=f"size_{axis}")
        if emit.opset >= 15:
            return emit.op("Squeeze", [self._dim(axis)], hint=f"size_{axis}")
        return emit.op(
            "Gather", [self.shape, emit.int64s(axis, hint=f"axis_{axis}")], hint=f"size_{axis}"
        )

    @property
    def shape(self) -> ir.Value:
        return self._once("shape", lambda: self.emit.op("Shape", [self.data], hint="shape"))

    @property
    def time(self) -> ir.Value:
        """T as a scalar."""
        return self._once("time", lambda: self._scalar(self.plan.time_axis))

    @property
    def batch(self) -> ir.Value:
        """B as a scalar."""
        return self._once("batch", lambda: self._scalar(self.plan.batch_axis))

    @property
    def time_1d(self) -> ir.Value:
        return self._once("time_1d", lambda: self._dim(self.plan.time_axis))

    @property
    def batch_1d(self) -> ir.Value:
        return self._once("batch_1d", lambda: self._dim(self.plan.batch_axis))

    @property
    def rest(self) -> ir.Value:
        """The dimensions after the first two, as a 1-D tensor (empty for rank 2)."""

        def make() -> ir.Value:
            emit, static = self.emit, self.plan.data_shape
            if static is not None:
                return emit.int64s(list(static[2:]), hint="rest_dims")
            if emit.opset >= 15:
                return emit.op("Shape", [self.data], {"start": 2}, hint="rest_dims")
            return emit.slice(self.shape, 2, _INT64_MAX, 0, hint="rest_dims")

        return self._once("rest", make)

    def flat(self) -> ir.Value:
        """The input reshaped to [T*B, *rest]."""

        def make() -> ir.Value:
            emit, static = self.emit, self.plan.data_shape
            if static is not None:
                shape = emit.int64s([static[0] * static[1], *static[2:]], hint="rows_shape")
            else:
                count = emit.op("Mul", [self.time_1d, self.batch_1d], hint="row_count")
                shape = emit.op("Concat", [count, self.rest], {"axis": 0}, hint="rows_shape")
            return emit.reshape(self.data, shape, hint="rows")

        return self._once("flat", make)

    def gather(
        self, index: ir.Value, source: ir.Value | None = None, output: ir.Value | None = None
    ) -> ir.Value:
        """Rows ``index`` of ``source`` (default: all rows of the input): [*index.shape, *rest]."""
        emit = self.emit
        source = self.flat() if source is None else source
        if not self.elementwise:
            return emit.op("Gather", [source, index], {"axis": 0}, hint="gathered", output=output)
        # onnxruntime's Gather keeps only the first string of each multi-element slice; gathering
        # along the last axis of the transposed [R, rows] matrix moves single elements.
        width = emit.reduce_prod(self.rest, hint="row_width")
        height = emit.slice(emit.op("Shape", [source], hint="source_shape"), 0, 1, 0, hint="height")
        matrix_shape = emit.op("Concat", [height, width], {"axis": 0}, hint="matrix_shape")
        matrix = emit.reshape(source, matrix_shape, hint="matrix")
        columns = emit.op("Transpose", [matrix], {"perm": [1, 0]}, hint="columns")
        flat_index = emit.op("Reshape", [index, emit.int64s([-1], hint="flat")], hint="flat_index")
        picked = emit.op("Gather", [columns, flat_index], {"axis": 1}, hint="picked")
        back = emit.op("Transpose", [picked], {"perm": [1, 0]}, hint="picked_rows")
        index_shape = emit.op("Shape", [index], hint="index_shape")
        shape = emit.op("Concat", [index_shape, self.rest], {"axis": 0}, hint="gathered_shape")
        return emit.reshape(back, shape, hint="gathered", output=output)


def _source_time(lens: np.ndarray, steps: int) -> np.ndarray:
    """src[t, b] for t < steps, as [steps, B]: reversed inside each length, identity after it."""
    t = np.arange(steps, dtype=np.int64)[:, None]
    lengths = lens[None, :]
    return np.where(t < lengths, lengths - 1 - t, t)


def _row_index(lens: np.ndarray, steps: int, time_axis: int, time_size: int | None) -> np.ndarray:
    """Source rows for the first ``steps`` time steps, shaped [steps, B] or [B, steps].

    Source rows are t*B + b (time-major) or b*steps + t (batch-major, where the rows gathered
    from hold ``steps`` time steps per batch). Lengths below 0, or above ``time_size`` when it is
    known, point past every row so that Gather fails at run time.
    """
    batch = lens.shape[0]
    src = _source_time(lens, steps)
    b = np.arange(batch, dtype=np.int64)[None, :]
    invalid = lens < 0
    if time_size is not None:
        invalid |= lens > time_size
    if time_axis == 0:
        index = np.where(invalid[None, :], _OUT_OF_RANGE, src * batch + b)
    else:
        index = np.where(invalid[:, None], _OUT_OF_RANGE, (b * steps + src).T)
    if invalid.any() and index.size == 0:
        index = np.full((1, 1), _OUT_OF_RANGE, dtype=np.int64)  # still fail with no rows at all
    return index


def _head_and_tail(
    emit: Emitter, rows: _Rows, lens: np.ndarray, time_axis: int, result: ir.Value
) -> None:
    """Constant lengths, unknown T: reverse the first max(len) steps, keep the rest as it is."""
    batch = lens.shape[0]
    # At least one step when a length is negative, so its out-of-range index is gathered.
    steps = max(int(lens.max(initial=0)), int((lens < 0).any()))
    if steps == 0:  # every length is 0: nothing moves
        emit.op("Identity", [rows.data], hint="out", output=result)
        return
    index = emit.constant(_row_index(lens, steps, time_axis, None), hint="head_index")
    if time_axis == 0:
        # Rows are t*B + b: the first steps*B rows hold every reversed element. A length above
        # T makes its first index (len-1)*B + b >= T*B, past the last row.
        head = rows.gather(index)
    else:
        # Batch-major: take each batch's first `steps` steps as rows b*steps + t.
        head_data = emit.slice(rows.data, 0, steps, 1, hint="head")
        head_rows_shape = emit.op(
            "Concat",
            [emit.int64s([batch * steps], hint="head_rows"), rows.rest],
            {"axis": 0},
            hint="head_rows_shape",
        )
        # A length above T fails here: the slice then holds fewer than B*steps rows.
        head_rows = emit.reshape(head_data, head_rows_shape, hint="head_rows")
        head = rows.gather(index, source=head_rows)
    tail = emit.slice(rows.data, steps, _INT64_MAX, time_axis, hint="tail")
    emit.op("Concat", [head, tail], {"axis": time_axis}, hint="out", output=result)


def _computed_index(emit: Emitter, rows: _Rows, lens: ir.Value, time_axis: int) -> ir.Value:
    """The row index computed at run time, for lengths known only then.

    With the time axis first, row(t, b) = src*B + b, which is c_b - t*B inside the length
    (c_b = (len_b - 1)*B + b) and t*B + b after it; batch-major is the same with the roles of
    the strides swapped. Everything per batch is done on [B] vectors, so only four ops touch
    all T*B entries.
    """
    time_first = time_axis == 0
    t_axis, b_axis = (1, 0) if time_first else (0, 1)
    b = emit.unsqueeze(emit.arange(rows.batch, hint="batches"), [b_axis], hint="b")
    # Reshape (not Unsqueeze) so that a sequence_lens of the wrong length fails, as natively.
    one = emit.int64s([1], hint="one")
    batch_1d = rows.batch_1d
    lens_shape = emit.op(
        "Concat", [one, batch_1d] if time_first else [batch_1d, one], {"axis": 0}, hint="lens_shape"
    )
    lengths = emit.reshape(lens, lens_shape, hint="lengths")
    # Lengths outside [0, T] become huge: their reversed rows then lie past the last row, so
    # Gather fails at run time as the native kernel does.
    negative = emit.op("Less", [lengths, emit.int64s(0, hint="zero")], hint="negative")
    too_long = emit.op("Greater", [lengths, rows.time_1d], hint="too_long")
    invalid = emit.op("Or", [negative, too_long], hint="invalid")
    huge = emit.int64s(_OUT_OF_RANGE, hint="huge")
    lengths = emit.op("Where", [invalid, huge, lengths], hint="checked_lengths")
    # One extra time step per invalid length, so that even with T = 0 some row is gathered from
    # past the end and the run fails (the output shape is then wrong, but nothing is returned).
    invalid_count = emit.op(
        "ReduceSum",
        [emit.op("Cast", [invalid], {"to": int(ir.DataType.INT64)}, hint="invalid_int")],
        {"keepdims": 0},
        hint="invalid_count",
    )
    steps = emit.op("Add", [rows.time, invalid_count], hint="steps_checked")
    t = emit.unsqueeze(emit.arange(steps, hint="steps"), [t_axis], hint="t")

    last = emit.op("Sub", [lengths, emit.int64s(1, hint="one_scalar")], hint="last")
    if time_first:
        t_stride = emit.op("Mul", [t, rows.batch_1d], hint="t_rows")  # t*B, [T, 1]
        start = emit.op(
            "Add", [emit.op("Mul", [last, rows.batch_1d], hint="last_rows"), b], hint="first_row"
        )  # (len-1)*B + b, [1, B]
        kept = emit.op("Add", [t_stride, b], hint="kept_row")
        reversed_row = emit.op("Sub", [start, t_stride], hint="reversed_row")
    else:
        b_stride = emit.op("Mul", [b, rows.time_1d], hint="b_rows")  # b*T, [B, 1]
        start = emit.op("Add", [b_stride, last], hint="first_row")  # b*T + len-1, [B, 1]
        kept = emit.op("Add", [b_stride, t], hint="kept_row")
        reversed_row = emit.op("Sub", [start, t], hint="reversed_row")
    inside = emit.op("Less", [t, lengths], hint="inside")
    return emit.op("Where", [inside, reversed_row, kept], hint="index")


def _int_attribute(node: ir.Node, name: str, default: int) -> int:
    attr = node.attributes.get(name)
    if attr is None:
        return default
    if attr.is_ref() or attr.type != ir.AttributeType.INT:
        raise InvalidNodeError(node, f"attribute '{name}' must be an int")
    return attr.as_int()


def _rank(value: ir.Value) -> int | None:
    return None if value.shape is None else len(value.shape)


def _static_dim(value: ir.Value, axis: int) -> int | None:
    shape = value.shape
    if shape is None or len(shape) <= axis:
        return None
    dim = shape[axis]
    return dim if isinstance(dim, int) else None


def _constant(value: ir.Value) -> np.ndarray | None:
    """The value's contents when fixed at lowering time (a Constant, or a non-input initializer)."""
    if value.is_initializer() and not value.is_graph_input() and value.const_value is not None:
        return value.const_value.numpy()
    producer = value.producer()
    if (
        producer is not None
        and producer.op_type == "Constant"
        and producer.domain in ("", "ai.onnx")
    ):
        attr = producer.attributes.get("value")
        if attr is not None and not attr.is_ref() and attr.type == ir.AttributeType.TENSOR:
            return attr.as_tensor().numpy()
    return None
