"""What ``LowerReverseSequence`` works out of a node before rewriting it: which form it gets
(a ``Slice``, a copy, a constant index, a ``GatherND``, ``GatherElements`` or row index computed
at run time, the opset-10 rows), the sizes that are static, and which nodes share an index."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import Site
from seqlower.passes._dims import Dim, DimProver, filled_vector
from seqlower.passes._emit import fits_constant
from seqlower.passes._ir import onnx_producer, static_dim
from seqlower.passes._types import TypeOracle, element_dtype
from seqlower.passes._validate import check_lengths_count, validate_reverse_sequence
from seqlower.passes.reverse_sequence._reverse_rows import invalid_lengths

__all__ = ["COMPUTED_FORMS", "Form", "ReversePlan", "nd_rows", "plan_node"]


class Form(enum.Enum):
    SLICE = "slice"  # proven full-length: one Slice with step -1
    COPY = "copy"  # constant lengths of 0 or 1: nothing moves
    CONSTANT = "constant"  # constant lengths and a static T: a constant index
    COMPUTED = "computed"  # lengths known at run time: a computed GatherND index
    ELEMENTS = "elements"  # the same, one element per step: a computed GatherElements index
    ROW_GATHER = "row_gather"  # the same, static slices: a Gather of [T*B, *slice] rows
    ROWS = "rows"  # opset 10: a row Gather (no GatherND or Range there)


@dataclasses.dataclass
class ReversePlan:
    node: ir.Node
    opset: int
    form: Form
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
    lengths_key: tuple[Any, ...] | None  # ... and its lengths part (see LengthsPart)
    elements: bool = False  # one element per (time, batch) entry: GatherElements
    slice_shape: tuple[int, ...] | None = None  # the static shape of one (time, batch) slice
    static_index: bool = False  # T and B static: only the lengths part is computed at run time


#: The forms whose index is computed at run time (unless the lengths are constants).
COMPUTED_FORMS = (Form.COMPUTED, Form.ELEMENTS, Form.ROW_GATHER)


def plan_node(site: Site, types: TypeOracle, dims: DimProver, *, rows: bool) -> ReversePlan:
    """The plan of a valid ``ReverseSequence`` (``rows``: lengths known at run time get the row
    ``Gather``, ``form="gather"``); ``dims`` proves its sizes."""
    node = site.node
    time_axis, batch_axis, lens = validate_reverse_sequence(node)
    data, lens_value = node.inputs
    assert data is not None and lens_value is not None
    time_dim, batch_dim = dims.dim(data, time_axis), dims.dim(data, batch_axis)
    filled = filled_vector(lens_value, dims)
    form = _choose_form(site.opset, filled, time_dim, batch_dim, rows=rows)
    # Sizes the proofs did not reach are taken from the declared or inferred shapes: a
    # static one makes the index's shape-derived parts constants (issue 33).
    time_dim = _static_size(types, data, time_axis, time_dim)
    batch_dim = _static_size(types, data, batch_axis, batch_dim)
    count = len(lens) if lens is not None else dims.dim(lens_value, 0)
    count = _static_size(types, lens_value, 0, count)
    check_lengths_count(node, batch_dim, count)
    time_size = time_dim if isinstance(time_dim, int) else None
    batch_checked = batch_dim is not None and count == batch_dim
    full_rank = None
    if form is Form.COMPUTED:
        full_rank = _full_rank(dims, types, data, time_dim, batch_dim)
    form, elements, slice_shape = _gather_form(
        form, dims, types, data, full_rank, time_dim, batch_dim
    )
    if form in COMPUTED_FORMS and batch_checked:
        form = _constant_form(lens, time_size) or form
    if form not in (Form.ROW_GATHER, Form.CONSTANT):
        slice_shape = None
    batch_size = batch_dim if isinstance(batch_dim, int) else None
    # Only the row form needs the element type (strings are gathered one by one): asking for
    # it otherwise could start shape inference of the whole model for nothing.
    row_form = form is Form.ROWS
    dtype = element_dtype(types.type_of(data)) if row_form else None
    plan = ReversePlan(
        node=node,
        opset=site.opset,
        form=form,
        time_axis=time_axis,
        batch_axis=batch_axis,
        lens=lens,
        time_size=time_size,
        data_shape=types.static_shape(data) if row_form else None,
        gather_elementwise=row_form and (dtype is None or dtype == ir.DataType.STRING),
        batch_checked=batch_checked,
        rank=full_rank,
        batch_size=batch_size,
        share_key=None,
        lengths_key=None,
        elements=elements,
        slice_shape=slice_shape,
        static_index=form in COMPUTED_FORMS and _static_sizes(time_size, batch_size),
    )
    plan.share_key, plan.lengths_key = _share_keys(plan, time_dim, batch_dim)
    return plan


def _full_rank(
    dims: DimProver, types: TypeOracle, data: ir.Value, time_dim: Dim | None, batch_dim: Dim | None
) -> int | None:
    """The input's rank, proven, or for static sizes past the proofs (``_static_size``) from
    the same declared or inferred shape."""
    full_rank = dims.rank(data)
    if full_rank is None and isinstance(time_dim, int) and isinstance(batch_dim, int):
        shape = types.shape_of(data)
        full_rank = None if shape is None else len(shape)
    return full_rank


def _gather_form(
    form: Form,
    dims: DimProver,
    types: TypeOracle,
    data: ir.Value,
    full_rank: int | None,
    time_dim: Dim | None,
    batch_dim: Dim | None,
) -> tuple[Form, bool, tuple[int, ...] | None]:
    """The form narrowed by the input's shape, when its rank is known: ``GatherElements`` for
    one element a (time, batch) entry, else the row ``Gather`` for a static slice shape; with
    whether it is the former, and the latter's slice shape."""
    elements = full_rank is not None and _one_per_step(dims, data, full_rank)
    slice_shape = None
    if elements:
        form = Form.ELEMENTS
    elif full_rank is not None:
        slice_shape = _static_slice(dims, types, data, full_rank)
        # A statically empty time or batch axis keeps GatherND: OpenVINO 2026.4.1 dies of
        # SIGFPE compiling a Gather along a static axis of size 0 (symbolic, it runs).
        empty = time_dim == 0 or batch_dim == 0
        if slice_shape is not None and not empty and _not_strings(types, data):
            form = Form.ROW_GATHER
        else:
            slice_shape = None
    return form, elements, slice_shape


