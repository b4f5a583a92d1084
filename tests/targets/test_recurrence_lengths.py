"""Issue 43, item 1: OpenVINO 2026.4.1 ignores an LSTM/GRU/RNN's ``sequence_lens``. As written,
a ``--target openvino`` proof fails whoever is to blame (exit 1, OpenVINO named: it gets the
original wrong too); ``recurrence-lengths-per-entry`` runs each batch entry on its own length,
so the lowered model is right there (exit 0)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import seqlower
from seqlower.verification import CheckOptions, verify
from tests.helpers import run_cli
from tests.runtimes import assert_close, require, run

_T, _B, _I, _H = "T", "B", 4, 5
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def padded_recurrence(op: str = "LSTM", direction: str = "bidirectional") -> onnx.ModelProto:
    """What PyTorch's TorchScript exporter writes for ``nn.LSTM(..., bidirectional=True)`` fed a
    padded batch and its lengths: the op with ``sequence_lens`` (int32) and zero initial states
    of the batch's size, ``Y`` [T, 2, B, H] read as [T, B, 2H] through a Transpose and Reshape."""
    rng = np.random.default_rng(0)
    dirs = 2 if direction == "bidirectional" else 1
    gates = _GATES[op] * _H
    weights = [
        numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), name)
        for name, shape in (
            ("W", (dirs, gates, _I)),
            ("R", (dirs, gates, _H)),
            ("B", (dirs, 2 * gates)),
        )
    ]
    state_shape = numpy_helper.from_array(np.array([dirs, 1, _H], np.int64), "state_shape")
    nodes = [
        helper.make_node("Shape", ["x"], ["x_shape"]),
        helper.make_node("Gather", ["x_shape", "one"], ["batch"], axis=0),
        helper.make_node("Concat", ["dirs", "batch", "hidden"], ["h0_shape"], axis=0),
        helper.make_node(
            "ConstantOfShape",
            ["h0_shape"],
            ["h0"],
            value=numpy_helper.from_array(np.zeros(1, np.float32)),
        ),
    ]
    states = ["h0", "h0"] if op == "LSTM" else ["h0"]
    outputs = ["y", "y_h", "y_c"] if op == "LSTM" else ["y", "y_h"]
    nodes += [
        helper.make_node(
            op,
            ["x", "W", "R", "B", "lengths", *states],
            outputs,
            direction=direction,
            hidden_size=_H,
            name="rnn",
        ),
        helper.make_node("Transpose", ["y"], ["y_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["y_t", "out_shape"], ["out"]),
    ]
    constants = [
        numpy_helper.from_array(np.array([1], np.int64), "one"),
        numpy_helper.from_array(np.array([dirs], np.int64), "dirs"),
        numpy_helper.from_array(np.array([_H], np.int64), "hidden"),
        numpy_helper.from_array(np.array([0, 0, -1], np.int64), "out_shape"),
    ]
    graph = helper.make_graph(
        nodes,
        "padded_recurrence",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [_T, _B, _I]),
            helper.make_tensor_value_info("lengths", TensorProto.INT32, [_B]),
        ],
        [
            helper.make_tensor_value_info("out", TensorProto.FLOAT, [_T, _B, dirs * _H]),
            *(
                helper.make_tensor_value_info(name, TensorProto.FLOAT, [dirs, _B, _H])
                for name in outputs[1:]
            ),
        ],
        [*weights, state_shape, *constants],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _feeds() -> dict[str, np.ndarray]:
    """Lengths of every kind: full, partial, one step, none."""
    x = np.random.default_rng(1).standard_normal((6, 4, _I)).astype(np.float32)
    return {"x": x, "lengths": np.array([6, 0, 3, 1], np.int32)}


def test_openvino_gets_lengths_wrong_as_written_and_that_is_exit_1(tmp_path: Path) -> None:
    """The original against itself on OpenVINO: its failure is the runtime's, and still a
    failed proof (never exit 0), the runtime named."""
    require("openvino")
    model = padded_recurrence()
    report = verify(model, model, CheckOptions(runtimes=("openvino",)))
    assert report.status == "mismatch" and report.culprit == "runtime", report.reason
    assert "computes this model wrongly, the original too" in report.reason
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    result = run_cli("verify", path, path, "--target", "openvino", "--no-save-failing-inputs")
    assert result.exit_code == 1, result.output
    assert "computes this model wrongly, the original too" in result.stderr


@pytest.mark.parametrize(
    ("op", "direction"),
    [("LSTM", "bidirectional"), ("LSTM", "reverse"), ("GRU", "bidirectional"), ("RNN", "forward")],
)
def test_target_openvino_makes_lengths_right(tmp_path: Path, op: str, direction: str) -> None:
    require("openvino")
    model = padded_recurrence(op, direction)
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    result = run_cli(source, "-o", out, "--target", "openvino")
    assert result.exit_code == 0, result.output
    assert "runs and matches on openvino" in result.output
    lowered = onnx.load(out)
    assert "Loop" in [n.op_type for n in lowered.graph.node]
    feeds = _feeds()
    assert_close(run("onnxruntime", model, feeds), run("openvino", lowered, feeds), atol=1e-5)
    # And through the API: proven there, no ProofFailedError.
    seqlower.lower(model, target="openvino")


def test_without_lengths_nothing_changes() -> None:
    """No sequence_lens: OpenVINO runs the op right, it is kept as it is."""
    model = padded_recurrence()
    node = next(n for n in model.graph.node if n.op_type == "LSTM")
    node.input[4] = ""
    lowered = seqlower.lower(model, ["recurrence-lengths-per-entry"])
    assert [n.op_type for n in lowered.graph.node] == [n.op_type for n in model.graph.node]
