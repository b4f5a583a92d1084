"""``run-time-slices-as-gathers`` (tract's row): a Slice by run-time starts/ends becomes a Gather
of a Range per axis, exact for every bound (negative, out of range, INT64_MIN/MAX, empty ranges)
and step, on onnxruntime and on tract, static and symbolic dims, in bodies too."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.parser
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h

import seqlower
from seqlower.errors import TargetError
from seqlower.passes import RunTimeSlicesAsGathers
from seqlower.verification.runtimes import OnnxRuntime
from tests.helpers import REALWORLD, all_op_types
from tests.runtimes import RuntimeFailure, assert_close, assert_same, require, run

I64 = np.iinfo(np.int64)
PROPERTY = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


def _ort(model: onnx.ModelProto, feeds: dict[str, Any]) -> list[np.ndarray]:
    """onnxruntime with graph optimizations off (the check's oracle)."""
    return OnnxRuntime().load(model).run(feeds)


def slice_model(
    dims: list[int], symbolic: bool, axes: list[int] | None, steps: list[int] | None, n: int
) -> onnx.ModelProto:
    """``y = Slice(x, s, e[, axes[, steps]])`` with ``s``/``e`` graph inputs (run-time bounds)."""
    shape = [f"d{k}" for k in range(len(dims))] if symbolic else dims
    inputs = ["x", "s", "e"]
    initializers = []
    if axes is not None:
        initializers.append(h.make_tensor("axes", T.INT64, [len(axes)], axes))
        inputs.append("axes")
    if steps is not None:
        initializers.append(h.make_tensor("steps", T.INT64, [len(steps)], steps))
        inputs.append("steps")
    graph = h.make_graph(
        [h.make_node("Slice", inputs, ["y"])],
        "g",
        [
            h.make_tensor_value_info("x", T.FLOAT, shape),
            h.make_tensor_value_info("s", T.INT64, [n]),
            h.make_tensor_value_info("e", T.INT64, [n]),
        ],
        [h.make_tensor_value_info("y", T.FLOAT, [f"o{k}" for k in range(len(dims))])],
        initializers,
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def onnx_slice(
    x: np.ndarray, starts: list[int], ends: list[int], axes: list[int], steps: list[int]
) -> np.ndarray:
    """ONNX's Slice as onnxruntime 1.32 runs it: a negative bound plus the dim, then starts
    clamped to [0, dim] (positive step) or [0, dim - 1] (negative), ends to [0, dim] or
    [-1, dim - 1], and an end of INT64_MAX with a negative step as INT64_MIN. (Python's
    slicing, which onnx.reference uses, clamps a negative start to -1 instead.)"""
    for s, e, a, k in zip(starts, ends, axes, steps, strict=True):
        d = x.shape[a]
        to_first = k < 0 and e == I64.max
        s, e = (s + d if s < 0 else s), (e + d if e < 0 else e)
        if k > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
        else:
            s, e = min(max(s, 0), d - 1), -1 if to_first else min(max(e, -1), d - 1)
        x = np.take(x, np.arange(s, e, k, dtype=np.int64), axis=a)
    return x


_BOUND = st.one_of(
    st.integers(-8, 8), st.sampled_from([int(I64.min), int(I64.max), -(2**40), 2**40])
)


#: A Slice model, its feeds and what it returns.
Case = tuple[onnx.ModelProto, dict[str, np.ndarray], np.ndarray]


@st.composite
def slices(draw: Any) -> Case:
    rank = draw(st.integers(1, 3))
    dims = draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank))
    n = draw(st.integers(1, rank))
    chosen = draw(st.permutations(range(rank)))[:n]
    form = draw(st.sampled_from(["none", "axes", "steps"]))
    axes = None if form == "none" else [a - rank if draw(st.booleans()) else a for a in chosen]
    steps = None
    if form == "steps":
        steps = draw(st.lists(st.sampled_from([-3, -2, -1, 1, 2, 3]), min_size=n, max_size=n))
    starts = draw(st.lists(_BOUND, min_size=n, max_size=n))
    ends = draw(st.lists(_BOUND, min_size=n, max_size=n))
    model = slice_model(dims, draw(st.booleans()), axes, steps, n)
    x = np.arange(int(np.prod(dims)), dtype=np.float32).reshape(dims)
    feeds = {"x": x, "s": np.array(starts, np.int64), "e": np.array(ends, np.int64)}
    real_axes = list(range(n)) if axes is None else [a % rank for a in axes]
    expected = onnx_slice(x, starts, ends, real_axes, steps or [1] * n)
    return model, feeds, expected


