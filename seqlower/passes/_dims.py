"""Proving from the graph that a value equals one of a tensor's dimensions.

tf2onnx writes ``tf.reverse`` and the backward half of every Keras ``Bidirectional`` layer as a
``ReverseSequence`` whose lengths are ``Expand(Gather(Shape(x), [t]), Gather(Shape(x'), [1]))``:
the full time length for every batch entry. Such a node is a plain reversal, one ``Slice``; but
only if that is *proven*, because a wrong guess gives wrong numbers without an error.

A :data:`Dim` names one dimension: an ``int`` when static, else ``(value, axis)`` after walking
back through ops that keep that dimension (elementwise unary ops, ``Cast``, ``Transpose``,
``ReverseSequence``...). Two dimensions are proven equal when their :data:`Dim` are equal: the
same static size, or the same axis of the same value. Declared symbolic names are never trusted
(nothing makes a runtime check that two ``"T"`` agree).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from seqlower._shape_rules import BROADCASTING, aligned, one_size
from seqlower.passes._ir import (
    ELEMENTWISE,
    RECURRENT_OPS,
    REDUCTIONS,
    SAME_SHAPE,
    constant_array,
    graph_attr,
    int_attr,
    ints_attr,
    onnx_producer,
    rank_of,
    reduction_axes,
)
from seqlower.passes._shared import unit_split

__all__ = [
    "BROADCASTING",
    "ELEMENTWISE",
    "SAME_SHAPE",
    "Dim",
    "DimProver",
    "filled_vector",
    "scalar_dim",
]

#: A dimension: its static size, or the (value, axis) it is the size of.
Dim = int | tuple[ir.Value, int]

# Casts that keep any dimension's value (dimensions are below 2**31 in every runtime).
_DIM_PRESERVING_CASTS = frozenset(
    {ir.DataType.INT32, ir.DataType.INT64, ir.DataType.UINT32, ir.DataType.UINT64}
)
_WALK_LIMIT = 256  # producers followed back, at most, per question (one-element values)


def _squeeze_axes(node: ir.Node) -> list[int] | None:
    """A Squeeze's or Unsqueeze's constant axes (an input from opset 13, else an attribute)."""
    if len(node.inputs) > 1:
        array = constant_array(node.inputs[1])
        return None if array is None else [int(a) for a in array.reshape(-1)]
    return ints_attr(node, "axes")


_DEPTH_LIMIT = 200  # nested proofs (broadcasting ops) before giving up: unproven is safe


class DimProver:
    """Which dimension of which value a dimension is, for one model, remembering every answer.

    A pass asks about nodes in graph order, so with the memo each question walks back only to
    the previous answer, however long the chain of layers is.
    """

    def __init__(self) -> None:
        self._dims: dict[tuple[int, int], Dim | None] = {}
        self._ranks: dict[int, int | None] = {}
        self._keep: list[ir.Value] = []  # ids stay valid while the memo holds them

    def rank(self, value: ir.Value, depth: int = 0) -> int | None:
        """The value's rank: declared, else through the same ops as :meth:`dim`."""
        if value.shape is not None:
            return len(value.shape)
        key = id(value)
        if key in self._ranks:
            return self._ranks[key]
        found: int | None = None
        node = onnx_producer(value)
        if node is not None and node.op_type in RECURRENT_OPS:
            found = 4 if value is node.outputs[0] else 3  # Y; Y_h and Y_c
        elif node is not None and node.op_type == "Split" and node.inputs and node.inputs[0]:
            found = self.rank(node.inputs[0], depth + 1) if depth < _DEPTH_LIMIT else None
        elif node is not None and depth < _DEPTH_LIMIT and value is node.outputs[0]:
            inputs = [v for v in node.inputs if v is not None]
            if node.op_type in SAME_SHAPE or node.op_type in ("Transpose", "Slice"):
                found = self.rank(inputs[0], depth + 1) if inputs else None
            elif node.op_type in BROADCASTING and inputs:
                ranks = [self.rank(v, depth + 1) for v in inputs]
                found = None if None in ranks else max(r for r in ranks if r is not None)
            elif node.op_type == "MatMul" and len(inputs) == 2:
                ranks = [self.rank(v, depth + 1) for v in inputs]
                if all(r is not None and r >= 2 for r in ranks):
                    found = max(r for r in ranks if r is not None)
            elif node.op_type == "Concat" and inputs:
                found = self.rank(inputs[0], depth + 1)
            elif node.op_type in ("Squeeze", "Unsqueeze") and inputs:
                axes, rank = _squeeze_axes(node), self.rank(inputs[0], depth + 1)
                if axes is not None and rank is not None:
                    found = rank + (len(axes) if node.op_type == "Unsqueeze" else -len(axes))
            elif node.op_type == "Reshape" and (like := _shape_source(node)) is not None:
                found = self.rank(like, depth + 1)
            elif node.op_type in REDUCTIONS and inputs:
                found = self._reduced_rank(node, depth)
            elif node.op_type == "ConcatFromSequence" and (joined := _mapped_output(node)):
                element = self.rank(joined[1], depth + 1)  # each element: the body's output
                stacked = int_attr(node, "new_axis", 0)
                found = None if element is None or stacked is None else element + bool(stacked)
        self._ranks[key] = found
        self._keep.append(value)
        return found

    def _reduced_rank(self, node: ir.Node, depth: int) -> int | None:
        """A reduction's rank: its input's with ``keepdims`` (the default), else less the
        reduced axes (every one when none are given: a scalar, whatever the input)."""
        keepdims = int_attr(node, "keepdims", 1)
        source = node.inputs[0]
        rank = None if source is None else self.rank(source, depth + 1)
        axes = reduction_axes(node)
        if keepdims is None or axes is None:
            return None
        if keepdims or (not axes and int_attr(node, "noop_with_empty_axes", 0)):
            return rank
        if not axes:
            return 0
        if rank is None or not all(-rank <= a < rank for a in axes):
            return None
        return rank - len({a % rank for a in axes})

    def dim(self, value: ir.Value, axis: int, depth: int = 0) -> Dim | None:
        """Dimension ``axis`` of ``value``, walked back to where it is first defined."""
        key = (id(value), axis)
        if key in self._dims:
            return self._dims[key]
        found = self._walk(value, axis, depth)
        self._dims[key] = found
        self._keep.append(value)
        return found

    def _walk(self, value: ir.Value, axis: int, depth: int) -> Dim | None:
        shape = value.shape
        if shape is not None:
            if axis < 0 or axis >= len(shape):
                return None
            dim = shape[axis]
            if isinstance(dim, int):
                return dim
        node = onnx_producer(value)
        if node is None or depth >= _DEPTH_LIMIT or not node.inputs or node.inputs[0] is None:
            return value, axis
        op = node.op_type
        if op in RECURRENT_OPS or op == "Scan":
            found = self._recurrent(node, value, axis, depth) if op != "Scan" else None
            if op == "Scan":
                found = self._scan(node, value, axis, depth)
            return (value, axis) if found is None else found
        if op == "Split":
            return self._split(node, value, axis, depth) or (value, axis)
        if value is not node.outputs[0]:
            return value, axis
        if op in ("Squeeze", "Unsqueeze"):
            return self._squeeze(node, axis, depth) or (value, axis)
        if op in SAME_SHAPE:
            return self.dim(node.inputs[0], axis, depth + 1)
        if op == "Transpose":
            source = node.inputs[0]
            perm = ints_attr(node, "perm")
            if perm is None and node.attributes.get("perm") is None:
                rank = self.rank(source, depth + 1)
                perm = None if rank is None else list(reversed(range(rank)))
            if perm is None or axis >= len(perm):
                return value, axis
            return self.dim(source, perm[axis], depth + 1)
        if op in BROADCASTING:
            return self._broadcast(node, value, axis, depth) or (value, axis)
        if op == "MatMul":
            return self._matmul(node, axis, depth) or (value, axis)
        if op == "Concat":  # the inputs agree on every other axis, or it fails at run time
            concat_axis = int_attr(node, "axis")
            rank = self.rank(node.inputs[0], depth + 1)
            if concat_axis is None or not rank or axis == concat_axis % rank:
                return value, axis
            return self.dim(node.inputs[0], axis, depth + 1)
        if op == "Reshape" and (like := _shape_source(node)) is not None:
            return self.dim(like, axis, depth + 1)  # Reshape(x, Shape(v)) has v's shape
        if op == "Slice":
            return self._slice(node, axis, depth) or (value, axis)
        if op == "ConcatFromSequence":
            return self._mapped_split(node, axis, depth) or (value, axis)
        return value, axis

    def _slice(self, node: ir.Node, axis: int, depth: int) -> Dim | None:
        """``Slice`` keeps every axis it does not cut (a stack cut along time keeps its batch
        axis); the cut axes must be known: constant ``axes``, or all of the first ones. (Opsets
        before 10, whose ``Slice`` takes attributes, have no ``ReverseSequence``.)"""
        source = node.inputs[0]
        assert source is not None
        if len(node.inputs) > 3 and node.inputs[3] is not None:
            found = constant_array(node.inputs[3])
            axes = None if found is None else [int(a) for a in found.reshape(-1)]
        else:
            starts_value = node.inputs[1] if len(node.inputs) > 1 else None
            shape = None if starts_value is None else starts_value.shape
            count = shape[0] if shape is not None and len(shape) == 1 else None
            if count is None and starts_value is not None:
                found = constant_array(starts_value)
                count = None if found is None else found.size
            axes = list(range(count)) if isinstance(count, int) else None
        rank = self.rank(source, depth + 1)
        if axes is None or rank is None or not all(-rank <= a < rank for a in axes):
            return None
        if axis in {a % rank for a in axes}:
            return None
        return self.dim(source, axis, depth + 1)

    def _mapped_split(self, node: ir.Node, axis: int, depth: int) -> Dim | None:
        """``ConcatFromSequence(SequenceMap(SplitToSequence(v)))``, onnxscript's map over the
        slices of a tensor: the joined axis is as long as the split one (one element per index,
        no ``split`` input), the others are the body output's, followed inside the body back to
        the element (v's other axes), a tensor it reads, or a static size."""
        found_map = _mapped_output(node)
        if found_map is None:
            return None
        mapped, body_output = found_map
        split = unit_split(mapped.inputs[0])
        body = body_output.graph
        if split is None or not isinstance(body, ir.Graph):
            return None
        source, split_axis, keepdims = split
        join_axis, new_axis = int_attr(node, "axis"), int_attr(node, "new_axis", 0)
        source_rank = self.rank(source, depth + 1)
        out_rank = self.rank(node.outputs[0], depth + 1)
        if None in (join_axis, new_axis, source_rank, out_rank):
            return None
        assert join_axis is not None and source_rank is not None and out_rank is not None
        if not source_rank or not -out_rank <= join_axis < out_rank or not 0 <= axis < out_rank:
            return None
        split_axis, join_axis = split_axis % source_rank, join_axis % out_rank
        count = self.dim(source, split_axis, depth + 1)
        if new_axis and axis == join_axis:
            return count
        element_axis = axis if new_axis == 0 or axis < join_axis else axis - 1
        found = self.dim(body_output, element_axis, depth + 1)
        if isinstance(found, tuple):
            found = self._outside(mapped, body, found, (source, split_axis, keepdims), depth)
        if not new_axis and axis == join_axis:
            # Joined without a new axis: as long as the split axis when every element is 1 long.
            return count if found == 1 else None
        return found

    def _outside(
        self,
        mapped: ir.Node,
        body: ir.Graph,
        found: tuple[ir.Value, int],
        split: tuple[ir.Value, int, bool],
        depth: int,
    ) -> Dim | None:
        """A body input's dimension as the dimension outside the map it stands for."""
        inner, inner_axis = found
        whole, split_axis, keepdims = split
        body_inputs = list(body.inputs)
        if body_inputs and inner is body_inputs[0]:
            # The element: the split value without the split axis (or with it, 1 long).
            if keepdims:
                if inner_axis == split_axis:
                    return 1
                return self.dim(whole, inner_axis, depth + 1)
            return self.dim(whole, inner_axis + (inner_axis >= split_axis), depth + 1)
        for k, body_input in enumerate(body_inputs[1:], start=1):
            outer = mapped.inputs[k] if k < len(mapped.inputs) else None
            if body_input is inner and outer is not None and isinstance(outer.type, ir.TensorType):
                return self.dim(outer, inner_axis, depth + 1)  # a tensor passed as it is
        return None

    def _matmul(self, node: ir.Node, axis: int, depth: int) -> Dim | None:
        """MatMul of inputs of rank >= 2: [..., M, K] @ [..., K, N] -> [..., M, N], the leading
        (batch) axes broadcast."""
        a, b = node.inputs[0], node.inputs[1] if len(node.inputs) > 1 else None
        if a is None or b is None:
            return None
        rank_a, rank_b = self.rank(a, depth + 1), self.rank(b, depth + 1)
        if rank_a is None or rank_b is None or min(rank_a, rank_b) < 2:
            return None
        out_rank = max(rank_a, rank_b)
        if axis == out_rank - 1:
            return self.dim(b, rank_b - 1, depth + 1)
        if axis == out_rank - 2:
            return self.dim(a, rank_a - 2, depth + 1)
        return self._aligned((a, b), [rank_a - 2, rank_b - 2], axis, depth)

    def _split(self, node: ir.Node, value: ir.Value, axis: int, depth: int) -> Dim | None:
        """A ``Split`` piece keeps every axis but the split one, whose size is the piece's
        constant size (``FoldSequenceOps`` splits a sequence's tensor so)."""
        source = node.inputs[0]
        rank = None if source is None else self.rank(source, depth + 1)
        split_axis = int_attr(node, "axis", 0)
        if source is None or rank is None or split_axis is None:
            return None
        if axis != split_axis % rank:
            return self.dim(source, axis, depth + 1)
        sizes = constant_array(node.inputs[1]) if len(node.inputs) > 1 else None
        if sizes is None:
            listed = ints_attr(node, "split")
            sizes = None if listed is None else np.array(listed)
        if sizes is None or sizes.ndim != 1 or len(sizes) != len(node.outputs):
            return None
        return int(sizes[node.outputs.index(value)])

    def _squeeze(self, node: ir.Node, axis: int, depth: int) -> Dim | None:
        """Squeeze/Unsqueeze with constant axes: an output axis is an input axis, or a 1."""
        source = node.inputs[0]
        assert source is not None
        axes = _squeeze_axes(node)
        rank = self.rank(source, depth + 1)
        if axes is None or rank is None:
            return None
        if node.op_type == "Squeeze":
            removed = {a + rank if a < 0 else a for a in axes}
            kept = [i for i in range(rank) if i not in removed]
            return self.dim(source, kept[axis], depth + 1) if axis < len(kept) else None
        out_rank = rank + len(axes)
        added = {a + out_rank if a < 0 else a for a in axes}
        if axis in added:
            return 1
        return self.dim(source, axis - sum(1 for a in added if a < axis), depth + 1)

    def _recurrent(self, node: ir.Node, value: ir.Value, axis: int, depth: int) -> Dim | None:
        """RNN/GRU/LSTM: the sequence and batch axes of every output are X's; the last axis is
        the ``hidden_size`` attribute (a reversal after the layer moves slices of that size)."""
        x = node.inputs[0]
        assert x is not None
        layout = int_attr(node, "layout", 0)
        if value not in node.outputs or layout not in (0, 1):
            return None
        x_seq, x_batch = (0, 1) if layout == 0 else (1, 0)
        if value is node.outputs[0]:  # Y: [seq, dirs, batch, hidden] or [batch, seq, dirs, hidden]
            axes = {0: x_seq, 2: x_batch} if layout == 0 else {0: x_batch, 1: x_seq}
            hidden_axis = 3
        else:  # Y_h, Y_c: [dirs, batch, hidden] or [batch, dirs, hidden]
            axes = {1: x_batch} if layout == 0 else {0: x_batch}
            hidden_axis = 2
        if axis == hidden_axis:
            return int_attr(node, "hidden_size")
        return self.dim(x, axes[axis], depth + 1) if axis in axes else None

    def _scan(self, node: ir.Node, value: ir.Value, axis: int, depth: int) -> Dim | None:
        """Scan: a scan output's scan axis is as long as the scan inputs' scan axes."""
        scan_count = int_attr(node, "num_scan_inputs")
        if scan_count is None or value not in node.outputs:
            return None
        state_count = len(node.inputs) - scan_count
        index = list(node.outputs).index(value) - state_count
        if index < 0:
            return None
        output_axes = ints_attr(node, "scan_output_axes") or [0] * (len(node.outputs) - state_count)
        input_axes = ints_attr(node, "scan_input_axes") or [0] * scan_count
        if index >= len(output_axes) or any(a < 0 for a in (*output_axes, *input_axes)):
            return None
        if not input_axes:
            return None
        if axis == output_axes[index]:
            first = node.inputs[state_count]
            return None if first is None else self.dim(first, input_axes[0], depth + 1)
        # Another axis: the body's output axis, followed inside the body back to one of its
        # scan inputs (an outer scan input minus its scan axis), or to a static size.
        body = graph_attr(node, "body")
        if body is None:
            return None
        body_outputs = list(body.outputs)[state_count:]
        if index >= len(body_outputs):
            return None
        inner_axis = axis if axis < output_axes[index] else axis - 1
        found = self.dim(body_outputs[index], inner_axis, depth + 1)
        if not isinstance(found, tuple):
            return found
        inner, inner_axis = found
        body_inputs = list(body.inputs)
        for i, body_input in enumerate(body_inputs[state_count:]):
            if body_input is inner and i < len(input_axes):
                outer = node.inputs[state_count + i]
                scan_axis = input_axes[i]
                outer_axis = inner_axis if inner_axis < scan_axis else inner_axis + 1
                return None if outer is None else self.dim(outer, outer_axis, depth + 1)
        return None

    def _broadcast(self, node: ir.Node, value: ir.Value, axis: int, depth: int) -> Dim | None:
        inputs = [v for v in node.inputs if v is not None]
        ranks = [self.rank(v, depth + 1) for v in inputs]
        if None in ranks:
            return None
        return self._aligned(inputs, ranks, axis, depth)  # type: ignore[arg-type]

    def _aligned(
        self, inputs: Sequence[ir.Value], ranks: list[int], axis: int, depth: int
    ) -> Dim | None:
        """Output axis ``axis`` of the broadcast of ``inputs`` (the batch axes of a
        ``MatMul``): their aligned dimensions, walked one by one until two differ (a static 1
        broadcasts; all 1: not proven, as before)."""
        dims = (self.dim(inputs[k], a, depth + 1) for k, a in aligned(ranks, axis))
        one: Dim = 1
        found = one_size(dims, one)
        return None if found == 1 else found


