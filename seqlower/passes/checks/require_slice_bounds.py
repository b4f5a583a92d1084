"""Check that every ``Slice`` slices by bounds tract can type, naming each one it cannot.

tract 0.23.9 types a ``Slice`` whose starts, ends, axes or steps are known when the model is
loaded (constants) or follow from tensor shapes (``Shape``/``Size`` and arithmetic on them:
``split([1, N-1])``, the lowered ``ReverseSequence``); one whose bounds are computed from
tensor *values* (a graph input, a ``Scan`` body's row, ``Gather`` of data: PyTorch's
``embedding_bag`` slices its weight rows by its ``offsets``) fails to load, in the main graph
and in any body ('Symbol <Sym0> points to an invalid (dead ?) SymbolScope'; inside an ``If``
branch first 'Source node without a determined fact'; ``tests/passes/test_slice_bounds.py``
keeps the smallest models). ``run-time-slices-as-gathers`` rewrites those it can into what tract
runs; the last check of the ``tract`` target raises :class:`~seqlower.errors.TargetError`
naming each one left, where its bound comes from and why it was left, before any check, and
changes nothing.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower._graphs import all_graphs
from seqlower.errors import TargetError, describe_node
from seqlower.passes._ir import blocked, is_onnx, origin, runtime_source

__all__ = ["RequireShapeSliceBounds"]


class RequireShapeSliceBounds(ir.passes.InPlacePass):
    """Raise TargetError naming every ``Slice`` whose bounds depend on tensor values."""

    target = "tract 0.23.9 (a Slice by run-time bounds)"

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        runtime: dict[int, ir.Value | None] = {}
        blockers = []
        for graph in all_graphs(model):
            for node in graph:
                if not is_onnx(node, "Slice"):
                    continue
                for position, role in ((1, "starts"), (2, "ends"), (3, "axes"), (4, "steps")):
                    bound = node.inputs[position] if len(node.inputs) > position else None
                    source = None if bound is None else runtime_source(bound, runtime)
                    if source is not None:
                        why = blocked(node, "require-shape-slice-bounds")
                        blockers.append(
                            f"{describe_node(node)} remains: its {role} '{bound.name}' "  # type: ignore[union-attr]
                            f"depends on the values of '{source.name}' (from "
                            f"{origin(source)}); tract 0.23.9 cannot load a Slice by run-time "
                            "bounds" + (f", and it is no Gather of a Range: {why}" if why else "")
                        )
                        break
        if blockers:
            raise TargetError(self.target, blockers)
        return ir.passes.PassResult(model, modified=False)
