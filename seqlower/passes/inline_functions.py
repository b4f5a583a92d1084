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
from onnx_ir.passes.common import InlinePass

from seqlower._graphs import subgraphs_of
from seqlower.passes._sequences import is_onnx

__all__ = [
    "InlineFunctions",
    "InlineUntypedSequenceMapFunctions",
    "inline_untyped_sequence_map_functions",
]


class InlineFunctions(ir.passes.InPlacePass):
    """Inline every call of a model-local function (tract and OpenVINO run none:
    ``Unimplemented(body_fn)``), so the passes after it see one graph."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = len(model.functions)
        if not model.functions:
            return ir.passes.PassResult(model, modified=False)
        InlinePass()(model)
        return ir.passes.PassResult(model, modified=True)


class InlineUntypedSequenceMapFunctions(ir.passes.InPlacePass):
    """Inline every call of a model-local function holding a SequenceMap with an untyped body."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = inline_untyped_sequence_map_functions(model)
        return ir.passes.PassResult(model, modified=self.rewritten > 0)


def inline_untyped_sequence_map_functions(model: ir.Model) -> int:
    """Inline (in place) the calls of the functions that need it; how many functions that was.
    ``LowerSequenceMap`` and ``FoldSequenceOps`` (the first SequenceMap pass of each pipeline)
    do this first, so the pipelines and their reports are unchanged."""
    wanted = {key for key, function in model.functions.items() if _needs_types(function)}
    if wanted:
        InlinePass(criteria=lambda f: f.identifier() in wanted)(model)
    return len(wanted)


def _needs_types(function: ir.Function) -> bool:
    graphs: list[ir.Graph | ir.Function] = [function]
    while graphs:
        graph = graphs.pop()
        for node in graph:
            subgraphs = subgraphs_of(node)
            if is_onnx(node, "SequenceMap"):
                body = subgraphs[0] if subgraphs else None
                if body is not None and any(v.type is None for v in (*body.inputs, *body.outputs)):
                    return True
            graphs += subgraphs
    return False
