"""An ``If`` whose then branch returns a constant, swapped or made a ``Where`` (target ``tract``).

tract 0.23.9 gives an ``If``'s output the *then* branch's fact, constant value included, so an
``If`` whose then branch returns a constant is folded to it (``Add(If(c, zeros, x), ...)`` reads
zeros whatever ``c``; in a ``Scan`` body it then drops the scanned input: 'No scan input'). Such
an ``If`` becomes ``If(Not(c))`` with its branches swapped, when the else branch returns no
constant; when both return only constants, of the same shapes and types, ``Where(c, then,
else)`` per output replaces it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._ir import constant_array
from seqlower.passes._types import TypeOracle

__all__ = ["VariableThenBranches"]


class VariableThenBranches(NodeLoweringPass["_IfPlan"]):
    """Swap the branches of each ``If`` whose then branch returns a constant, negating the
    condition, or make it a ``Where`` when both return constants (tract folds the If to the
    then constant)."""

    op_type = "If"
    takes_all = False
    repairs = True

    def plan(self, site: Site, types: TypeOracle) -> _IfPlan | None:
        node = site.node
        then_attr = node.attributes.get("then_branch")
        else_attr = node.attributes.get("else_branch")
        if then_attr is None or else_attr is None or then_attr.is_ref() or else_attr.is_ref():
            return None
        then_branch, else_branch = then_attr.as_graph(), else_attr.as_graph()
        if then_branch is None or else_branch is None or node.inputs[0] is None:
            return None
        then_values = [constant_array(v) for v in then_branch.outputs]
        else_values = [constant_array(v) for v in else_branch.outputs]
        if all(v is None for v in then_values):
            return None
        if all(v is None for v in else_values):
            return _IfPlan(site, None)
        alike = [
            (a, b)
            for a, b in zip(then_values, else_values, strict=True)
            if a is not None and b is not None and a.shape == b.shape and a.dtype == b.dtype
        ]
        if len(alike) == len(then_values):
            return _IfPlan(site, alike)
        return None  # constants on both sides, unlike: swapped, tract would fold the other

    def rewrite(self, plan: _IfPlan, ctx: Rewrite) -> None:
        node = ctx.node
        cond = node.inputs[0]
        assert cond is not None
        op = ctx.before()
        if plan.constants is not None:
            chosen = []
            for old, (a, b) in zip(node.outputs, plan.constants, strict=True):
                where = op.Where(
                    cond, op.constant(a, hint="then"), op.constant(b, hint="else"), _hint="chosen"
                )
                where.type, where.shape = old.type, old.shape
                chosen.append(where)
            ctx.replace(chosen, rename=True)
            return
        negated = op.Not(cond, _hint="not_cond")
        ctx.insert()
        node.replace_input_with(0, negated)
        then_branch = node.attributes["then_branch"].as_graph()
        else_branch = node.attributes["else_branch"].as_graph()
        node.attributes["then_branch"] = ir.AttrGraph("then_branch", else_branch)
        node.attributes["else_branch"] = ir.AttrGraph("else_branch", then_branch)


@dataclasses.dataclass
class _IfPlan:
    site: Site
    #: Each output's (then, else) constants when both branches return only constants (a
    #: ``Where`` per output), else None (the branches swapped).
    constants: list[tuple[np.ndarray, np.ndarray]] | None
