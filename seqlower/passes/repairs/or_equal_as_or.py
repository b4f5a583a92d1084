"""Write ``GreaterOrEqual``/``LessOrEqual`` as ``Or`` of the strict comparison and ``Equal``
where the runtime converts no node of that version (target ``iree``).

IREE 3.13.0's ONNX importer converts ``GreaterOrEqual`` only as defined in opset 16: at opsets
12 to 15 (``GreaterOrEqual-12``) the model fails to compile (measured: ``_iree_ops.py``).
``a >= b`` is ``Or(Greater(a, b), Equal(a, b))`` exactly, NaN included (both are false), and
likewise ``a <= b`` with ``Less``. Every type ``GreaterOrEqual-12``/``LessOrEqual-12`` takes,
``Greater``/``Less`` (9 and 13) and ``Equal`` (11 and 13) take at the same opset, so no cast is
needed; the row's check then names what is left.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._iree_ops import IREE_LACKS
from seqlower.passes._op_versions import since_version
from seqlower.passes._types import TypeOracle

__all__ = ["OrEqualAsOr"]

#: Each op, and the strict comparison it is written with.
STRICT = {"GreaterOrEqual": "Greater", "LessOrEqual": "Less"}


@dataclasses.dataclass
class _Plan:
    strict: str


class OrEqualAsOr(NodeLoweringPass[_Plan]):
    """Every ``GreaterOrEqual``/``LessOrEqual`` of a version IREE (or ``lacks``) has no
    conversion for, as ``Or`` of the strict comparison and ``Equal`` (module docstring)."""

    op_type = "GreaterOrEqual"
    op_types = frozenset(STRICT)
    takes_all = False
    repairs = True

    def __init__(
        self,
        *,
        min_opset: int | None = None,
        lacks: Mapping[str, tuple[int, ...]] | None = None,
    ) -> None:
        """``min_opset``: the row's, the opset an older model is converted up to; ``lacks``:
        op -> the since_versions the runtime converts no node of (IREE's measured table)."""
        super().__init__()
        self.min_opset = min_opset
        self.lacks = IREE_LACKS if lacks is None else lacks

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        opset = max(site.opset, self.min_opset or 0)
        if len(node.inputs) != 2 or since_version(node.op_type, opset) not in self.lacks.get(
            node.op_type, ()
        ):
            return None
        return _Plan(STRICT[node.op_type])

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node = ctx.node
        a, b = node.inputs
        op = ctx.before()
        strict = op.build(plan.strict, [a, b], {}, hint=plan.strict.lower())
        equal = op.Equal(a, b, _hint="equal")
        result = op.Or(strict, equal, _hint="or_equal")
        old = node.outputs[0]
        result.type, result.shape = old.type, old.shape
        ctx.replace([result])
