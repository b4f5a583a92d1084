"""Fast walks over every graph of a model, and the shape rules every prover shares.

onnx_ir's traversal helpers are general (and generators all the way down); these few are what
seqlower walks on every run, so they stay cheap on models of 100k nodes and more.

The shape rules (:func:`broadcast`, :func:`matmul`) are written once here, generic over what a
dimension is to the prover asking (a static size, a symbol, the outer dimensions that broadcast
to it, a graph input's axis): each prover gives only how the sizes of one axis combine. They
live beside the ONNX-domain test because both the passes and the check's input constraints read
them, and the check knows nothing of the passes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol, TypeGuard, TypeVar

import onnx
import onnx_ir as ir

__all__ = [
    "BROADCASTING",
    "ONNX_DOMAINS",
    "aligned",
    "all_graphs",
    "broadcast",
    "is_onnx",
    "iter_graph_likes",
    "matmul",
    "one_size",
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


#: Ops whose inputs broadcast multidirectionally (numpy's rule) to their output's shape (PRelu's
#: slope broadcasts one way to X, a case of it).
BROADCASTING = frozenset(
    {
        "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "And", "Or",
        "Xor", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Where", "PRelu",
        "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
    }
)  # fmt: skip

D = TypeVar("D")
R = TypeVar("R")


def aligned(ranks: Sequence[int], axis: int) -> list[tuple[int, int]]:
    """``(input, its axis)`` for each input that has output axis ``axis`` of a broadcast of
    inputs of ``ranks``: aligned on the trailing axes, an input without the axis left out."""
    rank = max(ranks, default=0)
    return [(k, axis - rank + r) for k, r in enumerate(ranks) if axis - rank + r >= 0]


def broadcast(
    shapes: Sequence[Sequence[D]], column: Callable[[list[D]], R | None]
) -> tuple[R, ...] | None:
    """Multidirectional broadcasting: each output axis is ``column`` of the inputs' dimensions
    aligned with it (in input order), None as soon as one is."""
    ranks = [len(s) for s in shapes]
    out: list[R] = []
    for axis in range(max(ranks, default=0)):
        dim = column([shapes[k][a] for k, a in aligned(ranks, axis)])
        if dim is None:
            return None
        out.append(dim)
    return tuple(out)


def one_size(dims: Iterable[D | None], one: D) -> D | None:
    """The size of dimensions that broadcast: every one not ``one`` the same (``one`` when all
    are), else None; None too where one is None (not known). Lazy: stops at the first."""
    found: D | None = None
    for dim in dims:
        if dim is None:
            return None
        if dim == one:
            continue
        if found is not None and dim != found:
            return None
        found = dim
    return one if found is None else found


def matmul(
    a: Sequence[D],
    b: Sequence[D],
    one: D,
    column: Callable[[list[D]], D | None],
    inner: Callable[[D, D], bool],
) -> tuple[D, ...] | None:
    """numpy's ``matmul`` shape (ONNX's ``MatMul``): a vector operand promoted by a ``one``
    axis and that axis dropped after, the batch axes broadcast by ``column``, the inner sizes
    equal as ``inner`` proves them."""
    if not a or not b:
        return None
    left = (one, *a) if len(a) == 1 else tuple(a)
    right = (*b, one) if len(b) == 1 else tuple(b)
    batch = broadcast([left[:-2], right[:-2]], column)
    if batch is None or not inner(left[-1], right[-2]):
        return None
    return (*batch, *(left[-2:-1] if len(a) > 1 else ()), *(right[-1:] if len(b) > 1 else ()))
