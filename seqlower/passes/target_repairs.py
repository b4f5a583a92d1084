"""Small repairs a target runtime needs on ops seqlower did not write (tract, mostly).

- :class:`ExplicitConstantOfShapeValue`: a ``ConstantOfShape`` without ``value`` means float32
  zeros in ONNX; tract reads F64 there (PyTorch's scan exports and tf2onnx's ``zeros_like`` write
  it so), so the value is written out: ``[0.0]`` as float32.
- :class:`StripSymbolicDims`: the exporter's symbolic dimension names (``unk__1392``, ``s27``,
  ``la``) in subgraph inputs and outputs and in ``value_info`` are claims tract tries to unify
  with what it infers, and fails (``Impossible to unify Sym(unk__1392) with Val(4)``); they are
  forgotten (the dimension stays unknown, its rank kept). The main graph's inputs and outputs,
  the model's interface, keep their names.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from seqlower._graphs import subgraphs_of
from seqlower.passes._sequences import is_onnx

__all__ = ["ExplicitConstantOfShapeValue", "StripSymbolicDims"]


class ExplicitConstantOfShapeValue(ir.passes.InPlacePass):
    """Give every ``ConstantOfShape`` without ``value`` its default, float32 zero, explicitly."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = 0
        for node in _all_nodes(model):
            if is_onnx(node, "ConstantOfShape") and "value" not in node.attributes:
                zero = ir.Tensor(np.zeros((1,), dtype=np.float32), name="value")
                node.attributes["value"] = ir.AttrTensor("value", zero)
                self.rewritten += 1
        return ir.passes.PassResult(model, modified=self.rewritten > 0)


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
                if id(value) not in interface and _strip(value):
                    self.rewritten += 1
        return ir.passes.PassResult(model, modified=self.rewritten > 0)


def _strip(value: ir.Value) -> bool:
    shape = value.shape
    if shape is None or not any(isinstance(d, ir.SymbolicDim) for d in shape):
        return False
    value.shape = ir.Shape([d if isinstance(d, int) else None for d in shape])
    return True


def _all_nodes(model: ir.Model) -> list[ir.Node]:
    nodes: list[ir.Node] = []
    graphs: list[ir.Graph | ir.Function] = [model.graph, *model.functions.values()]
    while graphs:
        graph = graphs.pop()
        for node in graph:
            nodes.append(node)
            graphs += subgraphs_of(node)
    return nodes
