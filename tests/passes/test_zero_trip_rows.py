"""``loop-to-scan-fixed-states``'s zero-trip guard (tract's row) for bodies that read rows of a
value whose number of rows is unknown when lowering (``Gather(x, i)``, tf2onnx's TensorArray
reads) or rows at a counter from a run-time start (``x[first + i]``): the Scan that runs at
least once reads those rows as a scan input over ``x`` with one zero row appended when the
Loop runs none, and the counter starts from 0 then. Exact against onnxruntime for every trip
count (zero, in range, past the rows: the original fails, so does the lowered model) and every
number of rows (zero included); tract and OpenVINO run it. A body the guard cannot make safe is
named before the check (exit 2), since tract 0.23.9 returns a wrong state after a Scan of zero
iterations."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seqlower
from seqlower.errors import ProofFailedError
from tests import loop_cases
from tests.helpers import all_nodes, all_op_types, ort_run, parse
from tests.runtimes import RuntimeFailure, assert_same, run

# The smallest model of tract 0.23.9's zero-iteration Scan: a state y, n iterations.
ZERO_ITERATIONS = """
<ir_version: 8, opset_import: ["" : 17]>
g (int64 n, float y) => (float res) {
    zero = Constant<value = int64 {0}>()
    one = Constant<value = int64 {1}>()
    its = Range(zero, n, one)
    res = Scan(y, its) <body = b (float y_in, int64 i) => (float y_out) {
        f = Cast<to = 1>(i)
        y_out = Add(y_in, f)
    }, num_scan_inputs = 1>
}
"""

# The smallest model of tract 0.23.9's wrong Where: after a Where on a constant false condition,
# Where(w > 0, w, 1) gives w (0), not 1 (so the guard's count of iterations is Max(N, 1)).
FOLDED_WHERE = """
<ir_version: 8, opset_import: ["" : 17]>
g (int64 b) => (int64[K] its) {
    zero = Constant<value = int64 {0}>()
    one = Constant<value = int64 {1}>()
    f = Constant<value = bool {0}>()
    w = Where(f, b, zero)
    ran = Greater(w, zero)
    once = Where(ran, w, one)
    its = Range(zero, once, one)
}
"""

# Row i of an x of unknown length added to a state and written as a scan output.
ROWS = """
<ir_version: 8, opset_import: ["" : 17]>
g (int64 trip_count, float[N, 2] x, float[2] y) => (float[2] res_y, float[M, 2] res_scan) {
    t = Constant<value = bool {1}>()
    res_y, res_scan = Loop(trip_count, t, y) <body = b (int64 i, bool c, float[2] y_in)
            => (bool c_out, float[2] y_out, float[2] scan_out) {
        c_out = Identity(c)
        row = Gather(x, i)
        y_out = Add(y_in, row)
        scan_out = Identity(row)
    }>
}
"""

# tests/loop_cases.py's for_loop over an x of unknown length: row first + i (a counter from a
# run-time start, read as a Gather index), times i.
COUNTER = f"""
<ir_version: 8, opset_import: ["" : 11]>
g (float[N, 2] x, int64 n, int64 first) => (float[M, 2] ys, int64 last) {{
    true = Constant<value = bool {{1}}>()
    last, ys = Loop(n, true, first) {loop_cases.FOR_BODY}
}}
"""

PROPERTY = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


def _ort(model: onnx.ModelProto, feeds: dict[str, Any]) -> list[Any] | None:
    """onnxruntime's outputs (optimizations off, as the check runs it), None when it fails."""
    try:
        return list(ort_run(model, feeds))
    except Exception:
        return None


def _outcome(runtime: str, model: onnx.ModelProto, feeds: dict[str, Any]) -> list[Any] | None:
    try:
        return run(runtime, model, feeds)
    except RuntimeFailure:
        return None


def _feeds(text: str, trips: int, rows: int, first: int = 0) -> dict[str, np.ndarray]:
    x = (np.arange(rows * 2, dtype=np.float32).reshape(rows, 2) - 3) / 2
    if text is ROWS:
        return {
            "trip_count": np.array(trips, np.int64),
            "x": x,
            "y": np.array([1.5, -2], np.float32),
        }
    return {"x": x, "n": np.array(trips, np.int64), "first": np.array(first, np.int64)}