@PROPERTY
@given(slices())
def test_exact_against_onnxruntime(case: Case) -> None:
    model, feeds, expected = case
    lowered = seqlower.lower(model, target="tract", check=False)
    assert "Slice" not in all_op_types(lowered)
    onnx.checker.check_model(lowered, full_check=True)
    (original,) = _ort(model, feeds)
    assert_same([expected], [original])  # onnxruntime's Slice as onnx_slice says
    assert_same([original], _ort(lowered, feeds))


_EDGES = [
    int(I64.min),
    -(2**40),
    -6,
    -5,
    -4,
    -1,
    0,
    1,
    3,
    4,
    5,
    2**40,
    int(I64.max) - 1,
    int(I64.max),
]


@pytest.mark.parametrize("dim", [0, 1, 4])
@pytest.mark.parametrize("step", [-3, -1, 1, 2])
def test_every_edge_of_one_axis(dim: int, step: int) -> None:
    """Each start and end of the edges, against onnxruntime and ``onnx_slice``."""
    model = slice_model([dim, 2], False, [0], [step], 1)
    lowered = seqlower.lower(model, target="tract", check=False)
    x = np.arange(dim * 2, dtype=np.float32).reshape(dim, 2)
    for s in _EDGES:
        for e in _EDGES:
            feeds = {"x": x, "s": np.array([s], np.int64), "e": np.array([e], np.int64)}
            (original,) = _ort(model, feeds)
            assert_same([onnx_slice(x, [s], [e], [0], [step])], [original])
            assert_same([original], _ort(lowered, feeds))


@pytest.mark.parametrize("step", [-1, 2])
def test_every_edge_on_tract(step: int) -> None:
    require("tract")
    model = slice_model([4, 2], True, [0], [step], 1)
    lowered = seqlower.lower(model, target="tract", check=False)
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    for s in _EDGES:
        for e in _EDGES:
            if step < 0 and e == I64.max:
                continue  # test_int64_max_end_backwards_on_tract
            feeds = {"x": x, "s": np.array([s], np.int64), "e": np.array([e], np.int64)}
            assert_same(_ort(model, feeds), run("tract-symbolic", lowered, feeds))


def test_int64_max_end_backwards_on_tract() -> None:
    """Known gap: an end of exactly INT64_MAX with a negative step slices to the first element
    on onnxruntime 1.32 (ONNX's text clamps it to dim - 1: nothing), and the lowered model does
    so on onnxruntime, but not on tract 0.23.9 (its int64 tests against INT64_MAX go wrong);
    there it is empty, which the check reports as a mismatch when an input holds it."""
    require("tract")
    model = slice_model([4, 2], False, [0], [-1], 1)
    lowered = seqlower.lower(model, target="tract", check=False)
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    feeds = {"x": x, "s": np.array([3], np.int64), "e": np.array([I64.max], np.int64)}
    assert _ort(lowered, feeds)[0].shape == (4, 2) == _ort(model, feeds)[0].shape
    assert run("tract", lowered, feeds)[0].shape == (0, 2)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(slices())
def test_exact_on_tract(case: Case) -> None:
    model, feeds, expected = case
    require("tract")
    lowered = seqlower.lower(model, target="tract", check=False)
    for runtime in ("tract", "tract-symbolic"):
        assert_same([expected], run(runtime, lowered, feeds))


