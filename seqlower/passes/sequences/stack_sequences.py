"""Sequences of one element shape read, inserted into or erased from at run-time positions, as
one tensor stacked along a new axis 0.

``FoldSequenceOps`` folds what is known when lowering (the elements and a constant position);
what it leaves is plumbing at positions only a run gives (ONNX's ``test_sequence_model2/3/7``:
``SequenceErase(SequenceConstruct(X, Y, Z), pos)`` then ``SequenceAt(_, pos_at)``). When every
element of a sequence provably has one shape (static sizes, or dimensions :mod:`.._dims` proves
equal), the sequence is exactly a tensor ``S`` of shape ``[n, *element]``:

- ``SequenceConstruct(e...)``: ``Concat(Unsqueeze(e, 0)...)``; ``SplitToSequence(x)`` without
  sizes (one piece per index of ``axis``; ``keepdims`` kept as a 1) or with a constant size that
  divides a static axis: ``x`` reshaped and the axis moved first; ``SequenceEmpty``: no tensor
  until its first element gives the shape;
- ``SequenceAt(S, i)``: ``Gather(S, i, axis=0)`` (ONNX's ``Gather`` takes the same positions,
  ``[-n, n-1]``, and refuses the same others);
- ``SequenceInsert(S, t, i)``: ``Gather(Concat(S, Unsqueeze(t)), idx)`` with
  ``idx = [0 .. q-1, n, q .. n-1]`` (``q``: ``i`` counted from the back when negative); no
  ``Slice`` with computed bounds, which tract 0.23.9 cannot load; appending is a ``Concat``;
- ``SequenceErase(S, i)``: ``Gather(S, [0 .. q-1, q+1 .. n-1, n-1])`` less its last row (row
  counts from shapes only);
- ``SequenceLength(S)``: ``Shape(S)[0]``; ``ConcatFromSequence(S)``: ``S`` transposed and, without
  ``new_axis``, reshaped (:func:`.._shared.concat_stacked`).

Positions out of range fail at run time as the sequence ops do (onnxruntime: "Invalid sequence
index"), never give an element: ``SequenceAt`` through ``Gather`` itself, ``SequenceInsert`` and
``SequenceErase`` through an index moved past the end by ``bad * (n + 1)`` (an erase from an
empty sequence gathers one index too), which onnxruntime's, onnx.reference's and torch's
``Gather`` refuse and tract 0.23.9's aborts on. OpenVINO's ``Gather`` returns zeros for an
out-of-range index, so :class:`StackSequences` (every sequence-free pipeline but tract's) also
adds to each index ``Reshape(Range(0, 1 + bad), [])``: zero for a good position, and a reshape of
two values to a scalar, which every runtime refuses, for a bad one. tract cannot load a
``Reshape`` to a computed shape ("Translating node ... Reshape ToTypedTranslator"), so its row
runs :class:`StackSequencesGatherChecked`, which leaves that out. One difference remains: a
``ConcatFromSequence`` of an empty sequence, which onnxruntime refuses, gives an empty tensor.

A sequence whose elements are not proven one shape stays (``test_sequence_model1`` inserts
``[1,3,4]`` and ``[3,3,4]`` elements), named by ``require-sequence-free`` with the reason.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower._graphs import subgraphs_of
from seqlower.passes._base import Site
from seqlower.passes._dims import Dim, DimProver
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import block, constant_int, is_onnx
from seqlower.passes._shared import concat_problem, concat_stacked
from seqlower.passes.sequences._sequence_folds import SequenceFolds

# Comparisons are Less/Greater/Equal/Not only: onnx2torch 1.5.15 converts GreaterOrEqual and
# LessOrEqual only as opset 12 defines them.

__all__ = ["StackSequences"]

_INT64 = int(ir.DataType.INT64)
_READERS = frozenset(
    {"SequenceAt", "SequenceLength", "SequenceInsert", "SequenceErase", "ConcatFromSequence"}
)


@dataclasses.dataclass(frozen=True)
class _Stack:
    """A sequence as a tensor: ``value`` ``[n, *element]``, ``dims`` the element's proven
    dimensions; both None for an empty sequence no element has reached yet."""

    value: ir.Value | None
    dims: tuple[Dim, ...] | None


class StackSequences(SequenceFolds):
    """Sequences of one element shape as stacked tensors (module docstring); positions out of
    range fail on every runtime, OpenVINO included (the ``Reshape`` check)."""

    def __init__(self, *, reshape_check: bool = True, lengths_as_data: bool = False) -> None:
        """``reshape_check``: each index also goes through the ``Reshape`` that fails for a bad
        position; without it a bad position fails in ``Gather`` alone (tract 0.23.9 aborts on
        one, and loads no ``Reshape`` to a computed shape). ``lengths_as_data``: a length the
        graph returns is counted from data (a ``ReduceSum`` of ones), not read from a shape:
        tract 0.23.9 types a value computed from shapes alone as a symbolic dimension and
        returns none ("Unsupported DatumType in the public API TDim")."""
        super().__init__()
        self.reshape_check = reshape_check
        self.lengths_as_data = lengths_as_data

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self._stacks: dict[int, _Stack] = {}
        self._prover = DimProver()
        return super().call(model)

    def _graph(self, graph: ir.Graph | ir.Function, opset: int) -> None:
        for node in list(graph):
            for subgraph in subgraphs_of(node):
                self._graph(subgraph, opset)
            if not is_onnx(node):
                continue
            make = _MAKERS.get(node.op_type)
            if make is not None and self._read_here(node):
                stack = make(self, node, graph, opset)
                if stack is not None:
                    self._stacks[id(node.outputs[0])] = stack
            read = _READS.get(node.op_type)
            if read is not None and read(self, node, graph, opset):
                self.rewritten += 1

    def _read_here(self, node: ir.Node) -> bool:
        """Whether an op this pass rewrites reads the node's sequence in the same graph."""
        return any(
            is_onnx(user, *_READERS) and user.graph is node.graph and index == 0
            for user, index in node.outputs[0].uses()
        )

    def _source(self, node: ir.Node) -> _Stack | None:
        sequence = node.inputs[0]
        return None if sequence is None else self._stacks.get(id(sequence))

    def _dims(self, value: ir.Value) -> tuple[Dim, ...] | None:
        rank = self._prover.rank(value)
        if rank is None:
            return None
        dims = tuple(self._prover.dim(value, axis) for axis in range(rank))
        return None if any(d is None for d in dims) else dims  # type: ignore[return-value]

    # ------------------------------------------------------------ sequences made

    def _stack_construct(
        self, node: ir.Node, graph: ir.Graph | ir.Function, opset: int
    ) -> _Stack | None:
        elements = list(node.inputs)
        if not elements or any(e is None for e in elements):
            return None
        dims = [self._dims(e) for e in elements if e is not None]
        if dims[0] is None or any(d != dims[0] for d in dims):
            block(node, "its elements are not proven to have one shape")
            return None
        emit = self._emitter(graph, opset, node)
        rows = [emit.unsqueeze(e, [0], hint=f"row_{k}") for k, e in enumerate(elements) if e]
        stacked = rows[0] if len(rows) == 1 else emit.Concat(*rows, axis=0, _hint="stacked")
        graph.insert_before(node, emit.nodes)
        return _Stack(stacked, dims[0])

    def _empty(self, node: ir.Node, graph: ir.Graph | ir.Function, opset: int) -> _Stack:
        return _Stack(None, None)

    def _split_stack(
        self, node: ir.Node, graph: ir.Graph | ir.Function, opset: int
    ) -> _Stack | None:
        x = node.inputs[0]
        dims = None if x is None else self._dims(x)
        if x is None or dims is None:
            return None
        rank = len(dims)
        axis = node.attributes["axis"].as_int() if "axis" in node.attributes else 0
        keepdims = node.attributes["keepdims"].as_int() if "keepdims" in node.attributes else 1
        if not -rank <= axis < rank:
            return None
        axis %= rank
        split = node.inputs[1] if len(node.inputs) > 1 else None
        emit = self._emitter(graph, opset, node)
        element = list(dims)
        if split is None:
            source = x
            if keepdims:
                element[axis] = 1
            else:
                del element[axis]
        else:
            size = constant_int(split)
            length = dims[axis]
            if split.shape is None or len(split.shape) != 0 or size is None or size <= 0:
                return None
            if not isinstance(length, int) or length % size:
                block(node, "its pieces are not proven to have one size")
                return None
            shape = [emit.dims(x, 0, axis, hint="before")] if axis else []
            shape.append(emit.int64s([length // size, size], hint="pieces"))
            if axis + 1 < rank:
                shape.append(emit.dims(x, axis + 1, hint="after"))
            target = emit.Concat(*shape, axis=0, _hint="target")
            source = emit.reshape(x, target, hint="pieces")
            element[axis] = size
            keepdims = 1
        source_rank = rank if split is None else rank + 1
        perm = [axis, *range(axis), *range(axis + 1, source_rank)]
        moved = source if axis == 0 else emit.Transpose(source, perm=perm, _hint="rows")
        if split is None and keepdims:
            moved = emit.unsqueeze(moved, [axis + 1], hint="rows")
        graph.insert_before(node, emit.nodes)
        return _Stack(moved, tuple(element))

    def _insert_stack(
        self, node: ir.Node, graph: ir.Graph | ir.Function, opset: int
    ) -> _Stack | None:
        stack, tensor = self._source(node), node.inputs[1]
        if stack is None or tensor is None:
            return None
        dims = self._dims(tensor)
        if dims is None or (stack.dims is not None and dims != stack.dims):
            block(node, "its element is not proven to have the shape of the sequence's")
            return None
        position = node.inputs[2] if len(node.inputs) > 2 else None
        emit = self._emitter(graph, opset, node)
        row = emit.unsqueeze(tensor, [0], hint="row")
        if position is None:
            stacked = (
                row
                if stack.value is None
                else emit.Concat(stack.value, row, axis=0, _hint="appended")
            )
        else:
            held = stack.value
            if held is None:  # an empty stack of the element's shape
                held = emit.slice(row, 0, 0, 0, hint="empty")
            count = self._count(emit, held)
            q = self._position(emit, position, count)
            bad = emit.Or(
                emit.Less(q, emit.int64s(0, hint="zero"), _hint="before_first"),
                emit.Greater(q, count, _hint="after_last"),
                _hint="bad_position",
            )
            after = emit.Add(count, emit.int64s(1, hint="one"), _hint="new_length")
            j = emit.arange(after, hint="rows")
            shifted = emit.Sub(
                j,
                emit.Cast(emit.Greater(j, q, _hint="later"), to=_INT64, _hint="later_int"),
                _hint="shifted",
            )
            index = emit.Where(emit.Equal(j, q, _hint="at"), count, shifted, _hint="index")
            index = self._checked(emit, index, bad, after)
            joined = emit.Concat(held, row, axis=0, _hint="joined")
            stacked = emit.Gather(joined, index, axis=0, _hint="inserted")
        graph.insert_before(node, emit.nodes)
        return _Stack(stacked, dims)

    def _erase_stack(
        self, node: ir.Node, graph: ir.Graph | ir.Function, opset: int
    ) -> _Stack | None:
        stack = self._source(node)
        if stack is None or stack.value is None:
            return None
        position = node.inputs[1] if len(node.inputs) > 1 else None
        emit = self._emitter(graph, opset, node)
        count = self._count(emit, stack.value)
        one = emit.int64s(1, hint="one")
        last = emit.Sub(count, one, _hint="last")
        q = last if position is None else self._position(emit, position, count)
        bad = emit.Or(
            emit.Less(q, emit.int64s(0, hint="zero"), _hint="before_first"),
            emit.Not(emit.Less(q, count, _hint="inside"), _hint="after_last"),
            _hint="bad_position",
        )
        bad_int = emit.Cast(bad, to=_INT64, _hint="bad_int")
        # max(n, 1) rows gathered (counts from shapes alone: tract gives a count computed from
        # data a symbol it cannot resolve), the n - 1 kept ones first, the last one sliced off;
        # an empty sequence gathers one row, so a bad position has an index to fail on.
        rows = emit.Max(count, one, _hint="gathered")
        j = emit.arange(rows, hint="rows")
        later = emit.Cast(
            emit.Not(emit.Less(j, q, _hint="earlier"), _hint="later"), to=_INT64, _hint="later_int"
        )
        kept = emit.Min(emit.Add(j, later, _hint="shifted"), last, _hint="kept")
        index = self._checked(emit, kept, bad, count, bad_int)
        gathered = emit.Gather(stack.value, index, axis=0, _hint="gathered_rows")
        end = emit.Sub(emit.dims(stack.value, 0, 1, hint="length_1d"), one, _hint="end")
        stacked = emit.slice(gathered, 0, end, 0, hint="erased")
        graph.insert_before(node, emit.nodes)
        return _Stack(stacked, stack.dims)

    # ------------------------------------------------------------ index helpers

    def _count(self, emit: Emitter, stacked: ir.Value) -> ir.Value:
        """``n``, the stack's length, as an int64 scalar."""
        shape = emit.Shape(stacked, _hint="shape", _dtype=ir.DataType.INT64)
        return emit.Gather(shape, emit.int64s(0, hint="zero"), _hint="length")

    def _position(self, emit: Emitter, position: ir.Value, count: ir.Value) -> ir.Value:
        """The position as an int64 scalar counted from the front (a negative one plus ``n``)."""
        p = emit.Reshape(position, emit.int64s([], hint="scalar"), _hint="position")
        if position.dtype != ir.DataType.INT64:
            p = emit.Cast(p, to=_INT64, _hint="position_int")
        return emit.Where(
            emit.Less(p, emit.int64s(0, hint="zero"), _hint="negative"),
            emit.Add(p, count, _hint="from_back"),
            p,
            _hint="position_front",
        )

    def _checked(
        self,
        emit: Emitter,
        index: ir.Value,
        bad: ir.Value,
        past: ir.Value,
        bad_int: ir.Value | None = None,
    ) -> ir.Value:
        """``index`` moved past ``past`` (the gathered tensor's length) for a bad position, and
        through the ``Reshape`` that fails for one when :attr:`reshape_check`."""
        if bad_int is None:
            bad_int = emit.Cast(bad, to=_INT64, _hint="bad_int")
        out = emit.Mul(
            bad_int, emit.Add(past, emit.int64s(1, hint="one"), _hint="past"), _hint="out"
        )
        index = emit.Add(index, out, _hint="index_checked")
        return self._fails_if(emit, index, bad_int)

    def _fails_if(
        self, emit: Emitter, value: ir.Value, bad_int: ir.Value, *, gathered: bool = True
    ) -> ir.Value:
        """``value``, through checks that fail at run time when ``bad_int`` is 1: the
        ``Reshape`` (when :attr:`reshape_check`) and, unless the caller's ``Gather`` already
        refuses a bad index (``gathered``), a ``Gather`` of ``[0]`` at ``bad_int``."""
        if not gathered:
            zero = emit.Gather(emit.int64s([0], hint="zero_row"), bad_int, _hint="zero_if_good")
            value = emit.Add(value, zero, _hint="checked")
        if not self.reshape_check:
            return value
        ones = emit.arange(
            emit.Add(emit.int64s(1, hint="one"), bad_int, _hint="check_count"), hint="check"
        )
        zero = emit.Reshape(
            ones,
            emit.int64s([], hint="scalar"),
            _hint="zero_unless_bad",
            _node="fails_if_position_out_of_range",
        )
        return emit.Add(value, zero, _hint="index_verified")

    # ------------------------------------------------------------ reads

    def _read_at(self, node: ir.Node, graph: ir.Graph | ir.Function, opset: int) -> bool:
        stack = self._source(node)
        position = node.inputs[1] if len(node.inputs) > 1 else None
        if stack is None or stack.value is None or position is None:
            return False
        emit = self._emitter(graph, opset, node)
        p = emit.Reshape(position, emit.int64s([], hint="scalar"), _hint="position")
        if self.reshape_check:
            if position.dtype != ir.DataType.INT64:
                p = emit.Cast(p, to=_INT64, _hint="position_int")
            count = self._count(emit, stack.value)
            bad = emit.Or(
                emit.Less(p, emit.Neg(count, _hint="minus_length"), _hint="before_first"),
                emit.Not(emit.Less(p, count, _hint="inside"), _hint="after_last"),
                _hint="bad_position",
            )
            p = self._fails_if(emit, p, emit.Cast(bad, to=_INT64, _hint="bad_int"))
        result = emit.Gather(stack.value, p, axis=0, _hint="element")
        self._replace(node, graph, list(emit.nodes), result, opset)
        return True

    def _read_length(self, node: ir.Node, graph: ir.Graph | ir.Function, opset: int) -> bool:
        stack = self._source(node)
        if stack is None:
            return self._split_length(node, graph, opset)
        if stack.value is None:
            return False
        emit = self._emitter(graph, opset, node)
        count = self._as_data(emit, node, self._count(emit, stack.value))
        self._replace(node, graph, list(emit.nodes), count, opset)
        return True

    def _as_data(self, emit: Emitter, node: ir.Node, count: ir.Value) -> ir.Value:
        """A length the graph returns, counted from data for tract (:attr:`lengths_as_data`)."""
        if not self.lengths_as_data or not node.outputs[0].is_graph_output():
            return count
        ones = emit.ConstantOfShape(
            emit.unsqueeze(count, [0], hint="count_1d"),
            value=ir.Tensor(np.array([1], dtype=np.int64)),
            _hint="ones",
        )
        return emit.ReduceSum(ones, keepdims=0, _hint="counted")

    def _split_length(self, node: ir.Node, graph: ir.Graph | ir.Function, opset: int) -> bool:
        """The length of ``SplitToSequence(x, split)`` whatever its pieces: the length of a 1-D
        ``split``, ``ceil(d / split)`` for a scalar one; failing, as the split does, unless the
        sizes add up to the axis' length ``d`` (a scalar: unless it is positive)."""
        producer = None if node.inputs[0] is None else node.inputs[0].producer()
        if not is_onnx(producer, "SplitToSequence") or producer is None:
            return False
        x = producer.inputs[0]
        split = producer.inputs[1] if len(producer.inputs) > 1 else None
        rank = None if x is None else self._prover.rank(x)
        sizes_rank = None if split is None else self._prover.rank(split)
        axis = producer.attributes["axis"].as_int() if "axis" in producer.attributes else 0
        if x is None or split is None or rank is None or sizes_rank not in (0, 1):
            return False
        if not -rank <= axis < rank:
            return False
        emit = self._emitter(graph, opset, node)
        length = emit.Gather(
            emit.Shape(x, _hint="shape", _dtype=ir.DataType.INT64),
            emit.int64s(axis % rank, hint="axis"),
            _hint="axis_length",
        )
        sizes = split
        if split.dtype is not None and split.dtype != ir.DataType.INT64:
            sizes = emit.Cast(split, to=_INT64, _hint="sizes")
        if sizes_rank == 1:
            count = self._count(emit, sizes)
            total = emit.ReduceSum(sizes, keepdims=0, _hint="total")
            bad = emit.Or(
                emit.Not(emit.Equal(total, length, _hint="adds_up"), _hint="not_adding_up"),
                emit.Less(
                    emit.ReduceMin(sizes, keepdims=0, _hint="smallest"),
                    emit.int64s(0, hint="zero"),
                    _hint="negative",
                ),
                _hint="bad_sizes",
            )
        else:
            one = emit.int64s(1, hint="one")
            count = emit.Div(
                emit.Sub(emit.Add(length, sizes, _hint="rounded_up"), one, _hint="ceil"),
                sizes,
                _hint="count",
            )
            bad = emit.Not(
                emit.Greater(sizes, emit.int64s(0, hint="zero"), _hint="positive"),
                _hint="bad_sizes",
            )
        bad_int = emit.Cast(bad, to=_INT64, _hint="bad_int")
        result = self._fails_if(emit, self._as_data(emit, node, count), bad_int, gathered=False)
        self._replace(node, graph, list(emit.nodes), result, opset)
        return True

    def _read_concat(self, node: ir.Node, graph: ir.Graph | ir.Function, opset: int) -> bool:
        stack = self._source(node)
        if stack is None or stack.value is None or stack.dims is None:
            return False
        problem = concat_problem(node, len(stack.dims))
        if problem is not None:
            block(node, problem)
            return False
        concat_stacked(self._scope.at(Site(node, opset)), stack.value, len(stack.dims))
        return True


_MAKERS = {
    "SequenceConstruct": StackSequences._stack_construct,
    "SequenceEmpty": StackSequences._empty,
    "SplitToSequence": StackSequences._split_stack,
    "SequenceInsert": StackSequences._insert_stack,
    "SequenceErase": StackSequences._erase_stack,
}
_READS = {
    "SequenceAt": StackSequences._read_at,
    "SequenceLength": StackSequences._read_length,
    "ConcatFromSequence": StackSequences._read_concat,
}