def _lowered(text: str) -> onnx.ModelProto:
    lowered = seqlower.lower(parse(text), target="tract", check=False)
    onnx.checker.check_model(lowered, full_check=True)
    onnx.shape_inference.infer_shapes(lowered, strict_mode=True)
    return lowered


def _run_once(model: onnx.ModelProto) -> bool:
    """Whether ``model`` holds a Scan run at least once (``Max(count, 1)`` iterations): its Loop
    was guarded, not refused."""
    ops = all_op_types(model)
    names = [o for n in all_nodes(model) for o in n.output]
    return "Loop" not in ops and any("at_least_once" in name for name in names)


def test_tract_returns_a_wrong_state_after_zero_iterations() -> None:
    """What the guard works around (tract 0.23.9): 0 for the state, not its initial value."""
    model = parse(ZERO_ITERATIONS)
    y = np.array(2.5, np.float32)
    (two,) = run("tract", model, {"n": np.array(2, np.int64), "y": y})
    assert float(two) == 3.5  # 2.5 + 0 + 1
    (none,) = run("tract", model, {"n": np.array(0, np.int64), "y": y})
    assert float(none) != 2.5


def test_tract_takes_a_where_after_a_folded_one_wrong() -> None:
    """What the guard's Max(N, 1) works around (tract 0.23.9): onnxruntime gives [0]."""
    feeds = {"b": np.array(3, np.int64)}
    assert ort_run(parse(FOLDED_WHERE), feeds)[0].tolist() == [0]
    assert run("tract", parse(FOLDED_WHERE), feeds)[0].tolist() == []


@pytest.mark.parametrize("text", [ROWS, COUNTER], ids=["rows", "counter"])
def test_lowered_as_a_guarded_scan_reading_rows_as_a_scan_input(text: str) -> None:
    lowered = _lowered(text)
    ops = all_op_types(lowered)
    assert "Loop" not in ops and "Scan" in ops and "Greater" in ops  # run at least once, masked
    (scan,) = [n for n in all_nodes(lowered) if n.op_type == "Scan"]
    body = next(a.g for a in scan.attribute if a.name == "body")
    assert "Gather" not in [n.op_type for n in body.node]  # the rows are scanned


@pytest.mark.parametrize("text", [ROWS, COUNTER], ids=["rows", "counter"])
@PROPERTY
@given(trips=st.integers(-2, 7), rows=st.integers(0, 5), first=st.integers(-6, 6))
def test_exact_against_onnxruntime_for_every_trip_count(
    text: str, trips: int, rows: int, first: int
) -> None:
    original, lowered = parse(text), _lowered(text)
    feeds = _feeds(text, trips, rows, first)
    want = _ort(original, feeds)
    got = _ort(lowered, feeds)
    if want is None:
        assert got is None  # x has no row i (or first + i): the original fails, and so does this
    else:
        assert got is not None
        assert_same(want, got)


@pytest.mark.parametrize(
    ("trips", "rows", "first"),
    [(0, 0, 0), (0, 3, 9), (0, 0, -4), (2, 3, 0), (3, 3, -3), (1, 0, 0), (4, 3, 0)],
)
@pytest.mark.parametrize("text", [ROWS, COUNTER], ids=["rows", "counter"])
@pytest.mark.parametrize("runtime", ["tract", "openvino"])
def test_runs_on_tract_and_openvino(
    runtime: str, text: str, trips: int, rows: int, first: int
) -> None:
    lowered = _lowered(text)
    feeds = _feeds(text, trips, rows, first)
    want = _ort(parse(text), feeds)
    got = _outcome(runtime, lowered, feeds)
    if want is not None:
        assert got is not None
        assert_same(want, got)
    elif runtime == "tract":
        assert got is None  # its Gather aborts on a row x lacks, where the original fails
    # OpenVINO's Gather returns zeros for an index out of range: no failure there.


