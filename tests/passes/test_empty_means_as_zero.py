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


def _reduced_rows(first: str, second: str) -> onnx.ModelProto:
    """Rows ``s`` to ``e`` of an ``[8, 3]`` table (empty when ``e <= s``) reduced by ``first``
    over the rows (``y``) and by ``second`` over everything (``z``)."""
    return onnx.parser.parse_model(
        f"""
        <ir_version: 8, opset_import: ["" : 18]>
        g (float[8, 3] w, int64 s, int64 e) => (float[1, 3] y, float z) {{
            one = Constant<value = int64 {{1}}>()
            ax = Constant<value = int64[1] {{0}}>()
            rows = Range(s, e, one)
            v = Gather(w, rows)
            y = {first}(v, ax)
            z = {second}<keepdims = 0>(v)
        }}
        """
    )


# The smallest model that shows it: the mean of rows of a run-time count.
ROWS = _reduced_rows("ReduceMean", "ReduceMean")
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


# tf2onnx's TimeDistributed(GlobalAveragePooling1D): a mean over rows a Reshape by a constant
# initializer sizes, no value declared a shape (as tf2onnx writes them): 5 rows, never empty.
RESHAPED = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[B, 7, 5, 6] x) => (float[B, 7, 6] y)
      <int64[3] rows = {-1, 5, 6}, int64[3] out = {-1, 7, 6}> {
        r = Reshape(x, rows)
        m = ReduceMean<axes = [1], keepdims = 0>(r)
        y = Reshape(m, out)
    }
    """
)


def test_means_over_rows_a_constant_reshape_sizes_are_left() -> None:
    """The pass asks inference for the mean's input shape: inference must see the Reshape's
    constant target (it did not, every initializer given to it as a bare input), else the mean
    is guarded for nothing, and the guard's ``Size`` arithmetic over the batch symbol is what
    tract 0.23.9 cannot load with symbolic facts ('Can't divide 210*B by max(1,42*B)')."""
    lowered = seqlower.lower(RESHAPED, passes=["empty-means-as-zero"], check=False)
    assert all_op_types(lowered) == ["Reshape", "ReduceMean", "Reshape"]
    x = np.random.default_rng(0).standard_normal((2, 7, 5, 6)).astype(np.float32)
    tract = seqlower.lower(RESHAPED, target="tract", check=False)
    assert_same(ort_run(RESHAPED, {"x": x}), run("tract-symbolic", tract, {"x": x}))


def test_embedding_bag_mean_passes_the_check_on_drawn_inputs_on_tract() -> None:
    """The check draws unsorted offsets, so empty bags: they matched onnxruntime's 0 on tract
    only once the empty mean was 0 there (exit 1 before)."""
    require("tract")
    bag = onnx.load(REALWORLD / "embedding_bag_mean.onnx")
    seqlower.lower(bag, target="tract")  # raises ProofFailedError on a mismatch


# The max and min of rows of a run-time count (PyTorch's embedding_bag(mode="max") slices its
# bags so: offsets that decrease give an empty slice).
EXTREMES = _reduced_rows("ReduceMax", "ReduceMin")


@pytest.mark.parametrize("runtime", ["tract", "openvino"])
def test_runtimes_give_the_extremes_of_an_empty_set_as_finite(runtime: str) -> None:
    """The runtimes' choice the pass stands for: tract 0.23.9 and OpenVINO 2026.4.1 give
    -/+FLT_MAX where ONNX (and onnxruntime) give -/+inf. When one of them follows ONNX, this
    fails."""
    require(runtime)
    inf = np.float32(np.inf)
    assert_same(ort_run(EXTREMES, feeds(3, 3)), [np.full((1, 3), -inf), inf])
    y, z = run(runtime, EXTREMES, feeds(3, 3))
    assert (y == -np.finfo(np.float32).max).all() and z == np.finfo(np.float32).max


@pytest.mark.parametrize("target", ["tract", "openvino"])
@pytest.mark.parametrize(("s", "e"), [(3, 3), (5, 2), (0, 8), (6, 7)])
def test_lowered_extremes_match_onnxruntime(target: str, s: int, e: int) -> None:
    """-/+inf on an empty set, the node's own result elsewhere (before: -/+FLT_MAX there, and
    PyTorch's embedding_bag(mode="max") failed the check for both targets)."""
    require(target)
    if target == "openvino" and s > e:
        pytest.skip("OpenVINO's Range counts up from 5 to 2 (next test)")
    lowered = seqlower.lower(EXTREMES, target=target, check=False)
    want = ort_run(EXTREMES, feeds(s, e))
    assert_same(want, ort_run(lowered, feeds(s, e)))
    assert_same(want, run(target, lowered, feeds(s, e)))


def test_openvino_counts_up_a_range_that_is_empty() -> None:
    """OpenVINO 2026.4.1: Range(5, 2, 1) is [5, 6, 7] (ONNX: max(ceil((2 - 5) / 1), 0) = 0
    elements; onnxruntime and tract give none). When OpenVINO gives none, this fails."""
    require("openvino")
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 18]>
        g (int64 s, int64 e) => (int64[N] r) {
            one = Constant<value = int64 {1}>()
            r = Range(s, e, one)
        }
        """
    )
    ends = {"s": np.array(5), "e": np.array(2)}
    assert ort_run(model, ends)[0].size == 0
    assert run("openvino", model, ends)[0].tolist() == [5, 6, 7]


# TensorFlow's ``tf.while_loop`` halving ``v`` until ``max(abs(v))`` is small, at most 5 times
# (tf2onnx), and each iteration's column minima as a scan output (of an empty ``x``: +inf, and
# the loop stops after one iteration on the max, -inf).
HALVING = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 18]>
    g (float[A, B, 4] x) => (float[A, B, 4] v, float[N, 1, B, 4] mins) {
        m = Constant<value = int64 {5}>()
        small = Constant<value = float {0.01}>()
        go = Constant<value = bool {1}>()
        v, mins = Loop(m, go, x) <body = b (int64 i, bool c, float[A, B, 4] s)
                => (bool c2, float[A, B, 4] s2, float[1, B, 4] low) {
            half = Constant<value = float {0.5}>()
            s2 = Mul(s, half)
            rows = Constant<value = int64[1] {0}>()
            low = ReduceMin<keepdims = 1>(s2, rows)
            a2 = Abs(s2)
            top2 = ReduceMax<keepdims = 0>(a2)
            c2 = Greater(top2, small)
        }>
    }
    """
)


@pytest.mark.parametrize("target", ["tract", "openvino"])
@pytest.mark.parametrize("rows", [0, 1, 3])
def test_extremes_in_a_loop_body_load_with_declared_facts(target: str, rows: int) -> None:
    """In a loop's body the emptiness is read from the data, not from Size: -/+inf on an empty
    set as onnxruntime, and tract loads the body with declared facts (before: 'inconsistent
    fact: body input 0 is A,B,4,F32 ... (1+4*A*B>=0)', exit 1, tf2onnx's
    ``tf_while_maximum_iterations``)."""
    require(target)
    lowered = seqlower.lower(HALVING, target=target)  # proven on the target
    x = {"x": (np.arange(rows * 12, dtype=np.float32).reshape(rows, 3, 4) - 5) / 3}
    want = ort_run(HALVING, x)
    runtimes = [target, "tract-symbolic"] if target == "tract" else [target]
    if target == "tract" and not rows:  # tract 0.23.9 types no Scan over an empty state with
        runtimes.remove(
            "tract"
        )  # facts from the inputs (tests/verification/test_tract_empty_states.py)
    for runtime in runtimes:
        assert_same(want, run(runtime, lowered, x))
