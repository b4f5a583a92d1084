"""Fold the whole model again once the lowering is done, when the input shapes were fixed.

The passes after :class:`~seqlower.passes.inputs.fix_input_shapes.FixInputShapes` make shape
arithmetic of their own (an unrolled loop's ``Shape`` of a state, a ``ReverseSequence``
index), constant at fixed shapes; converters that cannot compute on shape values (TVM's
``Sub cannot handle ShapeExpr inputs``) get constants. Runs only with
``--overwrite-input-shape``.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower.passes._base import model_names
from seqlower.passes._fold import fold_model

__all__ = ["FoldStaticShapes"]


class FoldStaticShapes(ir.passes.InPlacePass):
    """Fold every scope with onnxscript's folder (module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.rewritten = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = fold_model(model, model_names(model))
        return ir.passes.PassResult(model, modified=bool(self.rewritten))
