"""``empty-means-as-zero`` (tract's row): a float ``ReduceMean`` over axes that may be empty
gives onnxruntime's 0 there (ONNX leaves it undefined; tract 0.23.9 gives NaN), and its own
mean everywhere else, so PyTorch's ``embedding_bag(mode="mean")`` of an empty bag is 0 on
tract as in PyTorch."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import pytest

import seqlower
from tests.helpers import REALWORLD, all_op_types, ort_run
from tests.runtimes import assert_same, require, run

# The smallest model that shows it: the mean of rows of a run-time count.
ROWS = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 18]>
    g (float[8, 3] w, int64 s, int64 e) => (float[1, 3] y, float z) {
        one = Constant<value = int64 {1}>()
        ax = Constant<value = int64[1] {0}>()
        rows = Range(s, e, one)
        v = Gather(w, rows)
        y = ReduceMean(v, ax)
        z = ReduceMean<keepdims = 0>(v)
    }
    """
)
W = np.arange(24, dtype=np.float32).reshape(8, 3) - 7.5


def feeds(s: int, e: int) -> dict[str, np.ndarray]:
    return {"w": W, "s": np.array(s), "e": np.array(e)}


def test_tract_means_an_empty_set_to_nan() -> None:
    """The runtime's choice the pass stands for (tract 0.23.9; onnxruntime gives 0)."""
    y, z = run("tract", ROWS, feeds(3, 3))
    assert np.isnan(y).all() and np.isnan(z)
    assert_same(ort_run(ROWS, feeds(3, 3)), [np.zeros((1, 3), np.float32), np.float32(0)])


@pytest.mark.parametrize(("s", "e"), [(3, 3), (5, 2), (0, 8), (6, 7), (1, 4)])
def test_lowered_means_match_onnxruntime_on_tract(s: int, e: int) -> None:
    lowered = seqlower.lower(ROWS, target="tract", check=False)
    want = ort_run(ROWS, feeds(s, e))
    assert_same(want, ort_run(lowered, feeds(s, e)))
    assert_same(want, run("tract", lowered, feeds(s, e)))


def test_means_over_axes_known_positive_are_left() -> None:
    static = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 3] x) => (float[N, 1] y) {
            y = ReduceMean<axes = [1]>(x)
        }
        """
    )
    lowered = seqlower.lower(static, passes=["empty-means-as-zero"], check=False)
    assert all_op_types(lowered) == ["ReduceMean"]
    dynamic = seqlower.lower(ROWS, passes=["empty-means-as-zero"], check=False)
    assert all_op_types(dynamic).count("Where") == 2


def test_embedding_bag_mean_passes_the_check_on_drawn_inputs_on_tract() -> None:
    """The check draws unsorted offsets, so empty bags: they matched onnxruntime's 0 on tract
    only once the empty mean was 0 there (exit 1 before)."""
    require("tract")
    bag = onnx.load(REALWORLD / "embedding_bag_mean.onnx")
    seqlower.lower(bag, target="tract")  # raises ProofFailedError on a mismatch
