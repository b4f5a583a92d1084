"""``ragged-maps-as-scans`` (tract's row): onnxscript's map over the pieces of a split by
run-time sizes as a ``Scan`` writing each piece's rows into an N-row buffer, against the
original on onnxruntime, on onnxruntime, OpenVINO and tract, over drawn sizes (empty pieces
among them); bad sizes fail at run time; maps it cannot prove are refused before the check."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import seqlower
from seqlower.errors import SequenceFreeError
from seqlower.passes import SEQUENCE_OPS
from tests.helpers import RAGGED_BODY, RAGGED_MAP, all_op_types, ragged_map, run_cli
from tests.runtimes import RuntimeFailure, assert_same, run

RUNTIMES = ["onnxruntime", "openvino", "tract"]

# The tract bug the mean's rewrite stands for, smallest: a Scan whose body reads pieces of
# changing length (a Gather of a Range) and means them. tract 0.23.9 divides every piece's sum
# by the first piece's length (a Shape or Size read there gives the first length too).
PIECE_MEANS = onnx.parser.parse_model(
    """
    <ir_version: 10, opset_import: ["" : 18]>
    g (float[N] x, int64[K] starts, int64[K] sizes) => (float[K] means) {
        means = Scan<num_scan_inputs = 2, body = b (int64 s, int64 n) => (float m) {
            one = Constant<value = int64 {1}>()
            e = Add(s, n)
            rows = Range(s, e, one)
            piece = Gather(x, rows)
            m = ReduceMean<keepdims = 0>(piece)
        }>(starts, sizes)
    }
    """
)


def test_tract_means_every_piece_by_the_first_ones_length() -> None:
    """The runtime bug (tract 0.23.9); when a tract means these right, the rewrite can go."""
    feeds = {
        "x": np.arange(6, dtype=np.float32),
        "starts": np.array([0, 2], np.int64),
        "sizes": np.array([2, 4], np.int64),
    }
    want = run("onnxruntime", PIECE_MEANS, feeds)
    np.testing.assert_allclose(want[0], [0.5, 3.5])
    got = run("tract", PIECE_MEANS, feeds)
    np.testing.assert_allclose(got[0], [0.5, 7.0])  # 14 / 2, not 14 / 4


# tract 0.23.9's other faults in such a body, each the reason an op is not vetted: a MatMul of
# the piece gives every piece the first one's rows (wrong numbers, no error), an empty piece's
# ReduceMax is f32::MIN (ONNX: -inf), an empty rank-1 reduction panics, and a Scan over a Cast
# to int64 is not typed (int32 sizes are cast inside the body instead).
PIECE_MATMUL = onnx.parser.parse_model(
    """
    <ir_version: 10, opset_import: ["" : 18]>
    g (float[N,2] x, int64[K] starts, int64[K] sizes) => (float[K,2] y) {
        y = Scan<num_scan_inputs = 2, body = b (int64 s, int64 n) => (float[2] o) {
            one = Constant<value = int64 {1}>()
            e = Add(s, n)
            rows = Range(s, e, one)
            piece = Gather(x, rows)
            q = Constant<value = float[2, 2] {1, 0, 0, 1}>()
            p = MatMul(piece, q)
            z = Constant<value_ints = [0]>()
            o = ReduceSum<keepdims = 0>(p, z)
        }>(starts, sizes)
    }
    """
)
EMPTY_MAX = onnx.parser.parse_model(
    """
    <ir_version: 10, opset_import: ["" : 18]>
    g (float[N] x) => (float[1] y) {
        z = Constant<value_ints = [0]>()
        y = ReduceMax<keepdims = 1>(x, z)
    }
    """
)
EMPTY_SUM = onnx.parser.parse_model(
    """
    <ir_version: 10, opset_import: ["" : 18]>
    g (float[N] x) => (float y) {
        z = Constant<value_ints = [0]>()
        y = ReduceSum<keepdims = 0>(x, z)
    }
    """
)
CAST_SCAN = onnx.parser.parse_model(
    """
    <ir_version: 10, opset_import: ["" : 18]>
    g (int32[K] lens) => (int64[K] y) {
        wide = Cast<to = 7>(lens)
        y = Scan<num_scan_inputs = 1, body = b (int64 s) => (int64 o) {
            one = Constant<value = int64 {1}>()
            o = Add(s, one)
        }>(wide)
    }
    """
)


def test_tract_faults_the_vetting_stands_for() -> None:
    """When a tract gets these right, the op can be vetted (or the cast moved back out)."""
    feeds = {
        "x": np.arange(10, dtype=np.float32).reshape(5, 2),
        "starts": np.array([0, 2], np.int64),
        "sizes": np.array([2, 3], np.int64),
    }
    np.testing.assert_allclose(run("onnxruntime", PIECE_MATMUL, feeds)[0], [[2, 4], [18, 21]])
    np.testing.assert_allclose(run("tract", PIECE_MATMUL, feeds)[0], [[2, 4], [10, 12]])
    empty = {"x": np.zeros(0, np.float32)}
    assert run("onnxruntime", EMPTY_MAX, empty)[0][0] == -np.inf
    assert run("tract", EMPTY_MAX, empty)[0][0] == np.finfo(np.float32).min
    assert run("onnxruntime", EMPTY_SUM, empty)[0] == 0
    with pytest.raises(RuntimeFailure, match="divide by zero"):
        run("tract", EMPTY_SUM, empty)
    with pytest.raises(RuntimeFailure, match="unify I64 with TDim"):
        run("tract", CAST_SCAN, {"lens": np.array([2, 3], np.int32)})


@settings(max_examples=6, deadline=None)
@given(sizes=st.lists(st.integers(0, 3), min_size=1, max_size=4))
def test_int32_sizes_match_the_original(sizes: list[int]) -> None:
    original = ragged_map(RAGGED_MAP.replace("int64[K] lens", "int32[K] lens"))
    if "int32" not in _CACHE:
        _CACHE["int32"] = seqlower.lower(original, target="tract")
        _assert_valid(_CACHE["int32"])
    feeds = _feeds(sizes, seed=len(sizes))
    feeds["lens"] = feeds["lens"].astype(np.int32)
    _compare(original, _CACHE["int32"], feeds)


@pytest.fixture(scope="module")
def lowered() -> onnx.ModelProto:
    out = seqlower.lower(ragged_map(), target="tract")  # proven on tract
    _assert_valid(out)
    return out


def test_the_rewrite_leaves_every_graph_in_order() -> None:
    """Without the final sort: onnx_ir's cloning (the folder at fixed shapes) refuses a node
    reading a constant the body defines after it."""
    out = seqlower.lower(ragged_map(), target="tract", check=False, cleanup=False)
    onnx.checker.check_model(out, full_check=True)  # topological order in every graph


def _assert_valid(model: onnx.ModelProto, *, scan: bool = True) -> None:
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    ops = set(all_op_types(model))
    assert not ops & SEQUENCE_OPS
    assert ("Scan" in ops) == scan and "Loop" not in ops and "ReduceMean" not in ops


def _feeds(sizes: list[int], seed: int = 0, width: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "X": rng.normal(size=(sum(sizes), width)).astype(np.float32),
        "lens": np.array(sizes, dtype=np.int64),
        "W": rng.normal(size=width).astype(np.float32),
    }


def _compare(
    original: onnx.ModelProto, lowered: onnx.ModelProto, feeds: dict[str, np.ndarray]
) -> None:
    expected = run("onnxruntime", original, feeds)
    for runtime in RUNTIMES:
        got = run(runtime, lowered, feeds)
        # The totals sum in another order on OpenVINO and tract: near zero they differ by a
        # few 1e-7 absolute, which no lowering causes.
        assert_same(expected[:1], got[:1])
        for want, have in zip(expected[1:], got[1:], strict=True):
            np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5)


@settings(max_examples=12, deadline=None)
@given(sizes=st.lists(st.integers(0, 4), min_size=1, max_size=5))
def test_pieces_of_drawn_sizes_match_the_original(
    lowered: onnx.ModelProto, sizes: list[int]
) -> None:
    """Empty pieces included (an empty piece's mean is 0, as onnxruntime gives)."""
    _compare(ragged_map(), lowered, _feeds(sizes, seed=len(sizes)))


@pytest.mark.parametrize("runtime", ["onnxruntime", "tract"])
@pytest.mark.parametrize("sizes", [[2, 2], [3, -1, 3], []], ids=["short", "negative", "no-piece"])
def test_bad_sizes_fail_at_run_time(
    lowered: onnx.ModelProto, runtime: str, sizes: list[int]
) -> None:
    """As the split (or the empty concatenation of no rows) fails on onnxruntime: never
    another answer. (onnxruntime reads an empty ``lens`` for rows as no sizes, one row a piece;
    the lowering fails there, as OpenVINO's does. OpenVINO's Gather returns zeros for a bad
    index: the row is tract's only.)"""
    feeds = _feeds([2, 3] if sizes else [])
    feeds["lens"] = np.array(sizes, dtype=np.int64)
    with pytest.raises(RuntimeFailure):
        run("onnxruntime", ragged_map(), feeds)
    with pytest.raises(RuntimeFailure):
        run(runtime, lowered, feeds)


# Vetted ops of every kind: a transpose there and back, a product with a constant row, a sum
# and a product over the piece, the piece broadcast with a one-row outer value (Unsqueeze); the
# stacked output joined without a new axis.
VARIED = (
    RAGGED_MAP.replace(
        RAGGED_BODY,
        """
        zero = Constant<value_ints = [0]>()
        flipped = Transpose<perm = [1, 0]>(chunk)
        back = Transpose<perm = [1, 0]>(flipped)
        square = Mul(back, Q)
        top = ReduceSum<keepdims = 1>(square, zero)
        centred = Sub(square, top)
        wide = Unsqueeze(w, zero)
        scaled = Add(centred, wide)
        product = ReduceProd<keepdims = 0>(chunk, zero)
        total = ReduceSum<keepdims = 1>(product, zero)
""",
    )
    .replace(
        "T = ConcatFromSequence<axis = 0, new_axis = 1>(totals)",
        "T = ConcatFromSequence<axis = 0>(totals)",
    )
    .replace("float[K,1] T2", "float[K] T2")
    .replace(
        "center_scale (X, lens, W) => (Y, T) {",
        "center_scale (X, lens, W) => (Y, T) {\n"
        "    Q = Constant<value = float[1, 3] {1, 0.5, -2}>()",
    )
)


@settings(max_examples=8, deadline=None)
@given(sizes=st.lists(st.integers(0, 3), min_size=1, max_size=4))
def test_vetted_ops_match_the_original(sizes: list[int]) -> None:
    original = ragged_map(VARIED)
    lowered = _lowered_varied()
    feeds = _feeds(sizes, seed=sum(sizes))
    expected = run("onnxruntime", original, feeds)
    for runtime in RUNTIMES:
        got = run(runtime, lowered, feeds)
        for want, have in zip(expected, got, strict=True):
            np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5)


