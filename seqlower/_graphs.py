"""Facts about a model's graphs that both the passes and the check ask, each written once.

Fast walks over every graph (onnx_ir's traversal helpers are general, and generators all the
way down; these few are what seqlower walks on every run, so they stay cheap on models of 100k
nodes and more), the ONNX-domain test, and what a node's attributes and constant inputs hold.
They live here, not in ``passes/_ir.py``, because the check's input constraints and the shape
rules (:mod:`seqlower._shape_rules`) read them too, and the check knows nothing of the passes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, TypeGuard, TypeVar

import numpy as np
import onnx
import onnx_ir as ir

__all__ = [
    "ONNX_DOMAINS",
    "all_graphs",
    "constant_array",
    "constant_shape",
    "int_attr",
    "ints_attr",
    "is_onnx",
    "iter_graph_likes",
    "model_nodes",
    "nodes_in",
    "proto_graphs",
    "subgraphs_of",
]

#: The domain names of the standard ONNX ops.
ONNX_DOMAINS = frozenset({"", "ai.onnx"})


class _NodeLike(Protocol):
    @property
    def domain(self) -> str: ...

    @property
    def op_type(self) -> str: ...


N = TypeVar("N", bound=_NodeLike)


def is_onnx(node: N | None, *op_types: str) -> TypeGuard[N]:
    """Whether ``node`` (an onnx_ir node or a NodeProto) is a standard ONNX op (one of
    ``op_types``, when any are given): the one test of ONNX's domain."""
    if node is None or node.domain not in ONNX_DOMAINS:
        return False
    return not op_types or node.op_type in op_types


def subgraphs_of(node: ir.Node) -> list[ir.Graph]:
    """The graphs held by a node's attributes (If branches, Loop/Scan/SequenceMap bodies)."""
    # ``Attributes`` is a UserDict: its backing dict is much faster to test and iterate, which
    # matters when every node of a large model is visited.
    attributes = node.attributes.data
    if not attributes:
        return []
    graphs: list[ir.Graph] = []
    for attr in attributes.values():
        if attr.is_ref():
            continue
        if attr.type == ir.AttributeType.GRAPH:
            graphs.append(attr.as_graph())
        elif attr.type == ir.AttributeType.GRAPHS:
            graphs.extend(attr.as_graphs())
    return graphs


_GRAPH, _GRAPHS = ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS


def iter_graph_likes(model: ir.Model) -> Iterator[ir.Graph | ir.Function]:
    """The main graph, then every model-local function: the scopes that own an opset import."""
    yield model.graph
    yield from model.functions.values()


def all_graphs(model: ir.Model) -> list[ir.Graph | ir.Function]:
    """Every scope of the model: main graph, functions, and all subgraphs at any depth."""
    found: list[ir.Graph | ir.Function] = []

    def add(graph: ir.Graph | ir.Function) -> None:
        found.append(graph)
        for node in graph:
            # subgraphs_of inline (a third of this walk's time, which the load, the passes
            # and the write make ~6 times a run).
            for attr in node.attributes.data.values():
                kind = attr.type
                if kind == _GRAPH and not attr.is_ref():
                    add(attr.as_graph())
                elif kind == _GRAPHS and not attr.is_ref():
                    for subgraph in attr.as_graphs():
                        add(subgraph)

    for graph_like in iter_graph_likes(model):
        add(graph_like)
    return found


def nodes_in(graph: ir.Graph | ir.Function) -> list[ir.Node]:
    """Every node of ``graph`` and of the graphs in it, each node before its subgraphs'."""
    nodes: list[ir.Node] = []
    for node in graph:
        nodes.append(node)
        if node.attributes.data:
            for subgraph in subgraphs_of(node):
                nodes += nodes_in(subgraph)
    return nodes


def model_nodes(model: ir.Model) -> Iterator[ir.Node]:
    """Every node of the model: the main graph's, then each function's, each node before the
    nodes of its subgraphs (the order of :func:`nodes_in`)."""
    for graph in iter_graph_likes(model):
        yield from nodes_in(graph)


def proto_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every graph nested in its nodes' attributes (If branches, Loop and Scan
    bodies), depth first: the walk for code that reads a ``ModelProto`` as it is."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from proto_graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from proto_graphs(sub)


def constant_array(value: ir.Value | None) -> np.ndarray | None:
    """The value's contents when fixed at lowering time: an initializer (not also a graph input,
    which a caller may override) or a ``Constant`` node's ``value`` tensor, ``value_int(s)`` or
    ``value_float(s)``."""
    if value is None:
        return None
    if value.const_value is not None and value.is_initializer() and not value.is_graph_input():
        return value.const_value.numpy()
    found = _constant_attribute(value)
    if found is None:
        return None
    name, attr = found
    if name == "value" and attr.type == ir.AttributeType.TENSOR:
        # attr.value, not as_tensor(): that one's isinstance against a Protocol costs ~200 us
        # a call, 0.8 s of a 32k-node model's lowering.
        return attr.value.numpy()
    if name == "value_int":
        return np.array(attr.as_int(), dtype=np.int64)
    if name == "value_ints":
        return np.array(list(attr.as_ints()), dtype=np.int64)
    if name == "value_float":
        return np.array(attr.as_float(), dtype=np.float32)
    if name == "value_floats":
        return np.array(list(attr.as_floats()), dtype=np.float32)
    return None


def constant_shape(value: ir.Value | None) -> tuple[int, ...] | None:
    """The shape of :func:`constant_array`'s array for a ``Constant`` node's output (None
    where it gives none), without making the array: a prover asking only for sizes pays no
    conversion of the tensor."""
    found = None if value is None else _constant_attribute(value)
    if found is None:
        return None
    name, attr = found
    if name == "value" and attr.type == ir.AttributeType.TENSOR:
        return tuple(int(d) for d in attr.value.shape.numpy())
    if name == "value_int":
        attr.as_int()  # the type checked as constant_array checks it
        return ()
    if name == "value_float":
        attr.as_float()
        return ()
    if name == "value_ints":
        return (len(attr.as_ints()),)
    if name == "value_floats":
        return (len(attr.as_floats()),)
    return None


def _constant_attribute(value: ir.Value) -> tuple[str, ir.Attr] | None:
    """The one attribute (name, attribute) of the ONNX ``Constant`` node making ``value``, None
    for any other producer or a reference: what :func:`constant_array` and
    :func:`constant_shape` both read."""
    node = value.producer()
    if node is None or node.op_type != "Constant" or node.domain not in ONNX_DOMAINS:
        return None
    if len(node.attributes) != 1:
        return None
    name, attr = next(iter(node.attributes.items()))
    return None if attr.is_ref() else (name, attr)


def int_attr(node: ir.Node, name: str, default: int | None = None) -> int | None:
    """An INT attribute's value; ``default`` when absent, None when not a plain INT."""
    attr = node.attributes.data.get(name)  # the UserDict's own get raises and catches a miss
    if attr is None:
        return default
    if attr.is_ref() or attr.type != ir.AttributeType.INT:
        return None
    return attr.as_int()


def ints_attr(node: ir.Node, name: str) -> list[int] | None:
    """An INTS attribute's values; None when absent or not a plain INTS."""
    attr = node.attributes.data.get(name)
    if attr is None or attr.is_ref() or attr.type != ir.AttributeType.INTS:
        return None
    return list(attr.as_ints())
