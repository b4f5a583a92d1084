"""A graph output copied by ``Identity`` from a value other nodes read, written by that value's
own producer instead (target ``onnx2tf``).

onnx2tf 2.6.9 removes the ``Identity`` in ``out = Identity(h)`` when ``h`` is read elsewhere too
(an RNN's last state, which the step after it or a scan row also reads; an unrolled loop's final
state), and the ``.tflite`` it writes then fails in LiteRT: ``Input tensor 118 lacks data``.
The same model with ``h``'s producer writing ``out`` and the other readers reading ``out`` runs.
Outputs stay named and typed as they were; an ``Identity`` of a graph input, of an initializer,
of another output or of a value computed in an enclosing graph is left.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower.passes._base import RepairPass, rewire
from seqlower.passes._ir import is_onnx

__all__ = ["OutputsWithoutIdentity"]


class OutputsWithoutIdentity(RepairPass):
    """Every main-graph output ``Identity(h)`` of a computed ``h``: ``h``'s producer writes it."""

    op_type = "Identity"

    def repair(self, model: ir.Model) -> None:
        graph = model.graph
        for k, out in enumerate(list(graph.outputs)):
            node = out.producer()
            if not is_onnx(node, "Identity"):
                continue
            source = node.inputs[0] if node.inputs else None
            producer = None if source is None else source.producer()
            if source is None or producer is None or producer.graph is not graph:
                continue
            if source.is_graph_input() or source.is_graph_output() or source.is_initializer():
                continue
            if sum(value is out for value in graph.outputs) != 1:
                continue  # listed twice: the Identity's output stays
            graph.outputs[k] = source
            rewire(out, source, graph_outputs=False)  # readers of the copy read the value
            graph.remove(node, safe=True)
            name, out.name = out.name, None
            source.name = name
            source.type = out.type or source.type
            source.shape = out.shape or source.shape
            self.rewritten += 1
