"""Run batch-major ``RNN``/``GRU``/``LSTM`` (``layout=1``) time-major, between ``Transpose``s
(targets ``onnxruntime``, ``openvino``).

ONNX's opset-14 ``layout=1`` puts the batch first: ``X`` is ``[batch, seq, input]``, the initial
and final states ``[batch, directions, hidden]``, ``Y`` ``[batch, seq, directions, hidden]``.
onnxruntime 1.32 refuses it at load ('Batchwise recurrent operations (layout == 1) are not
supported'); OpenVINO 2026.4.1 loads it and returns wrong numbers (ONNX's
``test_{gru,lstm,simple_rnn}_batchwise``). With ``layout=0`` the same op computes the same
numbers on the time-major tensors, so ``X`` and the initial states are transposed in and the
outputs transposed back: ``Y`` from ``[seq, directions, batch, hidden]`` by ``[2, 0, 1, 3]``, the
states from ``[directions, batch, hidden]`` by ``[1, 0, 2]``.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._ir import RECURRENT_OPS, int_attr
from seqlower.passes._types import TypeOracle

__all__ = ["TimeMajorRecurrences"]

#: Input positions holding ``[batch, directions, hidden]`` states (``initial_h``, ``initial_c``).
_STATE_INPUTS = (5, 6)
#: Each output's permutation from the time-major form back to the batch-major one.
_OUTPUT_PERMS = ([2, 0, 1, 3], [1, 0, 2], [1, 0, 2])  # Y, Y_h, Y_c


class TimeMajorRecurrences(NodeLoweringPass[ir.Node]):
    """Every ``RNN``/``GRU``/``LSTM`` with ``layout=1`` as the ``layout=0`` op between
    ``Transpose``s (module docstring)."""

    op_type = "RNN"
    op_types = RECURRENT_OPS
    takes_all = False
    repairs = True

    def plan(self, site: Site, types: TypeOracle) -> ir.Node | None:
        node = site.node
        if not int_attr(node, "layout", 0) or not node.inputs or node.inputs[0] is None:
            return None
        return node

    def rewrite(self, plan: ir.Node, ctx: Rewrite) -> None:
        node, op = ctx.node, ctx.before()
        inputs = list(node.inputs)
        inputs[0] = op.Transpose(inputs[0], perm=[1, 0, 2], _hint="time_major_x")
        for k in _STATE_INPUTS:
            if k < len(inputs) and inputs[k] is not None:
                inputs[k] = op.Transpose(inputs[k], perm=[1, 0, 2], _hint="time_major_state")
        attributes = {name: attr for name, attr in node.attributes.items() if name != "layout"}
        time_major = [
            ir.Value(name=ctx.names.fresh(f"{ctx.base}_time_major_{k}"))
            for k in range(len(node.outputs))
        ]
        op.build(node.op_type, inputs, attributes, outputs=time_major, name=node.name)
        back = ctx.after()
        results: list[ir.Value | None] = []
        for old, new, perm in zip(node.outputs, time_major, _OUTPUT_PERMS, strict=False):
            if not old.uses() and not old.is_graph_output():
                results.append(None)
                continue
            result = back.Transpose(new, perm=perm, _hint="batch_major")
            result.type, result.shape = old.type, old.shape  # a graph output keeps its type
            results.append(result)
        ctx.replace(results)