def _mapped_output(node: ir.Node) -> tuple[ir.Node, ir.Value] | None:
    """The ``SequenceMap`` a ``ConcatFromSequence`` joins the output of, and the body output
    that output is made of."""
    seq = node.inputs[0] if node.inputs else None
    mapped = None if seq is None else onnx_producer(seq)
    if seq is None or mapped is None or mapped.op_type != "SequenceMap":
        return None
    body = graph_attr(mapped, "body")
    if body is None:
        return None
    index = list(mapped.outputs).index(seq)
    return (mapped, body.outputs[index]) if index < len(body.outputs) else None


def _shape_source(node: ir.Node) -> ir.Value | None:
    """``v`` when a Reshape's target shape is the whole ``Shape(v)``."""
    if len(node.inputs) < 2 or node.inputs[1] is None:
        return None
    shape = onnx_producer(node.inputs[1])
    if shape is None or shape.op_type != "Shape" or shape.attributes.get("start") is not None:
        return None
    if shape.attributes.get("end") is not None:
        return None
    return shape.inputs[0]


def scalar_dim(value: ir.Value | None, prover: DimProver | None = None) -> Dim | None:
    """The dimension a one-element integer value holds (a scalar or a [1] tensor), if proven."""
    for _ in range(_WALK_LIMIT):
        if value is None:
            return None
        array = constant_array(value)
        if array is not None:
            return (
                int(array.reshape(-1)[0]) if array.size == 1 and array.dtype.kind in "iu" else None
            )
        node = onnx_producer(value)
        if node is None or value is not node.outputs[0]:
            return None
        op = node.op_type
        if op == "Cast" and node.attributes.get("to") is not None:
            if int_attr(node, "to") not in _DIM_PRESERVING_CASTS:
                return None
            value = node.inputs[0]
        elif op in ("Identity", "Squeeze", "Unsqueeze", "Reshape", "Flatten"):
            value = node.inputs[0]  # a one-element input stays one element, same value
        elif op == "Shape":
            return _shape_entry(node, 0, prover)
        elif op == "Gather" and len(node.inputs) == 2 and int_attr(node, "axis", 0) == 0:
            index = constant_array(node.inputs[1])
            source = node.inputs[0]
            if index is None or index.size != 1 or source is None:
                return None
            shape_node = onnx_producer(source)
            if shape_node is None or shape_node.op_type != "Shape":
                return None
            return _shape_entry(shape_node, int(index.reshape(-1)[0]), prover)
        elif op == "Slice" and len(node.inputs) >= 3:
            source = node.inputs[0]
            shape_node = None if source is None else onnx_producer(source)
            starts, ends = constant_array(node.inputs[1]), constant_array(node.inputs[2])
            axes = constant_array(node.inputs[3]) if len(node.inputs) > 3 else None
            steps = constant_array(node.inputs[4]) if len(node.inputs) > 4 else None
            if (
                shape_node is None
                or shape_node.op_type != "Shape"
                or starts is None
                or ends is None
                or starts.size != 1
                or ends.size != 1
                or (axes is not None and axes.reshape(-1).tolist() not in ([0], [-1]))
                or (steps is not None and steps.reshape(-1).tolist() != [1])
                or (len(node.inputs) > 3 and node.inputs[3] is not None and axes is None)
                or (len(node.inputs) > 4 and node.inputs[4] is not None and steps is None)
            ):
                return None
            start, end = int(starts.reshape(-1)[0]), int(ends.reshape(-1)[0])
            if start < 0 or end != start + 1:
                return None
            return _shape_entry(shape_node, start, prover)
        else:
            return None
    return None


