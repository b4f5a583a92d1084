"""Issue 43's newcomer findings, each as the user met it: messages that name the right thing."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

from tests.helpers import assert_one_line_error, run_cli
from tests.runtimes import require
from tests.targets.test_recurrence_lengths import padded_recurrence


def _string_model() -> onnx.ModelProto:
    node = helper.make_node("StringNormalizer", ["s"], ["t"], name="normalize")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("s", TensorProto.STRING, [3])],
        [helper.make_tensor_value_info("t", TensorProto.STRING, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_verify_a_model_against_itself_blames_no_lowering(tmp_path: Path) -> None:
    """``verify A A`` lowered nothing: the runtime that cannot load A is at fault (exit 1)."""
    require("openvino")
    path = tmp_path / "m.onnx"
    onnx.save(_string_model(), path)
    result = run_cli("verify", path, path, "--target", "openvino")
    assert result.exit_code == 1, result.output
    assert "did not reach the target" not in result.output
    assert "lowered model" not in result.output
    assert "the candidate is the reference itself: openvino" in result.stderr


def test_a_bad_expected_file_is_named_as_expected(tmp_path: Path) -> None:
    """The --expected file also supplies the inputs; its errors still name --expected."""
    path, bad = tmp_path / "m.onnx", tmp_path / "bad.npz"
    onnx.save(padded_recurrence(), path)
    bad.write_text("not an archive")
    for command in ([path, "--dry-run"], ["verify", path, path]):
        result = run_cli(*command, "--expected", bad)
        line = assert_one_line_error(result, f"--expected {bad}: not a readable .npz file")
        assert "--inputs" not in line
    folder = tmp_path / "data" / "test_data_set_0"
    folder.mkdir(parents=True)
    (folder / "input_0.pb").write_bytes(b"\x08junk")
    result = run_cli(path, "--dry-run", "--expected", tmp_path / "data")
    assert_one_line_error(result, "--expected ", "not a readable TensorProto")


def test_untyped_outputs_are_named_with_what_to_do(tmp_path: Path) -> None:
    """onnxscript can leave graph outputs untyped: the checker's own words named no value."""
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [onnx.ValueInfoProto(name="y")],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    for command in ([path, "-o", tmp_path / "out.onnx"], ["verify", path, path]):
        line = assert_one_line_error(run_cli(*command), "graph output 'y' has no type")
        assert "infer_shapes" in line and "annotate" in line
