"""SliceReductionsAsMasks (``slice-reductions-as-masks``, the tvm target): a float reduction of a
``Slice`` by run-time bounds as a masked reduction of the whole axis, the same numbers for every
bound (negative, out of range, empty); PyTorch's ``embedding_bag`` on TVM 0.27, which compiles
no such ``Slice`` ("CodeGenVM cannot emit this Relax operator directly")."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import pytest

import seqlower
from tests.helpers import EMPTY_BAG_MAX
from tests.runtimes import RuntimeFailure, assert_same, run

# One bag of embedding_bag: rows [start, end) of a weight of static shape, reduced.
BAG = """
<ir_version: 8, opset_import: ["" : 18]>
g (float[5, 3] w, int64[2] bounds) => (float[{out}] y) {{
    zero = Constant<value = int64[1] {{0}}>()
    one = Constant<value = int64[1] {{1}}>()
    two = Constant<value = int64[1] {{2}}>()
    start = Slice(bounds, zero, one)
    end = Slice(bounds, one, two)
    rows = Slice(w, start, end, zero)
    y = {op}<keepdims = {keep}>(rows, zero)
}}
"""
BOUNDS = [[1, 4], [0, 5], [2, 2], [4, 1], [-3, -1], [-9, 9], [3, 100], [6, 8]]


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceMean"])
@pytest.mark.parametrize("keep", [0, 1])
def test_a_reduction_of_a_run_time_slice_is_masked(op: str, keep: int) -> None:
    model = onnx.parser.parse_model(BAG.format(op=op, keep=keep, out="1, 3" if keep else "3"))
    lowered = seqlower.lower(model, passes=["slice-reductions-as-masks"])
    onnx.checker.check_model(lowered, full_check=True)
    assert {"Where", op if op != "ReduceMean" else "ReduceSum"} <= {
        n.op_type for n in lowered.graph.node
    }
    w = np.arange(15, dtype=np.float32).reshape(5, 3) / 4 - 1
    for bounds in BOUNDS:
        feeds = {"w": w, "bounds": np.array(bounds, dtype=np.int64)}
        want = run("onnxruntime", model, feeds)
        got = run("onnxruntime", lowered, feeds)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6, err_msg=str(bounds))


def test_a_constant_slice_or_another_axis_is_left() -> None:
    text = BAG.format(op="ReduceSum", keep=0, out="3").replace(
        "y = ReduceSum<keepdims = 0>(rows, zero)", "y = ReduceSum<keepdims = 0>(rows, one)"
    )
    model = onnx.parser.parse_model(text.replace("float[3] y", "float[N] y"))
    lowered = seqlower.lower(model, passes=["slice-reductions-as-masks"])
    assert "Where" not in {n.op_type for n in lowered.graph.node}


# TVM 0.27.0 compiles no Where of a reduction of a Slice by run-time bounds ("CodeGenVM cannot
# emit this Relax operator directly"): embedding_bag's bags once if-as-where makes each If a Where.
WHERE_OF_A_BAG = """
<ir_version: 8, opset_import: ["" : 18]>
g (float[4, 2] w, int64[2] bounds, bool c) => (float[1, 2] y) {
    zero = Constant<value = int64[1] {0}>()
    one = Constant<value = int64[1] {1}>()
    two = Constant<value = int64[1] {2}>()
    start = Slice(bounds, zero, one)
    end = Slice(bounds, one, two)
    rows = Slice(w, start, end, zero)
    r = ReduceSum(rows, zero)
    z = Constant<value = float[1, 2] {0, 0}>()
    y = Where(c, z, r)
}
"""


def test_tvm_cannot_compile_a_where_of_a_run_time_slice_and_runs_the_masked_form() -> None:
    model = onnx.parser.parse_model(WHERE_OF_A_BAG)
    feeds = {"w": np.arange(8, dtype=np.float32).reshape(4, 2), "bounds": np.array([1, 3])}
    feeds["c"] = np.array(False)
    with pytest.raises(RuntimeFailure, match="CodeGenVM"):
        run("tvm", model, feeds)
    lowered = seqlower.lower(model, passes=["slice-reductions-as-masks"])
    assert [n.op_type for n in lowered.graph.node].count("Slice") == 2  # the bounds' alone
    for bounds in ([1, 3], [2, 2], [0, 4]):
        feeds["bounds"] = np.array(bounds, dtype=np.int64)
        assert_same(run("onnxruntime", model, feeds), run("tvm", lowered, feeds))


def test_litert_means_an_empty_slice_wrongly_and_runs_the_masked_form() -> None:
    """LiteRT 2.1.2 (onnx2tf 2.6.9's .tflite) reduces an empty axis to arbitrary numbers;
    pad-empty-reductions pads sums, products, maxima and minima, not a mean (its count would
    change): PyTorch's embedding_bag(mode='mean') on offsets out of order, which the check
    draws. Masked, the axis is never empty."""
    model = onnx.parser.parse_model(BAG.format(op="ReduceMean", keep=0, out="3"))
    w = np.arange(15, dtype=np.float32).reshape(5, 3) / 4 - 1
    cases = [{"w": w, "bounds": np.array(b, dtype=np.int64)} for b in BOUNDS[:5]]
    wrong = [
        c["bounds"].tolist()
        for c in cases
        if not np.allclose(run("onnx2tf", model, c)[0], run("onnxruntime", model, c)[0])
    ]
    assert wrong, "LiteRT now means an empty slice right: slice-reductions-as-masks may go"
    lowered = seqlower.lower(model, target="onnx2tf", check=False, input_shapes={"w": [5, 3]})
    assert "ReduceMean" not in {n.op_type for n in lowered.graph.node}
    for feeds in cases:
        np.testing.assert_allclose(
            run("onnx2tf", lowered, feeds)[0], run("onnxruntime", model, feeds)[0], rtol=1e-6
        )


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ReduceMean"])
def test_the_masked_forms_are_exact_on_tvm_for_every_bound(op: str) -> None:
    """An empty slice included: TVM 0.27 starts a max at the lowest finite float (the masked
    max of an empty slice is written as -inf where the span is empty)."""
    model = onnx.parser.parse_model(BAG.format(op=op, keep=0, out="3"))
    lowered = seqlower.lower(model, passes=["slice-reductions-as-masks"])
    w = np.arange(15, dtype=np.float32).reshape(5, 3) / 4 - 1
    for bounds in BOUNDS:
        feeds = {"w": w, "bounds": np.array(bounds, dtype=np.int64)}
        assert_same(run("onnxruntime", model, feeds), run("tvm", lowered, feeds))


def test_the_bags_run_on_tinygrad() -> None:
    """tinygrad 0.14 fails on PyTorch's embedding_bag ('list index out of range' on its If per
    bag); lowered for it, each If is a Where over a masked reduction."""
    model = onnx.parser.parse_model(EMPTY_BAG_MAX)
    lowered = seqlower.lower(model, target="tinygrad", check=False)
    ops = [n.op_type for n in lowered.graph.node]
    assert "If" not in ops and ops.count("Slice") == 2, ops  # the bounds' alone
    feeds = {"w": np.arange(8, dtype=np.float32).reshape(4, 2)}
    for bounds in ([1, 3], [2, 2], [3, 1], [0, 4]):
        feeds["bounds"] = np.array(bounds, dtype=np.int64)
        assert_same(run("onnxruntime", model, feeds), run("tinygrad", lowered, feeds))


def test_a_long_axis_gets_its_row_numbers_at_run_time() -> None:
    """Past the bound on constants the mask's row numbers are a ``Range`` (issue 42: an axis of
    static length 1e9 was a constant of 8 GB), the same numbers."""
    from seqlower.passes._emit import MAX_CONSTANT_ELEMENTS

    length = MAX_CONSTANT_ELEMENTS + 3
    text = BAG.format(op="ReduceSum", keep=0, out="3")
    text = text.replace("float[5, 3] w", f"float[{length}, 3] w")
    model = onnx.parser.parse_model(text)
    lowered = seqlower.lower(model, passes=["slice-reductions-as-masks"])
    assert "Where" in {n.op_type for n in lowered.graph.node}
    constants = [a.t for n in lowered.graph.node for a in n.attribute if a.type == a.TENSOR]
    assert max(int(np.prod(t.dims)) for t in constants) <= MAX_CONSTANT_ELEMENTS
    w = np.random.default_rng(0).random((length, 3), dtype=np.float32)
    for bounds in [[1, 4], [-9, length + 9], [length - 5, -1], [3, 3]]:
        feeds = {"w": w, "bounds": np.array(bounds, dtype=np.int64)}
        np.testing.assert_allclose(
            run("onnxruntime", lowered, feeds)[0], run("onnxruntime", model, feeds)[0], rtol=1e-5
        )