# ONNX's test_loop11 slices x[i:i+1] inside its body; here as a Scan (what --target tract makes
# of the Loop) summing the rows it slices, so the state keeps its shape.
SCAN_BODY = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 3] x, int64[K] starts) => (float[3] total) {
        zero = Constant<value = float[3] {0, 0, 0}>()
        total = Scan<num_scan_inputs = 1, body = body (float[3] acc, int64 i) => (float[3] out) {
            one = Constant<value = int64 {1}>()
            two = Constant<value = int64 {2}>()
            ax = Constant<value = int64[1] {0}>()
            s = Unsqueeze(i, ax)
            j = Add(i, two)
            e = Unsqueeze(j, ax)
            rows = Slice(x, s, e)
            sum = ReduceSum<keepdims = 0>(rows, ax)
            out = Add(acc, sum)
        }>(zero, starts)
    }
    """
)


@pytest.mark.parametrize("runtime", ["tract", "tract-symbolic"])
def test_in_a_scan_body(runtime: str) -> None:
    lowered = seqlower.lower(SCAN_BODY, target="tract", check=False)
    assert "Slice" not in all_op_types(lowered)
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    feeds = {"x": x, "starts": np.array([0, 3, -2, 7, -9, 4], np.int64)}
    assert_same(_ort(SCAN_BODY, feeds), run(runtime, lowered, feeds))


# PyTorch's embedding_bag: bounds sliced from the offsets in the body, read in an If branch
# (where tract 0.23.9 types no value of run-time length read from outside: 'Source node without a
# determined fact'; the pass computes the bounds' scalars outside the branch).
BRANCH_READ = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[8, 3] w, int64[4] offsets, int64 i) => (float[3] y) {
        one = Constant<value = int64[1] {1}>()
        two = Constant<value = int64[1] {2}>()
        idx = Reshape(i, one)
        idx1 = Add(idx, one)
        idx2 = Add(idx, two)
        start = Slice(offsets, idx, idx1)
        end = Slice(offsets, idx1, idx2)
        t = Constant<value = bool {1}>()
        y = If(t) <then_branch = th () => (float[3] r) {
            rows = Slice(w, start, end)
            ax = Constant<value = int64[1] {0}>()
            r = ReduceSum<keepdims = 0>(rows, ax)
        }, else_branch = el () => (float[3] z) {
            z = Constant<value = float[3] {0, 0, 0}>()
        }>
    }
    """
)


@pytest.mark.parametrize("i", [0, 1, 2, -3])
def test_bounds_read_in_a_branch(i: int) -> None:
    lowered = seqlower.lower(BRANCH_READ, target="tract", check=False)
    assert "Slice" not in all_op_types(lowered)
    w = np.arange(24, dtype=np.float32).reshape(8, 3)
    feeds = {"w": w, "offsets": np.array([0, 2, 2, 8], np.int64), "i": np.array(i, np.int64)}
    assert_same(_ort(BRANCH_READ, feeds), run("tract", lowered, feeds))


# tract 0.23.9 computes integers that mix a shape with run-time values as symbolic dimensions,
# wrongly at the extremes: the reason the pass clamps the bounds in float64.
MIN_OF_SHAPE = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[6] x, int64 e) => (float[?] y) {
        zero = Constant<value = int64 {0}>()
        one = Constant<value = int64 {1}>()
        d = Size(x)
        b = Min(e, d)
        r = Range(zero, b, one)
        y = Gather(x, r)
    }
    """
)


def test_tract_min_of_a_shape_and_int64_max_is_wrong() -> None:
    """Range(0, Min(INT64_MAX, Size(x)), 1) is one row on tract 0.23.9, six on onnxruntime;
    when a tract gets it right, the float64 clamp can go."""
    feeds = {"x": np.arange(6, dtype=np.float32), "e": np.array(I64.max, np.int64)}
    (want,) = _ort(MIN_OF_SHAPE, feeds)
    (got,) = run("tract", MIN_OF_SHAPE, feeds)
    assert want.shape == (6,) and got.shape != want.shape


# A Slice whose result the model needs of one size (a Scan state): x[i:i+1] has 0 or 1 rows,
# known only at run time, so tract 0.23.9 cannot type the state (what still blocks test_loop11).
STATE_SLICE = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1] y, int64[K] its) => (float[1] out) {
        out = Scan<num_scan_inputs = 1, body = body (float[1] acc, int64 i) => (float[1] next) {
            x = Constant<value = float[5] {1, 2, 3, 4, 5}>()
            one = Constant<value = int64 {1}>()
            j = Add(i, one)
            ax = Constant<value = int64[1] {0}>()
            s = Unsqueeze(i, ax)
            e = Unsqueeze(j, ax)
            row = Slice(x, s, e)
            next = Add(acc, row)
        }>(y, its)
    }
    """
)


def test_a_state_of_run_time_size_does_not_load_on_tract() -> None:
    lowered = seqlower.lower(STATE_SLICE, target="tract", check=False)
    feeds = {"y": np.zeros(1, np.float32), "its": np.arange(3, dtype=np.int64)}
    assert_same(_ort(STATE_SLICE, feeds), _ort(lowered, feeds))
    with pytest.raises(RuntimeFailure, match="Output mismatch"):
        run("tract", lowered, feeds)