_CACHE: dict[str, onnx.ModelProto] = {}


def _lowered_varied() -> onnx.ModelProto:
    if "varied" not in _CACHE:
        _CACHE["varied"] = seqlower.lower(ragged_map(VARIED), target="tract")
        _assert_valid(_CACHE["varied"])
    return _CACHE["varied"]


# A row-wise body (elementwise and broadcasting ops, each value's rows on axis 0): no Scan, the
# body runs once on X, two outputs joined along the rows.
ROW_WISE = (
    RAGGED_MAP.replace(
        RAGGED_BODY,
        """
        scaled0 = Mul(chunk, w)
        scaled = Tanh(scaled0)
        total = Relu(chunk)
""",
    )
    .replace(
        "=> (float[?, ?] scaled, float[1] total)", "=> (float[?, ?] scaled, float[?, ?] total)"
    )
    .replace(
        "T = ConcatFromSequence<axis = 0, new_axis = 1>(totals)",
        "T = ConcatFromSequence<axis = 0>(totals)",
    )
    .replace("float[K,1] T2", "float[N,D] T2")
)


@settings(max_examples=8, deadline=None)
@given(sizes=st.lists(st.integers(0, 3), min_size=1, max_size=4))
def test_a_row_wise_body_runs_once_on_the_whole_tensor(sizes: list[int]) -> None:
    original = ragged_map(ROW_WISE)
    if "row-wise" not in _CACHE:
        _CACHE["row-wise"] = seqlower.lower(original, target="tract")
        _assert_valid(_CACHE["row-wise"], scan=False)
    _compare(original, _CACHE["row-wise"], _feeds(sizes, seed=sum(sizes)))


