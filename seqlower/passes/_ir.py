"""Facts about the IR that every pass asks, each written once.

What a value holds when lowering (:func:`constant_array`), a node's attributes, a value's
rank, whether a node is a standard ONNX op, the graphs a node holds, every node of a model, and
why a pass left a node (:func:`block`, read back by the ``require-*`` checks). This module only
reads the IR (it changes nothing but ``node.meta``) and imports no pass, no ``Emitter``, no
``NodeLoweringPass``: the kit (``_base.py``, ``_emit.py``), ``_dims.py``, ``_types.py`` and the
summary all build on it.
"""

from __future__ import annotations

from typing import TypeGuard

import onnx_ir as ir

from seqlower._graphs import (
    ONNX_DOMAINS,
    all_graphs,
    constant_array,
    int_attr,
    ints_attr,
    is_onnx,
    model_nodes,
    nodes_in,
    subgraphs_of,
)
from seqlower._shape_rules import (
    ELEMENTWISE,
    REDUCTIONS,
    SAME_SHAPE,
    reduced_axes,
    reduced_dims,
    reduction_axes,
)
from seqlower.errors import describe_node

__all__ = [
    "BLOCKED_KEY",
    "BROADCASTING_CANNOT_FAIL",
    "CANNOT_FAIL",
    "ELEMENTWISE",
    "FLOAT_TYPES",
    "NO_LOOP",
    "ONNX_DOMAINS",
    "RECURRENT_OPS",
    "REDUCTIONS",
    "SAME_SHAPE",
    "SEQUENCE_FREE",
    "SEQUENCE_OPS",
    "all_graphs",
    "block",
    "blocked",
    "constant_array",
    "constant_int",
    "graph_attr",
    "int_attr",
    "ints_attr",
    "is_onnx",
    "loop_body",
    "model_nodes",
    "nodes_in",
    "onnx_producer",
    "origin",
    "rank_of",
    "reduced_axes",
    "reduced_dims",
    "reduction_axes",
    "runtime_source",
    "scans_in_scans",
    "static_dim",
    "strip_symbolic",
    "subgraphs_of",
]


#: The ops a sequence-free model may not contain.
SEQUENCE_OPS = frozenset(
    {
        "SequenceMap",
        "SequenceConstruct",
        "SequenceEmpty",
        "SequenceAt",
        "SequenceInsert",
        "SequenceErase",
        "SequenceLength",
        "SplitToSequence",
        "ConcatFromSequence",
    }
)

#: Unary ops that cannot fail on any input of their types, keeping its shape (what ``If``
#: branches and a loop's first iteration are proven safe with).
CANNOT_FAIL = frozenset(
    {"Identity", "Neg", "Abs", "Relu", "Exp", "Log", "Sqrt", "Tanh", "Sigmoid", "Cast",
     "Not", "Floor", "Ceil", "Sign", "Erf", "Sin", "Cos", "Softplus", "IsNaN", "IsInf"}
)  # fmt: skip
#: Broadcasting ops that cannot fail once their inputs' shapes broadcast (``Div`` on floats).
BROADCASTING_CANNOT_FAIL = frozenset(
    {"Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Less", "LessOrEqual", "Greater",
     "GreaterOrEqual", "And", "Or", "Xor", "Where"}
)  # fmt: skip
#: The recurrent ops (``X`` of ``[seq, batch, input]``, or batch first with ``layout=1``).
RECURRENT_OPS = frozenset({"RNN", "GRU", "LSTM"})
#: The float element types those proofs cover.
FLOAT_TYPES = frozenset({ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16})
#: ``node.meta`` key prefix: why a pass left the node (meta is never serialized), one record per
#: check that names what stays, so a reason for one check never reads as the other's.
BLOCKED_KEY = "seqlower.blocked"
#: The checks a reason is for: ``require-sequence-free`` (a sequence op or value stays),
#: ``require-no-loop`` (a ``Loop`` stays)...
SEQUENCE_FREE = "require-sequence-free"
NO_LOOP = "require-no-loop"
#: ... and the converter checks (``require-onnx2torch-ops``): an op a pass could have written
#: in ops the converter has stays.
CONVERTER_OPS = "require-converter-ops"


def onnx_producer(value: ir.Value) -> ir.Node | None:
    """The standard ONNX node that produces ``value`` (None for inputs and custom ops)."""
    node = value.producer()
    return node if node is not None and node.domain in ONNX_DOMAINS else None


def block(node: ir.Node, reason: str, check: str = SEQUENCE_FREE) -> None:
    """Record why ``node`` stays, for ``check`` to name (the last pass to try it has the last
    word)."""
    node.meta[f"{BLOCKED_KEY}.{check}"] = reason


def blocked(node: ir.Node, check: str = SEQUENCE_FREE) -> str | None:
    """Why a pass left ``node``, if one said so for ``check`` (:func:`block`)."""
    reason = node.meta.get(f"{BLOCKED_KEY}.{check}")
    return str(reason) if reason else None


def constant_int(value: ir.Value | None) -> int | None:
    """The value as one integer, when it is a constant integer scalar or 1-element tensor."""
    array = constant_array(value)
    if array is None or array.size != 1 or array.dtype.kind not in "iu":
        return None
    return int(array.reshape(()))


