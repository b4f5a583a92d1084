"""``peel-first-iteration`` (target ``tract``): a Loop whose state changes shape on its first
iteration (Paddle's placeholder: a scalar 0 that becomes a ``[3]``; a state of size 0 that the
first iteration gives its size) runs that iteration before it, then the rest as a Scan; the same
numbers as the Loop on onnxruntime, for every trip count, counted or stopped on data, with scan
outputs; a Loop that may run none is refused, named."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import seqlower
from seqlower.errors import TargetError
from seqlower.passes.loops.peel_first_iteration import PeelFirstIteration
from tests.helpers import all_op_types
from tests.runtimes import assert_same, require, run

# A placeholder: ``acc`` starts as a scalar 0 and the body returns it as a [3]; each iteration's
# row is a scan output (ITERATION: one that reads the iteration number).
RANK = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x) => (float[3] acc, float[N,3] rows) {
    m = Constant <value = int64 {TRIPS}> ()
    t = Constant <value = bool {1}> ()
    s0 = Constant <value = float {0}> ()
    acc, rows = Loop(m, t, s0) <body = b (int64 i, bool c, float s) => (bool c_out, float[3] s2,
            float[3] row) {
        c_out = Identity(c)
        s2 = Add(s, x)
        row = Mul(s2, s2)
    }>
}
"""

# A state of size 0 that the first iteration gives its size: the first 3 of ``[s, x]`` are
# ``x`` when ``s`` is empty, ``s`` after.
GROWS = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x) => (float[3] acc, int64 k) {
    zero = Constant <value = int64 {0}> ()
    limit = Constant <value = int64 {TRIPS}> ()
    s0 = Constant <value = float[0] {}> ()
    go = Less(zero, limit)
    k, acc = Loop("", go, zero, s0) <body = b (int64 i, bool c, int64 j, float[?] s)
            => (bool c_out, int64 j2, float[3] s2) {
        one = Constant <value = int64 {1}> ()
        j2 = Add(j, one)
        begin = Constant <value = int64[1] {0}> ()
        three = Constant <value = int64[1] {3}> ()
        both = Concat <axis = 0> (s, x)
        head = Slice(both, begin, three)
        s2 = Add(head, x)
        c_out = Less(j2, limit)
    }>
}
"""

# A while-loop that stops on data before a bound (Paddle's Newton: ``i < 40 and err > tol``),
# its initial condition true: peeled (the placeholder read by the body), then the rest frozen.
DATA = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x, float tol) => (float[3] acc, int64 k) {
    zero = Constant <value = int64 {0}> ()
    limit = Constant <value = int64 {TRIPS}> ()
    big = Constant <value = float {1000}> ()
    s0 = Constant <value = float {0}> ()
    more = Less(zero, limit)
    far = Less(zero, limit)
    go = And(more, far)
    k, acc = Loop("", go, zero, s0) <body = b (int64 i, bool c, int64 j, float s)
            => (bool c_out, int64 j2, float[3] s2) {
        one = Constant <value = int64 {1}> ()
        half = Constant <value = float {0.5}> ()
        j2 = Add(j, one)
        h = Mul(x, half)
        s2 = Add(s, h)
        top = ReduceMax <keepdims = 0> (s2)
        bounded = Less(j2, limit)
        unsettled = Less(top, tol)
        c_out = And(bounded, unsettled)
    }>
}
"""

ITERATION = RANK.replace("row = Mul(s2, s2)", "fi = Cast <to = 1> (i)\n row = Mul(s2, fi)")

# Paddle's counter step (``scale``): through float and back, its final value read.
PADDLE_STEP = DATA.replace(
    "j2 = Add(j, one)",
    "one_f = Constant <value = float {1}> ()\n jf = Cast <to = 1> (j)\n"
    " jn = Add(jf, one_f)\n j2 = Cast <to = 7> (jn)",
)

X = np.array([1.0, -2.0, 3.5], np.float32)


def _model(text: str, trips: int) -> onnx.ModelProto:
    return onnx.parser.parse_model(text.replace("TRIPS", str(trips)))


def _assert_runs(
    model: onnx.ModelProto,
    feeds: dict[str, np.ndarray],
    targets: tuple[str, ...] = ("tract", "openvino"),
    runtimes: tuple[str, ...] | None = None,
) -> None:
    """Lowered for each target, it gives the Loop's numbers on onnxruntime and on the target
    (``runtimes``: on those only)."""
    expected = run("onnxruntime", model, feeds)
    for target in targets:
        lowered = seqlower.lower(model, target=target, check=False)
        onnx.checker.check_model(lowered, full_check=True)
        if target == "tract":
            assert "Loop" not in all_op_types(lowered)
        assert_same(expected, run("onnxruntime", lowered, feeds))
        for runtime in (target,) if runtimes is None else runtimes:
            require(runtime)
            assert_same(expected, run(runtime, lowered, feeds))


