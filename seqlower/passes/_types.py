"""Types of values, declared or inferred.

Lowering needs element types (``SequenceEmpty`` takes a dtype) and must tell sequences from
tensors. Exporters often leave intermediate values untyped, so when a declared type is missing we
fall back to ONNX shape inference, run once, lazily, on a clone: the user's model keeps exactly
the type annotations it had.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import onnx
import onnx_ir as ir

from seqlower._graphs import all_graphs
from seqlower.errors import InvalidModelError, describe_node
from seqlower.passes._ir import SAME_SHAPE, graph_attr, is_onnx, is_static

__all__ = ["TypeOracle", "element_dtype", "inference_affordable", "pair_values", "weightless_proto"]


class _Inferred(NamedTuple):
    """What inference said about one value (the value kept, so that its id stays its own)."""

    value: ir.Value
    type: ir.TypeProtocol | None
    shape: ir.Shape | None


# Inference results by model, for the later passes of a run: lowering never changes the type of
# a value it keeps, so a later pass reuses them and infers again only for a value made since.
_EARLIER: weakref.WeakKeyDictionary[ir.Model, dict[int, _Inferred]] = weakref.WeakKeyDictionary()


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
        self._inferred: dict[int, _Inferred] | None = _EARLIER.get(model)
        self._fresh = False  # whether self._inferred describes the model as it is now
        self._parameters: dict[int, tuple[ir.Function, int]] | None = None
        self._asking: set[int] = set()  # parameters being resolved (recursive calls)

    def type_of(self, value: ir.Value) -> ir.TypeProtocol | None:
        """Declared, else followed back through type-preserving ops, else (for an input of a
        model-local function) what its call sites pass, else inferred."""
        if value.type is not None and element_dtype(value.type) is not None:
            return value.type
        traced = self._trace(value)
        if traced is not None:
            return traced
        passed = self._from_call_sites(value)
        if passed is not None:
            return passed
        inferred = self._lookup(value)
        return value.type if inferred is None or inferred.type is None else inferred.type

    def _from_call_sites(self, value: ir.Value) -> ir.TypeProtocol | None:
        """A function input's type from every call of the function: ONNX leaves function
        inputs untyped, the types are at the call sites. Raises InvalidModelError naming two
        call sites that pass different types."""
        if self._parameters is None:
            self._parameters = {
                id(param): (function, k)
                for function in self._model.functions.values()
                for k, param in enumerate(function.inputs)
            }
        found = self._parameters.get(id(value))
        if found is None or id(value) in self._asking:
            return None
        function, k = found
        self._asking.add(id(value))
        try:
            seen: list[tuple[ir.Node, ir.TypeProtocol]] = []
            for call in _calls_of(self._model, function):
                argument = call.inputs[k] if k < len(call.inputs) else None
                type_ = None if argument is None else self.type_of(argument)
                if type_ is None or element_dtype(type_) is None:
                    continue
                if seen and _kind(seen[0][1]) != _kind(type_):
                    raise InvalidModelError(
                        f"input {k} '{value.name}' of function '{function.domain}::"
                        f"{function.name}' has conflicting types at its call sites: "
                        f"{describe_node(seen[0][0])} passes {seen[0][1]}, "
                        f"{describe_node(call)} passes {type_}"
                    )
                seen.append((call, type_))
        finally:
            self._asking.discard(id(value))
        return seen[0][1] if seen else None

    def _trace(self, value: ir.Value) -> ir.TypeProtocol | None:
        """The type, from the producers' declared types through ops whose rule is trivial.

        Whole-model shape inference costs seconds on a large model; most untyped values are a
        few elementwise or sequence ops away from a declared one.
        """
        wrappers: list[type[ir.TensorType] | type[ir.SequenceType] | None] = []
        for _ in range(_TRACE_LIMIT):
            if value.type is not None and element_dtype(value.type) is not None:
                found: ir.TypeProtocol = value.type
                break
            node = value.producer()
            if not is_onnx(node):
                return None
            # The rules give the first output's type; other outputs (Dropout's mask, MaxPool's
            # indices, LayerNormalization's statistics) may differ, except Split's.
            if value is not node.outputs[0] and node.op_type != "Split":
                return None
            rule = _rule(node)
            if rule is None:
                return None
            if not isinstance(rule, tuple):
                if not isinstance(rule, (ir.TensorType, ir.SequenceType)):
                    return None
                found = rule
                break
            wrapper, source = rule
            if source is None:
                return None
            wrappers.append(wrapper)
            value = source
        else:
            return None
        for wrapper in reversed(wrappers):
            if wrapper is ir.SequenceType:
                found = ir.SequenceType(found)
            elif wrapper is ir.TensorType:
                if not isinstance(found, ir.SequenceType):
                    return None
                found = found.elem_type
        return found

    def static_shape(self, value: ir.Value) -> tuple[int, ...] | None:
        """The value's shape when every dimension is a known integer.

        Declared shapes, and inferred ones when inference has already run for a missing type;
        a shape alone never starts inference, which costs as much as a pass over a big model.
        """
        inferred = None if self._inferred is None else self._inferred.get(id(value))
        if inferred is not None and inferred.value is not value:
            inferred = None
        for shape in (value.shape, getattr(inferred, "shape", None)):
            if is_static(shape):
                return tuple(int(d) for d in shape)  # type: ignore[arg-type]
        return None

    def shape_of(self, value: ir.Value) -> ir.Shape | None:
        """The declared shape, else one followed back through ops that keep their first input's
        shape, else the inferred one (this may run shape inference)."""
        if value.shape is not None:
            return value.shape
        traced = _shape_up_the_chain(value)
        if traced is not None:
            return traced
        inferred = self._lookup(value)
        return None if inferred is None else inferred.shape

    def _lookup(self, value: ir.Value) -> _Inferred | None:
        """Inferred type and shape: from an earlier pass's inference while the value is one it
        saw, else from inference run now (once per oracle)."""
        found = None if self._inferred is None else self._inferred.get(id(value))
        if (found is None or found.value is not value) and not self._fresh:
            self._inferred = self._infer()
            self._fresh = True
            _EARLIER[self._model] = self._inferred
            found = self._inferred.get(id(value))
        return found if found is not None and found.value is value else None

    def _infer(self) -> dict[int, _Inferred]:
        # onnx_ir's ShapeInferencePass merges only dtype and shape back, which turns an inferred
        # sequence type into a tensor type; read the whole inferred type instead.
        if not inference_affordable(self._model):
            return {}  # what stays unknown is reported by the caller, as when inference fails
        try:
            inferred_proto = onnx.shape_inference.infer_shapes(
                weightless_proto(self._model, SHAPE_DATA_SIZE), check_type=False, strict_mode=False
            )
            inferred = ir.serde.deserialize_model(inferred_proto)
        except Exception:  # inference is best effort; the caller reports what stays unknown
            return {}
        pairs = pair_values(self._model.graph, inferred.graph)
        return {
            id(original): _Inferred(original, copy.type, copy.shape) for original, copy in pairs
        }


# ONNX's inference copies the outer scope's types for each subgraph it infers: quadratic, 18 s
# for 1850 SequenceMap bodies in a 118k-node model (0.3 s at 300 in 19k). Past this product
# of subgraphs and nodes (about a second) it is run nowhere: not to derive declared sizes
# (_declared) and not to answer a type or shape question here (12 s of a 28-s run at 32k nodes
# and 2000 bodies, for nothing it could derive).
_BUDGET = 10_000_000


def inference_affordable(
    model: ir.Model, scopes: list[ir.Graph | ir.Function] | None = None
) -> bool:
    """Whether ONNX's whole-model inference fits :data:`_BUDGET` for ``model`` (``scopes``:
    its :func:`all_graphs`, when the caller has them)."""
    graphs = all_graphs(model) if scopes is None else scopes
    subgraphs = len(graphs) - 1 - len(model.functions)
    return subgraphs * sum(len(graph) for graph in graphs) <= _BUDGET


def _shape_up_the_chain(value: ir.Value) -> ir.Shape | None:
    """The declared shape of the value ``value`` is a shape-keeping op's first output of (a
    ``ReverseSequence``'s, a ``Relu``'s, ... in a chain): whole-model shape inference costs
    seconds on a large model, for shapes that are often one op away (issue 33)."""
    for _ in range(_TRACE_LIMIT):
        node = value.producer()
        if not is_onnx(node) or node.op_type not in SAME_SHAPE or value is not node.outputs[0]:
            return None
        if not node.inputs or node.inputs[0] is None:
            return None
        value = node.inputs[0]
        if value.shape is not None:
            return value.shape
    return None


#: Initializers of at most this many elements keep their data in the proto inference reads: a
#: ``Reshape``'s, ``Slice``'s or ``Expand``'s constant operands, which inference reads to give
#: their outputs' sizes (without them a ``Reshape`` to ``[-1, 5, 6]`` is of rank 3 and no size).
SHAPE_DATA_SIZE = 64


def weightless_proto(model: ir.Model, keep: int = 0) -> onnx.ModelProto:
    """A proto of a copy of ``model`` whose initializers are typed graph inputs without data
    (but those of at most ``keep`` elements: shapes data propagation reads): all shape
    inference needs, small to serialize whatever the weights weigh."""
    clone = model.clone()
    graph = clone.graph
    for initializer in list(graph.initializers.values()):
        tensor = initializer.const_value
        if tensor is not None and tensor.size <= keep:
            continue
        if tensor is not None and initializer.type is None:
            initializer.dtype = tensor.dtype
            initializer.shape = ir.Shape(tensor.shape.numpy())
        if initializer not in graph.inputs:
            graph.inputs.append(initializer)
        assert initializer.name is not None
        graph.initializers.pop(initializer.name)
        initializer.const_value = None
    return ir.serde.serialize_model(clone)


_TRACE_LIMIT = 256
# Ops whose output has the type of their first input (Where: second).
_SAME_AS_INPUT = {
    op: 0
    for op in [
        "Abs",
        "Acos",
        "Add",
        "Asin",
        "Atan",
        "BitShift",
        "Ceil",
        "Clip",
        "Concat",
        "Cos",
        "CumSum",
        "DepthToSpace",
        "Div",
        "Dropout",
        "Elu",
        "Erf",
        "Exp",
        "Expand",
        "Flatten",
        "Floor",
        "Gather",
        "GatherElements",
        "GatherND",
        "HardSigmoid",
        "Identity",
        "LeakyRelu",
        "Log",
        "LogSoftmax",
        "Max",
        "Min",
        "Mod",
        "Mul",
        "Neg",
        "Pad",
        "Pow",
        "Reciprocal",
        "Relu",
        "Reshape",
        "ReverseSequence",
        "Round",
        "Selu",
        "Sigmoid",
        "Sign",
        "Sin",
        "Softmax",
        "Softplus",
        "Softsign",
        "SpaceToDepth",
        "Sqrt",
        "Squeeze",
        "Sub",
        "Tan",
        "Tanh",
        "Tile",
        "Transpose",
        "Trilu",
        "Unsqueeze",
        "Slice",
        "ReduceMax",
        "ReduceMin",
        "ReduceSum",
        "ReduceMean",
        "ReduceProd",
        # The ops of exported networks between two ReverseSequence/SequenceMap nodes: without
        # them a value after a MatMul could only be typed by whole-model shape inference.
        "MatMul",
        "Gemm",
        "Einsum",
        "Conv",
        "ConvTranspose",
        "BatchNormalization",
        "InstanceNormalization",
        "LayerNormalization",
        "GroupNormalization",
        "MeanVarianceNormalization",
        "LpNormalization",
        "LRN",
        "MaxPool",
        "AveragePool",
        "LpPool",
        "GlobalAveragePool",
        "GlobalMaxPool",
        "GlobalLpPool",
        "Resize",
        "Split",
        "Compress",
        "ScatterND",
        "ScatterElements",
        "PRelu",
        "Celu",
        "Gelu",
        "HardSwish",
        "Mish",
        "Shrink",
        "ThresholdedRelu",
        "Hardmax",
        "Sinh",
        "Cosh",
        "Asinh",
        "Acosh",
        "Atanh",
        "Sum",
        "Mean",
        "ReduceL1",
        "ReduceL2",
        "ReduceLogSum",
        "ReduceLogSumExp",
        "ReduceSumSquare",
    ]
} | {"Where": 1, "CastLike": 1}
_BOOLEAN = frozenset(
    [
        "And",
        "Equal",
        "Greater",
        "GreaterOrEqual",
        "IsInf",
        "IsNaN",
        "Less",
        "LessOrEqual",
        "Not",
        "Or",
        "Xor",
    ]
)
_INT64 = frozenset(["ArgMax", "ArgMin", "NonZero", "Shape", "Size"])


def _rule(
    node: ir.Node,
) -> (
    ir.TypeProtocol
    | tuple[type[ir.TensorType] | type[ir.SequenceType] | None, ir.Value | None]
    | None
):
    """How the first output's type follows: a fixed type, or (wrap, input) to follow."""
    op, first = node.op_type, node.inputs[0] if node.inputs else None
    if op in _SAME_AS_INPUT:
        index = _SAME_AS_INPUT[op]
        return (None, node.inputs[index] if len(node.inputs) > index else None)
    if op in _BOOLEAN:
        return ir.TensorType(ir.DataType.BOOL)
    if op in _INT64:
        return ir.TensorType(ir.DataType.INT64)
    if op == "Cast" and "to" in node.attributes:
        return ir.TensorType(ir.DataType(node.attributes["to"].as_int()))
    if op == "Constant" and "value" in node.attributes:
        attr = node.attributes["value"]
        if not attr.is_ref() and attr.type == ir.AttributeType.TENSOR:
            return ir.TensorType(attr.value.dtype)
        return None
    if op == "SequenceEmpty":
        dtype = node.attributes.get("dtype")
        return ir.SequenceType(
            ir.TensorType(ir.DataType(dtype.as_int()) if dtype else ir.DataType.FLOAT)
        )
    if op in ("SplitToSequence", "SequenceConstruct"):
        return (ir.SequenceType, first)
    if op in ("ConcatFromSequence", "SequenceAt"):
        return (ir.TensorType, first)
    if op in ("SequenceInsert", "SequenceErase"):
        return (None, first)
    if op == "SequenceMap":  # a sequence of what the body returns (onnxscript's map)
        body = graph_attr(node, "body")
        return None if body is None or not body.outputs else (ir.SequenceType, body.outputs[0])
    return None


