"""The zero-trip guard's rule for sizes not proven to agree (``_first_iteration``, tract's
``loop-to-scan-fixed-states``): an op that fails on shapes alone, all of them the same on every
iteration (outer values, states whose shape the body keeps, rows of a fixed row shape), fails on
the added iteration 0 exactly when the Loop fails on every iteration, so it is accepted; the one
difference is a Loop that runs none on inputs its body rejects, where the lowered model fails
instead of returning empty. Failures that depend on values (an index read from a row) or on a
shape that changes from one iteration to the next stay proven, or named."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest

import seqlower
from seqlower.errors import SeqlowerError, TargetError
from tests.helpers import all_op_types, ort_run, parse
from tests.runtimes import RuntimeFailure, assert_same, run

# tf2onnx's bidirectional_dynamic_rnn with a lengths input (../shared/realworld-samples'
# v1_bidir_dynamic_rnn_lens_input), cut down: the cell reads Concat(row, s), which ties the
# state's batch to x's on every iteration that runs; the state is masked by the lengths' [L, 1]
# (L and B two unrelated symbols: they agree only at run time) and may change shape (B = 1).
MASKED_RNN = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[T, B, 3] x, float[L] m, float[6, 3] w) => (float[B, 3] h, float[M, B, 3] hs) {
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
        both = Concat<axis = 1>(row, s)
        cell = MatMul(both, w)
        act = Tanh(cell)
        one = Constant<value = int64[1] {1}>()
        col = Unsqueeze(m, one)
        keep = Mul(s, col)
        new = Mul(act, col)
        s_out = Add(keep, new)
        y = Identity(s_out)
    }>
}
"""

# The trip count from values: rows of a batch unknown when lowering are read in place, from x
# and a zero row at scanned indices (tract types no scan input of them then).
COUNTED = MASKED_RNN.replace("(float[T, B, 3] x,", "(float[T, B, 3] x, int64 n,").replace(
    "n = Squeeze(steps, axis)", ""
)


def _lowered(text: str) -> onnx.ModelProto:
    lowered = seqlower.lower(parse(text), target="tract", check=False)
    onnx.checker.check_model(lowered, full_check=True)
    onnx.shape_inference.infer_shapes(lowered, strict_mode=True)
    return lowered


