"""onnxruntime 1.32.0 aborts the whole process ('terminate called without an active exception')
on a ``GRU`` of no step or no batch and an ``LSTM`` of no batch. The check runs onnxruntime in
its own process, so a zero-size input (``--inputs``, ``--dim N=0``) killed seqlower with no
word; the adapter now says the run would abort instead of running it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from seqlower.verification.runtimes.onnxruntime import aborts_on
from tests.helpers import ROOT
from tests.runtimes import require

HIDDEN, WIDTH = 2, 3
GATES = {"GRU": 3, "LSTM": 4, "RNN": 1}


def recurrence(op: str, layout: int = 0) -> onnx.ModelProto:
    """The smallest model that shows it: one recurrence over ``x`` ``[T, B, 3]``."""
    gates = GATES[op] * HIDDEN
    weights = [
        numpy_helper.from_array(np.ones((1, gates, WIDTH), np.float32), "W"),
        numpy_helper.from_array(np.ones((1, gates, HIDDEN), np.float32), "R"),
    ]
    attributes = {"layout": layout} if layout else {}
    node = helper.make_node(op, ["x", "W", "R"], ["y"], hidden_size=HIDDEN, **attributes)
    dims = ["B", "T", WIDTH] if layout else ["T", "B", WIDTH]
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


PROBE = """
import sys, numpy as np, onnx, onnxruntime as ort
model = onnx.load(sys.argv[1])
session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
session.run(None, {"x": np.zeros(tuple(int(v) for v in sys.argv[2].split(",")), np.float32)})
"""


@pytest.mark.parametrize(
    ("op", "shape", "aborts"),
    [
        ("GRU", (0, 2, WIDTH), True),
        ("GRU", (2, 0, WIDTH), True),
        ("LSTM", (2, 0, WIDTH), True),
        ("LSTM", (0, 2, WIDTH), False),
        ("RNN", (0, 2, WIDTH), False),
        ("RNN", (2, 0, WIDTH), False),
    ],
)
def test_onnxruntime_aborts_on_empty_recurrences(
    tmp_path: Path, op: str, shape: tuple[int, ...], aborts: bool
) -> None:
    """The runtime's bug the adapter stands for (onnxruntime 1.32.0), and what it runs."""
    path = tmp_path / f"{op}.onnx"
    onnx.save(recurrence(op), path)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(path), ",".join(map(str, shape))],
        capture_output=True,
        text=True,
    )
    assert (done.returncode == -signal.SIGABRT) == aborts, done.stderr
    model = recurrence(op)
    said = aborts_on(model, list(model.graph.node), {"x": np.zeros(shape)})
    assert (said is not None) == aborts


def test_a_batch_major_gru_of_no_batch_is_foreseen() -> None:
    model = recurrence("GRU", layout=1)
    assert aborts_on(model, list(model.graph.node), {"x": np.zeros((0, 2, WIDTH))}) is not None
    assert aborts_on(model, list(model.graph.node), {"x": np.zeros((2, 1, WIDTH))}) is None


def test_the_check_says_onnxruntime_would_abort_instead_of_dying(tmp_path: Path) -> None:
    """``--inputs`` with no batch: exit 3 naming onnxruntime's GRU, not the process killed."""
    require("openvino")
    model, inputs = tmp_path / "gru.onnx", tmp_path / "empty.npz"
    onnx.save(recurrence("GRU"), model)
    np.savez(inputs, x=np.zeros((2, 0, WIDTH), np.float32))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "seqlower",
            str(model),
            "-o",
            str(tmp_path / "out.onnx"),
            "--inputs",
            str(inputs),
            "--target",
            "openvino",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 3, done.stderr
    assert "would abort the process on GRU node" in done.stderr
    assert not (tmp_path / "out.onnx").exists()
