"""The README's promises under faults: out of memory anywhere is exit 3 with one line, and a
signal during the final renames lets them finish and says what was written."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.parser
import pytest
from click.testing import CliRunner

import seqlower.io
import seqlower.job
import seqlower.plan
import seqlower.verification.inputs
import seqlower.writing
from seqlower.cli.commands import cli
from tests.helpers import assert_one_line_error

# 20000 x 20000 float32: 1.6 GB, under the --check-memory given, but no room to draw it here.
HUGE = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[20000, 20000] x, int64[20000] lens) => (float[20000, 20000] y) {
        y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
    }
    """
)

SMALL = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T, 2] x, int64[2] lens) => (float[T, 2] y) {
        y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
    }
    """
)


def _out_of_memory(*_: Any, **__: Any) -> Any:
    raise MemoryError()


def _one_line(result: Any, code: int) -> str:
    return assert_one_line_error(result, code=code, prefix="seqlower: ")


def test_out_of_memory_drawing_inputs_is_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, out = tmp_path / "huge.onnx", tmp_path / "out.onnx"
    onnx.save(HUGE, source)
    monkeypatch.setattr(seqlower.verification.inputs, "random_tensor", _out_of_memory)
    result = CliRunner().invoke(cli, [str(source), "-o", str(out), "--check-memory", "8G", "-q"])
    line = _one_line(result, 3)
    assert "ran out of memory drawing the inputs of run 1" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["huge.onnx"]


def test_out_of_memory_while_lowering_is_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, out = tmp_path / "small.onnx", tmp_path / "out.onnx"
    onnx.save(SMALL, source)
    monkeypatch.setattr(seqlower.plan, "run_pipeline", _out_of_memory)
    line = _one_line(CliRunner().invoke(cli, [str(source), "-o", str(out)]), 3)
    assert line.startswith("seqlower: error: seqlower ran out of memory")
    assert not out.exists()


def test_out_of_memory_in_verify_is_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "small.onnx"
    onnx.save(SMALL, source)
    monkeypatch.setattr(seqlower.io, "self_contained_proto", _out_of_memory)
    result = CliRunner().invoke(cli, ["verify", str(source), str(source)])
    assert "ran out of memory" in _one_line(result, 3)


@pytest.mark.parametrize("weights", [False, True])
def test_signal_during_the_final_renames_says_what_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weights: bool
) -> None:
    source, out = tmp_path / "small.onnx", tmp_path / "out.onnx"
    onnx.save(SMALL, source)
    real = os.replace

    def replace_then_interrupt(a: Any, b: Any) -> None:
        real(a, b)
        if Path(b) == out:  # signals are held: this one arrives once the renames are done
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(seqlower.writing.os, "replace", replace_then_interrupt)
    flags = ["--external-data", "w.bin"] if weights else []
    if weights:  # a weight big enough to go to the external file
        model = onnx.parser.parse_model(
            """
            <ir_version: 8, opset_import: ["" : 17]>
            g (float[T, 2] x, int64[2] lens) => (float[T, 2] y) {
                r = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
                y = Add(r, w)
            }
            """
        )
        model.graph.initializer.append(
            onnx.numpy_helper.from_array(np.zeros((1, 2), np.float32), "w")
        )
        onnx.save(model, source)
    result = CliRunner().invoke(cli, [str(source), "-o", str(out), *flags, "--no-check"])
    line = _one_line(result, 130)
    assert line == f"seqlower: interrupted; {out} was written in full", line
    assert out.exists()
    onnx.checker.check_model(onnx.load(out))
