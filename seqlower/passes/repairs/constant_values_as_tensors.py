"""Write ``Constant`` values given as ``value_int(s)``/``value_float(s)`` as ``value`` tensors.

ONNX lets a ``Constant`` hold its value as a tensor (``value``) or, since opset 12, as a plain
int, float or list of them; onnxscript's bodies use the lists (torch_lib's ``atleast_3d``:
``Constant<value_ints = [...]>``), and unrolling a ``SequenceMap`` brings them into the main
graph. onnx2torch 1.5.15 then reads such a value as a Python list where a converter reading it
as a constant input expects an array: its ``Unsqueeze`` converter fails with
``'list' object has no attribute 'tolist'``. The same value as a tensor (int64 or float32, a
scalar for ``value_int``/``value_float``) is read by every runtime alike.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from seqlower._graphs import all_graphs
from seqlower.passes._base import RepairPass
from seqlower.passes._ir import is_onnx

__all__ = ["ConstantValuesAsTensors"]

_DTYPES = {
    "value_int": np.int64,
    "value_ints": np.int64,
    "value_float": np.float32,
    "value_floats": np.float32,
}


class ConstantValuesAsTensors(RepairPass):
    """Every ``Constant`` whose value is an int, float or list of them gets it as a tensor."""

    op_type = "Constant"

    def repair(self, model: ir.Model) -> None:
        for graph in all_graphs(model):
            for node in graph:
                if not is_onnx(node, "Constant"):
                    continue
                names = [name for name in node.attributes if name in _DTYPES]
                attr = node.attributes.get(names[0]) if len(names) == 1 else None
                if attr is None or attr.is_ref():
                    continue
                name = names[0]
                array = np.array(attr.value, dtype=_DTYPES[name])
                del node.attributes[name]
                node.attributes["value"] = ir.AttrTensor("value", ir.tensor(array))
                self.rewritten += 1
