"""Inline the calls of model-local functions whose ``SequenceMap`` bodies are untyped.

onnxscript writes model-local functions with untyped parameters (ONNX's design: a function is
generic) and untyped ``SequenceMap`` bodies inside them; ONNX's shape inference does not look
inside functions, so nothing types such a body and ``SequenceMap`` cannot be lowered there (the
element type of its outputs is unknown). Inlined into the calling graph, the same nodes get their
types from the call site's values. Only functions that hold such a map (at any depth) are
inlined, through onnx_ir's ``InlinePass``; other functions, and maps whose bodies are typed, are
lowered where they are. ``LowerSequenceMap`` and ``FoldSequenceOps`` run it first.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower.passes._shared import drop_unused_imports, inline_untyped_sequence_map_functions

__all__ = ["InlineUntypedSequenceMapFunctions"]


class InlineUntypedSequenceMapFunctions(ir.passes.InPlacePass):
    """Inline every call of a model-local function holding a SequenceMap with an untyped body."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        domains = {f.domain for f in model.functions.values()}
        self.rewritten = inline_untyped_sequence_map_functions(model)
        if self.rewritten:
            drop_unused_imports(model, domains)
        return ir.passes.PassResult(model, modified=self.rewritten > 0)
