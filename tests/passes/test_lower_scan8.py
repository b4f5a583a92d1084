"""LowerScan8 (``lower-scan-8``, target ``tract``; ``lower-scan-8-lengths``, target ``openvino``):
the opset-8 ``Scan`` (a batch axis, ``sequence_lens``, ``directions``) as one opset-9 ``Scan``
per batch entry, against onnxruntime's own Scan-8 on the original, over batch sizes, lengths
and directions, and on tract and OpenVINO."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import seqlower
from seqlower.errors import TargetError
from tests.helpers import all_nodes, run_cli
from tests.runtimes import RuntimeFailure, assert_same, run


def scan8(
    batch: int | str,
    steps: int | str,
    lengths: list[int] | None = None,
    directions: tuple[int, ...] = (0, 0),
    *,
    lengths_input: bool = False,
) -> onnx.ModelProto:
    """Two states (one passed through, by an ``Identity``: onnxruntime 1.32's Scan-8 returns
    zeros for a state the body returns as its own input), two scan inputs, two scan outputs;
    the body's arithmetic depends on the order of the rows, so a wrong direction or length
    shows."""
    lens = '""'
    inputs = f"float[{batch},2] init, float[{batch},{steps},2] x, float[{batch},{steps},2] w"
    initializers = ""
    if lengths_input:
        lens, inputs = "lens", f"int64[{batch}] lens, {inputs}"
    elif lengths is not None:
        lens = "lens"
        initializers = f"<int64[{len(lengths)}] lens = {{{', '.join(map(str, lengths))}}}>"
    flags = ", ".join(map(str, directions))
    return onnx.parser.parse_model(
        f"""
        <ir_version: 4, opset_import: ["" : 8]>
        g ({inputs}) => (float[{batch},2] y, float[{batch},2] k, float[{batch},{steps},2] z,
                         float[{batch},{steps},2] d) {initializers}
        {{
            y, k, z, d = Scan ({lens}, init, init, x, w) <num_scan_inputs = 2,
                directions = [{flags}],
                body = b (float[2] a, float[2] kept, float[2] n, float[2] m)
                    => (float[2] o, float[2] kept_out, float[2] so, float[2] so2) {{
                    kept_out = Identity(kept)
                    half = Constant<value = float {{0.5}}>()
                    t = Mul(a, half)
                    u = Add(t, n)
                    o = Sub(u, m)
                    so = Identity(o)
                    so2 = Mul(n, m)
                }}>
        }}
        """
    )


def _feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        if value.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            feeds[value.name] = rng.normal(size=shape).astype(np.float32)
    return feeds


def _lowered(model: onnx.ModelProto, target: str = "tract") -> onnx.ModelProto:
    lowered = seqlower.lower(model, target=target, check=False)
    onnx.checker.check_model(lowered, full_check=True)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True)
    assert lowered.opset_import[0].version == 9
    assert all(n.op_type != "Scan" or n.input[0] != "" for n in all_nodes(lowered))
    return lowered


CASES = [
    (1, 3, None, (0, 0)),  # ONNX's test_scan_sum's shape
    (3, 4, None, (0, 1)),
    (3, 4, [4, 2, 3], (0, 0)),
    (3, 4, [4, 2, 3], (1, 0)),
    (3, 4, [1, 4, 2], (1, 1)),
    (2, 3, [3, 3], (1, 1)),  # every entry full: no Slice, no padding
]


@pytest.mark.parametrize(("batch", "steps", "lengths", "directions"), CASES)
@pytest.mark.parametrize("runtime", ["onnxruntime", "tract"])
def test_scan8_runs_per_batch_entry(
    runtime: str, batch: int, steps: int, lengths: list[int] | None, directions: tuple[int, ...]
) -> None:
    """Bit for bit what onnxruntime's Scan-8 gives, padding rows (zeros) included."""
    model = scan8(batch, steps, lengths, directions)
    feeds = _feeds(model)
    lowered = _lowered(model)
    assert_same(run("onnxruntime", model, feeds), run(runtime, lowered, feeds))


def test_tract_and_openvino_cannot_run_the_original() -> None:
    """Why the rows lower it: tract 0.23.9 types no Scan-8, OpenVINO 2026.4.1 refuses its
    sequence_lens (it runs the other forms: its row leaves them)."""
    plain, with_lengths = scan8(2, 3), scan8(2, 3, [3, 1])
    feeds = _feeds(plain)
    for model in (plain, with_lengths):
        with pytest.raises(RuntimeFailure, match=r"unify|mappings expects"):
            run("tract", model, feeds)
    with pytest.raises(RuntimeFailure, match="is_null"):
        run("openvino", with_lengths, feeds)
    assert_same(run("onnxruntime", plain, feeds), run("openvino", plain, feeds))
    assert seqlower.lower(plain, target="openvino", check=False).opset_import[0].version == 8
    lowered = _lowered(with_lengths, "openvino")
    assert_same(run("onnxruntime", with_lengths, feeds), run("openvino", lowered, feeds))