def _share_keys(
    plan: ReversePlan, time_dim: Dim | None, batch_dim: Dim | None
) -> tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]:
    """The keys under which nodes of one graph share the whole index, and its lengths part
    (``LengthsPart``); None: not shared."""
    graph = plan.node.graph
    if plan.form not in (*COMPUTED_FORMS, Form.CONSTANT) or graph is None:
        return None, None
    # Constant lengths are the same lengths wherever they are written (exporters write
    # one Constant per layer).
    lens_value = plan.node.inputs[1]
    lengths_id = id(lens_value) if plan.lens is None else ("constant", plan.lens.tobytes())
    lengths_key = (
        id(graph),
        lengths_id,
        plan.time_axis,
        _key(batch_dim),
        plan.form,
        plan.elements,
    )
    # A constant or static row index is int32 for Gather and int64 for GatherND: kept
    # apart (one computed from symbolic sizes is int32 for both, each GatherND node
    # widening it).
    keyed = plan.static_index or plan.form is Form.CONSTANT
    row_op = _row_op(plan.time_axis, plan.slice_shape) if keyed else None
    return (*lengths_key, _key(time_dim), row_op), lengths_key


def _choose_form(
    opset: int,
    filled: tuple[Dim, Dim] | None,
    time_dim: Dim | None,
    batch_dim: Dim | None,
    rows: bool = False,
) -> Form:
    if filled is not None and time_dim is not None and filled == (time_dim, batch_dim):
        return Form.SLICE
    if opset < 11 or rows:
        return Form.ROWS
    return Form.COMPUTED


def _constant_form(lens: np.ndarray | None, time_size: int | None) -> Form | None:
    """The form for lengths known when lowering, one per batch entry, on a static time axis:
    no index is computed at run time (issue 33: 2000 reversals of constant lengths wrote 6000
    ``Range`` and 6000 ``Shape`` for indices that are constants). None when the lengths are not
    constant, T is not static, a length is out of range (the model must fail at run time, as
    the computed index makes it) or the index would be too large to hold as a constant."""
    if lens is None or time_size is None or invalid_lengths(lens, time_size).any():
        return None
    if lens.size == 0 or (lens <= 1).all():
        return Form.COPY
    if (lens == time_size).all():
        return Form.SLICE
    # Equal lengths shorter than T too: reversing the head with two Slices and a Concat loaded
    # 1.1-1.6x slower in onnxruntime than a GatherND with a constant index shared by the model's
    # reversals, and ran no faster (200 reversals of [8, 4, 16] and [8, 8, 1], 20 of
    # [64, 32, 256]).
    return Form.CONSTANT if fits_constant(time_size, lens.size) else None


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


def _static_sizes(time_size: int | None, batch_size: int | None) -> bool:
    """Whether T and B are static and not 0 (OpenVINO 2026.4.1 broadcasts an empty constant
    away, see ``_reverse_index._time_steps``), small enough for constants of T + 1 and B
    entries (issue 42), and every row number fits in int32: the index's shape parts are then
    constants (issue 33)."""
    if not time_size or not batch_size:
        return False
    if not fits_constant(time_size + 1) or not fits_constant(batch_size):
        return False
    return (time_size + 1) * batch_size < 2**31


#: The largest slice (elements) a time-major row reversal moves with ``GatherND``.
_ND_ROWS_MAX = 64


def nd_rows(plan: ReversePlan) -> bool:
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
