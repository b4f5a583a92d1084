"""Check that no ``Loop`` is left, naming each one and why it stays (tract has no Loop).

The last step of the ``tract`` target, after
:class:`~seqlower.passes.loops.loop_to_scan.LoopToScan`:
a runtime without ``Loop`` refuses the whole model for one, so the pass raises
:class:`~seqlower.errors.TargetError` listing every ``Loop`` in any scope with the reason the
rewrite recorded on it (its trip count is known only inside, and which value shows it), and
changes nothing.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower.errors import TargetError, describe_node
from seqlower.passes._ir import NO_LOOP, blocked, is_onnx, model_nodes

__all__ = ["RequireNoLoop"]


class RequireNoLoop(ir.passes.InPlacePass):
    """Raise TargetError unless no ``Loop`` is left in any scope."""

    target = "a runtime without Loop (tract)"

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        blockers = [
            f"{describe_node(node)} remains: "
            + (blocked(node, NO_LOOP) or "no Scan form is known for it")
            for node in model_nodes(model)
            if is_onnx(node, "Loop")
        ]
        if blockers:
            raise TargetError(self.target, blockers)
        return ir.passes.PassResult(model, modified=False)
