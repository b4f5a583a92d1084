"""``iteration-row-slices`` and ``loop-to-scan-fixed-states``'s zero-trip guard (tract's row):
ONNX's ``test_loop11`` (``y + x[i:i+1]`` on iteration ``i`` of a Loop whose trip count is a
graph input) runs on tract,
exact against onnxruntime for every trip count: zero (the Scan runs once, its results masked),
in range, and beyond ``len(x)`` (the original fails: its scan output changes shape; so does the
lowered model, at its Gather)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seqlower
from seqlower.passes import PASSES, create_pass
from seqlower.targets import PIPELINES
from tests.helpers import all_op_types, parse
from tests.runtimes import RuntimeFailure, assert_same, run

# ONNX's test_loop11 as its generator writes it (opset 11: Unsqueeze's axes an attribute).
LOOP11 = """
<ir_version: 6, opset_import: ["" : 11]>
test_loop11 (int64 trip_count, bool cond, float[1] y) => (float[1] res_y, float[5, 1] res_scan) {
    res_y, res_scan = Loop(trip_count, cond, y) <body = loop_body (int64 iter_count, bool cond_in,
            float[1] y_in) => (bool cond_out, float[1] y_out, float[1] scan_out) {
        cond_out = Identity(cond_in)
        x = Constant<value = float[5] {1, 2, 3, 4, 5}>()
        one = Constant<value = int64 {1}>()
        end = Add(iter_count, one)
        slice_start = Unsqueeze<axes = [0]>(iter_count)
        slice_end = Unsqueeze<axes = [0]>(end)
        slice_out = Slice(x, slice_start, slice_end)
        y_out = Add(y_in, slice_out)
        scan_out = Identity(y_out)
    }>
}
"""

# The same at opset 17, the row of a [5, 2] x read from outside, ends as [i] + 1.
LOOP17 = """
<ir_version: 8, opset_import: ["" : 17]>
g (int64 trip_count, bool cond, float[1, 2] y, float[5, 2] x) => (float[1, 2] res_y,
        float[N, 1, 2] res_scan) {
    res_y, res_scan = Loop(trip_count, cond, y) <body = b (int64 i, bool c, float[1, 2] y_in)
            => (bool c_out, float[1, 2] y_out, float[1, 2] scan_out) {
        c_out = Identity(c)
        one = Constant<value = int64[1] {1}>()
        ax = Constant<value = int64[1] {0}>()
        s = Unsqueeze(i, ax)
        e = Add(s, one)
        row = Slice(x, s, e, ax)
        y_out = Mul(y_in, row)
        scan_out = Identity(y_out)
    }>
}
"""

PROPERTY = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


def _outcome(runtime: str, model: onnx.ModelProto, feeds: dict[str, Any]) -> list[Any] | None:
    """The outputs, or None when the runtime fails the run."""
    try:
        return run(runtime, model, feeds)
    except RuntimeFailure:
        return None


def _feeds(text: str, trips: int, cond: bool) -> dict[str, np.ndarray]:
    feeds = {"trip_count": np.array(trips, np.int64), "cond": np.array(cond)}
    if text is LOOP11:
        feeds["y"] = np.array([-2], np.float32)
    else:
        feeds["y"] = np.array([[1.5, -2]], np.float32)
        feeds["x"] = np.arange(10, dtype=np.float32).reshape(5, 2) - 4
    return feeds


@pytest.mark.parametrize("text", [LOOP11, LOOP17], ids=["opset11", "opset17"])
def test_lowered_as_gather_and_guarded_scan(text: str) -> None:
    lowered = seqlower.lower(parse(text), target="tract", check=False)
    onnx.checker.check_model(lowered, full_check=True)
    onnx.shape_inference.infer_shapes(lowered, strict_mode=True)
    ops = all_op_types(lowered)
    assert "Slice" not in ops and "Loop" not in ops and "Scan" in ops
    assert "Greater" in ops  # the Scan runs at least once, masked


@pytest.mark.parametrize("text", [LOOP11, LOOP17], ids=["opset11", "opset17"])
@PROPERTY
@given(trips=st.integers(-2, 9), cond=st.booleans())
def test_exact_against_onnxruntime_for_every_trip_count(text: str, trips: int, cond: bool) -> None:
    original = parse(text)
    lowered = seqlower.lower(original, target="tract", check=False)
    feeds = _feeds(text, trips, cond)
    want = _outcome("onnxruntime", original, feeds)
    if cond and trips > 5:
        assert want is None  # 'Inconsistent shape in loop output': x[5:6] is empty
    got = _outcome("onnxruntime", lowered, feeds)
    if want is None:
        assert got is None
    else:
        assert got is not None
        assert_same(want, got)


@pytest.mark.parametrize("trips", [0, 1, 5, 6, -1])
@pytest.mark.parametrize("runtime", ["tract", "openvino"])
def test_runs_on_tract_and_openvino(runtime: str, trips: int) -> None:
    original = parse(LOOP11)
    lowered = seqlower.lower(original, target="tract", check=False)
    for cond in (True, False):
        feeds = _feeds(LOOP11, trips, cond)
        want = _outcome("onnxruntime", original, feeds)
        got = _outcome(runtime, lowered, feeds)
        if want is not None:
            assert got is not None
            assert_same(want, got)
        elif runtime == "tract":
            assert got is None  # its Gather aborts on x[5], where the original fails
        # OpenVINO's Gather returns zeros for an index out of range: no failure there.


# The slice only feeds a state: an empty slice makes the state empty, and the original runs on.
STATE_ONLY = """
<ir_version: 8, opset_import: ["" : 17]>
g (int64 trip_count, float[1] y) => (float[?] res_y) {
    t = Constant<value = bool {1}>()
    res_y = Loop(trip_count, t, y) <body = b (int64 i, bool c, float[?] y_in)
            => (bool c_out, float[?] y_out) {
        c_out = Identity(c)
        x = Constant<value = float[5] {1, 2, 3, 4, 5}>()
        one = Constant<value = int64[1] {1}>()
        ax = Constant<value = int64[1] {0}>()
        s = Unsqueeze(i, ax)
        e = Add(s, one)
        row = Slice(x, s, e)
        y_out = Add(y_in, row)
    }>
}
"""


def test_a_slice_whose_emptiness_the_loop_survives_is_left() -> None:
    model = parse(STATE_ONLY)
    feeds = {"trip_count": np.array(7, np.int64), "y": np.zeros(1, np.float32)}
    (want,) = run("onnxruntime", model, feeds)
    assert want.shape == (0,)  # the original runs on, y empty
    pass_ = PASSES["iteration-row-slices"]()
    pass_(ir.serde.deserialize_model(model))
    assert pass_.rewritten == 0  # x[i:i+1] stays a Slice (named for tract later)


def test_registered_and_in_tract_row_only() -> None:
    assert "iteration-row-slices" in PASSES
    rows = [t.name for t in PIPELINES.values() if "iteration-row-slices" in t.passes]
    assert rows == ["tract"]
    guarded = [
        t.name
        for t in PIPELINES.values()
        if any(getattr(create_pass(p), "guards_zero_trips", False) for p in t.pass_names)
    ]
    assert guarded == ["tract"]
