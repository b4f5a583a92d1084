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
from seqlower.passes._shared import remove_dead
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
        states_in = [body.inputs[2 + k] for k in kept]
        states_out = [body.outputs[1 + k] for k in kept]
        scans_out = [body.outputs[1 + k] for k in scans]
        head, cond = list(body.inputs[:2]), body.outputs[0]
        body.inputs.clear()
        body.inputs.extend([*head, *states_in])
        body.outputs.clear()
        body.outputs.extend([cond, *states_out, *scans_out])
        remove_dead(body)
        finals = []
        for k in [*kept, *scans]:
            final = ir.Value(name=ctx.names.fresh(f"{node.outputs[k].name or ctx.base}_loop"))
            final.type, final.shape = node.outputs[k].type, node.outputs[k].shape
            finals.append(final)
        del node.attributes["body"]
        op.Loop(
            *node.inputs[:2], *(node.inputs[2 + k] for k in kept), body=body, _outputs=finals,
            _name=node.name or ctx.names.fresh("Loop"), _doc_string=node.doc_string,
        )  # fmt: skip
        replaced: list[ir.Value | None] = [None] * len(node.outputs)
        for k, final in zip([*kept, *scans], finals, strict=True):
            replaced[k] = final
        ctx.replace(replaced, rename=True)


def _read(value: ir.Value) -> bool:
    """Whether a node or its graph's outputs read ``value``."""
    return bool(value.uses()) or value.is_graph_output()