def _vector_rank(value: ir.Value | None) -> int | None:
    """The rank of a value :func:`scalar_dim` reads (one element): declared, else from how it
    is made (``Gather`` of a shape keeps its index's rank, ``Shape`` and ``Slice`` give 1-D)."""
    for _ in range(_WALK_LIMIT):
        if value is None:
            return None
        if value.shape is not None:
            return len(value.shape)
        array = constant_array(value)
        if array is not None:
            return array.ndim
        node = onnx_producer(value)
        if node is None:
            return None
        if node.op_type in ("Cast", "Identity"):
            value = node.inputs[0]
        elif node.op_type in ("Shape", "Slice"):
            return 1
        elif node.op_type == "Gather" and len(node.inputs) == 2:
            index = constant_array(node.inputs[1])
            return None if index is None else index.ndim
        else:
            return None
    return None


def _shape_entry(shape_node: ir.Node, index: int, prover: DimProver | None) -> Dim | None:
    """Entry ``index`` of ``Shape(x, start, end)``'s output, as a dimension of ``x``."""
    source = shape_node.inputs[0] if shape_node.inputs else None
    if source is None:
        return None
    rank = rank_of(source)
    start = int_attr(shape_node, "start", 0)
    end = int_attr(shape_node, "end")
    if start is None or (shape_node.attributes.get("end") is not None and end is None):
        return None
    if start < 0 or (end is not None and end < 0) or index < 0:
        if rank is None:
            return None
        start = start + rank if start < 0 else start
        if end is not None and end < 0:
            end += rank
        length = (rank if end is None else min(end, rank)) - start
        if index < 0:
            index += length
    axis = start + index
    if index < 0 or (end is not None and axis >= end):
        return None
    return (prover or DimProver()).dim(source, axis)


