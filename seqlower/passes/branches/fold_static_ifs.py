"""An ``If`` whose condition is known from declared ranks, sizes or constants, as its taken
branch (targets ``openvino``, ``tract``).

The TorchScript exporter's ``Equal(Size(Shape(x)), 1)`` around ``hstack`` and ONNX's AffineGrid
function's ``Equal(Size(size), 4)`` are known when lowering. OpenVINO and tract check both
branches, and the untaken one may be invalid for these inputs (a ``Concat(axis=1)`` of 1-D
tensors, a ``Split`` of 4 sizes in 5).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from seqlower._graphs import subgraphs_of
from seqlower.passes._base import rewire
from seqlower.passes._fold import detach
from seqlower.passes._ir import constant_array, is_onnx, model_nodes

__all__ = ["FoldStaticIfs"]


class FoldStaticIfs(ir.passes.InPlacePass):
    """Replace each ``If`` whose condition is fixed by declared ranks or constants by the nodes
    of its taken branch (innermost first)."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = 0
        for node in reversed(list(model_nodes(model))):
            if not is_onnx(node, "If") or node.graph is None:
                continue
            taken = _static_condition(node.inputs[0], model.graph)
            if taken is None:
                continue
            branch_name = "then_branch" if taken else "else_branch"
            if branch_name not in node.attributes:
                continue
            branch = node.attributes[branch_name].as_graph()
            if branch is None or len(branch.outputs) != len(node.outputs):
                continue
            _inline_branch(node, branch)
            self.rewritten += 1
        return ir.passes.PassResult(model, modified=self.rewritten > 0)


def _static_condition(cond: ir.Value | None, main: ir.Graph) -> bool | None:
    """The condition's value when constant, or ``Equal`` of a constant and a rank
    (``Size(Shape(x))``, x a main-graph input of declared rank) or a size (``Size(x)``, x a
    main-graph input of declared static shape)."""
    array = constant_array(cond)
    if array is not None:
        return bool(array.reshape(-1)[0]) if array.size == 1 else None
    producer = None if cond is None else cond.producer()
    if not is_onnx(producer, "Equal") or producer is None or len(producer.inputs) != 2:
        return None
    values = [_rank_or_constant(v, main) for v in producer.inputs]
    if any(v is None for v in values):
        return None
    return values[0] == values[1]


def _rank_or_constant(value: ir.Value | None, main: ir.Graph) -> int | None:
    array = constant_array(value)
    if array is not None:
        return int(array.reshape(-1)[0]) if array.size == 1 and array.dtype.kind in "iu" else None
    producer = None if value is None else value.producer()
    if not is_onnx(producer, "Size") or producer is None:
        return None
    counted = producer.inputs[0]
    if (
        counted is not None
        and counted.is_graph_input()
        and counted.graph is main
        and counted.shape is not None
        and counted.shape.is_static()  # ONNX's AffineGrid: Equal(Size(size), 4)
    ):
        return int(np.prod(counted.shape.numpy(), dtype=np.int64))
    shape_node = counted.producer() if counted is not None else None
    if not is_onnx(shape_node, "Shape") or shape_node is None or shape_node.attributes:
        return None
    source = shape_node.inputs[0]
    # Only a main-graph input's rank is a contract the runtime enforces (exporters' value_info
    # can be wrong, as tf2onnx's Loop outputs; a body input's declared rank too: ONNX's
    # inference does not check a Loop state's, tests/passes/test_declared_sizes.py).
    if source is None or source.shape is None or not source.is_graph_input():
        return None
    if source.graph is not main:
        return None
    return len(source.shape)


def _inline_branch(node: ir.Node, branch: ir.Graph) -> None:
    graph = node.graph
    assert graph is not None
    results = list(branch.outputs)
    branch.outputs.clear()
    moved = list(branch)
    for inner in moved:
        branch.remove(inner)
    if moved:
        graph.insert_before(node, moved)
    for old, new in zip(list(node.outputs), results, strict=True):
        if new.type is None:
            new.type = old.type
        if new.shape is None:
            new.shape = old.shape
        name = old.name
        is_output = old.is_graph_output()
        rewire(old, new)
        if is_output and new.producer() is not None:
            old.name = None
            new.name = name
    for untaken in subgraphs_of(node):  # its outer reads would keep what they read alive
        detach(untaken)
    graph.remove(node, safe=True)
