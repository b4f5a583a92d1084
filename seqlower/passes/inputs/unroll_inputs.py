"""Replace sequence graph inputs by a fixed number of tensor inputs (``--unroll-input NAME=K``).

A model that takes a sequence cannot be sequence-free without a new interface: runtimes with no
sequences cannot even be handed one. When the caller knows how many elements it will pass, the
input ``NAME`` becomes ``K`` tensor inputs ``NAME_0``..``NAME_{K-1}`` (in its place, with its
element type and shape) and the graph reads ``SequenceConstruct(NAME_0, ..., NAME_{K-1})``
where it read ``NAME``; the sequence-free passes then fold that away. This changes what the model
takes, so it is never a default: the caller asks for it by name. The numerical check compares the
result with the original given the same change (the original then gets the K tensors as its
sequence).
"""

from __future__ import annotations

from collections.abc import Mapping

import onnx_ir as ir

from seqlower.errors import BadOptionError
from seqlower.passes._base import Scope, rewire

__all__ = ["UnrollInputs"]


class UnrollInputs(ir.passes.InPlacePass):
    """Replace each named sequence input by ``K`` tensor inputs (module docstring)."""

    def __init__(self, counts: Mapping[str, int]) -> None:
        super().__init__()
        self.counts = dict(counts)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        inputs = {value.name: value for value in graph.inputs}
        for name, count in self.counts.items():
            value = inputs.get(name)
            if value is None:
                known = ", ".join(n for n in inputs if n) or "none"
                raise BadOptionError(
                    f"--unroll-input {name}: the model has no input of that name (inputs: {known})"
                )
            if not isinstance(value.type, ir.SequenceType):
                raise BadOptionError(f"--unroll-input {name}: that input is not a sequence")
            if count < 1:
                raise BadOptionError(f"--unroll-input {name}={count}: K must be at least 1")
        if not self.counts:
            return ir.passes.PassResult(model, modified=False)
        scope = Scope.of(model)
        names = scope.names
        constructs: list[ir.Node] = []
        new_inputs: list[ir.Value] = []
        for value in list(graph.inputs):
            if (value.name or "") not in self.counts:
                new_inputs.append(value)
                continue
            count = self.counts[value.name or ""]
            assert isinstance(value.type, ir.SequenceType)
            element = value.type.elem_type
            tensors = []
            for k in range(count):
                tensor_name = f"{value.name}_{k}"
                if tensor_name in names:
                    raise BadOptionError(
                        f"--unroll-input {value.name}: the model already has a value named "
                        f"'{tensor_name}'"
                    )
                tensors.append(ir.Value(name=tensor_name, type=element, shape=value.shape))
            sequence = ir.Value(name=names.fresh(f"{value.name}_sequence"), type=value.type)
            opset = model.opset_imports.get("", 1)
            emit = scope.emitter(graph, value.name or "", opset, pool=None)
            emit.SequenceConstruct(*tensors, _outputs=[sequence])
            constructs.extend(emit.nodes)
            rewire(value, sequence)
            new_inputs.extend(tensors)
        graph.inputs.clear()
        graph.inputs.extend(new_inputs)
        if len(graph) > 0:
            graph.insert_before(graph[0], constructs)
        else:
            graph.extend(constructs)
        return ir.passes.PassResult(model, modified=True)
