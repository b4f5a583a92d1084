"""Check that onnx2tf can write every ``Loop`` and ``Scan`` left as TFLite ops, naming each one
it would write as a custom op LiteRT cannot run (the last step of the ``onnx2tf`` target).

onnx2tf 2.6.9 writes a ``Loop`` as TFLite ops in three forms only (``_validate_loop`` in its
``op_registry.py``): unrolled when its trip count and condition are constants, a ``WHILE`` when
it carries states alone, or a three-node ``Range``-like loop; any other becomes the custom op
``ONNX_LOOP``, and every ``Scan`` ``ONNX_SCAN``, which LiteRT refuses at load. The row's passes
give each ``Loop`` an explicit count (``explicit-loop-counts``), unroll those of a constant one
and turn the scan outputs of a bounded count into states (``scan-outputs-as-states``); what
remains is a ``Loop`` with scan outputs whose count has no constant bound (at dynamic input
shapes, every tf2onnx ``while_loop`` over the time axis) or whose rows have a run-time shape,
and a ``Scan`` whose count is not a constant. No existing pass applies to them under proof:
unrolling and preallocated rows need the bound, a ``Scan`` is a custom op too, and a state grown
by ``Concat`` cannot be reshaped by XNNPACK inside a ``WHILE``. Fixing the input shapes
(``--overwrite-input-shape``) makes those counts constants. This pass raises
:class:`~seqlower.errors.TargetError` naming them before the check (which would otherwise fail,
exit 1, on LiteRT's refusal) and changes nothing.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower.errors import TargetError, describe_node
from seqlower.passes._ir import constant_array, graph_attr, is_onnx, model_nodes

__all__ = ["RequireOnnx2TfLoops"]


class RequireOnnx2TfLoops(ir.passes.InPlacePass):
    """Raise TargetError naming every ``Loop`` onnx2tf writes as ``ONNX_LOOP`` and every
    ``Scan`` (``ONNX_SCAN``)."""

    target = "onnx2tf 2.6.9"

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        blockers = []
        for node in model_nodes(model):
            if is_onnx(node, "Scan"):
                blockers.append(
                    f"{describe_node(node)} remains: onnx2tf writes every Scan as the custom op "
                    "ONNX_SCAN, which LiteRT cannot run (a Scan of a constant count up to 256 is "
                    "unrolled)"
                )
            elif is_onnx(node, "Loop") and _custom_loop(node):
                blockers.append(
                    f"{describe_node(node)} remains with scan outputs and a trip count that is "
                    "not a constant: onnx2tf writes it as the custom op ONNX_LOOP, which LiteRT "
                    "cannot run (it writes a Loop as TFLite ops only unrolled, of a constant "
                    "count, or as a WHILE of states alone; scan outputs become states only where "
                    "a constant bounds the count and their rows are static)"
                )
        if blockers:
            raise TargetError(self.target, blockers)
        return ir.passes.PassResult(model, modified=False)


def _custom_loop(node: ir.Node) -> bool:
    """Whether onnx2tf 2.6.9 writes ``node`` as ``ONNX_LOOP``: scan outputs, a count that is not
    a constant, and not its three-node ``Range`` pattern (left to the proof)."""
    body = graph_attr(node, "body")
    states = len(node.inputs) - 2
    if body is None or states < 0 or len(node.outputs) <= states:
        return False  # states alone: a WHILE
    if node.inputs and constant_array(node.inputs[0]) is not None:
        return False  # a constant count: unrolled (by onnx2tf past 256)
    return not (states == 1 and len(node.outputs) == 2 and len(body) == 3)
