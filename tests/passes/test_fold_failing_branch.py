"""--sequence-free on PyTorch's TorchScript ``hstack``: a rank ``If`` whose untaken branch holds a
``ConcatFromSequence`` with an axis out of range must not become a ``Concat`` onnxruntime
refuses at load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import onnxruntime as ort
from click.testing import CliRunner

import seqlower
from seqlower.cli.commands import cli
from tests.helpers import all_op_types

# torch.hstack of two 1-D tensors, as torch.onnx.export(dynamo=False) writes it.
LEGACY_HSTACK = """
<ir_version: 8, opset_import: ["" : 17]>
main_graph (float[la] a, float[lb] b) => (float[ly] y) {
    seq = SequenceConstruct(a, b)
    zero = Constant<value = int64 {0}>()
    first = SequenceAt(seq, zero)
    shape = Shape(first)
    rank = Size(shape)
    one = Constant<value = int64 {1}>()
    is_1d = Equal(rank, one)
    y = If(is_1d) <
        then_branch = sub_graph () => (float[n] cat0) {
            cat0 = ConcatFromSequence<axis = 0, new_axis = 0>(seq)
        },
        else_branch = sub_graph1 () => (float[n] cat1) {
            cat1 = ConcatFromSequence<axis = 1, new_axis = 0>(seq)
        }
    >
}
"""

FEEDS = {"a": np.arange(5, dtype=np.float32), "b": np.arange(4, dtype=np.float32)}


def test_untaken_rank_branch_is_folded_not_made_invalid() -> None:
    model = onnx.parser.parse_model(LEGACY_HSTACK)
    lowered = seqlower.lower(model, sequence_free=True)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True, data_prop=True)
    assert all_op_types(lowered) == ["Concat"]
    session = ort.InferenceSession(lowered.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, FEEDS)
    np.testing.assert_array_equal(y, np.concatenate([FEEDS["a"], FEEDS["b"]]))


def test_through_the_command_line(tmp_path: Path) -> None:
    source, out = tmp_path / "hstack.onnx", tmp_path / "out.onnx"
    onnx.save(onnx.parser.parse_model(LEGACY_HSTACK), source)
    result = CliRunner().invoke(cli, [str(source), "-o", str(out), "--sequence-free"])
    assert result.exit_code == 0, result.output
    assert "(reference: onnxruntime, candidate: onnxruntime)" in result.output
    ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])


def test_undecided_condition_names_the_failing_node(tmp_path: Path) -> None:
    """When nothing known decides the If, the node stays, and --sequence-free says why."""
    text = LEGACY_HSTACK.replace("(float[la] a, float[lb] b)", "(float[la] a, float[lb] b, bool c)")
    text = text.replace("y = If(is_1d)", "y = If(c)")
    source, out = tmp_path / "hstack.onnx", tmp_path / "out.onnx"
    onnx.save(onnx.parser.parse_model(text), source)
    result = CliRunner().invoke(cli, [str(source), "-o", str(out), "--sequence-free"])
    assert result.exit_code == 2, result.output
    assert "its axis 1 is out of range for its rank-1 elements" in result.stderr
    assert not out.exists()
