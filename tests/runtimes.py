"""Run a model on the runtimes seqlower exists for: onnxruntime, OpenVINO and tract.

The lowered models must run, and match, on runtimes that lack the ops seqlower removes; these
helpers give every test one way to ask "does this model run there, and what does it return".
OpenVINO and tract come with the ``runtimes`` extra (``pip install -e '.[test,runtimes]'``,
which ``.ci/run`` installs). Where one is missing, :func:`require` skips the test with a reason,
except under CI (``CI`` set), where a missing runtime is a failure: CI must measure them all.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import pytest

__all__ = ["RUNTIMES", "RuntimeFailure", "assert_same", "available", "require", "run"]


class RuntimeFailure(Exception):
    """The runtime refused to load or run the model; the message is the runtime's own."""


Feeds = Mapping[str, np.ndarray]


def _run_onnxruntime(model: onnx.ModelProto, feeds: Feeds) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, dict(feeds))


def _run_openvino(model: onnx.ModelProto, feeds: Feeds) -> list[np.ndarray]:
    import openvino as ov

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.onnx"
        onnx.save(model, path)
        compiled = ov.Core().compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        result = compiled(dict(feeds))
        return [np.asarray(result[output]) for output in compiled.outputs]


def _run_tract(model: onnx.ModelProto, feeds: Feeds, *, concrete: bool = True) -> list[np.ndarray]:
    import tract

    names = _input_names(model)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.onnx"
        onnx.save(model, path)
        inference = tract.onnx().load(str(path))
        for index, name in enumerate(names if concrete else []):
            array = np.asarray(feeds[name])
            # tract's facts default to the declared (often symbolic) shapes; concrete ones
            # are what a deployment gives it too.
            shape = ",".join(str(d) for d in array.shape)
            dtype = _TRACT_DTYPES[array.dtype.str[1:]]
            fact = f"{shape},{dtype}" if shape else dtype
            inference.set_input_fact(index, fact)
        runnable = inference.into_model().into_runnable()
        outputs = runnable.run([np.asarray(feeds[name]) for name in names])
        return [output.to_numpy() for output in outputs]


_TRACT_DTYPES = {
    "f4": "f32",
    "f8": "f64",
    "f2": "f16",
    "i1": "i8",
    "i2": "i16",
    "i4": "i32",
    "i8": "i64",
    "u1": "u8",
    "u2": "u16",
    "u4": "u32",
    "u8": "u64",
    "b1": "bool",
}


def _input_names(model: onnx.ModelProto) -> list[str]:
    initializers = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]


def _run_tract_symbolic(model: onnx.ModelProto, feeds: Feeds) -> list[np.ndarray]:
    return _run_tract(model, feeds, concrete=False)


RUNTIMES: dict[str, tuple[str, Callable[[onnx.ModelProto, Feeds], list[np.ndarray]]]] = {
    "onnxruntime": ("onnxruntime", _run_onnxruntime),
    "openvino": ("openvino", _run_openvino),
    # tract with concrete input shapes, and with the model's declared (symbolic) ones.
    "tract": ("tract", _run_tract),
    "tract-symbolic": ("tract", _run_tract_symbolic),
}


def available(runtime: str) -> bool:
    module, _ = RUNTIMES[runtime]
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def require(runtime: str) -> None:
    """Skip the calling test when ``runtime`` is not installed; fail instead under CI."""
    if available(runtime):
        return
    message = f"{runtime} is not installed (pip install -e '.[test,runtimes]')"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def run(runtime: str, model: onnx.ModelProto, feeds: Feeds) -> list[np.ndarray]:
    """The outputs of ``model`` on ``runtime``, in graph order; RuntimeFailure if it refuses."""
    require(runtime)
    _, runner = RUNTIMES[runtime]
    try:
        return runner(model, feeds)
    except Exception as e:
        text = str(e).strip().splitlines()
        raise RuntimeFailure(f"{runtime}: {text[0] if text else type(e).__name__}") from e


def assert_same(expected: Sequence[np.ndarray], actual: Sequence[np.ndarray]) -> None:
    """Bit-exact for integers, bools and strings; float outputs equal to the last ulp or two."""
    assert len(expected) == len(actual)
    for want, got in zip(expected, actual, strict=True):
        got = np.asarray(got)
        assert want.shape == got.shape, (want.shape, got.shape)
        if want.dtype.kind in "fc":
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
        else:
            np.testing.assert_array_equal(got, want)
