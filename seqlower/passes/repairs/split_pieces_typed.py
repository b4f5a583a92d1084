"""The pieces of a ``Split`` that ONNX's shape inference leaves without a shape given the shape
it proves: the input's, the split axis unknown (target ``iree``).

A ``Split`` by sizes known only at run time (PyTorch's ``split`` by lengths, seqlower's unrolled
``SplitToSequence`` at fixed shapes) gets pieces of no shape from ONNX's inference, whatever
their rank; IREE 3.13.0's importer types such a value rank 0 and ``iree-compile`` then crashes
converting the ``Split`` ('Error invoking IREE compiler tool iree-compile': a segmentation
fault). Every piece has the input's rank and its sizes but along the axis, which is what is
declared.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower._graphs import all_graphs
from seqlower.passes._base import RepairPass
from seqlower.passes._ir import int_attr, is_onnx

__all__ = ["SplitPiecesTyped"]


class SplitPiecesTyped(RepairPass):
    """Every ``Split`` piece declared without a shape, given its input's but along the axis
    (module docstring)."""

    op_type = "Split"

    def repair(self, model: ir.Model) -> None:
        for graph in all_graphs(model):
            for node in graph:
                if not is_onnx(node, "Split") or not node.inputs or node.inputs[0] is None:
                    continue
                whole = node.inputs[0]
                if whole.shape is None or not any(p.shape is None for p in node.outputs):
                    continue
                rank = len(whole.shape)
                axis = int_attr(node, "axis", 0) or 0
                axis = axis + rank if axis < 0 else axis
                if not 0 <= axis < rank:
                    continue
                dims = [None if k == axis else d for k, d in enumerate(whole.shape)]
                for piece in node.outputs:
                    if piece.shape is None:
                        piece.type = piece.type or whole.type
                        piece.shape = ir.Shape(dims)
                self.rewritten += 1