@pytest.mark.parametrize("trips", [1, 2, 5])
def test_a_state_that_changes_rank_is_peeled(trips: int) -> None:
    """On tract and OpenVINO (which ran no Loop whose state changes rank: 'dynamic rank'), and
    on tinygrad, whose row unrolls the Scan."""
    _assert_runs(_model(RANK, trips), {"x": X}, ("tract", "openvino", "tinygrad"))


@pytest.mark.parametrize("trips", [1, 2, 5])
def test_the_peeled_loop_reads_the_next_iteration_number(trips: int) -> None:
    """The Loop after the peeled iteration starts at the original's iteration 1. Lowered for
    tract, on onnxruntime only: tract 0.23.9 fails to load a Scan of a constant count whose body
    casts ``i + 1`` ('Trying to substitute a 1,F32 by 4,F32'), an original reading ``i + 1``
    too; the check on tract catches it."""
    _assert_runs(_model(ITERATION, trips), {"x": X}, ("tract",), runtimes=())
    _assert_runs(_model(ITERATION, trips), {"x": X}, ("openvino",))


@pytest.mark.parametrize("trips", [1, 2, 5])
def test_a_state_of_size_zero_that_grows_once_is_peeled(trips: int) -> None:
    # OpenVINO 2026.4.1 fails to load the Loop left of one iteration's: 1 runs on tract only.
    _assert_runs(
        _model(GROWS, trips), {"x": X}, ("tract",) if trips == 1 else ("tract", "openvino")
    )


@pytest.mark.parametrize("tol", [-1.0, 1.0, 4.0, 100.0], ids=["first", "second", "later", "bound"])
def test_a_loop_stopped_on_data_is_peeled_then_frozen(tol: float) -> None:
    _assert_runs(_model(DATA, 6), {"x": X, "tol": np.array(tol, np.float32)})


@pytest.mark.parametrize("tol", [-1.0, 4.0, 100.0], ids=["first", "later", "bound"])
def test_a_counter_stepped_through_float_is_read_as_its_start_plus_steps(tol: float) -> None:
    """Paddle's counter step through float and back, its final value read: after the peeled
    iteration it starts from a constant, 1, and the rest is frozen on data."""
    _assert_runs(_model(PADDLE_STEP, 6), {"x": X, "tol": np.array(tol, np.float32)}, ("tract",))


@settings(max_examples=8, deadline=None)
@given(trips=st.integers(1, 7), scale=st.floats(-4, 4, width=32))
def test_every_trip_count_matches(trips: int, scale: float) -> None:
    """Property: for any trip count from 1, the peeled Scan gives the Loop's states and rows."""
    _assert_runs(_model(RANK, trips), {"x": (X * np.float32(scale)).astype(np.float32)})


def test_the_pass_alone_keeps_a_loop_and_its_numbers() -> None:
    """Peeled, the model still holds a Loop (of one iteration fewer) and gives the same numbers
    on onnxruntime: the pass is exact without the Scan that follows it."""
    model = _model(RANK, 4)
    ir_model = ir.serde.deserialize_model(model)
    assert PeelFirstIteration()(ir_model).modified
    peeled = ir.serde.serialize_model(ir_model)
    onnx.checker.check_model(peeled, full_check=True)
    assert all_op_types(peeled).count("Loop") == 1
    assert_same(run("onnxruntime", model, {"x": X}), run("onnxruntime", peeled, {"x": X}))


@pytest.mark.parametrize(
    ("text", "shapes"),
    [
        (
            RANK.replace("(float[3] x)", "(float[3] x, int64 m)").replace(
                "m = Constant <value = int64 {TRIPS}> ()", ""
            ),
            r"\[\] and the body returns it of shape \[3\].*may run no iteration",
        ),
        (
            GROWS.replace("(float[3] x)", "(float[3] x, int64 limit)").replace(
                "limit = Constant <value = int64 {TRIPS}> ()", ""
            ),
            r"\[0\] and the body returns it of shape \[3\].*may run no iteration",
        ),
        # may stop on data before it starts (frozen before peeled, it ran once and broadcast its 0)
        (
            DATA.replace("TRIPS", "6").replace(
                "far = Less(zero, limit)",
                "top0 = ReduceMax <keepdims = 0> (x)\n far = Less(top0, tol)",
            ),
            r"\[\] and the body returns it of shape \[3\], and a Scan's states keep",
        ),
    ],
    ids=["rank", "size", "data"],
)
def test_a_loop_that_may_run_none_is_refused_named(text: str, shapes: str) -> None:
    """Its count is an input, or its data may stop it before it starts: run none, its state
    would be its start, of another shape than after any iteration, so no Scan gives it (the
    state of size 0 made an invalid Scan, which the check failed; the data-stopped one, frozen
    before peeled, ran once and broadcast its scalar 0 to a [3])."""
    model = onnx.parser.parse_model(text)
    for target in ("tract", "onnx2torch"):
        with pytest.raises(TargetError, match=f"starts of shape {shapes}"):
            seqlower.lower(model, target=target, check=False)
    ir_model = ir.serde.deserialize_model(model)
    assert not PeelFirstIteration()(ir_model).modified
