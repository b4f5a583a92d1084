"""An ``If`` whose branches compute alike, differing only in the scalars they read from outside,
as one copy of the branch reading ``Where(c, a, b)`` (target ``tract``).

tract 0.23.9 requires an ``If``'s branches to give outputs of equal facts, and gives each
``Range`` of a run-time length its own symbol: PyTorch's ``embedding_bag`` (max) slices the
bag's rows ``w[s:e]`` in one branch and ``w[s:n]`` in the other (the last bag), which become
the same ``Gather`` of a ``Range`` (``run-time-slices-as-gathers``) from different bounds, and
tract refuses the ``If`` ('then_body.output_fact(i) == else_body.output_fact(i)', range_1 vs
range_2; ``tests/passes/test_alike_branches_as_where.py``). Exact: the copy runs what the taken
branch runs, on what it reads (``Where`` on a scalar condition between two values of one
declared static shape and type is the taken one). Taken only then: the condition a scalar
(declared or inferred; ``scalar-if-conditions`` runs first), node for node the same ops and
attributes in both branches (no subgraphs, no initializers), branch values read at the same
places.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._ir import if_parts
from seqlower.passes._shared import inline_copy
from seqlower.passes._types import TypeOracle

__all__ = ["AlikeBranchesAsWhere"]

#: Where the branches read different outer values: (node index, input index) -> (then, else);
#: (-1, k) for the k-th branch output.
Reads = dict[tuple[int, int], tuple[ir.Value, ir.Value]]


@dataclasses.dataclass
class _Plan:
    then_branch: ir.Graph
    reads: Reads


class AlikeBranchesAsWhere(NodeLoweringPass[_Plan]):
    """Each ``If`` whose branches are the same nodes reading different scalars from outside, as
    the then branch inlined, those reads a ``Where`` on the condition."""

    op_type = "If"
    takes_all = False
    repairs = True

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        parts = if_parts(node)
        if parts is None:
            return None
        cond, then_branch, else_branch = parts
        shape = cond.shape or types.shape_of(cond)
        if shape is None or len(shape) != 0:
            return None
        if then_branch.initializers or else_branch.initializers:
            return None
        if len(then_branch) != len(else_branch) or not node.outputs:
            return None
        return _alike(then_branch, else_branch)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        cond = ctx.node.inputs[0]
        emit = ctx.into(ctx.graph, pool=None)
        chosen = {
            key: emit.Where(cond, a, b, _hint=f"{a.name}_chosen")
            for key, (a, b) in plan.reads.items()
        }
        for key, value in chosen.items():
            value.type, value.shape = plan.reads[key][0].type, plan.reads[key][0].shape
        nodes, outputs = inline_copy(ctx, plan.then_branch, [], ctx.base)
        assert len(nodes) == len(plan.then_branch)  # no initializers: node k is node k
        for (k, j), value in chosen.items():
            if k >= 0:
                nodes[k].replace_input_with(j, value)
        outputs = [chosen.get((-1, k), v) for k, v in enumerate(outputs)]
        ctx.replace(outputs, nodes=[*emit.nodes, *nodes], rename=True)


def _alike(then_branch: ir.Graph, else_branch: ir.Graph) -> _Plan | None:
    """The plan when the branches are alike node for node (see the module docstring)."""
    local: dict[int, ir.Value] = {}  # then-branch value -> its else-branch counterpart
    reads: Reads = {}
    for k, (a, b) in enumerate(zip(then_branch, else_branch, strict=True)):
        if (a.op_type, a.domain, a.overload) != (b.op_type, b.domain, b.overload):
            return None
        if len(a.inputs) != len(b.inputs) or len(a.outputs) != len(b.outputs):
            return None
        if not _same_attributes(a, b):
            return None
        for j, (x, y) in enumerate(zip(a.inputs, b.inputs, strict=True)):
            if not _pair(x, y, local, reads, (k, j)):
                return None
        for x, y in zip(a.outputs, b.outputs, strict=True):
            local[id(x)] = y
    for j, (x, y) in enumerate(zip(then_branch.outputs, else_branch.outputs, strict=True)):
        if not _pair(x, y, local, reads, (-1, j)):
            return None
    return _Plan(then_branch, reads)


def _pair(
    x: ir.Value | None,
    y: ir.Value | None,
    local: dict[int, ir.Value],
    reads: Reads,
    key: tuple[int, int],
) -> bool:
    """Whether ``x`` (then) and ``y`` (else) are read alike: counterparts, the same outer value,
    or two outer values of one declared static shape and type (recorded in ``reads``)."""
    if x is None or y is None:
        return x is y
    if id(x) in local:
        return local[id(x)] is y
    if x is y:
        return True
    if y in local.values() or x.shape is None or y.shape is None:
        return False
    static = all(isinstance(d, int) for d in x.shape)
    if not static or list(x.shape) != list(y.shape) or x.type != y.type or x.type is None:
        return False
    reads[key] = (x, y)
    return True


def _same_attributes(a: ir.Node, b: ir.Node) -> bool:
    if set(a.attributes) != set(b.attributes):
        return False
    for name, attr in a.attributes.items():
        other = b.attributes[name]
        if attr.type != other.type or attr.type in (
            ir.AttributeType.GRAPH,
            ir.AttributeType.GRAPHS,
        ):
            return False
        if attr.type == ir.AttributeType.TENSOR:
            if not np.array_equal(attr.as_tensor().numpy(), other.as_tensor().numpy()):
                return False
        elif attr.value != other.value:
            return False
    return True