RUNTIME_STEPS = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[6] x, int64[1] s, int64[1] k) => (float[N] y) {
        axes = Constant<value = int64[1] {0}>()
        e = Constant<value = int64[1] {5}>()
        y = Slice(x, s, e, axes, k)
    }
    """
)


def test_steps_not_constant_are_left_and_named() -> None:
    with pytest.raises(TargetError) as caught:
        seqlower.lower(RUNTIME_STEPS, target="tract", check=False)
    (blocker,) = caught.value.blockers
    assert "its starts 's'" in blocker and "tract 0.23.9 cannot load" in blocker
    assert blocker.endswith("no Gather of a Range: its steps 'k' are not constant")


def test_registered_and_in_tract_row_only() -> None:
    from seqlower.passes import PASSES
    from seqlower.targets import PIPELINES

    assert PASSES["run-time-slices-as-gathers"].cls is RunTimeSlicesAsGathers  # type: ignore[union-attr]
    rows = [t.name for t in PIPELINES.values() if "run-time-slices-as-gathers" in t.passes]
    assert rows == ["tract"]


def reversal_model(start: int, end: int, dims: list[Any]) -> onnx.ModelProto:
    """``y = x[:2, ::-1]`` written as one Slice by constant bounds (PyTorch's ``flip`` and the
    reversal lower-reverse-sequence writes for a Bidirectional layer: start, end, step -1)."""
    bounds = {"s": [0, start], "e": [2, end], "a": [-1, 1], "k": [1, -1]}
    graph = h.make_graph(
        [h.make_node("Slice", ["x", "s", "e", "a", "k"], ["y"])],
        "g",
        [h.make_tensor_value_info("x", T.FLOAT, dims)],
        [h.make_tensor_value_info("y", T.FLOAT, None)],
        [h.make_tensor(n, T.INT64, [2], v) for n, v in bounds.items()],
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize(
    "bounds", [(-1, int(I64.min)), (int(I64.max), int(I64.min)), (-1, -(2**31))]
)
@pytest.mark.parametrize("runtime", ["tract", "tract-symbolic"])
def test_reversal_of_a_symbolic_axis_loads_with_declared_facts(
    bounds: tuple[int, int], runtime: str
) -> None:
    """tract 0.23.9 types no step -1 over a symbolic size (the original fails with its declared
    facts: 'Streaming dimensions with strides'); the Gather of (n - 1) - Range(0, n, 1) loads
    both ways and runs as onnxruntime does, for every length, 0 included."""
    require("tract")
    model = reversal_model(*bounds, ["N", "T", 4])
    lowered = seqlower.lower(model, target="tract", check=False)
    assert "Gather" in all_op_types(lowered)
    for t in (0, 1, 3):
        x = np.arange(2 * t * 4, dtype=np.float32).reshape(2, t, 4)
        (expected,) = _ort(model, {"x": x})
        assert_same([x[:, ::-1, :2]], [expected])
        assert_same([expected], run(runtime, lowered, {"x": x}))


def test_reversal_of_a_static_axis_is_left() -> None:
    """A static size: tract types the Slice itself, which stays as written."""
    lowered = seqlower.lower(
        reversal_model(-1, int(I64.min), [2, 3, 4]), target="tract", check=False
    )
    assert set(all_op_types(lowered)) <= {"Slice", "Constant"}


RANGE_DOWN = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, T, 4] x) => (float[N, T, 4] y) {
        shape = Shape(x)
        axis = Constant<value = int64 {1}>()
        n = Gather(shape, axis)
        one = Constant<value = int64 {1}>()
        last = Sub(n, one)
        back = Constant<value = int64 {-1}>()
        index = Range(last, back, back)
        y = Gather<axis = 1>(x, index)
    }
    """
)


@pytest.mark.parametrize("runtime", ["tract", "tract-symbolic"])
def test_tract_range_down_from_a_size_does_not_load(runtime: str) -> None:
    """Why a reversal is (n - 1) - Range(0, n, 1): tract 0.23.9 sizes Range(n - 1, -1, -1) of a
    shape's n as if its step were unsigned, either facts ('Impossible to unify Val(3) with
    Val(5)', 'expected 2+-1*(T)/18446744073709551615'). When a tract loads it, this fails."""
    require("tract")
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    with pytest.raises(RuntimeFailure, match="Range"):
        run(runtime, RANGE_DOWN, {"x": x})


