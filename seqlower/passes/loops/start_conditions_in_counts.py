"""A ``Loop``'s initial condition folded into its trip count (target ``iree``).

IREE 3.13.0 ignores a ``Loop``'s condition, the initial one included: a loop given
``cond = false`` runs all ``M`` iterations. A loop whose body passes its condition through runs
``M`` times when it starts true and none otherwise, so ``M`` becomes ``Where(cond, M, 0)`` and
the condition a constant true: the same iterations, in a form IREE runs right. ONNX's expanded
``Range`` (``cond = count > 0``) and loops whose first test is computed before them are of this
kind. Loops whose body computes its condition are left (``require-iree-loops`` names them).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._induction import passes_through
from seqlower.passes._ir import constant_array, graph_attr
from seqlower.passes._types import TypeOracle

__all__ = ["StartConditionsInCounts"]


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    rank: int  # the condition's rank: 0, or that of a one-element [1] (as paddle2onnx writes)


class StartConditionsInCounts(NodeLoweringPass[_Plan]):
    """Every ``Loop`` with ``M`` and a run-time initial condition its body passes through: the
    condition folded into ``M``."""

    op_type = "Loop"
    takes_all = False
    repairs = True

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        body = graph_attr(node, "body")
        if body is None or len(node.inputs) < 2 or node.inputs[0] is None:
            return None
        start = node.inputs[1]
        if start is None or constant_array(start) is not None:
            return None  # none, or a constant: nothing to fold
        if not passes_through(body.outputs[0], body.inputs[1]):
            return None
        shape = types.shape_of(start) or body.inputs[1].shape
        return _Plan(node, 0 if shape is None else shape.rank())

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node = ctx.node
        op = ctx.before()
        count, start = node.inputs[0], node.inputs[1]
        assert count is not None and start is not None
        if plan.rank:  # M stays a scalar; the body's condition keeps the shape ONNX infers
            start = op.reshape(start, op.int64s([], hint="scalar"), hint="start")
            start.type, start.shape = ir.TensorType(ir.DataType.BOOL), ir.Shape([])
        runs = op.Where(start, count, op.constant(np.zeros((), np.int64), hint="none"), _hint="M")
        runs.dtype, runs.shape = ir.DataType.INT64, count.shape
        true = op.constant(np.ones([1] * plan.rank, bool), hint="go")
        ctx.insert()
        node.replace_input_with(0, runs)
        node.replace_input_with(1, true)
