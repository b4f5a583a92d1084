"""A main-graph output of rank 0 written by a ``ReduceMax`` over its one element (target
``onnx2tf``).

onnx2tf 2.6.9 gives a rank-0 output the shape ``[1]`` when a ``Squeeze``, ``Gather`` or
comparison computes it (LiteRT then returns ``[1]`` where ONNX says ``[]``), yet keeps rank 0
for a reduction with ``keepdims = 0``. So the value is reshaped to ``[1]`` and reduced by
``ReduceMax<keepdims = 0>``: the maximum of one element is that element, bit for bit (NaN and
-0.0 included), for every type ``ReduceMax`` takes; a bool goes through int32 and back. The
output keeps its name and type. An output that is a graph input or an initializer, or of a
type ``ReduceMax`` lacks (int16, uint16, strings), is left.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import RepairPass, Scope

__all__ = ["ScalarOutputs"]

#: The element types ``ReduceMax`` takes (opset 13 on), bool through int32.
_TAKEN = {
    ir.DataType.FLOAT,
    ir.DataType.DOUBLE,
    ir.DataType.FLOAT16,
    ir.DataType.BFLOAT16,
    ir.DataType.INT32,
    ir.DataType.INT64,
    ir.DataType.UINT32,
    ir.DataType.UINT64,
    ir.DataType.INT8,
    ir.DataType.UINT8,
    ir.DataType.BOOL,
}


class ScalarOutputs(RepairPass):
    """Every computed rank-0 main-graph output as ``ReduceMax<keepdims=0>`` of it as ``[1]``."""

    op_type = "ReduceMax"

    def repair(self, model: ir.Model) -> None:
        graph = model.graph
        scope = Scope.of(model)
        opset = model.opset_imports.get("", 1)
        if opset < 13:
            return
        done: dict[int, ir.Value] = {}
        for k, out in enumerate(list(graph.outputs)):
            if id(out) in done:
                graph.outputs[k] = done[id(out)]
                continue
            type_ = out.type
            if out.shape is None or out.shape.rank() != 0 or not isinstance(type_, ir.TensorType):
                continue
            if type_.dtype not in _TAKEN or out.producer() is None or out.is_initializer():
                continue
            emit = scope.emitter(graph, out.name or "output", opset, pool=None)
            flat = emit.Reshape(out, emit.constant(np.array([1], np.int64), hint="one"))
            if type_.dtype == ir.DataType.BOOL:
                flat = emit.Cast(flat, to=ir.DataType.INT32.value)
            result = emit.ReduceMax(flat, keepdims=0, _hint="scalar")
            if type_.dtype == ir.DataType.BOOL:
                result = emit.Cast(result, to=ir.DataType.BOOL.value)
            graph.extend(emit.nodes)
            name = out.name
            out.name = scope.names.fresh(f"{name}_value")
            result.name, result.type, result.shape = name, type_, ir.Shape([])
            graph.outputs[k] = result
            done[id(out)] = result
            self.rewritten += 1