def test_a_row_wise_body_fails_on_bad_sizes() -> None:
    original = ragged_map(ROW_WISE)
    lowered = seqlower.lower(original, target="tract", check=False)
    feeds = _feeds([2, 3])
    feeds["lens"] = np.array([1, 2], np.int64)
    for runtime in ("onnxruntime", "tract"):
        with pytest.raises(RuntimeFailure):
            run(runtime, lowered, feeds)


def _refused(text: str, *words: str) -> None:
    with pytest.raises(SequenceFreeError) as caught:
        seqlower.lower(ragged_map(text), target="tract", check=False)
    message = str(caught.value)
    assert "SequenceMap node" in message
    for word in words:
        assert word in message, message


def test_a_body_reading_a_shape_is_refused() -> None:
    """tract would give every piece the first one's length: named before any check."""
    text = RAGGED_MAP.replace(
        "mean = ReduceMean<keepdims = 1>(chunk, zero)",
        "rows = Shape(chunk)\n        length = Cast<to = 1>(rows)\n"
        "        mean = ReduceMean<keepdims = 1>(chunk, zero)",
    ).replace("scaled = Mul(centred, w)", "scaled = Mul(centred, length)")
    _refused(text, "Shape", "tract 0.23.9")


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ("scaled = Mul(centred, w)", "scaled = MatMul(centred, Q)", "MatMul"),
        ("mean = ReduceMean<keepdims = 1>(chunk, zero)",
         "mean = ReduceMax<keepdims = 1>(chunk, zero)", "ReduceMax"),
    ],
    ids=["matmul", "max"],
)  # fmt: skip
def test_a_body_of_an_op_tract_gets_wrong_is_refused(old: str, new: str, named: str) -> None:
    text = RAGGED_MAP.replace(old, new).replace(
        "center_scale (X, lens, W) => (Y, T) {",
        "center_scale (X, lens, W) => (Y, T) {\n    Q = Constant<value = float[3, 3] "
        "{1, 0, 0, 0, 1, 0, 0, 0, 1}>()",
    )
    _refused(text, named, "tract 0.23.9")