def _kind(type_: ir.TypeProtocol) -> tuple[str, ir.DataType | None]:
    """What call sites must agree on: sequence or tensor, and the element type."""
    return (type(type_).__name__, element_dtype(type_))


def _calls_of(model: ir.Model, function: ir.Function) -> list[ir.Node]:
    key = function.identifier()
    return [
        node
        for graph in all_graphs(model)
        for node in graph
        if (node.domain, node.op_type, node.overload) == key
    ]


def pair_values(original: ir.Graph, copy: ir.Graph) -> list[tuple[ir.Value, ir.Value]]:
    """Each value of ``original`` (its subgraphs' too) with its twin in ``copy``, a copy of it
    that shape inference went through."""
    pairs: list[tuple[ir.Value, ir.Value]] = []
    _pair_graph(original, copy, pairs)
    return pairs


def _pair_graph(original: ir.Graph, copy: ir.Graph, pairs: list[tuple[ir.Value, ir.Value]]) -> None:
    # The copy's main graph may list former initializers as extra inputs, after the real ones.
    pairs.extend(zip(original.inputs, copy.inputs, strict=False))
    pairs.extend(zip(original.outputs, copy.outputs, strict=True))
    for node, node_copy in zip(original, copy, strict=True):
        # Trailing omitted outputs ("" names, as LSTM's Y_h, Y_c) may be dropped in the copy.
        pairs.extend(zip(node.outputs, node_copy.outputs, strict=False))
        for name, attr in node.attributes.items():
            attr_copy = node_copy.attributes[name]
            if attr.is_ref():
                continue
            if attr.type == ir.AttributeType.GRAPH:
                _pair_graph(attr.as_graph(), attr_copy.as_graph(), pairs)
            elif attr.type == ir.AttributeType.GRAPHS:
                for graph, graph_copy in zip(attr.as_graphs(), attr_copy.as_graphs(), strict=True):
                    _pair_graph(graph, graph_copy, pairs)
