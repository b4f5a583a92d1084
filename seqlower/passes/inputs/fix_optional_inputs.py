"""Fix the presence of optional graph inputs (``--optional-input NAME=present|absent``).

An optional graph input's presence is the caller's, so nothing can fold the optional ops that
read it, and OpenVINO, tract and onnxruntime 1.32 (no kernel for the opset-28 optional ops)
cannot run them. When the caller knows whether it will pass the input, ``present`` makes the
input its element type (a tensor or a sequence) and the graph reads ``Optional(input)`` where it
read the optional, and ``absent`` removes it: the graph reads an empty ``Optional`` of its type
instead. ``FoldOptionals`` then folds what reads them into ``true``/``false`` and the element
itself; an ``Optional`` left (an optional graph output) stays valid. This changes what the
model takes, so it is never a default: the caller asks for it by name. The check compares the
result with the original given the same change.
"""

from __future__ import annotations

from collections.abc import Mapping

import onnx_ir as ir

from seqlower.errors import BadOptionError
from seqlower.passes._base import Scope, rewire

__all__ = ["FixOptionalInputs"]

FLAG = "--optional-input"


class FixOptionalInputs(ir.passes.InPlacePass):
    """Each named optional input becomes its element (present) or is removed (absent)."""

    def __init__(self, presence: Mapping[str, bool]) -> None:
        super().__init__()
        self.presence = dict(presence)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        inputs = {value.name: value for value in graph.inputs}
        for name in self.presence:
            value = inputs.get(name)
            if value is None or not isinstance(value.type, ir.OptionalType):
                optional = [
                    n or "" for n, v in inputs.items() if isinstance(v.type, ir.OptionalType)
                ]
                what = "no input of that name" if value is None else "that input is not optional"
                raise BadOptionError(
                    f"{FLAG} {name}: {what} (optional inputs: {', '.join(optional) or 'none'})"
                )
        if not self.presence:
            return ir.passes.PassResult(model, modified=False)
        scope = Scope.of(model)
        opset = model.opset_imports.get("", 1)
        optionals: list[ir.Node] = []
        new_inputs: list[ir.Value] = []
        for value in list(graph.inputs):
            present = self.presence.get(value.name or "")
            if present is None:
                new_inputs.append(value)
                continue
            assert isinstance(value.type, ir.OptionalType)
            name = value.name or ""
            if present and value.is_graph_output():
                raise BadOptionError(
                    f"{FLAG} {name}=present: the input is also a graph output, which would need "
                    "two names; leave it optional"
                )
            output = value.is_graph_output()
            value.name = None
            element = ir.Value(name=name, type=value.type.elem_type, shape=value.shape)
            op = scope.emitter(graph, name or "optional", opset, pool=None)
            if present:
                held = op.Optional(element, _hint="present")
            else:
                kind = ir.AttrTypeProto("type", ir.TypeAndShape(element.type, element.shape))
                held = op.Optional(type=kind, _hint="absent")
            held.type, held.shape = value.type, value.shape
            optionals.extend(op.nodes)
            rewire(value, held)
            if present:
                new_inputs.append(element)
            if output:  # the graph output keeps its name
                held.name = name
        graph.inputs.clear()
        graph.inputs.extend(new_inputs)
        if optionals:
            if len(graph) > 0:
                graph.insert_before(graph[0], optionals)
            else:
                graph.extend(optionals)
        return ir.passes.PassResult(model, modified=True)
