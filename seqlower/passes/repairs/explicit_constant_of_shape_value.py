"""The default value of ``ConstantOfShape`` written out (target ``tract``).

A ``ConstantOfShape`` without ``value`` means float32 zeros in ONNX; tract reads F64 there
(PyTorch's scan exports and tf2onnx's ``zeros_like`` write it so), so the value is written out:
``[0.0]`` as float32.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from seqlower.passes._ir import is_onnx, model_nodes

__all__ = ["ExplicitConstantOfShapeValue"]


class ExplicitConstantOfShapeValue(ir.passes.InPlacePass):
    """Give every ``ConstantOfShape`` without ``value`` its default, float32 zero, explicitly."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = 0
        for node in model_nodes(model):
            if is_onnx(node, "ConstantOfShape") and "value" not in node.attributes:
                zero = ir.Tensor(np.zeros((1,), dtype=np.float32), name="value")
                node.attributes["value"] = ir.AttrTensor("value", zero)
                self.rewritten += 1
        return ir.passes.PassResult(model, modified=self.rewritten > 0)
