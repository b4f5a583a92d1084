"""Apache TVM's Relax ONNX frontend as a target oracle (``--target tvm``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from seqlower.verification.runtimes.base import (
    Oracle,
    Runner,
    c_order,
    feed_names,
)


class Tvm(Oracle):
    """Apache TVM: the Relax ONNX frontend, compiled for ``llvm`` (the host CPU) and run in
    the Relax virtual machine; symbolic sizes stay symbolic, so one build serves every run."""

    name = "tvm"
    package = "apache-tvm"
    module = "tvm"
    extra = "tvm"

    def load(self, model: onnx.ModelProto) -> Runner:
        import tvm
        from tvm import relax
        from tvm.relax.frontend.onnx import from_onnx

        module = from_onnx(model, keep_params_in_input=False)
        types = [o.type.tensor_type.elem_type for o in model.graph.output]
        machine = relax.VirtualMachine(tvm.compile(module, target="llvm"), tvm.cpu())
        names = feed_names(model)

        def run(feeds: Mapping[str, Any]) -> list[Any]:
            arrays = [tvm.runtime.tensor(c_order(feeds[n])) for n in names]
            out = machine["main"](*arrays)
            return [_declared(a, t) for a, t in zip(_flat_numpy(out), types, strict=False)]

        return Runner(self.label(), run)


def _flat_numpy(value: Any) -> list[Any]:
    """TVM's outputs (a tensor, or a tuple of them, nested) as numpy arrays in order; a scalar
    it computed from shapes comes back a Python number (a 0-d array of numpy's type here)."""
    if hasattr(value, "numpy"):
        return [value.numpy()]
    if isinstance(value, bool | int | float):
        return [np.asarray(value)]
    return [array for item in value for array in _flat_numpy(item)]


def _declared(array: Any, elem_type: int) -> Any:
    """A 0-d output in the element type the model declares (TVM gives a scalar it computed from
    shapes as a Python number: float64 or int64 here, where the model says float32, ...)."""
    if not elem_type or array.ndim != 0:
        return array
    declared = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    return array if array.dtype == declared else array.astype(declared)
