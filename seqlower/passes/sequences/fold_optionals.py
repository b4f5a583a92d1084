"""Optionals whose presence is known when lowering, folded away (sequence-free mode and the
targets that use it).

OpenVINO 2026.4.1 converts no optional op (``No conversion rule for OptionalHasElement``),
tract 0.23.9 none either (``Unimplemented(OptionalGetElement)``), and onnxruntime 1.32 has no
kernel for the opset-28 versions (``Could not find an implementation for
OptionalGetElement(28)``). Most optionals in real models say nothing the graph does not already
know: ``Optional(x)`` holds ``x``, ``Optional()`` (only a ``type``) and an omitted input hold
nothing, and since opset 18 ``OptionalHasElement``/``OptionalGetElement`` also take a plain
tensor or sequence, which is always present. So, in every scope:

- ``OptionalHasElement(v)`` of a known presence becomes the constant ``true``/``false``;
- ``OptionalGetElement(v)`` of a present value reads the value itself (``x``, or ``v`` when it
  is no optional), through an ``Identity`` where its output is a graph output.

The ``Optional`` nodes left unread go with dead-node removal. A ``OptionalGetElement`` of an
empty optional is an error when the model runs; it is left for the runtime to report.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._ir import is_onnx
from seqlower.passes._types import TypeOracle

__all__ = ["FoldOptionals"]

_OPS = ("OptionalHasElement", "OptionalGetElement")


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    opset: int
    #: ``OptionalHasElement``: whether the optional holds a value.
    present: bool | None
    #: ``OptionalGetElement``: the value it holds.
    element: ir.Value | None


class FoldOptionals(NodeLoweringPass[_Plan]):
    """``OptionalHasElement``/``OptionalGetElement`` of optionals whose presence is known."""

    op_type = "OptionalGetElement"
    op_types = frozenset(_OPS)  # the walk asks no other node (a set lookup, not a call)
    takes_all = False

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        if len(node.outputs) != 1:
            return None
        value = node.inputs[0] if node.inputs else None
        if node.op_type == "OptionalHasElement":
            present = _presence(value)
            return None if present is None else _Plan(node, site.opset, present, None)
        element = _element(value)
        return None if element is None else _Plan(node, site.opset, None, element)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        old = ctx.node.outputs[0]
        # A graph output gets a constant of its own (it takes the output's name).
        op = ctx.before(pool="own" if old.is_graph_output() else "graph")
        if plan.element is None:
            new = op.constant(np.array(plan.present), hint="present")
        elif old.is_graph_output():
            new = op.Identity(plan.element, _hint="element")
        else:
            new = plan.element
        if new.type is None:
            new.type, new.shape = old.type, old.shape
        ctx.replace([new], rename=old.is_graph_output() and new is not plan.element)


def _presence(value: ir.Value | None) -> bool | None:
    """Whether ``value`` holds something, when known while lowering."""
    if value is None:
        return False  # an omitted input is an empty optional
    producer = value.producer()
    if is_onnx(producer, "Optional") and producer is not None:
        return bool(producer.inputs) and producer.inputs[0] is not None
    if isinstance(value.type, ir.TensorType | ir.SequenceType):
        return True
    return None


def _element(value: ir.Value | None) -> ir.Value | None:
    """The value ``value`` holds, when it is known to hold one."""
    if value is None:
        return None
    producer = value.producer()
    if is_onnx(producer, "Optional") and producer is not None:
        return producer.inputs[0] if producer.inputs else None
    if isinstance(value.type, ir.TensorType | ir.SequenceType):
        return value
    return None