def filled_vector(value: ir.Value, prover: DimProver | None = None) -> tuple[Dim, Dim] | None:
    """``(fill, count)`` when ``value`` is proven a 1-D vector of ``count`` entries all ``fill``."""
    for _ in range(_WALK_LIMIT):
        array = constant_array(value)
        if array is not None:
            if array.ndim != 1 or array.dtype.kind not in "iu" or array.size == 0:
                return None
            if not (array == array[0]).all():
                return None
            return int(array[0]), int(array.size)
        node = onnx_producer(value)
        if node is None or value is not node.outputs[0]:
            return None
        op = node.op_type
        if op == "Cast":
            if int_attr(node, "to") not in _DIM_PRESERVING_CASTS or node.inputs[0] is None:
                return None
            value = node.inputs[0]
        elif op == "Identity" and node.inputs[0] is not None:
            value = node.inputs[0]
        elif op in ("Expand", "Tile") and len(node.inputs) == 2:
            source, count_value = node.inputs
            # A scalar or [1] source, and a [1] shape (Expand) or repeats (Tile) holding count:
            # the output is [count], every entry the source's.
            if _vector_rank(source) not in ((0, 1) if op == "Expand" else (1,)):
                return None
            if _vector_rank(count_value) != 1:
                return None
            fill, count = scalar_dim(source, prover), scalar_dim(count_value, prover)
            if fill is None or count is None:
                return None
            return fill, count
        elif op == "ConstantOfShape" and node.inputs and node.inputs[0] is not None:
            shape_value = node.inputs[0]
            attr = node.attributes.get("value")
            fill_value = (
                0
                if attr is None
                else (
                    attr.value.numpy()
                    if not attr.is_ref() and attr.type == ir.AttributeType.TENSOR
                    else None
                )
            )
            if fill_value is None or (
                not isinstance(fill_value, int)
                and (fill_value.size != 1 or fill_value.dtype.kind not in "iu")
            ):
                return None
            if _vector_rank(shape_value) != 1:
                return None
            count = scalar_dim(shape_value, prover)
            if count is None:
                return None
            fill = fill_value if isinstance(fill_value, int) else int(fill_value.reshape(-1)[0])
            return fill, count
        else:
            return None
    return None
