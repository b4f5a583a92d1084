"""Drop ``allowzero=1`` from a ``Reshape`` whose shape is a constant without zeros (target
``onnx2torch``).

onnx2torch 1.5.15 refuses every ``Reshape`` with ``allowzero=1`` ("not implemented"), which
PyTorch's dynamo exporter writes for every ``view`` (``column_stack``, ``embedding_bag``) and
seqlower's own computed reshapes too (constant once ``--overwrite-input-shape`` folds them).
``allowzero`` only says what a 0 in the shape means (copy the input's dimension, or a real 0):
a shape with no 0 reshapes the same either way, so the attribute is removed there. A shape
computed at run time, or with a 0, keeps it (the target's check names it).
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower._graphs import all_graphs
from seqlower.passes._base import RepairPass
from seqlower.passes._ir import constant_array, int_attr, is_onnx

__all__ = ["ReshapeWithoutAllowzero"]


class ReshapeWithoutAllowzero(RepairPass):
    """Every ``Reshape`` with ``allowzero=1`` and a constant shape without a 0 loses the
    attribute (module docstring)."""

    op_type = "Reshape"

    def repair(self, model: ir.Model) -> None:
        for graph in all_graphs(model):
            for node in graph:
                if not is_onnx(node, "Reshape") or not int_attr(node, "allowzero", 0):
                    continue
                shape = constant_array(node.inputs[1] if len(node.inputs) > 1 else None)
                if shape is not None and shape.size and not (shape == 0).any():
                    del node.attributes["allowzero"]
                    self.rewritten += 1
