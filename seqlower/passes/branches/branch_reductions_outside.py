"""A float reduction an ``If`` branch computes from values of the enclosing graph whose size is
known only at run time, computed before the ``If`` (target ``tract``).

tract 0.23.9 types no ``If`` branch that reads a value whose size is known only at run time
('Source node without a determined fact'; ``tests/passes/test_branch_reductions_outside.py``).
PyTorch's ``embedding_bag`` (mean) gathers the bag's rows (a ``Gather`` of a ``Range`` for
tract) and reduces them in a nested ``If``'s branches: ``ReduceSum`` in one, ``ReduceMean`` in
the other. Computed before the ``If``, the branches read their results, whose shape tract
knows ([1, 3], declared: tract infers no reduction's shape from an input of run-time size,
even along the reduced axis). Exact: a float reduction over constant axes cannot fail (an
empty axis gives the reduction's identity, NaN for a mean), so computing the untaken one too
changes nothing but the work done. Only reductions whose inputs all come from outside the
branch and one of them of a shape not static are moved.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._ir import (
    FLOAT_TYPES,
    REDUCTIONS,
    graph_attr,
    is_onnx,
    is_static,
    reduced_dims,
    reduction_axes,
)
from seqlower.passes._types import TypeOracle

__all__ = ["BranchReductionsOutside"]


#: The nodes to move, each with its branch and its result's type and shape (None: unknown).
Moves = list[tuple[ir.Node, ir.Graph, ir.TypeProtocol | None, ir.Shape | None]]


class BranchReductionsOutside(NodeLoweringPass[Moves]):
    """Each ``If`` branch's float reductions of outer values of run-time size, moved before
    the ``If``."""

    op_type = "If"
    takes_all = False
    repairs = True

    def plan(self, site: Site, types: TypeOracle) -> Moves | None:
        moved = []
        for name in ("then_branch", "else_branch"):
            branch = graph_attr(site.node, name)
            if branch is None:
                return None
            made = {id(v) for node in branch for v in node.outputs}
            for node in branch:
                if _movable(node, made, types):
                    type_ = types.type_of(node.inputs[0])  # type: ignore[arg-type]
                    moved.append((node, branch, type_, _reduced_shape(node, types)))
        return moved or None

    def rewrite(self, plan: Moves, ctx: Rewrite) -> None:
        for node, branch, type_, shape in plan:
            branch.remove(node)
            result = node.outputs[0]
            if type_ is not None and shape is not None:  # tract infers none: declared
                result.type, result.shape = type_, shape
            if result in branch.outputs:  # a graph's output is made in it: an Identity
                inside = ctx.into(branch, pool=None)
                kept = inside.Identity(result, _hint=f"{result.name}_out")
                kept.type, kept.shape = result.type, result.shape
                branch.extend(inside.nodes)
                outputs = [kept if v is result else v for v in branch.outputs]
                branch.outputs.clear()
                branch.outputs.extend(outputs)
        ctx.insert([move[0] for move in plan])


def _movable(node: ir.Node, made: set[int], types: TypeOracle) -> bool:
    """Whether ``node`` is a float reduction over constant axes of values from outside its
    branch (``made``: what the branch computes), one of a shape not static."""
    if not is_onnx(node, *REDUCTIONS) or not node.inputs:
        return False
    data = node.inputs[0]
    if data is None or any(v is not None and id(v) in made for v in node.inputs):
        return False
    if reduction_axes(node) is None:
        return False  # axes not known when lowering
    dtype = types.type_of(data)
    if dtype is None or dtype.dtype not in FLOAT_TYPES:
        return False
    return not is_static(data.shape or types.shape_of(data))


def _reduced_shape(node: ir.Node, types: TypeOracle) -> ir.Shape | None:
    """The reduction's result shape from its input's rank and other dimensions (the reduced
    axes 1, or dropped without ``keepdims``); None when the rank is unknown."""
    data = node.inputs[0]
    shape = None if data is None else data.shape or types.shape_of(data)
    if shape is None:
        return None
    dims = reduced_dims(node, list(shape), 1)
    return None if dims is None else ir.Shape(dims)
