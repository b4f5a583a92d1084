"""Issue 43, item 2: an op the target runtime cannot load, which seqlower never touches, is a
blocker (exit 2 naming the node and the op, before any check; ``inspect`` says so), not a
MISMATCH on the runtime's words. The tables are measured (``benchmarks/runtime_ops.py``) and
checked here against the installed runtimes."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

import seqlower
from seqlower.passes._runtime_ops import (
    OPENVINO_LACKS,
    OPENVINO_VERSION,
    TRACT_LACKS,
    TRACT_VERSION,
)
from tests.helpers import run_cli
from tests.runtimes import require
from tests.targets.test_recurrence_lengths import padded_recurrence

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import runtime_ops

# A few of each table, and ops each runtime has (never refused).
_SAMPLES = {
    "tract": (TRACT_LACKS, TRACT_VERSION, ["StringNormalizer", "Unique", "Det"], ["Relu", "LSTM"]),
    "openvino": (
        OPENVINO_LACKS,
        OPENVINO_VERSION,
        ["StringNormalizer", "Det", "TfIdfVectorizer"],
        ["Relu", "Unique", "NonMaxSuppression"],
    ),
}


@pytest.mark.parametrize("runtime", list(_SAMPLES))
def test_the_measured_table_is_the_installed_runtime(tmp_path: Path, runtime: str) -> None:
    require(runtime)
    table, version, lacking, present = _SAMPLES[runtime]
    installed = importlib.metadata.version(runtime).split("-")[0]
    assert installed == version, f"{runtime} {installed}: rerun benchmarks/runtime_ops.py"
    probe = runtime_ops.tract_lacks if runtime == "tract" else runtime_ops.openvino_lacks
    path = tmp_path / "probe.onnx"
    for op in lacking + present:
        since = max(runtime_ops.versions()[op])
        onnx.save(runtime_ops.probe_model(op, since), path)
        assert probe(path, op) == (op in lacking), (runtime, op)
        assert (since in table.get(op, ())) == (op in lacking), (runtime, op)


def string_model() -> onnx.ModelProto:
    """A string op no runtime of the table loads (tract, OpenVINO): a blocker by name."""
    node = helper.make_node("StringNormalizer", ["s"], ["t"], name="normalize")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("s", TensorProto.STRING, [3])],
        [helper.make_tensor_value_info("t", TensorProto.STRING, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize(
    ("target", "model", "words"),
    [
        ("tract", padded_recurrence, "LSTM node 'rnn'"),
        ("openvino", string_model, "StringNormalizer node 'normalize'"),
        ("tract", string_model, "StringNormalizer node 'normalize'"),
    ],
)
def test_an_op_the_runtime_lacks_is_a_blocker(
    tmp_path: Path, target: str, model: object, words: str
) -> None:
    require(target)
    built = model()  # type: ignore[operator]
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(built, source)
    result = run_cli(source, "-o", out, "--target", target)
    assert result.exit_code == 2, result.output
    assert f"cannot lower the model for {target} (1 blocker)" in result.stderr
    assert words in result.stderr and "MISMATCH" not in result.output
    assert not out.exists()
    inspected = run_cli("inspect", source, "--target", target)
    assert inspected.exit_code == 0
    assert "runs anywhere" not in inspected.output
    assert f"but {target} cannot run it as it stands" in inspected.output
    assert words in inspected.output
    with pytest.raises(seqlower.TargetError, match=words):
        seqlower.lower(built, target=target, check=False)


def test_tract_names_the_lengths_it_cannot_load(tmp_path: Path) -> None:
    """Without sequence_lens tract loads the op: only the lengths block."""
    source = tmp_path / "m.onnx"
    onnx.save(padded_recurrence(), source)
    result = run_cli(source, "-o", tmp_path / "out.onnx", "--target", "tract", "--no-check")
    assert result.exit_code == 2
    assert f"tract {TRACT_VERSION} cannot load LSTM with sequence_lens" in result.stderr