# Zero trip counts of tests/loop_cases.py's tf2onnx loops (the check drew the first of each),
# and a time axis of no rows.
ZERO_TRIPS: dict[str, list[dict[str, Any]]] = {
    "for_loop": [{"n": 0, "first": 7}, {"n": 0, "first": -9}],
    "dynamic_rnn": [{"lengths": [-9, -4]}, {"rows": 0}, {"rows": 0, "lengths": [0, 0]}],
    "bidirectional_rnn": [{"lengths": [0, 0]}, {"rows": 0, "lengths": [0, 0]}],
}


@pytest.mark.parametrize("name", sorted(ZERO_TRIPS))
@pytest.mark.parametrize("runtime", ["tract", "openvino"])
def test_tf2onnx_loops_of_zero_trips(runtime: str, name: str) -> None:
    model, feeds = loop_cases.CASES[name]()
    lowered = seqlower.lower(model, target="tract", check=False)
    if runtime == "openvino" and name == "for_loop":
        pytest.skip("its body reads x from outside, which OpenVINO's Scan takes no read of")
    for change in ZERO_TRIPS[name]:
        case = dict(feeds)
        for key, value in change.items():
            if key == "rows":
                case["x"] = feeds["x"][:value]
            else:
                case[key] = np.array(value, feeds[key].dtype)
        want = ort_run(model, case)
        got = _ort(lowered, case)
        assert got is not None
        assert_same(want, got)
        assert_same(want, run(runtime, lowered, case))


# Row i + 1: iteration 0 reads row 1, which no padding row provides.
NEXT_ROW = ROWS.replace(
    "row = Gather(x, i)",
    "one = Constant<value = int64 {1}>()\n        j = Add(i, one)\n        row = Gather(x, j)",
)


@pytest.mark.parametrize("runtime", ["onnxruntime", "tract"])
def test_a_body_that_can_fail_on_iteration_0_runs_guarded(runtime: str) -> None:
    """Its count is an input's value: tract types no If on it around the Scan (what guards a
    count of shapes, ``test_zero_trip_guard.py``), so the Scan's body runs under an If on the
    count (``test_zero_trip_guarded_body.py``): row 1 is never read when the Loop runs none."""
    model = parse(NEXT_ROW)
    lowered = seqlower.lower(model, target="tract", check=False)
    assert "Loop" not in all_op_types(lowered)
    y = np.array([0.5, -1.0], np.float32)
    for n, rows in ((0, 0), (0, 1), (1, 2), (3, 4)):
        x = np.arange(2 * rows, dtype=np.float32).reshape(rows, 2)
        feeds = {"trip_count": np.array(n, np.int64), "x": x, "y": y}
        assert_same(ort_run(model, feeds), run(runtime, lowered, feeds))


