"""A Loop that may run none whose state is of a size not known when lowering, for tract: the
Scan's body under an ``If`` on the count, not the Scan under one (tract 0.23.9 types no ``If``
around a Scan giving such a state with declared facts: 'Source node without a determined
fact')."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import seqlower
from tests.helpers import REALWORLD, ort_run
from tests.runtimes import assert_close, require, run

# tf2onnx 1.17.0's tf.foldr over the rows of x [T, B, 4] into a state of a row's shape (TF 2.21,
# tf_foldr of benchmarks/families/new_shapes.py).
FOLDR = REALWORLD / "tf_foldr_op17.onnx"


@pytest.mark.parametrize("steps", [None, 1, 4])
def test_a_state_of_a_symbolic_size_runs_on_tract(steps: int | None) -> None:
    """Proven on tract with both kinds of facts, and exact on the framework's inputs and other
    counts (before: exit 1, the If around the Scan did not load with declared facts)."""
    from benchmarks.target_samples import feeds_and_expected

    require("tract")
    model = onnx.load(FOLDR)
    feeds, expected = feeds_and_expected(FOLDR.with_suffix(".npz"))
    if steps is not None:
        feeds = {"x": np.arange(steps * 12, dtype=np.float32).reshape(steps, 3, 4) / 7}
        expected = ort_run(model, feeds)
    lowered = seqlower.lower(model, target="tract")  # proven on tract, either facts
    for runtime in ("tract", "tract-symbolic"):
        assert_close(expected, run(runtime, lowered, feeds), atol=1e-5)
