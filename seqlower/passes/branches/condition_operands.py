"""What an ``If`` condition is computed from, read in its branches as one element of a shape
known at load (target ``tract``).

tract 0.23.9 types no ``If`` branch that reads a value whose size is known only at run time
('Source node without a determined fact'; ``tests/passes/test_condition_operands.py``).
PyTorch's ``embedding_bag`` (mean) branches on ``Equal(start, end)``, ``start = offsets[i:i+1]``
(0 or 1 element, a ``Gather`` of a ``Range`` for tract), and divides by ``n - start`` inside.
An ``If`` runs only when its condition holds one element, and a condition computed by
elementwise ops holds one only when each of their operands does (a dimension 0 or above 1
broadcasts to the result), so inside the branches such an operand is read as
``Unsqueeze(Gather(Reshape(v, [-1]), Size(v)^2 - 1))``, computed before the ``If``: the same
values, a shape tract knows, and an error where the ``If`` raises one anyway. Operands of a
static shape or an unknown rank are left.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._dims import BROADCASTING
from seqlower.passes._ir import ELEMENTWISE, if_parts, is_onnx, is_static, nodes_in
from seqlower.passes._shared import one_element
from seqlower.passes._types import TypeOracle

__all__ = ["ConditionOperandsInBranches"]

_DEPTH = 16  # producers followed back from the condition, at most


@dataclasses.dataclass
class _Read:
    value: ir.Value
    type: ir.TypeProtocol | None
    rank: int
    uses: list[tuple[ir.Node, int]]  # the branch nodes reading it, and where


class ConditionOperandsInBranches(NodeLoweringPass[list[_Read]]):
    """Each ``If``'s branch reads of what its condition is computed from elementwise, of a
    size known only at run time, as their one element reshaped to their rank."""

    op_type = "If"
    takes_all = False
    repairs = True

    def plan(self, site: Site, types: TypeOracle) -> list[_Read] | None:
        parts = if_parts(site.node)
        if parts is None:
            return None
        cond, then_branch, else_branch = parts
        inside = {id(n) for b in (then_branch, else_branch) for n in nodes_in(b)}
        reads = []
        for value in _operands(cond):
            uses = [(u.node, u.idx) for u in value.uses() if id(u.node) in inside]
            shape = value.shape or types.shape_of(value)
            if uses and shape is not None and not is_static(shape):
                reads.append(_Read(value, types.type_of(value), len(shape), uses))
        return reads or None

    def rewrite(self, plan: list[_Read], ctx: Rewrite) -> None:
        op = ctx.before()
        for read in plan:
            one = one_element(op, read.value, read.type, read.value.name or "operand")
            if read.rank > 0:
                one = op.Unsqueeze(one, op.int64s(list(range(read.rank)), hint="axes"))
            if read.type is not None:
                one.type, one.shape = read.type, ir.Shape([1] * read.rank)
            for node, index in read.uses:
                node.replace_input_with(index, one)
        ctx.insert()


def _operands(cond: ir.Value) -> list[ir.Value]:
    """The values ``cond`` is computed from through elementwise ops (each holds one element
    whenever ``cond`` does), ``cond`` excluded."""
    found: list[ir.Value] = []
    frontier, seen = [cond], {id(cond)}
    for _ in range(_DEPTH):
        following = []
        for value in frontier:
            producer = value.producer()
            if not is_onnx(producer) or producer.op_type not in ELEMENTWISE | BROADCASTING:
                continue
            for operand in producer.inputs:
                if operand is not None and id(operand) not in seen:
                    seen.add(id(operand))
                    found.append(operand)
                    following.append(operand)
        frontier = following
    return found