# An RNN over the rows of x[T, B, 3] (tf2onnx's Keras RNN: M = T), its state starting from zeros
# of x's batch: the batch is unknown when lowering, but one symbol for both (ONNX's data
# propagation), so the body is proven.
BATCHED = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[T, B, 3] x) => (float[B, 3] h, float[M, B, 3] hs) {
    t = Constant<value = bool {1}>()
    batch = Shape<start = 1, end = 2>(x)
    steps = Shape<start = 0, end = 1>(x)
    axis = Constant<value = int64[1] {0}>()
    n = Squeeze(steps, axis)
    three = Constant<value = int64[1] {3}>()
    shape = Concat<axis = 0>(batch, three)
    h0 = ConstantOfShape<value = float[1] {0}>(shape)
    h, hs = Loop(n, t, h0) <body = b (int64 i, bool c, float[B, 3] s)
            => (bool c_out, float[B, 3] s_out, float[B, 3] y) {
        c_out = Identity(c)
        row = Gather(x, i)
        sum = Add(row, s)
        s_out = Tanh(sum)
        y = Identity(s_out)
    }>
}
"""


@pytest.mark.parametrize(("rows", "batch"), [(0, 2), (3, 2), (0, 1), (1, 3)])
@pytest.mark.parametrize("runtime", ["tract", "openvino"])
def test_a_batch_unknown_when_lowering_is_one_symbol(runtime: str, rows: int, batch: int) -> None:
    lowered = _lowered(BATCHED)
    assert _run_once(lowered)
    x = np.arange(rows * batch * 3, dtype=np.float32).reshape(rows, batch, 3) / 10
    want = ort_run(parse(BATCHED), {"x": x})
    got = run(runtime, lowered, {"x": x})
    if rows == 0:  # onnxruntime shapes a zero-trip Loop's scan output from the body's declared
        # output, its unknown sizes 0: [0, 0, 3]; the Scan's rows have the batch: [0, B, 3]
        assert want[1].shape == (0, 0, 3) and got[1].shape == (0, batch, 3)
        want, got = want[:1], got[:1]
    assert_same(want, got)


def test_sizes_not_proven_to_agree_are_named_with_the_flag() -> None:
    """The state from an input of its own batch: the sizes may differ, so iteration 0 may fail
    where the original (running none) does not. The body runs under an If on the count, which
    tract types on the input shapes (its declared facts: B and C, which no fact unifies): the
    check names it, and fixed input shapes prove it."""
    text = BATCHED.replace("(float[T, B, 3] x)", "(float[T, B, 3] x, float[C, 3] h0)")
    text = text.replace("h0 = ConstantOfShape<value = float[1] {0}>(shape)", "")
    with pytest.raises(ProofFailedError) as raised:
        seqlower.lower(parse(text), target="tract")
    message = str(raised.value)
    assert "Impossible to unify" in message and "--overwrite-input-shape" in message


@pytest.mark.parametrize("trips", [0, 1, 3])
def test_rows_of_unknown_size_over_a_count_from_values_are_read_in_place(trips: int) -> None:
    """tract 0.23.9 types no scan input of rows of a size unknown when lowering whose length
    comes from values ('Source node without a determined fact'), nor an outer read of such a
    length: the body reads x and a zero row in place, at indices scanned."""
    text = BATCHED.replace("(float[T, B, 3] x)", "(float[T, B, 3] x, int64 n)")
    text = text.replace("n = Squeeze(steps, axis)", "")
    lowered = _lowered(text)
    (scan,) = [n for n in all_nodes(lowered) if n.op_type == "Scan"]
    body = next(a.g for a in scan.attribute if a.name == "body")
    assert "Gather" in [n.op_type for n in body.node]  # the rows read in place
    x = np.arange(3 * 2 * 3, dtype=np.float32).reshape(3, 2, 3) / 10
    feeds = {"x": x, "n": np.array(trips, np.int64)}
    want = ort_run(parse(text), feeds)
    got = run("tract", lowered, feeds)
    if trips == 0:  # onnxruntime's zero-trip scan output: its unknown sizes 0
        assert want[1].shape == (0, 0, 3) and got[1].shape == (0, 2, 3)
        want, got = want[:1], got[:1]
    assert_same(want, got)


# tf2onnx's map_fn over tf.reverse (../shared/realworld-samples' tf_map_fn_reverse): each row
# [T', B'] reversed along its time axis by ReverseSequence with lengths Expand(T', [B']), read
# from the row's Shape; proven because those lengths are one per batch entry, each T'.
MAP_REVERSE = """
<ir_version: 8, opset_import: ["" : 15]>
g (float[N, T, B] x) => (float[M, T2, B2] y) {
    t = Constant<value = bool {1}>()
    count = Shape<start = 0, end = 1>(x)
    axis = Constant<value = int64[1] {0}>()
    n = Squeeze(count, axis)
    y = Loop(n, t) <body = b (int64 i, bool c) => (bool c_out, float[T1, B1] r) {
        c_out = Identity(c)
        row = Gather(x, i)
        shape = Shape(row)
        one = Constant<value = int64[1] {1}>()
        zero = Constant<value = int64[1] {0}>()
        batch = Gather(shape, one)
        time = Gather(shape, zero)
        lens = Expand(time, batch)
        r = ReverseSequence<batch_axis = 1, time_axis = 0>(row, lens)
    }>
}
"""


@pytest.mark.parametrize("shape", [(0, 3, 4), (1, 3, 4), (3, 5, 2), (2, 1, 1), (3, 4, 0)])
def test_a_map_over_reversed_rows_is_proven(shape: tuple[int, ...]) -> None:
    lowered = _lowered(MAP_REVERSE)
    # a Scan run at least once, over max(N, 1 - count) rows: tract types both with the model's
    # declared facts (N + (count == 0) it did not)
    assert _run_once(lowered)
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    (want,) = ort_run(parse(MAP_REVERSE), {"x": x})
    for runtime in ("tract", "tract-symbolic", "openvino"):
        (got,) = run(runtime, lowered, {"x": x})
        if shape[0] == 0:  # onnxruntime's zero-trip scan output: its unknown sizes 0
            assert want.shape == (0, 0, 0) and got.shape == shape
        else:
            assert_same([want], [got])


# Lengths B' (may exceed T'): not proven on iteration 0, so the Scan's body runs under an If on
# the count (``test_zero_trip_guarded_body.py``).
MAP_REVERSE_BY_BATCH = MAP_REVERSE.replace(
    "lens = Expand(time, batch)", "lens = Expand(batch, batch)"
)


@pytest.mark.parametrize("shape", [(0, 3, 2), (1, 3, 2), (3, 5, 2), (2, 2, 3)])
def test_reverse_sequence_lengths_not_proven_run_guarded(shape: tuple[int, ...]) -> None:
    model = parse(MAP_REVERSE_BY_BATCH)
    lowered = seqlower.lower(model, target="tract")  # the check on tract included
    assert "If" in all_op_types(lowered)
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    if shape[1] < shape[2]:  # lengths past the time axis: both fail
        for runtime, candidate in (("onnxruntime", model), ("tract", lowered)):
            with pytest.raises(RuntimeFailure):
                run(runtime, candidate, {"x": x})
        return
    (want,) = ort_run(model, {"x": x})
    for runtime in ("tract", "tract-symbolic"):
        (got,) = run(runtime, lowered, {"x": x})
        if shape[0] == 0:  # onnxruntime's zero-trip scan output: its unknown sizes 0
            assert want.shape == (0, 0, 0) and got.shape == shape
        else:
            assert_same([want], [got])


def test_reverse_sequence_lengths_of_the_time_axis_are_never_exit_0() -> None:
    """T' lengths for B' entries: the guarded body's two branches differ in tract's declared
    facts ([T, range] and [T, B]); the check on tract's declared facts names it."""
    text = MAP_REVERSE.replace("batch = Gather(shape, one)", "batch = Gather(shape, zero)")
    with pytest.raises(ProofFailedError, match="symbolic facts"):
        seqlower.lower(parse(text), target="tract")


