"""Exporters' symbolic dimension names dropped inside the model (target ``tract``).

The exporter's symbolic dimension names (``unk__1392``, ``s27``, ``la``) in subgraph inputs
and outputs and in ``value_info`` are claims tract tries to unify with what it infers, and fails
(``Impossible to unify Sym(unk__1392) with Val(4)``); they are forgotten (the dimension stays
unknown, its rank kept). The main graph's inputs and outputs, the model's interface, keep their
names.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower._graphs import subgraphs_of
from seqlower.passes._ir import strip_symbolic

__all__ = ["StripSymbolicDims"]


class StripSymbolicDims(ir.passes.InPlacePass):
    """Forget symbolic dimension names everywhere but on the main graph's inputs and outputs."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = 0
        interface = {id(v) for v in (*model.graph.inputs, *model.graph.outputs)}
        graphs: list[ir.Graph | ir.Function] = [model.graph, *model.functions.values()]
        while graphs:
            graph = graphs.pop()
            values = [*graph.inputs, *graph.outputs]
            for node in graph:
                values += node.outputs
                graphs += subgraphs_of(node)
            for value in values:
                if id(value) not in interface and strip_symbolic(value):
                    self.rewritten += 1
        return ir.passes.PassResult(model, modified=self.rewritten > 0)
