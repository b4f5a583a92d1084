"""Types of values, declared or inferred.

Lowering needs element types (``SequenceEmpty`` takes a dtype) and must tell sequences from
tensors. Exporters often leave intermediate values untyped, so when a declared type is missing we
fall back to ONNX shape inference, run once, lazily, on a clone: the user's model keeps exactly
the type annotations it had.
"""

from __future__ import annotations

import onnx
import onnx_ir as ir

__all__ = ["TypeOracle", "element_dtype"]


def element_dtype(type_: ir.TypeProtocol | None) -> ir.DataType | None:
    """The tensor element type of a tensor type or of a sequence of tensors, when known."""
    if type_ is None:
        return None
    if isinstance(type_, ir.SequenceType):
        type_ = type_.elem_type
    if isinstance(type_, ir.TensorType):
        dtype = type_.dtype
        return None if dtype == ir.DataType.UNDEFINED else dtype
    return None


class TypeOracle:
    """Answers "what is the type of this value?" for the values of one model.

    Build it before the model is changed: inferred types are matched to values by position in a
    clone taken at the first question.
    """

    def __init__(self, model: ir.Model) -> None:
        self._model = model
        self._inferred: dict[int, ir.Value] | None = None

    def type_of(self, value: ir.Value) -> ir.TypeProtocol | None:
        if value.type is not None and element_dtype(value.type) is not None:
            return value.type
        inferred = self._lookup(value)
        return value.type if inferred is None or inferred.type is None else inferred.type

    def static_shape(self, value: ir.Value) -> tuple[int, ...] | None:
        """The value's shape when every dimension is a known integer.

        Declared shapes, and inferred ones when inference has already run for a missing type;
        a shape alone never starts inference, which costs as much as a pass over a big model.
        """
        inferred = None if self._inferred is None else self._inferred.get(id(value))
        for shape in (value.shape, getattr(inferred, "shape", None)):
            if shape is not None and all(isinstance(d, int) for d in shape):
                return tuple(int(d) for d in shape)  # type: ignore[arg-type]
        return None

    def _lookup(self, value: ir.Value) -> ir.Value | None:
        if self._inferred is None:
            self._inferred = self._infer()
        return self._inferred.get(id(value))

    def _infer(self) -> dict[int, ir.Value]:
        # onnx_ir's ShapeInferencePass merges only dtype and shape back, which turns an inferred
        # sequence type into a tensor type; read the whole inferred type instead.
        clone = self._model.clone()
        graph = clone.graph
        for initializer in list(graph.initializers.values()):
            # Weights are not needed for types; dropping them keeps the serialized copy small.
            tensor = initializer.const_value
            if tensor is not None and initializer.type is None:
                initializer.dtype = tensor.dtype
                initializer.shape = ir.Shape(tensor.shape)
            if initializer not in graph.inputs:
                graph.inputs.append(initializer)
            assert initializer.name is not None
            graph.initializers.pop(initializer.name)
            initializer.const_value = None
        try:
            inferred_proto = onnx.shape_inference.infer_shapes(
                ir.serde.serialize_model(clone), check_type=False, strict_mode=False
            )
            inferred = ir.serde.deserialize_model(inferred_proto)
        except Exception:  # inference is best effort; the caller reports what stays unknown
            return {}
        pairs: list[tuple[ir.Value, ir.Value]] = []
        _pair_graph(self._model.graph, inferred.graph, pairs)
        return {id(original): copy for original, copy in pairs}


def _pair_graph(original: ir.Graph, copy: ir.Graph, pairs: list[tuple[ir.Value, ir.Value]]) -> None:
    # The copy's main graph may list former initializers as extra inputs, after the real ones.
    pairs.extend(zip(original.inputs, copy.inputs, strict=False))
    pairs.extend(zip(original.outputs, copy.outputs, strict=True))
    for node, node_copy in zip(original, copy, strict=True):
        pairs.extend(zip(node.outputs, node_copy.outputs, strict=True))
        for name, attr in node.attributes.items():
            attr_copy = node_copy.attributes[name]
            if attr.is_ref():
                continue
            if attr.type == ir.AttributeType.GRAPH:
                _pair_graph(attr.as_graph(), attr_copy.as_graph(), pairs)
            elif attr.type == ir.AttributeType.GRAPHS:
                for graph, graph_copy in zip(attr.as_graphs(), attr_copy.as_graphs(), strict=True):
                    _pair_graph(graph, graph_copy, pairs)
