"""The folds of sequence ops whose elements are known when lowering (read
:mod:`seqlower.passes.sequences.fold_sequence_ops` for what each becomes), kept apart
from the pass so that ``StackSequences`` extends them without importing another pass."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from seqlower._graphs import subgraphs_of
from seqlower.passes._base import Scope, Site
from seqlower.passes._emit import Emitter
from seqlower.passes._fold import REGION_KEY, fold_region, mark_region
from seqlower.passes._ir import block, constant_array, constant_int, is_onnx
from seqlower.passes._shared import (
    inline_untyped_sequence_map_functions,
    known_elements,
    unit_split,
)
from seqlower.passes._types import TypeOracle

__all__ = ["SPLIT_LIMIT", "SequenceFolds", "known_elements", "unit_split"]

#: Most pieces a SplitToSequence of known count is split into (a map over more runs as a Scan).
SPLIT_LIMIT = 64


class SequenceFolds(ir.passes.InPlacePass):
    """The walk and folds of ``FoldSequenceOps``, shared with ``StackSequences``, which
    extends them to sequences at run-time positions (a pass module imports no other)."""

    def __init__(self) -> None:
        super().__init__()
        self.rewritten = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = 0
        inlined = inline_untyped_sequence_map_functions(model)
        self._scope = Scope.of(model)
        self._names = self._scope.names
        self._types = TypeOracle(model)
        self._model = model
        default = model.opset_imports.get("", 1)
        self._graph(model.graph, default)
        for function in model.functions.values():
            self._graph(function, function.opset_imports.get("", default))
        return ir.passes.PassResult(model, modified=self.rewritten > 0 or inlined > 0)

    def _graph(self, graph: ir.Graph | ir.Function, opset: int) -> None:
        for node in list(graph):
            for subgraph in subgraphs_of(node):
                self._graph(subgraph, opset)
            fold = _FOLDS.get(node.op_type) if is_onnx(node) else None
            if fold is not None and fold(self, node, graph, opset):
                self.rewritten += 1
            elif is_onnx(node, "If") and _holds_failing_node(node):
                self._fold_if(node)

    def _fold_if(self, node: ir.Node) -> None:
        """Fold an ``If`` whose branch holds a node that fails whenever it runs, when known
        ranks decide its condition: only that ``If`` and the nodes computing its condition."""
        region = [node]
        stack = [node.inputs[0]]
        while stack and len(region) < _CONDITION_LIMIT:
            value = stack.pop()
            producer = value.producer() if value is not None else None
            if producer is None or producer.graph is not node.graph or producer in region:
                continue
            region.append(producer)
            stack.extend(producer.inputs)
        before = {id(n) for n in region if n.meta.get(REGION_KEY)}
        mark_region(region)
        fold_region(self._model, self._names)
        if node.graph is None:
            self.rewritten += 1
        for marked in region:  # the user's nodes the folder kept go back to being the user's
            if id(marked) not in before:
                marked.meta.pop(REGION_KEY, None)

    def _emitter(self, graph: ir.Graph | ir.Function, opset: int, node: ir.Node) -> Emitter:
        return self._scope.emitter(graph, node.name or node.op_type, opset)

    def _replace(
        self,
        node: ir.Node,
        graph: ir.Graph | ir.Function,
        new_nodes: list[ir.Node],
        result: ir.Value,
        opset: int,
    ) -> None:
        """Put ``new_nodes`` before ``node``, let ``result`` stand for its output, drop it."""
        ctx = self._scope.at(Site(node, opset))
        old = node.outputs[0]
        new_nodes = list(new_nodes)
        fresh = any(result.producer() is made for made in new_nodes)
        if not fresh and old.is_graph_output():
            # A graph output keeps its name (and a subgraph cannot return an outer-scope value
            # directly: onnxruntime refuses it), so it gets an Identity of its own.
            forward = ctx.into(graph, pool=None)
            identity = forward.Identity(result, _hint="value")
            identity.type, identity.shape = result.type, result.shape
            new_nodes += forward.nodes
            result, fresh = identity, True
        if fresh:
            result.type = result.type or old.type
            result.shape = result.shape or old.shape
        ctx.replace([result], rename=fresh, nodes=new_nodes)

    # ------------------------------------------------------------------ the folds

    def _insert(self, node: ir.Node, graph: ir.Graph | ir.Function, opset: int) -> bool:
        elements = known_elements(node.inputs[0])
        if elements is None:
            return False
        position = node.inputs[2] if len(node.inputs) > 2 else None
        if position is None:
            index = len(elements)
        else:
            given = constant_int(position)
            if given is None or not -len(elements) <= given <= len(elements):
                block(node, f"its position '{position.name}' is not a constant in range")
                return False
            index = given
            index = index + len(elements) if index < 0 else index
        tensor = node.inputs[1]
        if tensor is None:
            return False
        return self._construct(node, graph, opset, [*elements[:index], tensor, *elements[index:]])

    def _erase(self, node: ir.Node, graph: ir.Graph | ir.Function, opset: int) -> bool:
        elements = known_elements(node.inputs[0])
        if not elements:
            return False
        position = node.inputs[1] if len(node.inputs) > 1 else None
        index = -1 if position is None else constant_int(position)
        if index is None or not -len(elements) <= index < len(elements):
            return False
        rest = list(elements)
        del rest[index]
        if not rest:
            return False  # an empty sequence has no SequenceConstruct form
        return self._construct(node, graph, opset, rest)

    def _construct(
        self, node: ir.Node, graph: ir.Graph | ir.Function, opset: int, elements: list[ir.Value]
    ) -> bool:
        emit = self._emitter(graph, opset, node)
        result = emit.SequenceConstruct(*elements, _hint="sequence")
        self._replace(node, graph, list(emit.nodes), result, opset)
        return True

    def _at(self, node: ir.Node, graph: ir.Graph | ir.Function, opset: int) -> bool:
        elements = known_elements(node.inputs[0])
        position = node.inputs[1] if len(node.inputs) > 1 else None
        if elements is None:
            return self._at_split(node, graph, opset, position)
        index = constant_int(position)
        if index is None:
            # Left for StackSequences (stack-sequences), which stacks elements of one shape and
            # makes a bad position fail on every runtime (OpenVINO's Gather returns zeros).
            block(node, f"its position '{getattr(position, 'name', '')}' is not a constant")
            return False
        if not -len(elements) <= index < len(elements):
            block(node, f"its position {index} is out of range for {len(elements)} elements")
            return False
        self._replace(node, graph, [], elements[index], opset)
        return True

    def _at_split(
        self,
        node: ir.Node,
        graph: ir.Graph | ir.Function,
        opset: int,
        position: ir.Value | None,
    ) -> bool:
        """``SequenceAt`` of a one-per-index ``SplitToSequence`` is a ``Gather``, for any position
        (negative or out of range alike: Gather takes and refuses the same ones)."""
        split = unit_split(node.inputs[0])
        if split is None or position is None:
            return False
        x, axis, keepdims = split
        emit = self._emitter(graph, opset, node)
        index = emit.unsqueeze(position, [0], hint="position") if keepdims else position
        result = emit.Gather(x, index, axis=axis, _hint="element")
        self._replace(node, graph, list(emit.nodes), result, opset)
        return True

    def _length(self, node: ir.Node, graph: ir.Graph | ir.Function, opset: int) -> bool:
        elements = known_elements(node.inputs[0])
        if elements is None:
            split = unit_split(node.inputs[0])
            if split is None:
                return False
            x, axis, _ = split
            emit = self._emitter(graph, opset, node)
            shape = emit.Shape(x, _hint="shape", _dtype=ir.DataType.INT64)
            index = emit.constant(np.array(axis, dtype=np.int64), hint="axis")
            count = emit.Gather(shape, index, _hint="length", _dtype=ir.DataType.INT64)
            self._replace(node, graph, list(emit.nodes), count, opset)
            return True
        emit = self._emitter(graph, opset, node)
        count = emit.constant(np.array(len(elements), dtype=np.int64), hint="length")
        self._replace(node, graph, list(emit.nodes), count, opset)
        return True

    def _concat(self, node: ir.Node, graph: ir.Graph | ir.Function, opset: int) -> bool:
        elements = known_elements(node.inputs[0])
        if not elements or "axis" not in node.attributes:
            return False
        axis = node.attributes["axis"].as_int()
        new_axis = node.attributes["new_axis"].as_int() if "new_axis" in node.attributes else 0
        ranks = {len(e.shape) if e.shape is not None else -1 for e in elements}
        if len(ranks) == 1 and -1 not in ranks:
            rank = next(iter(ranks)) + (1 if new_axis else 0)
            if not -rank <= axis < rank:
                block(
                    node,
                    f"its axis {axis} is out of range for its rank-{rank - bool(new_axis)} "
                    "elements, so it fails whenever it runs (a Concat with that axis would be "
                    "refused at load)",
                )
                node.meta[_FAILS_KEY] = True
                return False
        emit = self._emitter(graph, opset, node)
        if new_axis:
            elements = [
                emit.unsqueeze(element, [axis], hint=f"element_{k}")
                for k, element in enumerate(elements)
            ]
        result = emit.Concat(*elements, axis=axis, _hint="concat")
        self._replace(node, graph, list(emit.nodes), result, opset)
        return True

    def _split(self, node: ir.Node, graph: ir.Graph | ir.Function, opset: int) -> bool:
        x = node.inputs[0]
        if x is None:
            return False
        split = node.inputs[1] if len(node.inputs) > 1 else None
        axis = node.attributes["axis"].as_int() if "axis" in node.attributes else 0
        keepdims = node.attributes["keepdims"].as_int() if "keepdims" in node.attributes else 1
        sizes = self._split_sizes(x, split, axis)
        count: int | None
        if isinstance(sizes, int):  # too many pieces to list
            count, sizes = sizes, None
        else:
            count = len(sizes) if sizes is not None else self._static_count(split, opset)
        if count is None:
            block(node, "the number of pieces is known only at run time")
            return False
        if not count:
            return False  # splitting an empty axis gives an empty sequence
        if count > SPLIT_LIMIT:
            block(node, f"{count} pieces are more than the {SPLIT_LIMIT} it unrolls")
            return False
        emit = self._emitter(graph, opset, node)
        base = node.name or node.op_type
        pieces = [ir.Value(name=self._names.fresh(f"{base}_piece_{k}")) for k in range(count)]
        if sizes is None:
            # Sizes known only at run time, but as many as the split tensor's static length
            # (PyTorch's split([1, N-1]): Concat([1], Reshape(N-1, [-1]))): Split takes them.
            assert split is not None
            emit.Split(x, split, axis=axis, _outputs=pieces)
        elif opset >= 13:
            emit.Split(x, emit.int64s(sizes, hint="sizes"), axis=axis, _outputs=pieces)
        else:
            emit.Split(x, axis=axis, split=sizes, _outputs=pieces)
        new_nodes = list(emit.nodes)
        if split is None and keepdims == 0:
            squeeze = self._emitter(graph, opset, node)
            if opset >= 13:
                axes = squeeze.int64s([axis], hint="axis")
                pieces = [
                    squeeze.Squeeze(p, axes, _hint=f"element_{k}") for k, p in enumerate(pieces)
                ]
            else:
                pieces = [
                    squeeze.Squeeze(p, axes=[axis], _hint=f"element_{k}")
                    for k, p in enumerate(pieces)
                ]
            new_nodes += squeeze.nodes
        construct = self._emitter(graph, opset, node)
        result = construct.SequenceConstruct(*pieces, _hint="sequence")
        self._replace(node, graph, [*new_nodes, *construct.nodes], result, opset)
        return True

    def _static_count(self, split: ir.Value | None, opset: int) -> int | None:
        """The length of a 1-D split tensor when static (``Split`` takes a tensor from 13)."""
        if split is None or opset < 13:
            return None
        shape = split.shape or self._types.shape_of(split)
        if shape is None or len(shape) != 1 or not isinstance(shape[0], int):
            return None
        return shape[0]

    def _split_sizes(
        self, x: ir.Value, split: ir.Value | None, axis: int
    ) -> list[int] | int | None:
        """The pieces' sizes when known; only their count past :data:`SPLIT_LIMIT` (listing
        a static axis of 1e9 unit pieces took gigabytes, issue 42)."""
        if split is not None:
            array = constant_array(split)
            if array is None or array.dtype.kind not in "iu":
                return None
            if array.ndim == 1:
                return [int(v) for v in array]
            if array.ndim != 0 or int(array) <= 0:
                return None
        shape = x.shape or self._types.shape_of(x)
        if shape is None or not -len(shape) <= axis < len(shape):
            return None
        size = shape[axis]
        if not isinstance(size, int):
            return None
        step = 1 if split is None else int(constant_array(split))  # type: ignore[arg-type]
        count = -(-size // step)
        if count > SPLIT_LIMIT:
            return count
        return [min(step, size - start) for start in range(0, size, step)]


#: ``node.meta`` key of a node that fails whenever it runs (left for its ``If`` to fold away).
_FAILS_KEY = "seqlower.fails_when_run"
_CONDITION_LIMIT = 16  # nodes followed back from an If's condition


def _holds_failing_node(node: ir.Node) -> bool:
    return any(
        inner.meta.get(_FAILS_KEY) or _holds_failing_node(inner)
        for subgraph in subgraphs_of(node)
        for inner in subgraph
    )


_FOLDS = {
    "SequenceInsert": SequenceFolds._insert,
    "SequenceErase": SequenceFolds._erase,
    "SequenceAt": SequenceFolds._at,
    "SequenceLength": SequenceFolds._length,
    "ConcatFromSequence": SequenceFolds._concat,
    "SplitToSequence": SequenceFolds._split,
}
