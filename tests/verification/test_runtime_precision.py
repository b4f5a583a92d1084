"""A runtime that computes float64 in float32 (OpenVINO's CPU plugin) is compared at float32's
tolerance for float64 outputs, and only there: a float32-sized error stays a failure
everywhere else, and an error past float32's tolerance fails on it too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from seqlower.verification.compare import Tolerances
from tests.helpers import run_cli
from tests.runtimes import require

_SEQUENCE_MODEL7 = (
    Path(onnx.__file__).parent / "backend/test/data/simple/test_sequence_model7/model.onnx"
)


def test_a_narrowed_float64_output_gets_float32s_tolerance() -> None:
    want = np.linspace(1.0, 2.0, 12, dtype=np.float64)
    rounded = want.astype(np.float32).astype(np.float64)  # what a float32 computation gives
    assert not np.array_equal(want, rounded)
    plain, narrowed = Tolerances(), Tolerances(narrowed={"float64": "float32"})
    assert not plain.compare("y", want, rounded).ok
    assert narrowed.compare("y", want, rounded).ok
    assert not narrowed.compare("y", want, want * (1 + 1e-3)).ok  # past float32's tolerance
    as_float32 = want.astype(np.float32)
    assert narrowed.compare("y", as_float32, as_float32).ok  # other types untouched
    assert narrowed.compare("s", [want], [rounded]).ok  # sequences by their elements' type
    # a tolerance the user gave wins over the narrowed default
    assert (
        not Tolerances(rtol=0.0, atol=0.0, narrowed={"float64": "float32"})
        .compare("y", want, rounded)
        .ok
    )


def test_a_float64_model_is_proven_on_openvino(tmp_path: Path) -> None:
    """ONNX's test_sequence_model7 (float64) runs 5e-8 off on OpenVINO, the original too:
    exit 1 at float64's tolerance, which no float64 model can meet there."""
    require("openvino")
    out = tmp_path / "out.onnx"
    result = run_cli(str(_SEQUENCE_MODEL7), "-o", str(out), "--target", "openvino")
    assert result.exit_code == 0, result.output
    assert out.exists()