# ``table[t]`` in a loop over tokens, as tf2onnx and jax2onnx write ``x[i]``: a Slice of one
# row at an index read from data, squeezed, of a table the loop carries (jax2onnx's constants);
# jax2onnx's ``dynamic_slice`` also slices the columns by constants (``Concat(t, 0)`` to
# ``Concat(t, 0) + [1, 3]``).
EMBED = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[5, 4] table, int64[T] tokens) => (float[3] h, float[5, 4] table_out, float[T] sums) {
        shape = Shape(tokens)
        zero = Constant<value = int64[1] {0}>()
        count = Gather(shape, zero)
        n = Squeeze(count, zero)
        go = Constant<value = bool {1}>()
        h0 = Constant<value = float[3] {0, 0, 0}>()
        h, table_out, sums = Loop(n, go, h0, table) <body = step (int64 i, bool c,
                float[3] state, float[P, Q] rows) => (bool c_out, float[3] next, float[P, Q]
                rows_out, float s) {
            t = Gather(tokens, i)
            one = Constant<value = int64[1] {1}>()
            at = Unsqueeze(t, zero)
            first_col = Constant<value = int64[1] {0}>()
            starts = Concat<axis = 0>(at, first_col)
            sizes = Constant<value = int64[2] {1, 3}>()
            ends = Add(starts, sizes)
            window = Slice(rows, starts, ends)
            row = Squeeze(window, zero)
            added = Add(state, row)
            next = Tanh(added)
            s = ReduceSum<keepdims = 0>(next)
            c_out = Identity(c)
            rows_out = Identity(rows)
        }>
    }
    """
)


@pytest.mark.parametrize("tokens", [[1, 4, 0, 3], [2], [], [-2, -5, 0]])
def test_a_squeezed_row_at_an_index_from_data_is_one_row_on_tract(tokens: list[int]) -> None:
    """The row is read at its index and the columns by a Slice of constants, exact for any
    index the original runs with. Before, a Gather of a ``Range`` whose length tract cannot
    prove is one failed to load ('Removing non-trivial axis #0 of dim: range'): exit 1, as for
    jax2onnx's export of this (``benchmarks/families/jax2onnx/jax_scan_embed``)."""
    feeds = {
        "table": np.arange(20, dtype=np.float32).reshape(5, 4) / 10,
        "tokens": np.array(tokens, np.int64),
    }
    lowered = seqlower.lower(EMBED, target="tract")  # proven on tract, either facts
    want = _ort(EMBED, feeds)
    for runtime in ("onnxruntime", "tract", "tract-symbolic"):
        assert_same(want, run(runtime, lowered, feeds))


def test_tf2onnx_row_reads_of_step_a_billion_are_one_row_on_tract() -> None:
    """tf2onnx writes ``x[i]`` as a Slice of step 10**9 and a Squeeze (a tf.while_loop summing
    rows, tf2onnx 1.17.0): the same one row. It failed to load on tract before ('Removing
    non-trivial axis #0 of dim: range,3,4'), exit 1."""
    from benchmarks.target_samples import feeds_and_expected

    path = REALWORLD / "tf_while_cumulative_op17.onnx"
    feeds, expected = feeds_and_expected(path.with_suffix(".npz"))
    lowered = seqlower.lower(onnx.load(path), target="tract")  # proven on tract, either facts
    for runtime in ("tract", "tract-symbolic"):
        assert_close(expected, run(runtime, lowered, feeds), atol=1e-5)


# paddle2onnx's ``for i in range(x.shape[0])`` reads ``i`` as ``Range(0, n)[i:i + 1]`` squeezed,
# the Range of no declared shape (a rank only inference gives).
RANGE_ROW = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T] x, int64[1] i) => (float y) {
        n = Size(x)
        zero = Constant<value = int64 {0}>()
        one = Constant<value = int64 {1}>()
        r = Range(zero, n, one)
        e = Add(i, one)
        w = Slice(r, i, e)
        axes = Constant<value = int64[1] {0}>()
        k = Squeeze(w, axes)
        y = Gather(x, k)
    }
    """
)


@pytest.mark.parametrize("i", [0, 3, -2])
def test_a_squeezed_row_of_data_of_an_inferred_rank_is_one_row_on_tract(i: int) -> None:
    """The one row of a Slice every reader squeezes is read at its index when the data's rank
    is inferred, not declared (paddle2onnx's ``for`` with an ``if`` in it,
    ``benchmarks/families/new_shapes.py`` ``paddle_for_if``). Before, a Gather of a ``Range``
    failed to load on tract ('Removing non-trivial axis #0 of dim: range'): exit 1."""
    feeds = {"x": np.arange(5, dtype=np.float32) * 1.5, "i": np.array([i], np.int64)}
    lowered = seqlower.lower(RANGE_ROW, target="tract")  # proven on tract, either facts
    want = _ort(RANGE_ROW, feeds)
    for runtime in ("onnxruntime", "tract", "tract-symbolic"):
        assert_same(want, run(runtime, lowered, feeds))
