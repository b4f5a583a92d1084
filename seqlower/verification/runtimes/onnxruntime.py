"""onnxruntime's CPU provider as an oracle, and the IR-version re-stamped copy of it; also
:func:`ort_run`, ``session.run`` taking and returning bfloat16/float8 arrays.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from seqlower.verification.runtimes.base import (
    Oracle,
    Runner,
    c_order,
    ml_dtype,
)


class OnnxRuntime(Oracle):
    """onnxruntime's CPU provider with graph optimizations off (nothing rewritten under us)."""

    name = "onnxruntime"
    package = "onnxruntime"

    def load(self, model: onnx.ModelProto) -> Runner:
        return _ort_runner(model, self.name)


class RestampedOnnxRuntime(Oracle):
    """onnxruntime on a copy with an older IR version: onnx writes IR versions newer than the
    installed onnxruntime may read, though nothing else in the model needs them."""

    name = "onnxruntime (re-stamped)"
    package = "onnxruntime"
    versions = (13, 12, 11, 10)

    def load(self, model: onnx.ModelProto) -> Runner:
        last: Exception = RuntimeError("the model's IR version is already old enough")
        for ir_version in self.versions:
            if ir_version >= model.ir_version:
                continue
            copy = onnx.ModelProto()
            copy.CopyFrom(model)
            copy.ir_version = ir_version
            try:
                return _ort_runner(copy, f"onnxruntime (re-stamped to IR version {ir_version})")
            except Exception as e:
                last = e
        raise last


def _ort_runner(model: onnx.ModelProto, name: str) -> Runner:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4  # failures surface as exceptions, not as stderr noise
    # onnxruntime's memory-reuse planner compares every new buffer with every freed one it
    # could not match, which is quadratic in the intermediates of unknown shape: a lowered
    # model with 1,700 ReverseSequence took 4 minutes to load with it and seconds without. The
    # check runs small inputs; reuse saves nothing here.
    options.enable_mem_reuse = False
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    run_options: list[Any] = []

    def run(feeds: Mapping[str, Any]) -> list[Any]:
        run_options[:] = [ort.RunOptions()]
        return ort_run(session, feeds, run_options[0])

    def stop() -> None:
        for options in run_options:
            options.terminate = True

    return Runner(name, run, stop)


def ort_run(session: Any, feeds: Mapping[str, Any], run_options: Any = None) -> list[Any]:
    """``session.run`` that also takes and returns bfloat16/float8 (ml_dtypes') arrays: numpy
    has no such type, so onnxruntime refuses them ("Numpy_type 256 can't be converted to
    MLDataType"); they go in and come out as OrtValues."""
    if not any(ml_dtype(value) for value in feeds.values()):
        return session.run(None, dict(feeds), run_options)
    values = {name: _ort_value(value) for name, value in feeds.items()}
    outputs = session.run_with_ort_values(None, values, run_options)
    return [_from_ort_value(value) for value in outputs]


def _ort_value(value: Any) -> Any:
    import onnxruntime as ort

    if not ml_dtype(value):
        return (
            value
            if isinstance(value, ort.OrtValue)
            else ort.OrtValue.ortvalue_from_numpy(c_order(value))
        )
    array = c_order(value)
    onnx_type = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
    bits = np.dtype(f"u{array.dtype.itemsize}")
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(bits), onnx_type)


def _from_ort_value(value: Any) -> Any:
    """An output as numpy, those numpy lacks as ml_dtypes' arrays (copied from its buffer)."""
    try:
        return value.numpy()
    except Exception:
        kind = value.data_type()  # "tensor(bfloat16)"
        if not (kind.startswith("tensor(") and value.is_tensor()):
            raise
        onnx_type = getattr(onnx.TensorProto, kind[len("tensor(") : -1].upper())
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(onnx_type))
        shape = tuple(value.shape())
        count = int(np.prod(shape, dtype=np.int64))
        if count == 0:
            return np.zeros(shape, dtype)
        import ctypes

        buffer = (ctypes.c_char * (count * dtype.itemsize)).from_address(value.data_ptr())
        return np.frombuffer(bytes(buffer), dtype=dtype).reshape(shape)
