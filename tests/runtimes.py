"""Run a model on the runtimes seqlower exists for: onnxruntime, OpenVINO, tract, tinygrad, and
the converters onnx2torch, TVM, onnx2tf and IREE.

The lowered models must run, and match, on runtimes that lack the ops seqlower removes; these
helpers give every test one way to ask "does this model run there, and what does it return".
OpenVINO, tract and tinygrad come with the ``runtimes`` extra (``pip install -e
'.[test,runtimes]'``, which ``.ci/run`` installs, with clang for tinygrad's CPU device). Where one
is missing, :func:`require` skips the test with a reason, except under CI (``CI`` set), where a
missing runtime is a failure: CI must measure them all. The converters in :data:`BY_HAND` are
not CI's (torch, TVM and IREE take hundreds of MB to gigabytes; onnx2tf needs Python 3.12):
their tests skip when absent, CI or not, and are run by hand in a venv with their extra.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
import pytest

__all__ = [
    "BY_HAND",
    "CONVERTERS",
    "RUNTIMES",
    "RuntimeFailure",
    "assert_same",
    "available",
    "require",
    "run",
]


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
    from seqlower.verification.runtimes import ort_run

    return ort_run(session, feeds)  # bfloat16 arrays too


def _run_on(target: str) -> Callable[[onnx.ModelProto, Feeds], list[np.ndarray]]:
    """The library's own target oracle (what ``--target`` runs): one way to run everywhere."""

    def runner(model: onnx.ModelProto, feeds: Feeds) -> list[np.ndarray]:
        from seqlower.verification.runtimes import TARGET_ORACLES

        return list(TARGET_ORACLES[target].load(model).run(feeds))

    return runner


RUNTIMES: dict[str, tuple[str, Callable[[onnx.ModelProto, Feeds], list[np.ndarray]]]] = {
    "onnxruntime": ("onnxruntime", _run_onnxruntime),
    "openvino": ("openvino", _run_on("openvino")),
    # tract with concrete input shapes, and with the model's declared (symbolic) ones.
    "tract": ("tract", _run_on("tract")),
    "tract-symbolic": ("tract", _run_on("tract-symbolic")),
}

#: The converter targets' runtimes: each runs only what its own target lowers (no Loop or Scan
#: in tinygrad, for one), so the tests that run every lowering on RUNTIMES leave them out.
CONVERTERS: dict[str, tuple[str, Callable[[onnx.ModelProto, Feeds], list[np.ndarray]]]] = {
    "tinygrad": ("tinygrad", _run_on("tinygrad")),
    "onnx2torch": ("onnx2torch", _run_on("onnx2torch")),
    "tvm": ("tvm", _run_on("tvm")),
    "onnx2tf": ("onnx2tf", _run_on("onnx2tf")),
    "iree": ("iree.compiler", _run_on("iree")),
}
_ALL = {**RUNTIMES, **CONVERTERS}

#: Runtimes CI does not install, with the extra that does: skipped when absent, even under CI.
BY_HAND = {"onnx2torch": "onnx2torch", "tvm": "tvm", "onnx2tf": "onnx2tf", "iree": "iree"}


def missing(runtime: str) -> str | None:
    """Why ``runtime`` cannot run here (not installed, or what it needs is not), or None."""
    from seqlower.errors import SeqlowerError
    from seqlower.verification.runtimes import TARGET_ORACLES, load_target

    module, _ = _ALL[runtime]
    try:  # onnx2torch is imported by its oracle (which stands in for a broken torchvision)
        oracle = runtime in TARGET_ORACLES
        found = importlib.util.find_spec(module) if oracle else __import__(module)
    except ImportError:
        found = None
    if found is None:
        extra = BY_HAND.get(runtime, "test,runtimes")
        return f"{runtime} is not installed (pip install -e '.[{extra}]')"
    if runtime in TARGET_ORACLES:
        try:
            load_target(runtime, lowering=False)
        except SeqlowerError as e:
            return str(e)
    return None


def available(runtime: str) -> bool:
    return missing(runtime) is None


#: Runtimes CI installs that also need a C compiler pip cannot bring (tinygrad's CPU device
#: compiles with clang, which ``.ci/run`` installs when it can): installed without it, their
#: tests skip with the reason even under CI.
NEEDS_COMPILER = {"tinygrad"}


def require(runtime: str) -> None:
    """Skip the calling test when ``runtime`` cannot run here; fail instead under CI, unless it
    is one of the converters CI does not install (:data:`BY_HAND`) or it is installed and only
    its compiler is missing (:data:`NEEDS_COMPILER`)."""
    message = missing(runtime)
    if message is None:
        return
    installed = "is not installed" not in message
    excused = runtime in BY_HAND or (runtime in NEEDS_COMPILER and installed)
    if os.environ.get("CI") and not excused:
        pytest.fail(message)
    pytest.skip(message)


def run(runtime: str, model: onnx.ModelProto, feeds: Feeds) -> list[np.ndarray]:
    """The outputs of ``model`` on ``runtime``, in graph order; RuntimeFailure if it refuses."""
    require(runtime)
    _, runner = _ALL[runtime]
    try:
        return runner(model, feeds)
    except Exception as e:
        text = str(e).strip().splitlines()
        raise RuntimeFailure(f"{runtime}: {text[0] if text else type(e).__name__}") from e


def assert_same(expected: Sequence[np.ndarray], actual: Sequence[np.ndarray]) -> None:
    """Bit-exact for integers, bools and strings; floats within 1e-6 relative, 1e-7 absolute.

    The absolute part is for runtimes' own transcendental kernels: tract 0.23.9's tanh and
    sigmoid differ from onnxruntime's by up to 8e-8 near zero on some CPUs (seen 2026-11-25),
    which no lowering causes.
    """
    assert len(expected) == len(actual)
    for want, got in zip(expected, actual, strict=True):
        got = np.asarray(got)
        assert want.shape == got.shape, (want.shape, got.shape)
        if want.dtype.kind in "fc":
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
        else:
            np.testing.assert_array_equal(got, want)


def assert_close(
    expected: Sequence[np.ndarray], actual: Sequence[np.ndarray], *, atol: float
) -> None:
    """Shapes and dtypes equal, integers bit-exact, floats within 1e-5 relative and ``atol``
    absolute: for runtimes whose float kernels differ from onnxruntime's in the last bits
    (OpenVINO's Tanh, LiteRT's), with or without a rewrite."""
    assert len(expected) == len(actual)
    for want, got in zip(expected, actual, strict=True):
        got = np.asarray(got)
        assert want.shape == got.shape and want.dtype == got.dtype
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=atol)
        else:
            np.testing.assert_array_equal(got, want)
