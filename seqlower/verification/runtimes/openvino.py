"""OpenVINO's CPU plugin in float32 as a target oracle (``--target openvino``)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from seqlower.verification.runtimes.base import (
    Oracle,
    Runner,
    c_order,
    ml_dtype,
    model_file,
    runtime_errors,
)


class OpenVino(Oracle):
    """OpenVINO's CPU plugin in float32: its default on CPUs with bf16 is bf16, whose errors
    (near 1e-3) would fail every float32 comparison. Outputs are matched by name."""

    name = "openvino"
    package = "openvino"
    extra = "runtimes"

    def load(self, model: onnx.ModelProto) -> Runner:
        with model_file(model) as path, runtime_errors():
            compiled = _openvino_core().compile_model(
                path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
            )
        names = [o.name for o in model.graph.output]
        ports = list(compiled.outputs)

        def port(name: str, index: int) -> Any:
            for candidate in ports:
                if name in candidate.get_names():
                    return candidate
            return ports[index]  # OpenVINO may drop the name of an output it folded

        chosen = [port(name, k) for k, name in enumerate(names)]

        def run(feeds: Mapping[str, Any]) -> list[Any]:
            given = {name: _openvino_feed(value) for name, value in feeds.items()}
            with runtime_errors():
                result = compiled.create_infer_request().infer(given)
            return [_openvino_output(result[p], p) for p in chosen]

        # Its CPU plugin has no float64 kernels: it converts the model to float32 (documented in
        # docs/targets/openvino.md; ONNX's test_sequence_model7 is 5e-8 off on it).
        return Runner(self.label(), run, narrows={"float64": "float32"})


#: ml_dtypes' types by OpenVINO's name for them. OpenVINO 2026.4.1 takes an ml_dtypes array as
#: float16 values (bfloat16 1.5 in, 0.125 read: wrong numbers, no error) and returns these
#: types as float16 arrays of their bits, so both ways go through the bits.
_OPENVINO_BITS = {"bf16": "bfloat16", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}


def _openvino_feed(value: Any) -> Any:
    if not ml_dtype(value):
        return value
    import openvino as ov

    array = c_order(value)
    names = {v: k for k, v in _OPENVINO_BITS.items()}
    if array.dtype.name not in names:
        raise TypeError(f"OpenVINO takes no {array.dtype.name} input here")
    bits = array.view(np.dtype(f"u{array.dtype.itemsize}"))
    return ov.Tensor(bits, list(array.shape), getattr(ov.Type, names[array.dtype.name]))


def _openvino_output(value: Any, port: Any) -> np.ndarray:
    array = np.array(value)
    wanted = _OPENVINO_BITS.get(port.get_element_type().get_type_name())
    if wanted is None:
        return array
    import ml_dtypes

    dtype = np.dtype(getattr(ml_dtypes, wanted))
    return array.view(np.dtype(f"u{dtype.itemsize}")).view(dtype)


@functools.cache
def _openvino_core() -> Any:
    """One OpenVINO Core for the process. Each Core's CPU plugin gives the thread that first
    compiles with it a new alternate signal stack and, when the Core goes, puts back the one it
    found, which is already freed when Cores go in another order than they came (OpenVINO
    2026.4.1: the original and the lowered model loaded side by side); the next signal handled
    on that thread (Ctrl-C, SIGTERM) then crashes the process."""
    import openvino as ov

    return ov.Core()