@settings(max_examples=25, deadline=None)
@given(
    batch=st.integers(1, 4),
    steps=st.integers(1, 5),
    data=st.data(),
    directions=st.tuples(st.integers(0, 1), st.integers(0, 1)),
)
def test_scan8_lowered_matches_onnxruntime(
    batch: int, steps: int, data: st.DataObject, directions: tuple[int, int]
) -> None:
    lengths = data.draw(st.none() | st.lists(st.integers(1, steps), min_size=batch, max_size=batch))
    model = scan8(batch, steps, lengths, directions)
    feeds = _feeds(model, seed=batch * 7 + steps)
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", _lowered(model), feeds))


def test_a_nested_scan8_and_the_ops_converted_around_it() -> None:
    """A Scan-8 in a Scan-8's body is lowered first; an op that changed in opset 9 outside the
    Scan bodies (BatchNormalization lost ``spatial``) goes through onnx's adapter."""
    model = onnx.parser.parse_model(
        """
        <ir_version: 4, opset_import: ["" : 8]>
        g (float[2,3,2,2] x, float[2,2] s0) => (float[2,2] s, float[2,3,2,2] r, float[2,3,2,2] n)
        <float[3] gamma = {1.5, 2, -1}, float[3] beta = {0, 1, 2}, float[3] mean = {0, 1, 0},
         float[3] var = {1, 2, 3}> {
            s, r = Scan ("", s0, x) <num_scan_inputs = 1,
                body = outer (float[2] acc, float[2,2] rows) => (float[2] acc_out, float[2,2] r) {
                    acc_out, r = Scan ("", acc, rows) <num_scan_inputs = 1, directions = [1],
                        body = inner (float a, float row) => (float b, float c) {
                            b = Add(a, row)
                            c = Mul(b, row)
                        }>
                }>
            n = BatchNormalization<spatial = 1>(r, gamma, beta, mean, var)
        }
        """
    )
    onnx.checker.check_model(model, full_check=True)
    feeds = _feeds(model)
    lowered = _lowered(model)
    (norm,) = [n for n in lowered.graph.node if n.op_type == "BatchNormalization"]
    assert not norm.attribute
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))
    assert_same(run("onnxruntime", model, feeds), run("tract", lowered, feeds))


