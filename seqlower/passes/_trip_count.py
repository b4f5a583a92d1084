"""A Loop's or Scan's count when it is made of constants (and of static shapes) when lowering.

What a trip count *is* (a Loop's counters and the bounds its condition puts on them) is the
induction analysis' (:mod:`seqlower.passes._induction`); this evaluates the values it and the
unrolling passes compute, where they are fixed when lowering.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import onnx_ir as ir

from seqlower.passes._ir import constant_array, int_attr, is_onnx, is_static

__all__ = ["UNROLL_LIMIT", "evaluate"]


#: Iterations a Scan of constant count is unrolled up to (``unroll-constant-scans``); past this
#: the model grows more than a converter wants.
UNROLL_LIMIT = 256
_EXPRESSION_LIMIT = 64  # nodes of the constant expression evaluated for the trip count


def evaluate(
    value: ir.Value, opset: int, shapes: Callable[[ir.Value], ir.Shape | None] | None = None
) -> np.ndarray | None:
    """``value`` computed by onnx's reference evaluator, when it depends on constants only
    (Constant nodes and initializers that are not graph inputs), through a few nodes; a
    ``Shape`` of a value whose shape is declared static, or static in ``shapes``, is a
    constant."""
    constant = constant_array(value)
    if constant is not None:
        return constant
    nodes: list[ir.Node] = []
    leaves: dict[str, np.ndarray] = {}
    pending, seen = [value], {id(value)}
    while pending:
        current = pending.pop()
        known = constant_array(current)
        if known is not None and current.name:
            leaves[current.name] = known
            continue
        producer = current.producer()
        shape = _static_shape_of(producer, shapes)
        if shape is not None and current.name:
            leaves[current.name] = shape  # Shape of a value whose shape is declared static
            continue
        if producer is None or producer.graph is not value.graph or current.is_graph_input():
            return None  # a graph input, a body input, or an outer-scope value
        if not is_onnx(producer) or any(
            a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
            for a in producer.attributes.values()
        ):
            return None
        if len(nodes) >= _EXPRESSION_LIMIT:
            return None
        nodes.append(producer)
        for source in producer.inputs:
            if source is not None and id(source) not in seen:
                seen.add(id(source))
                pending.append(source)
    graph = value.graph
    assert graph is not None
    order = {id(node): k for k, node in enumerate(graph)}
    nodes.sort(key=lambda n: order.get(id(n), 0))
    protos = [ir.serde.serialize_node(node) for node in nodes]
    model = onnx.helper.make_model(
        onnx.helper.make_graph(
            protos,
            "trip_count",
            [],
            [onnx.helper.make_value_info(value.name or "", onnx.TypeProto())],
            [onnx.numpy_helper.from_array(array, name) for name, array in leaves.items()],
        ),
        opset_imports=[onnx.helper.make_opsetid("", opset)],
    )
    try:
        from onnx.reference import ReferenceEvaluator

        (result,) = ReferenceEvaluator(model).run(None, {})
    except Exception:  # the expression is not one the evaluator runs: leave the Scan
        return None
    return np.asarray(result)


def _static_shape_of(
    node: ir.Node | None, shapes: Callable[[ir.Value], ir.Shape | None] | None = None
) -> np.ndarray | None:
    """What a ``Shape`` node gives when its input's shape is declared static (the second layer
    of a stacked RNN over a fixed length reads its length so)."""
    if not is_onnx(node, "Shape"):
        return None
    source = node.inputs[0] if node.inputs else None
    shape = None if source is None else source.shape
    if source is not None and shapes is not None and not is_static(shape):
        shape = shapes(source)
    if shape is None or not is_static(shape):
        return None
    dims = np.array([int(d) for d in shape], dtype=np.int64)  # type: ignore[arg-type]
    first, last = int_attr(node, "start", 0), int_attr(node, "end", len(dims))
    if first is None or last is None:
        return None
    return dims[first:last]
