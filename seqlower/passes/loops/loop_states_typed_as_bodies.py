"""Every ``Loop`` state typed one way at its three ends: its initial value, the body's state and
what the body passes on, and the result (target ``iree``).

IREE 3.13.0's importer types a ``Loop`` state as its body input declares it, and an initial
value, a body output and a result as ONNX's shape inference finds them; when they differ
(``[2, 3]`` for a state the body declares ``[?, 3]``, because its size changes between
iterations or the body was typed for any batch) it fails to compile ('unresolved
materialization', 'should match successor input type'). The state's type becomes the sizes the
three agree on; an initial value or body output known to have a size the state leaves unknown is
reshaped to itself through a ``Where`` (which ONNX's data propagation does not read), and a
result declared with such a size is reshaped back to it after the loop: the same values, each
end typed alike. A result declared with no shape is typed as the state: ONNX's shape inference
gives a state's result none, and IREE's importer converts no ``Transpose`` of such a value
('onnx.Transpose not converted': tf2onnx's ``bidirectional_dynamic_rnn`` at fixed shapes).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import onnx_ir as ir

from seqlower._graphs import all_graphs, proto_graphs
from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import graph_attr
from seqlower.passes._op_versions import convert_version
from seqlower.passes._types import TypeOracle

__all__ = ["LoopStatesTypedAsBodies"]

Sizes = list[int | None]


@dataclasses.dataclass
class _Plan:
    body: ir.Graph
    #: State index -> the sizes its ends agree on (None: unknown), and whether its initial
    #: value and the body's output are typed otherwise, for the states whose ends differ.
    states: dict[int, tuple[Sizes, bool, bool]]


class LoopStatesTypedAsBodies(NodeLoweringPass[_Plan]):
    """Every ``Loop`` whose states are typed apart at their ends, each typed by the sizes they
    agree on (module docstring)."""

    op_type = "Loop"
    takes_all = False
    repairs = True

    def __init__(self, *, min_opset: int | None = None) -> None:
        super().__init__()
        #: The opset the row converts an older model to after lowering: what the importer
        #: infers shapes at (an opset-11 Expand is [?, ?] there, [?, 2] at 13).
        self.min_opset = min_opset

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        # What IREE's importer sees: ONNX's shape inference with data propagation, run as it
        # runs it, at the opset it is given (the rules here may prove less, or more).
        self._inferred = _inferred_shapes(model, self.min_opset) if _has_loop(model) else {}
        try:
            return super().call(model)
        finally:
            self._inferred = {}

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        body = graph_attr(node, "body")
        if body is None or site.opset < 9 or len(body.outputs) != len(node.outputs) + 1:
            return None  # scan outputs: IREE converts no such Loop
        states: dict[int, tuple[Sizes, bool, bool]] = {}
        for k, state in enumerate(body.inputs[2:]):
            declared = _sizes(state.shape)
            initial, passed = node.inputs[2 + k], body.outputs[1 + k]
            if declared is None or initial is None:
                continue  # IREE types a state of no declared shape rank 0 whatever is done
            seen = [self._inferred.get(v.name or "") for v in (initial, passed)]
            # an end of another rank (a state whose rank changes) cannot be reshaped to it
            seen = [s if s is not None and len(s) == len(declared) else None for s in seen]
            shapes = [declared, *(s for s in seen if s is not None)]
            agreed = [col[0] if len(set(col)) == 1 else None for col in zip(*shapes, strict=True)]
            retype = [s is not None and s != agreed for s in seen]
            # ONNX's inference gives a state's result no shape, which IREE cannot convert a
            # Transpose of: typed as the state
            untyped = node.outputs[k].shape is None
            if any(retype) or agreed != declared or untyped:
                states[k] = (agreed, retype[0], retype[1] and passed is not state)
        return _Plan(body, states) if states else None

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, body, names = ctx.node, plan.body, ctx.names
        op, inside = ctx.before(), ctx.into(body, pool="own")
        inputs = list(node.inputs)
        finals = [ir.Value(name=names.fresh(f"{v.name or ctx.base}_loop")) for v in node.outputs]
        for new, old in zip(finals, node.outputs, strict=True):
            new.type, new.shape = old.type, old.shape
        for k, (agreed, initial, passed) in plan.states.items():
            state = body.inputs[2 + k]
            state.shape = ir.Shape(agreed)
            if initial:
                inputs[2 + k] = _typed(op, inputs[2 + k], agreed, state.type)
            if passed:
                body.outputs[1 + k] = _typed(inside, body.outputs[1 + k], agreed, state.type)
            finals[k].type, finals[k].shape = finals[k].type or state.type, state.shape
        body.extend(inside.nodes)
        del node.attributes["body"]
        op.Loop(
            *inputs, body=body, _outputs=list(finals),
            _name=node.name or names.fresh("Loop"), _doc_string=node.doc_string,
        )  # fmt: skip
        for k in plan.states:
            declared = node.outputs[k].shape
            if declared is not None and any(isinstance(d, int) for d in declared):
                sizes = [d if isinstance(d, int) else 0 for d in declared]  # 0: as it is
                finals[k] = op.Reshape(finals[k], op.int64s(sizes, hint="sizes"), _hint="result")
                finals[k].type, finals[k].shape = node.outputs[k].type, declared
        ctx.replace(finals, rename=True)


def _sizes(shape: ir.Shape | None) -> Sizes | None:
    return None if shape is None else [d if isinstance(d, int) else None for d in shape]


def _has_loop(model: ir.Model) -> bool:
    return any(node.op_type == "Loop" for graph in all_graphs(model) for node in graph)


def _inferred_shapes(model: ir.Model, opset: int | None) -> dict[str, Sizes]:
    """Every value's sizes as ONNX's shape inference with data propagation finds them (what
    IREE's importer runs), by name, in every scope, on the model converted to ``opset`` when
    older (names are kept)."""
    try:
        proto = ir.to_proto(model)
        if opset is not None and model.opset_imports.get("", opset) < opset:
            proto = convert_version(proto, opset)
        inferred = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    except Exception:
        return {}
    found: dict[str, Sizes] = {}
    for graph in proto_graphs(inferred.graph):
        for info in [*graph.value_info, *graph.input, *graph.output]:
            tensor = info.type.tensor_type
            if info.type.HasField("tensor_type") and tensor.HasField("shape"):
                dims = tensor.shape.dim
                found[info.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    return found


def _typed(
    emit: Emitter, value: ir.Value | None, agreed: Sizes, type_: ir.TypeProtocol | None
) -> ir.Value:
    """``value`` reshaped to itself, the sizes ``agreed`` leaves unknown read through a
    ``Where`` (so ONNX's shape inference does not know them)."""
    assert value is not None
    sizes = emit.Shape(value, _hint="sizes")
    hidden = emit.Where(emit.constant(np.array(True), hint="always"), sizes, sizes, _hint="sizes")
    parts = [
        emit.int64s([d], hint="size")
        if d is not None
        else emit.slice(hidden, k, k + 1, 0, hint="size")
        for k, d in enumerate(agreed)
    ]
    shape = emit.Concat(*parts, axis=0, _hint="shape") if len(parts) > 1 else parts[0]
    retyped = emit.Reshape(value, shape, _hint="typed")
    retyped.type, retyped.shape = type_ or value.type, ir.Shape(agreed)
    return retyped