def test_what_cannot_be_made_exact_is_named(tmp_path: Path) -> None:
    """A batch size not known when lowering, constant lengths over a scan axis of unknown
    length, an op in a body that changed in opset 9: exit 2 naming the node, nothing written;
    --overwrite-input-shape fixes the batch size."""
    for model, words in [
        (scan8("B", 3), ["batch size is not known", "--overwrite-input-shape"]),
        (scan8(2, "T", [1, 2]), ["length of its scan axis is not known"]),
    ]:
        with pytest.raises(TargetError, match="cannot lower the model for tract") as caught:
            seqlower.lower(model, target="tract", check=False)
        (blocker,) = caught.value.blockers
        assert blocker.startswith("Scan node producing 'y', 'k', 'z', 'd' in graph 'g'")
        assert all(word in str(caught.value) for word in words), str(caught.value)
    upsampled = onnx.parser.parse_model(
        """
        <ir_version: 4, opset_import: ["" : 8]>
        g (float[1,3,2] x, float[1,4] s0) => (float[1,4] s) {
            s = Scan ("", s0, x) <num_scan_inputs = 1,
                body = b (float[4] a, float[2] row) => (float[4] out) {
                    up = Upsample<scales = [2.0]>(row)
                    out = Add(a, up)
                }>
        }
        """
    )
    with pytest.raises(TargetError, match=r"Upsample node .* in the body of Scan node"):
        seqlower.lower(upsampled, target="tract", check=False)
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(scan8("B", 3), source)
    result = run_cli(source, "-o", out, "--target", "tract")
    assert result.exit_code == 2 and "batch size is not known" in result.stderr
    assert not out.exists()
    result = run_cli(
        source, "-o", out, "--target", "tract", "--overwrite-input-shape", "init=2,2",
        "--overwrite-input-shape", "x=2,3,2", "--overwrite-input-shape", "w=2,3,2",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "runs and matches on tract" in result.stdout


def test_a_state_the_body_returns_as_it_is() -> None:
    """A body input returned as a body output gets an ``Identity`` in each copy: without it
    onnxruntime 1.32 returns another entry's values for the Scan-9's state and tract 0.23.9
    panics. (onnxruntime's own Scan-8 returns zeros for that state, so the expected values are
    written here.)"""
    model = onnx.parser.parse_model(
        """
        <ir_version: 4, opset_import: ["" : 8]>
        g (float[3,2] init, float[3,4,2] x) => (float[3,2] y, float[3,2] k) {
            y, k = Scan ("", init, init, x) <num_scan_inputs = 1,
                body = b (float[2] a, float[2] kept, float[2] n) => (float[2] o, float[2] kept) {
                    o = Add(a, n)
                }>
        }
        """
    )
    init = np.arange(6, dtype=np.float32).reshape(3, 2)
    x = np.random.default_rng(1).normal(size=(3, 4, 2)).astype(np.float32)
    expected = [init + x.sum(axis=1, dtype=np.float32), init]
    lowered = _lowered(model)
    for runtime in ("onnxruntime", "tract", "openvino"):
        outputs = run(runtime, lowered, {"init": init, "x": x})
        np.testing.assert_allclose(outputs[0], expected[0], rtol=1e-6)
        np.testing.assert_array_equal(outputs[1], expected[1])


@settings(max_examples=20, deadline=None)
@given(data=st.data(), directions=st.tuples(st.integers(0, 1), st.integers(0, 1)))
def test_run_time_lengths(data: st.DataObject, directions: tuple[int, int]) -> None:
    """``sequence_lens`` a graph input: each entry scans all T rows, a reverse input's first
    ``length`` rows reversed, the states frozen and the scan outputs zero past the length; bit
    for bit what onnxruntime's Scan-8 gives, on tract (its row) and OpenVINO (which refuses the
    original's sequence_lens)."""
    lengths = data.draw(st.lists(st.integers(1, 4), min_size=3, max_size=3))
    model = scan8(3, 4, directions=directions, lengths_input=True)
    feeds = {**_feeds(model, seed=sum(lengths)), "lens": np.array(lengths, dtype=np.int64)}
    expected = run("onnxruntime", model, feeds)
    for target in ("tract", "openvino"):
        lowered = _lowered(model, target)
        assert_same(expected, run("onnxruntime", lowered, feeds))
        assert_same(expected, run(target, lowered, feeds))


@pytest.mark.parametrize("lengths", [[0, 2, 3], [5, 1, 1], [1, 2]])
@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_run_time_lengths_out_of_range_fail(runtime: str, lengths: list[int]) -> None:
    """Lengths of 0, past T, or not one per entry fail at run time as onnxruntime's Scan-8
    refuses them (tract, whose Gather aborts the process on them, is left out here)."""
    model = scan8(3, 4, lengths_input=True)
    feeds = {**_feeds(model), "lens": np.array(lengths, dtype=np.int64)}
    with pytest.raises(RuntimeFailure):
        run("onnxruntime", model, feeds)
    with pytest.raises(RuntimeFailure):
        run(runtime, _lowered(model, "openvino"), feeds)


# Rows past an entry's length that the body would fail on (indices out of range), and a state
# the body would fail on once frozen (a counter reading row k of a table): onnxruntime's Scan-8
# never runs the body past a length, so neither may the lowering.
PAST_THE_LENGTH = onnx.parser.parse_model(
    """
    <ir_version: 4, opset_import: ["" : 8]>
    g (int64[2] lens, float[2,1] acc, int64[2,1] k, int64[2,4,1] idx)
        => (float[2,1] total, int64[2,1] count, float[2,4,1] picked) {
        total, count, picked = Scan (lens, acc, k, idx) <num_scan_inputs = 1,
            body = b (float[1] a, int64[1] k_in, int64[1] i) => (float[1] a_out, int64[1] k_out,
                                                                   float[1] v) {
                table = Constant<value = float[3] {10, 20, 30}>()
                v = Gather(table, i)
                w = Gather(table, k_in)
                s = Add(a, v)
                a_out = Add(s, w)
                one = Constant<value = int64[1] {1}>()
                k_out = Add(k_in, one)
            }>
    }
    """
)


@pytest.mark.parametrize("target", ["tract", "openvino"])
def test_rows_past_the_length_are_never_run(target: str) -> None:
    feeds = {
        "lens": np.array([3, 1], np.int64),
        "acc": np.zeros((2, 1), np.float32),
        "k": np.array([[0], [2]], np.int64),
        "idx": np.array([[[2], [0], [1], [7]], [[1], [7], [-9], [7]]], np.int64),
    }
    expected = run("onnxruntime", PAST_THE_LENGTH, feeds)
    lowered = _lowered(PAST_THE_LENGTH, target)
    assert_same(expected, run("onnxruntime", lowered, feeds))
    assert_same(expected, run(target, lowered, feeds))
