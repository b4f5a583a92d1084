"""The runtime harness itself: each runtime CI installs loads and runs a plain model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tests.runtimes import RUNTIMES, RuntimeFailure, assert_same, run

MODEL = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 3] x, int64[N] k) => (float[N, 3] y, int64[N] j) {
        y = Neg(x)
        j = Add(k, k)
    }
    """
)


@pytest.mark.parametrize("runtime", list(RUNTIMES))
def test_runtime_runs_a_plain_model(runtime: str) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    k = np.array([1, 2], dtype=np.int64)
    assert_same([-x, k + k], run(runtime, MODEL, {"x": x, "k": k}))


@pytest.mark.parametrize("runtime", list(RUNTIMES))
def test_runtime_failure_is_reported(runtime: str) -> None:
    broken = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 3] x) => (float[7] y) {
            s = Constant<value = int64[1] {7}>()
            y = Reshape(x, s)
        }
        """
    )
    with pytest.raises(RuntimeFailure, match=runtime):
        run(runtime, broken, {"x": np.zeros((2, 3), np.float32)})
