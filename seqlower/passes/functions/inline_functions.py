"""Inline every call of a model-local function (targets ``openvino``, ``tract``, ``tinygrad``).

tract and OpenVINO run no model-local function (``Unimplemented(body_fn)``), tinygrad 0.14 none
either; inlined through onnx_ir's ``InlinePass``, the passes after it see one graph.

A function's domain no node calls any more leaves the model's opset imports with its functions:
tinygrad 0.14 refuses to load a model importing a domain it does not know, used or not
(``'this' is not a valid Domain``).
"""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.passes.common import InlinePass

from seqlower.passes._shared import drop_unused_imports

__all__ = ["InlineFunctions"]


class InlineFunctions(ir.passes.InPlacePass):
    """Inline every call of a model-local function (tract and OpenVINO run none:
    ``Unimplemented(body_fn)``), so the passes after it see one graph."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = len(model.functions)
        if not model.functions:
            return ir.passes.PassResult(model, modified=False)
        domains = {f.domain for f in model.functions.values()}
        InlinePass()(model)
        drop_unused_imports(model, domains)
        return ir.passes.PassResult(model, modified=True)
