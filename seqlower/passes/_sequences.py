"""What the sequence-free passes share: constants, sequence ops, and why a node stays.

A pass that leaves a sequence op in place records why on the node (:func:`block`), so the final
check (:class:`~seqlower.passes.sequence_free.require_sequence_free.RequireSequenceFree`)
can name the reason rather than only the node.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from seqlower.errors import describe_node

__all__ = [
    "BLOCKED_KEY",
    "SEQUENCE_OPS",
    "block",
    "constant_array",
    "constant_int",
    "is_onnx",
    "origin",
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

#: ``node.meta`` key: why a sequence-free pass left the node (meta is never serialized).
BLOCKED_KEY = "seqlower.sequence_free.blocked"


def is_onnx(node: ir.Node | None, *op_types: str) -> bool:
    return node is not None and node.domain in ("", "ai.onnx") and node.op_type in op_types


def block(node: ir.Node, reason: str) -> None:
    """Record why ``node`` stays (the last pass to try it has the last word)."""
    node.meta[BLOCKED_KEY] = reason


def constant_array(value: ir.Value | None) -> np.ndarray | None:
    """The value's contents when fixed at lowering time: an initializer (not also a graph input,
    which a caller may override) or a ``Constant`` node's tensor or ints."""
    if value is None:
        return None
    if value.const_value is not None and value.is_initializer() and not value.is_graph_input():
        return value.const_value.numpy()
    node = value.producer()
    if not is_onnx(node, "Constant") or node is None or len(node.attributes) != 1:
        return None
    name, attr = next(iter(node.attributes.items()))
    if attr.is_ref():
        return None
    if name == "value" and attr.type == ir.AttributeType.TENSOR:
        return attr.value.numpy()  # not as_tensor(): its Protocol isinstance costs ~200 us
    if name == "value_int":
        return np.array(attr.as_int(), dtype=np.int64)
    if name == "value_ints":
        return np.array(list(attr.as_ints()), dtype=np.int64)
    return None


def constant_int(value: ir.Value | None) -> int | None:
    """The value as one integer, when it is a constant integer scalar or 1-element tensor."""
    array = constant_array(value)
    if array is None or array.size != 1 or array.dtype.kind not in "iu":
        return None
    return int(array.reshape(()))


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
