"""Write ``CastLike`` as ``Cast`` where the type it casts to is known (target ``onnx2torch``).

onnx2torch 1.5.15 has no converter for ``CastLike`` (opset 15), which the ONNX function bodies
of ``Gelu``, ``Mish``, ``GroupNormalization`` and others are written with, and onnxscript's
exports too. ``CastLike(x, like)`` is ``Cast(x, to=T)`` for the element type T of ``like``; a
node whose ``like`` has no known element type is left for the target's check to name.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower._graphs import all_graphs
from seqlower.passes._base import RepairPass
from seqlower.passes._ir import is_onnx
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["CastLikeAsCast"]


class CastLikeAsCast(RepairPass):
    """Every ``CastLike`` whose target type is known becomes a ``Cast`` (module docstring)."""

    op_type = "CastLike"

    def repair(self, model: ir.Model) -> None:
        types = TypeOracle(model)
        found = [
            node
            for graph in all_graphs(model)
            for node in graph
            if is_onnx(node, "CastLike") and len(node.inputs) == 2
        ]
        planned = []
        for node in found:
            like = node.inputs[1]
            dtype = None if like is None else element_dtype(types.type_of(like))
            if dtype is not None:
                planned.append((node, dtype))
        for node, dtype in planned:
            saturate = node.attributes.get("saturate")
            node.op_type = "Cast"
            node.resize_inputs(1)
            node.attributes["to"] = ir.AttrInt64("to", dtype.value)
            if saturate is not None and not saturate.is_ref() and saturate.as_int() == 1:
                del node.attributes["saturate"]  # Cast's default; absent before opset 19
            self.rewritten += 1
