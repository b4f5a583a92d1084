"""An ``If`` whose branches cannot fail and agree in shape as a ``Where`` (target ``onnx2tf``).

onnx2tf 2.6.9 writes an ``If`` as both branches and a ``Where`` itself (its "generic branch
mux"), but lowers the branch nodes without the enclosing graph's constants: a ``ReduceSum``
whose axes the branch reads from outside becomes an ``ONNX_REDUCESUM`` custom op, a constant
moved into the branch a tensor LiteRT has no data for ("Input tensor N lacks data"); what is
left is an ``ONNX_IF`` custom op or a failed conversion. PyTorch's ``embedding_bag`` writes an
``If`` per bag (an empty bag's zeros, else the reduced rows), one per bag once its ``Loop`` is
unrolled. The same ``Where`` written in the graph runs.

Evaluating both branches is exact only when the untaken one cannot fail and both give one
shape: every branch node is an op that cannot fail on the shapes it gets (a constant, an
elementwise op, a ``Slice`` with constant axes and steps, a float reduction over constant
axes: onnxruntime reduces an empty slice to its identity, a ``Reshape`` of static shapes), with
no subgraph, and each output's shape is static and the same in both branches (traced through
those ops, values read from outside too). The row runs it twice: an ``If`` whose branch held an
``If`` (``embedding_bag``'s mean divides by a positive size) is taken once that one is. Any
other ``If`` is left (onnx2tf's ``ONNX_IF``, refused by the proof at load). The condition, one
element of any shape, is reshaped to a scalar so ``Where`` keeps the branches' rank.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import cast

import numpy as np
import onnx_ir as ir

from seqlower._graphs import subgraphs_of
from seqlower._shape_rules import STATIC, broadcast, infer, slice_size
from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._fold import detach
from seqlower.passes._ir import (
    BROADCASTING_CANNOT_FAIL,
    CANNOT_FAIL,
    FLOAT_TYPES,
    REDUCTIONS,
    constant_array,
    graph_attr,
    if_parts,
    is_onnx,
)
from seqlower.passes._shared import inline_copy
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["IfAsWhere"]

Dims = tuple[int | None, ...]


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    opset: int
    scalar_cond: bool  # the condition is declared rank 0 already
    shapes: list[tuple[int, ...]]  # each output's, the same in both branches


class IfAsWhere(NodeLoweringPass[_Plan]):
    """Every ``If`` whose branches cannot fail and give outputs of one static shape, as both
    branches inlined and a ``Where`` per output."""

    op_type = "If"
    takes_all = False
    repairs = True

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        parts = if_parts(node)
        if parts is None or not node.outputs:
            return None
        cond, then_branch, else_branch = parts
        shapes = [_branch_shapes(b, types) for b in (then_branch, else_branch)]
        if shapes[0] is None or shapes[0] != shapes[1]:
            return None
        for a, b in zip(then_branch.outputs, else_branch.outputs, strict=True):
            dtype = element_dtype(types.type_of(a))
            if dtype is None or dtype != element_dtype(types.type_of(b)):
                return None
            if not isinstance(types.type_of(a), ir.TensorType):
                return None
        shape = cond.shape or types.shape_of(cond)
        return _Plan(node, site.opset, shape is not None and shape.rank() == 0, shapes[0])

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, base = ctx.node, ctx.base
        cond = node.inputs[0]
        assert cond is not None
        op = ctx.before()
        if not plan.scalar_cond:  # one element of any shape: Where would broadcast its rank
            cond = op.Reshape(cond, op.constant(np.zeros(0, np.int64), hint="scalar"))
        branches = [graph_attr(node, "then_branch"), graph_attr(node, "else_branch")]
        copies: list[ir.Node] = []
        results = []
        for branch, label in zip(branches, ("then", "else"), strict=True):
            assert branch is not None
            nodes, outputs = inline_copy(ctx, branch, [], f"{base}_{label}")
            copies += nodes
            results.append(outputs)
        chosen: list[ir.Value] = []
        for old, a, b in zip(node.outputs, *results, strict=True):
            where = op.Where(cond, a, b, _hint="chosen")
            where.type, where.shape = old.type or a.type, ir.Shape(plan.shapes[len(chosen)])
            chosen.append(where)
        ctx.replace(chosen, rename=True, nodes=copies)
        for branch in branches:
            if branch is not None:  # its outer reads would keep what they read alive
                detach(branch)


def _branch_shapes(branch: ir.Graph, types: TypeOracle) -> list[tuple[int, ...]] | None:
    """Each output's static shape, when every node of ``branch`` cannot fail and each output's
    shape is static (traced from the shapes read from outside); else None."""
    known: dict[int, Dims | None] = {}

    def apply(node: ir.Node, depth: int) -> object:
        rule = _RULES.get(node.op_type)
        if rule is None or len(node.outputs) != 1 or not is_onnx(node):
            return _FAILS
        floats = all(
            element_dtype(types.type_of(v)) in FLOAT_TYPES for v in node.inputs[:1] if v is not None
        )
        return rule(node, [dims(v, depth + 1) for v in node.inputs], floats)

    def dims(value: ir.Value | None, depth: int = 0) -> Dims | None:
        """The value's dimensions: traced, declared, or (read from outside) traced through
        the rules too, a declared static dimension winning over an unknown traced one."""
        if value is None:
            return None
        if id(value) in known:
            return known[id(value)]
        array = constant_array(value)
        if array is not None:
            return tuple(array.shape)
        shape = value.shape or types.shape_of(value)
        declared = (
            None if shape is None else tuple(d if isinstance(d, int) else None for d in shape)
        )
        producer = value.producer()
        if producer is None or depth > 16:
            return declared
        traced = apply(producer, depth)
        if not isinstance(traced, tuple):
            return declared
        if declared is not None and len(declared) == len(traced):
            traced = tuple(a if a is not None else b for a, b in zip(traced, declared, strict=True))
        known[id(value)] = traced
        return traced

    for node in branch:
        if subgraphs_of(node):
            return None
        result = apply(node, 0)
        if result is _FAILS:
            return None
        known[id(node.outputs[0])] = result  # type: ignore[assignment]
    shapes = []
    for output in branch.outputs:
        shape = dims(output)
        if shape is None or any(d is None for d in shape):
            return None
        shapes.append(tuple(int(d) for d in shape))  # type: ignore[arg-type]
    return shapes


#: What a rule returns for a node that could fail.
_FAILS = object()
Rule = Callable[[ir.Node, list["Dims | None"], bool], object]


def _unary(node: ir.Node, shapes: list[Dims | None], floats: bool) -> object:
    return shapes[0] if node.inputs else _FAILS


def _constant(node: ir.Node, shapes: list[Dims | None], floats: bool) -> object:
    array = constant_array(node.outputs[0])
    return _FAILS if array is None else tuple(array.shape)


def _binary(node: ir.Node, shapes: list[Dims | None], floats: bool) -> object:
    if node.op_type == "Div" and not floats:
        return _FAILS  # an integer division by zero
    if not shapes or any(s is None or None in s for s in shapes):
        return _FAILS  # unknown sizes may not broadcast
    found = broadcast(cast("list[tuple[int, ...]]", shapes), STATIC)
    return _FAILS if found is None else found


def _slice(node: ir.Node, shapes: list[Dims | None], floats: bool) -> object:
    data, starts, ends = (shapes + [None] * 3)[:3]
    if data is None or starts is None or ends is None or len(starts) != 1 or starts != ends:
        return _FAILS
    count = starts[0]
    axes_in = node.inputs[3] if len(node.inputs) > 3 else None
    steps_in = node.inputs[4] if len(node.inputs) > 4 else None
    axes = list(range(count or 0)) if axes_in is None else constant_array(axes_in)
    steps = None if steps_in is None else constant_array(steps_in)
    if count is None or axes is None or len(axes) != count:
        return _FAILS
    if steps_in is not None and steps is None:
        return _FAILS
    rank = len(data)
    normal = [int(a) + rank if int(a) < 0 else int(a) for a in axes]
    if any(not 0 <= a < rank for a in normal) or len(set(normal)) != len(normal):
        return _FAILS
    if steps is not None and (len(steps) != count or not np.all(steps != 0)):
        return _FAILS
    bounds = [constant_array(v) for v in node.inputs[1:3]]
    out = list(data)
    for k, axis in enumerate(normal):
        size = data[axis]
        if size is None or bounds[0] is None or bounds[1] is None:
            out[axis] = None
            continue
        step = 1 if steps is None else int(steps[k])
        out[axis] = slice_size(size, int(bounds[0][k]), int(bounds[1][k]), step)
    return tuple(out)


def _reduce(node: ir.Node, shapes: list[Dims | None], floats: bool) -> object:
    data = shapes[0] if shapes else None
    if data is None or not floats:
        return _FAILS
    dims = infer(node, [cast("tuple[int, ...]", data)], STATIC)
    # axes or keepdims not known when lowering (a function's reference: every axis, or keepdims
    # 0, before)
    return _FAILS if dims is None else dims


def _reshape(node: ir.Node, shapes: list[Dims | None], floats: bool) -> object:
    data = shapes[0] if shapes else None
    if data is None or None in data:
        return _FAILS  # an element count that may not match
    found = infer(node, cast("list[tuple[int, ...] | None]", shapes), STATIC)
    return _FAILS if found is None else found


def _static(dim: object) -> int | None:
    return dim if isinstance(dim, int) else None


_RULES: dict[str, Rule] = {
    "Constant": _constant,
    "Reshape": _reshape,
    "Slice": _slice,
    **dict.fromkeys(CANNOT_FAIL, _unary),
    **dict.fromkeys(BROADCASTING_CANNOT_FAIL, _binary),
    **dict.fromkeys(REDUCTIONS, _reduce),
}
