"""An ``If`` condition of a shape not known when lowering read as a scalar (target ``tract``).

tract 0.23.9 types an ``If`` only when its condition is known to hold one element when the model
is loaded (``inputs[0].shape.volume() == 1``); PyTorch's ``embedding_bag`` tests
``Equal(offsets[i:i+1], offsets[i+1:i+2])``, whose length (0 or 1) run-time slices make known
only at run time. A ``Reshape`` to ``[]`` is refused there too ('Reshape volume mismatch'), so
the condition becomes ``Gather(Reshape(c, [-1]), Size(c) * Size(c) - 1)``: a scalar, the one
element when ``c`` holds one, and an out-of-range index (an error, as the ``If`` itself raises)
when it holds none (``-1``) or ``n > 1`` (``n * n - 1 >= n``). Conditions declared or inferred
to hold one element are left.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._ir import is_static
from seqlower.passes._shared import one_element
from seqlower.passes._types import TypeOracle

__all__ = ["ScalarIfConditions"]


class ScalarIfConditions(NodeLoweringPass[ir.Value]):
    """Each ``If`` whose condition is not known to hold one element reads it as a scalar,
    failing at run time as the ``If`` does when it holds any other number."""

    op_type = "If"
    takes_all = False
    repairs = True

    def plan(self, site: Site, types: TypeOracle) -> ir.Value | None:
        cond = site.node.inputs[0] if site.node.inputs else None
        if cond is None:
            return None
        shape = cond.shape or types.shape_of(cond)
        if is_static(shape) and all(d == 1 for d in shape):
            return None
        return cond

    def rewrite(self, plan: ir.Value, ctx: Rewrite) -> None:
        one = one_element(ctx.before(), plan, ir.TensorType(ir.DataType.BOOL), "cond")
        ctx.insert()
        ctx.node.replace_input_with(0, one)