def test_a_reduction_of_a_rank_one_piece_is_refused() -> None:
    text = """
    <ir_version: 10, opset_import: ["" : 18]>
    g (float[N] X, int64[K] lens) => (float[N] Y) {
        s = SplitToSequence<axis = 0>(X, lens)
        m = SequenceMap(s) <body = b (float[?] e) => (float[?] o) {
            z = Constant<value_ints = [0]>()
            mu = ReduceMean<keepdims = 1>(e, z)
            o = Sub(e, mu)
        }>
        Y = ConcatFromSequence<axis = 0>(m)
    }
    """
    with pytest.raises(SequenceFreeError, match="rank-1 piece"):
        seqlower.lower(onnx.parser.parse_model(text), target="tract", check=False)


def test_rows_joined_along_another_axis_are_refused() -> None:
    text = RAGGED_MAP.replace(
        "Y = ConcatFromSequence<axis = 0>(outs)", "Y = ConcatFromSequence<axis = 1>(outs)"
    )
    _refused(text, "along another axis")


def test_a_piece_broadcast_with_an_outer_row_count_is_refused() -> None:
    """``Add(piece, X)``: as long as the piece only where X's rows broadcast; not proven."""
    _refused(RAGGED_MAP.replace("scaled = Mul(centred, w)", "scaled = Mul(centred, X)"), "scaled")


def test_the_cli_refuses_before_the_check_and_writes_nothing(tmp_path: Path) -> None:
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    text = RAGGED_MAP.replace(
        "mean = ReduceMean<keepdims = 1>(chunk, zero)",
        "mean = ReduceL2<keepdims = 1>(chunk, zero)",
    )
    onnx.save(ragged_map(text), source)
    result = run_cli(source, "-o", out, "--target", "tract")
    assert result.exit_code == 2, result.output
    assert "SequenceMap node" in result.stderr and "ReduceL2" in result.stderr
    assert "check:" not in result.output
    assert not out.exists()


def test_openvino_keeps_its_loop() -> None:
    """The pass is tract's: OpenVINO's row grows tensors in a Loop (test_ragged_maps)."""
    out = seqlower.lower(ragged_map(), target="openvino", check=False)
    assert "Loop" in all_op_types(out) and "ScatterND" not in all_op_types(out)
