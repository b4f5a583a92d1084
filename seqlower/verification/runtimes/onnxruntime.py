"""onnxruntime's CPU provider as an oracle, and the IR-version re-stamped copy of it; also
:func:`ort_run`, ``session.run`` taking and returning bfloat16/float8 arrays.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from seqlower.verification.runtimes.base import (
    KnownAbort,
    Oracle,
    Runner,
    c_order,
    ml_dtype,
    sizes_of,
    types_at,
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
    recurrences = [n for n in model.graph.node if n.op_type in _EMPTY_ABORTS and n.input]

    def run(feeds: Mapping[str, Any]) -> list[Any]:
        abort = aborts_on(model, recurrences, feeds) if recurrences else None
        if abort is not None:
            raise KnownAbort(f"{name} {abort}")
        run_options[:] = [ort.RunOptions()]
        return ort_run(session, feeds, run_options[0])

    def stop() -> None:
        for options in run_options:
            options.terminate = True

    return Runner(name, run, stop)


#: The recurrences onnxruntime 1.32.0 aborts the process on ('terminate called without an
#: active exception') when their input ``X`` is empty along these axes of time-major ``X``
#: (``[T, B, I]``): a GRU of no step or no batch, an LSTM of no batch (an RNN runs both;
#: ``tests/verification/test_onnxruntime_aborts.py``).
_EMPTY_ABORTS = {"GRU": (0, 1), "LSTM": (1,)}


def aborts_on(
    model: onnx.ModelProto, recurrences: list[onnx.NodeProto], feeds: Mapping[str, Any]
) -> str | None:
    """Why onnxruntime would abort the process running ``recurrences`` (of ``model``'s main
    graph) on ``feeds`` (None: not known to): a recurrence of :data:`_EMPTY_ABORTS` whose
    input is empty along an axis that aborts it."""
    shapes = {n: np.shape(v) for n, v in feeds.items() if not isinstance(v, (list, tuple))}
    if not any(0 in shape for shape in shapes.values()):
        return None
    known = types_at(model, shapes)
    if known is None:
        return None
    for node in recurrences:
        axes = _EMPTY_ABORTS.get(node.op_type, ())
        sizes = sizes_of(known.get(node.input[0])) if axes and node.input else None
        if sizes is None or len(sizes) != 3:
            continue
        layout = next((a.i for a in node.attribute if a.name == "layout"), 0)
        time_major = sizes if layout == 0 else [sizes[1], sizes[0], sizes[2]]
        if any(time_major[axis] == 0 for axis in axes):
            what = f"{node.op_type} node '{node.name or node.output[0]}'"
            return (
                f"would abort the process on {what}: its input '{node.input[0]}' is empty "
                f"({sizes}), which onnxruntime's {node.op_type} kernel does not survive (a bug "
                "of onnxruntime 1.32.0's); not run"
            )
    return None


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
