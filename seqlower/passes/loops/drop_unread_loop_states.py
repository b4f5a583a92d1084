"""``Loop`` states nothing reads dropped (target ``iree``).

A state that neither the body nor anything after the loop reads changes no output: its initial
value, its body input and output and its result go, and the body's nodes that only computed it.
paddle2onnx writes such placeholders (its greedy decode carries one that starts a scalar ``0``
and that the body passes on as a ``[1, 4]``), and IREE 3.13.0 compiles no ``Loop`` state whose
rank changes ('should match successor input type'), read or not.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._ir import loop_body
from seqlower.passes._shared import loop_finals, narrow_loop_body, narrowed_loop
from seqlower.passes._types import TypeOracle

__all__ = ["DropUnreadLoopStates"]


@dataclasses.dataclass
class _Plan:
    body: ir.Graph
    dropped: set[int]  # the states (0: the first after the condition) nothing reads


class DropUnreadLoopStates(NodeLoweringPass[_Plan]):
    """Every ``Loop`` with states nothing reads, rebuilt without them (module docstring)."""

    op_type = "Loop"
    takes_all = False
    repairs = True

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        body = loop_body(node)
        count = len(node.inputs) - 2
        if body is None or count <= 0:
            return None
        dropped = {
            k for k in range(count) if not _read(body.inputs[2 + k]) and not _read(node.outputs[k])
        }
        return _Plan(body, dropped) if dropped else None

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, body, op = ctx.node, plan.body, ctx.before()
        kept = [k for k in range(len(node.inputs) - 2) if k not in plan.dropped]
        scans = range(len(kept) + len(plan.dropped), len(node.outputs))
        narrow_loop_body(body, kept, scans)
        finals = loop_finals(ctx, [*kept, *scans])
        replaced = narrowed_loop(ctx, op, body, kept, scans, finals)
        ctx.replace(replaced, rename=True)


def _read(value: ir.Value) -> bool:
    """Whether a node or its graph's outputs read ``value``."""
    return bool(value.uses()) or value.is_graph_output()
