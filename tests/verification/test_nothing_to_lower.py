"""A model with nothing to lower is written as read, without a check that would compare it with
itself; RNN/GRU/LSTM sequence_lens are drawn in range, and failures name the input behind them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import pytest
from click.testing import CliRunner

from seqlower.cli.commands import cli
from seqlower.job import LowerOptions, lower_file
from seqlower.verification import verify

# A bidirectional nn.LSTM over pack_padded_sequence, as the TorchScript exporter writes it: the
# lengths are sorted (Cast to float, TopK, Cast back) before they reach sequence_lens.
LSTM = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[T, B, 3] x, int64[B] lengths) => (float[T, 2, B, 4] y) {
    lf = Cast<to = 1>(lengths)
    k = Shape<start = 0, end = 1>(lengths)
    sorted, order = TopK<axis = 0, largest = 1, sorted = 1>(lf, k)
    lens = Cast<to = 6>(sorted)
    y, yh, yc = LSTM<direction = "bidirectional", hidden_size = 4>(x, W, R, Bb, lens)
}
"""


def lstm_model() -> onnx.ModelProto:
    model = onnx.parser.parse_model(LSTM)
    rng = np.random.default_rng(0)
    for name, shape in [("W", (2, 16, 3)), ("R", (2, 16, 4)), ("Bb", (2, 32))]:
        array = rng.standard_normal(shape).astype(np.float32)
        model.graph.initializer.append(onnx.numpy_helper.from_array(array, name))
    return model


def rnn_model(op: str, layout: int) -> onnx.ModelProto:
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    x = "float[B, T, 3] x" if layout else "float[T, B, 3] x"
    model = onnx.parser.parse_model(
        f"""
        <ir_version: 10, opset_import: ["" : 21]>
        g ({x}, int32[B] lengths) => (float y) {{
            lens = Cast<to = 6>(lengths)
            out, h = {op}<hidden_size = 2, layout = {layout}>(x, W, R, , lens)
            y = ReduceSum<keepdims = 0, noop_with_empty_axes = 0>(h)
        }}
        """
    )
    rng = np.random.default_rng(1)
    for name, shape in [("W", (1, 2 * gates, 3)), ("R", (1, 2 * gates, 2))]:
        array = rng.standard_normal(shape).astype(np.float32)
        model.graph.initializer.append(onnx.numpy_helper.from_array(array, name))
    return model


def test_nothing_to_lower_is_written_as_read_without_a_check(tmp_path: Path) -> None:
    source, out = tmp_path / "lstm.onnx", tmp_path / "out.onnx"
    onnx.save(lstm_model(), source)
    result = CliRunner().invoke(cli, [str(source), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[:2] == [
        "note: the model is kept as read and not checked (the check would compare it with itself)",
        "nothing to lower: no ReverseSequence or SequenceMap in the model",
    ]
    assert "check:" not in result.output
    assert out.read_bytes() == source.read_bytes()


def test_nothing_to_lower_restamped_only_when_asked(tmp_path: Path) -> None:
    source, out = tmp_path / "lstm.onnx", tmp_path / "out.onnx"
    onnx.save(lstm_model(), source)
    result = lower_file(source, out, LowerOptions(ir_version=9))
    assert result.exit_code == 0 and result.unchanged and result.verification is None
    expected = lstm_model()
    expected.ir_version = 9
    assert onnx.load(out) == expected


def test_lstm_sequence_lens_through_cast_topk_cast_are_drawn_in_range() -> None:
    model = lstm_model()
    report = verify(model, model, n=5)
    assert report.ok, report.reason
    assert report.input_problems == []


@pytest.mark.parametrize(("op", "layout"), [("RNN", 0), ("GRU", 1), ("LSTM", 1)])
def test_rnn_gru_lstm_sequence_lens_in_range(op: str, layout: int) -> None:
    model = rnn_model(op, layout)
    report = verify(model, model, n=4, dims={"T": 5, "B": 3})
    assert report.ok, report.reason
    assert report.input_problems == []


def test_lengths_out_of_range_name_the_input_that_reaches_them(tmp_path: Path) -> None:
    source, data = tmp_path / "lstm.onnx", tmp_path / "bad.npz"
    onnx.save(lstm_model(), source)
    np.savez(data, x=np.zeros((3, 2, 3), np.float32), lengths=np.array([9, 2]))
    result = CliRunner().invoke(cli, ["verify", str(source), str(source), "--inputs", str(data)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "'lengths'" in lines[0] and "LSTM" in lines[0], lines


def test_a_rejected_draw_names_the_lengths_input_behind_cast_topk_cast() -> None:
    # Five lengths for a batch of two: every draw is rejected, and the message names 'lengths'.
    model = onnx.parser.parse_model(LSTM.replace("int64[B] lengths", "int64[5] lengths"))
    model.graph.initializer.extend(lstm_model().graph.initializer)
    report = verify(model, model, input_shapes={"x": (3, 2, 3)}, n=1)
    assert report.status == "cannot_verify"
    assert "a LSTM node rejected inputs 'lengths', 'x'" in report.reason, report.reason
