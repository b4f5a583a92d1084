"""onnxscript's map over the pieces of a split by run-time sizes, in a model-local function, for
OpenVINO (``lower-ragged-maps``, ``slice-split-pieces``, then ``stack-loop-sequences`` with a
seed read from a named input dimension): a ``Loop`` over ``Slice``s growing tensors, no sequence
left, against the original on onnxruntime, over drawn sizes; bad sizes fail at run time."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import seqlower
from seqlower.passes import SEQUENCE_OPS
from tests.helpers import all_op_types, ragged_map
from tests.runtimes import RuntimeFailure, assert_same, run


def _model() -> onnx.ModelProto:
    return ragged_map()


@pytest.fixture(scope="module")
def lowered() -> onnx.ModelProto:
    out = seqlower.lower(_model(), target="openvino", check=False)
    onnx.checker.check_model(out, full_check=True)
    onnx.shape_inference.infer_shapes(out, check_type=True, strict_mode=True)
    assert not set(all_op_types(out)) & SEQUENCE_OPS
    assert "Loop" in all_op_types(out)
    return out


def _feeds(sizes: list[int], seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "X": rng.normal(size=(sum(sizes), 3)).astype(np.float32),
        "lens": np.array(sizes, dtype=np.int64),
        "W": rng.normal(size=3).astype(np.float32),
    }


@settings(max_examples=15, deadline=None)
@given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=5))
def test_pieces_of_run_time_sizes_match_the_original(
    lowered: onnx.ModelProto, sizes: list[int]
) -> None:
    feeds = _feeds(sizes, seed=len(sizes))
    expected = run("onnxruntime", _model(), feeds)
    assert_same(expected, run("onnxruntime", lowered, feeds))
    # OpenVINO sums the weighted chunk in another order than onnxruntime: a total near zero
    # differs by a few 1e-7 absolute (2.2e-7 drawn once), which no lowering causes.
    (y, total) = run("openvino", lowered, feeds)
    assert_same(expected[:1], [y])
    np.testing.assert_allclose(total, expected[1], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_sizes_that_do_not_add_up_fail_at_run_time(lowered: onnx.ModelProto, runtime: str) -> None:
    """As the split itself does (onnxruntime refuses them): never another answer."""
    feeds = _feeds([2, 3])
    feeds["lens"] = np.array([2, 2], dtype=np.int64)
    with pytest.raises(RuntimeFailure):
        run("onnxruntime", _model(), feeds)
    with pytest.raises(RuntimeFailure):
        run(runtime, lowered, feeds)