def graph_attr(node: ir.Node, name: str) -> ir.Graph | None:
    """The graph a GRAPH attribute holds (a body, a branch); None when absent, a reference to
    a function's attribute, or not a graph."""
    attr = node.attributes.data.get(name)
    if attr is None or attr.is_ref() or attr.type != ir.AttributeType.GRAPH:
        return None
    return attr.as_graph()


def if_parts(node: ir.Node) -> tuple[ir.Value, ir.Graph, ir.Graph] | None:
    """An ``If``'s condition, then branch and else branch; None when one of them is missing
    (or a branch is not a plain graph, see :func:`graph_attr`)."""
    cond = node.inputs[0] if node.inputs else None
    then_branch, else_branch = graph_attr(node, "then_branch"), graph_attr(node, "else_branch")
    if cond is None or then_branch is None or else_branch is None:
        return None
    return cond, then_branch, else_branch


def is_static(shape: ir.Shape | None) -> TypeGuard[ir.Shape]:
    """Whether ``shape`` is declared with every dimension a number (no symbol, no unknown)."""
    return shape is not None and all(isinstance(d, int) for d in shape)


def rank_of(value: ir.Value) -> int | None:
    """The declared rank (None when the shape is not declared)."""
    return None if value.shape is None else len(value.shape)


def static_dim(shape: ir.Shape | None, axis: int) -> int | None:
    """Dimension ``axis`` of ``shape`` when it is a number (None for a symbol, an unknown or
    an axis the shape does not have)."""
    if shape is None or not 0 <= axis < len(shape):
        return None
    dim = shape[axis]
    return dim if isinstance(dim, int) else None


def strip_symbolic(value: ir.Value) -> bool:
    """Forget the symbolic names in ``value``'s shape (unknown dimensions stay unknown);
    whether anything was forgotten."""
    shape = value.shape
    if shape is None or not any(isinstance(d, ir.SymbolicDim) for d in shape):
        return False
    value.shape = ir.Shape([d if isinstance(d, int) else None for d in shape])
    return True


def loop_body(node: ir.Node) -> ir.Graph | None:
    """A ``Loop``'s body when its interface agrees with the node's: the iteration number, the
    condition and one input per state; the condition and one output per state, then the scan
    outputs."""
    body = graph_attr(node, "body")
    carried = len(node.inputs) - 2
    if body is None or carried < 0 or len(body.inputs) != carried + 2:
        return None
    return body if len(body.outputs) >= carried + 1 else None


def scans_in_scans(model: ir.Model) -> list[ir.Node]:
    """Every ``Scan`` inside the body of another ``Scan`` (at any depth, through ``If``s)."""
    return [
        inner
        for node in model_nodes(model)
        if is_onnx(node, "Scan")
        for body in subgraphs_of(node)
        for inner in nodes_in(body)
        if is_onnx(inner, "Scan")
    ]


def origin(value: ir.Value) -> str:
    """Where a value comes from, for messages: a graph input, an initializer or a node."""
    producer = value.producer()
    if producer is not None:
        return describe_node(producer)
    if value.is_graph_input():
        graph = value.graph
        scope = f" of graph '{graph.name}'" if graph is not None and graph.name else ""
        return f"an input{scope}"
    if value.is_initializer():
        return "an initializer"
    return "an outer scope"


#: Ops whose output is known at load time whatever their inputs hold.
_LOAD_TIME = frozenset({"Shape", "Size", "Constant"})
#: Ops whose output is known at load time when every input is.
_LOAD_TIME_IF_INPUTS = frozenset(
    {
        "Abs", "Add", "And", "Cast", "CastLike", "Ceil", "Clip", "Concat", "ConstantOfShape",
        "Div", "Equal", "Expand", "Flatten", "Floor", "Gather", "Greater", "GreaterOrEqual",
        "Identity", "Less", "LessOrEqual", "Max", "Min", "Mod", "Mul", "Neg", "Not", "Or",
        "Range", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSum", "Reshape", "Slice",
        "Squeeze", "Sub", "Tile", "Unsqueeze", "Where",
    }
)  # fmt: skip


def runtime_source(value: ir.Value, memo: dict[int, ir.Value | None]) -> ir.Value | None:
    """A value known only at run time that ``value`` is computed from, or None when it is
    known at load time (constants, shapes and arithmetic on them: what tract 0.23.9 can type a
    ``Slice`` bound by). ``memo`` carries the answers across calls of one walk."""
    stack = [value]
    while stack:
        top = stack[-1]
        if id(top) in memo:
            stack.pop()
            continue
        producer = top.producer()
        if top.const_value is not None or (producer is not None and producer.op_type in _LOAD_TIME):
            memo[id(top)] = None
            stack.pop()
            continue
        if producer is None or producer.op_type not in _LOAD_TIME_IF_INPUTS:
            memo[id(top)] = top
            stack.pop()
            continue
        inputs = [i for i in producer.inputs if i is not None]
        pending = [i for i in inputs if id(i) not in memo]
        if pending:
            stack.extend(pending)
            continue
        memo[id(top)] = next((memo[id(i)] for i in inputs if memo[id(i)] is not None), None)
        stack.pop()
    return memo[id(value)]
