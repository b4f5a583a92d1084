"""Inline the calls of model-local functions whose ``SequenceMap`` bodies are untyped.

onnxscript writes model-local functions with untyped parameters (ONNX's design: a function is
generic) and untyped ``SequenceMap`` bodies inside them; ONNX's shape inference does not look
inside functions, so nothing types such a body and ``SequenceMap`` cannot be lowered there (the
element type of its outputs is unknown). Inlined into the calling graph, the same nodes get their
types from the call site's values. Only functions that hold such a map (at any depth) are
inlined, through onnx_ir's ``InlinePass``; other functions, and maps whose bodies are typed, are
lowered where they are. ``LowerSequenceMap`` and ``FoldSequenceOps`` run it first.

A function's domain no node calls any more leaves the model's opset imports with its functions:
tinygrad 0.14 refuses to load a model importing a domain it does not know, used or not
(``'this' is not a valid Domain``).
"""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.passes.common import InlinePass

from seqlower.passes._shared import inline_untyped_sequence_map_functions

__all__ = ["InlineFunctions", "InlineUntypedSequenceMapFunctions"]


class InlineFunctions(ir.passes.InPlacePass):
    """Inline every call of a model-local function (tract and OpenVINO run none:
    ``Unimplemented(body_fn)``), so the passes after it see one graph."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = len(model.functions)
        if not model.functions:
            return ir.passes.PassResult(model, modified=False)
        domains = {f.domain for f in model.functions.values()}
        InlinePass()(model)
        _drop_unused_imports(model, domains)
        return ir.passes.PassResult(model, modified=True)


class InlineUntypedSequenceMapFunctions(ir.passes.InPlacePass):
    """Inline every call of a model-local function holding a SequenceMap with an untyped body."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        domains = {f.domain for f in model.functions.values()}
        self.rewritten = inline_untyped_sequence_map_functions(model)
        if self.rewritten:
            _drop_unused_imports(model, domains)
        return ir.passes.PassResult(model, modified=self.rewritten > 0)


def _drop_unused_imports(model: ir.Model, domains: set[str]) -> None:
    """The imports of ``domains`` (inlined functions' own) that no node or function uses."""
    used = {f.domain for f in model.functions.values()}
    used.update(node.domain for node in ir.traversal.RecursiveGraphIterator(model.graph))
    for function in model.functions.values():
        used.update(node.domain for node in ir.traversal.RecursiveGraphIterator(function))
    for domain in domains - used - {"", "ai.onnx"}:
        model.opset_imports.pop(domain, None)
