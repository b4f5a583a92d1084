"""Fast walks over every graph of a model.

onnx_ir's traversal helpers are general (and generators all the way down); these few are what
seqlower walks on every run, so they stay cheap on models of 100k nodes and more.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, TypeGuard, TypeVar

import onnx
import onnx_ir as ir

__all__ = [
    "ONNX_DOMAINS",
    "all_graphs",
    "is_onnx",
    "iter_graph_likes",
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
            for subgraph in subgraphs_of(node):
                add(subgraph)

    for graph_like in iter_graph_likes(model):
        add(graph_like)
    return found


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