def _feeds(text: str, trips: int, batch: int, lengths: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(trips * 10 + batch)
    feeds = {
        "x": rng.standard_normal((trips, batch, 3)).astype(np.float32),
        "m": (np.arange(lengths) % 2).astype(np.float32) + 0.5,
        "w": rng.standard_normal((6, 3)).astype(np.float32),
    }
    if text is COUNTED:
        feeds["n"] = np.array(trips, np.int64)
    return feeds


def _outcome(runtime: str, model: onnx.ModelProto, feeds: dict[str, Any]) -> list[Any] | None:
    try:
        return run(runtime, model, feeds)
    except RuntimeFailure:
        return None


@pytest.mark.parametrize("text", [MASKED_RNN, COUNTED], ids=["shape_count", "value_count"])
def test_sizes_the_same_on_every_iteration_are_accepted(text: str) -> None:
    lowered = _lowered(text)
    assert "Loop" not in all_op_types(lowered) and "Greater" in all_op_types(lowered)


@pytest.mark.parametrize("trips", [0, 1, 2, 3])
@pytest.mark.parametrize(("batch", "lengths"), [(2, 2), (3, 1), (1, 1)])
@pytest.mark.parametrize("runtime", ["tract", "onnxruntime"])
@pytest.mark.parametrize("text", [MASKED_RNN, COUNTED], ids=["shape_count", "value_count"])
def test_runs_and_matches_at_every_trip_count(
    text: str, runtime: str, batch: int, lengths: int, trips: int
) -> None:
    """Where the inputs agree (the lengths one per batch entry, or one for all)."""
    feeds = _feeds(text, trips, batch, lengths)
    want = ort_run(parse(text), feeds)
    got = run(runtime, _lowered(text), feeds)
    if trips == 0:  # onnxruntime shapes a zero-trip Loop's scan output from the body's declared
        # output, its unknown sizes 0: [0, 0, 3]; the Scan's rows have the batch: [0, B, 3]
        assert want[1].shape == (0, 0, 3) and got[1].shape == (0, batch, 3)
        want, got = want[:1], got[:1]
    assert_same(want, got)


@pytest.mark.parametrize("runtime", ["tract", "onnxruntime"])
@pytest.mark.parametrize("text", [MASKED_RNN, COUNTED], ids=["shape_count", "value_count"])
def test_inputs_the_body_rejects_fail_instead_of_returning_empty(text: str, runtime: str) -> None:
    """The one accepted difference: 3 lengths for a batch of 2, which every iteration rejects;
    the Loop runs none and returns its initial state, the lowered model fails (never a wrong
    number)."""
    for trips in (0, 2):
        feeds = _feeds(text, trips, 2, 3)
        original = _outcome("onnxruntime", parse(text), feeds)
        assert (original is None) == (trips > 0)
        assert _outcome(runtime, _lowered(text), feeds) is None


@pytest.mark.parametrize("trips", [0, 1])
@pytest.mark.parametrize("runtime", ["tract", "onnxruntime"])
def test_a_state_that_changes_shape_fails_loudly(runtime: str, trips: int) -> None:
    """A batch of 1 and 3 lengths: the state becomes [3, 3] on iteration 0 (the original runs
    one iteration, and returns its initial state when it runs none); a Scan keeps its states'
    shape, so the lowered model fails on both runtimes instead of masking a [3, 3] state into a
    wrong-shaped result (with one trip, as any Loop lowered to a Scan: README's limits)."""
    feeds = _feeds(MASKED_RNN, trips, 1, 3)
    assert _outcome("onnxruntime", parse(MASKED_RNN), feeds) is not None
    assert _outcome(runtime, _lowered(MASKED_RNN), feeds) is None


@pytest.mark.parametrize("trips", [0, 2, 3, 5])
def test_rows_read_in_place_fail_past_the_rows_as_the_original(trips: int) -> None:
    """The count from values beyond x's 3 rows: the original fails at its Gather, so does the
    lowered model (the zero row appended is read only when the Loop runs none)."""
    feeds = _feeds(COUNTED, 3, 2, 2)
    feeds["n"] = np.array(trips, np.int64)
    want = _outcome("onnxruntime", parse(COUNTED), feeds)
    for runtime in ("tract", "onnxruntime"):
        got = _outcome(runtime, _lowered(COUNTED), feeds)
        assert (got is None) == (want is None) == (trips > 3)
        if want is not None and got is not None and trips:
            assert_same(want, got)


# Changes that make the rule not apply: the body then runs under an If on the count
# (test_zero_trip_guarded_body.py); the check on tract names what tract cannot type.
GUARDED = {
    # an index read from the row: its value on the padded row is 0, the original's anything
    "index_from_row": (
        "keep = Mul(s, col)",
        "zero = Constant<value = int64 {0}>()\n        f = Gather<axis = 1>(row, zero)\n"
        "        k = Cast<to = 7>(f)\n        keep = Gather(s, k)",
        "Gather",
    ),
    # an integer division by a value read from the row
    "division_by_a_value": (
        "keep = Mul(s, col)",
        "r = Cast<to = 7>(row)\n        q = Div(r, r)\n        qf = Cast<to = 1>(q)\n"
        "        keep = Mul(s, qf)",
        "Div",
    ),
    # a slice as long as the iteration number: a size that changes from one iteration to the next
    "iteration_sized": (
        "keep = Mul(s, col)",
        "z = Constant<value = int64[1] {0}>()\n        i1 = Unsqueeze(i, z)\n"
        "        part = Slice(m, z, i1, z)\n        pcol = Unsqueeze(part, one)\n"
        "        keep = Mul(s, pcol)",
        "Mul",
    ),
    # the cell no longer reads the state, so nothing ties its batch to x's: Mul(s, col) may
    # make it L from 1, a shape not the same on every iteration
    "state_resized_by_broadcasting": ("s_out = Add(keep, new)", "s_out = Add(keep, new)", "Mul"),
    # a state slid along its rows (its first row dropped, rows appended): the same
    "state_resized_by_concat": (
        "s_out = Add(keep, new)",
        "grown = Concat<axis = 0>(s, new)\n        z = Constant<value = int64[1] {0}>()\n"
        "        big = Constant<value = int64[1] {1000}>()\n"
        "        s_out = Slice(grown, one, big, z)",
        "Mul",
    ),
}


@pytest.mark.parametrize("name", sorted(GUARDED))
def test_failures_on_values_or_changing_shapes_run_guarded(name: str) -> None:
    """Never a wrong number: where the lowered model runs on onnxruntime (0 to 3 trips) the
    original runs and matches; a state whose shape changes from one iteration to the next (the
    original runs, a Scan's state keeps its shape) fails there, and the check on tract's
    declared facts names it (exit 1: 'Impossible to unify Sym(B) with Broadcast'), or it
    cannot prove it (exit 3: the original fails on every input drawn)."""
    old, new, _ = GUARDED[name]
    text = MASKED_RNN.replace(old, new)
    if name.startswith("state_resized"):  # nothing ties the state's batch to x's
        text = text.replace("both = Concat<axis = 1>(row, s)", "both = Concat<axis = 1>(row, row)")
    assert text != MASKED_RNN
    lowered = _lowered(text)
    assert "Loop" not in all_op_types(lowered) and "If" in all_op_types(lowered)
    for trips in range(4):
        for batch, lengths in ((2, 2), (1, 3)):
            feeds = _feeds(MASKED_RNN, trips, batch, lengths)
            want = _outcome("onnxruntime", parse(text), feeds)
            got = _outcome("onnxruntime", lowered, feeds)
            assert want is not None or got is None
            if want is not None and got is not None:  # a zero-trip row's unknown sizes aside
                assert_same(want[:1] if trips == 0 else want, got[:1] if trips == 0 else got)
    with pytest.raises(SeqlowerError) as raised:  # never exit 0 unproven
        seqlower.lower(parse(text), target="tract")
    assert raised.value.exit_code in (1, 3)


def test_a_state_that_grows_is_named() -> None:
    """A Scan keeps its states' shape: named before the proof."""
    text = MASKED_RNN.replace("s_out = Add(keep, new)", "s_out = Concat<axis = 0>(s, keep)")
    with pytest.raises(TargetError) as raised:
        seqlower.lower(parse(text), target="tract", check=False)
    message = str(raised.value)
    assert raised.value.exit_code == 2 and "Loop" in message and "Concat" in message, message