# PyTorch's nn.Linear in a while_loop body (torch family's while_gru_cell): Gemm with transB.
GEMM_ROWS = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[T, B, 3] x, float[4, 3] w, float[4] bias) => (float[M, B, 4] ys) {
    t = Constant<value = bool {1}>()
    steps = Shape<start = 0, end = 1>(x)
    axis = Constant<value = int64[1] {0}>()
    n = Squeeze(steps, axis)
    ys = Loop(n, t) <body = b (int64 i, bool c) => (bool c_out, float[B, 4] y) {
        c_out = Identity(c)
        row = Gather(x, i)
        y = Gemm<transB = 1>(row, w, bias)
    }>
}
"""


@pytest.mark.parametrize("rows", [0, 3])
def test_a_gemm_is_proven_on_iteration_0(rows: int) -> None:
    lowered = _lowered(GEMM_ROWS)
    assert _run_once(lowered)
    rng = np.random.default_rng(rows)
    feeds = {
        "x": rng.standard_normal((rows, 2, 3)).astype(np.float32),
        "w": rng.standard_normal((4, 3)).astype(np.float32),
        "bias": rng.standard_normal(4).astype(np.float32),
    }
    want = ort_run(parse(GEMM_ROWS), feeds)
    for runtime in ("tract", "onnxruntime"):  # OpenVINO loads no Scan body reading outer values
        got = run(runtime, lowered, feeds)
        if rows:
            np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
        else:  # both empty; onnxruntime's zero-trip sizes come from the body's declaration
            assert got[0].size == 0 and want[0].size == 0


def test_a_gemm_of_sizes_the_same_on_every_iteration_is_accepted() -> None:
    """w's K and the rows' 3 are not proven to agree, but neither changes from one iteration to
    the next: iteration 0 fails exactly when every iteration does
    (tests/passes/test_zero_trip_steady_shapes.py)."""
    text = GEMM_ROWS.replace("float[4, 3] w", "float[4, K] w")
    assert _run_once(_lowered(text))
