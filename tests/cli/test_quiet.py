"""-q prints nothing on success, even when a runtime warns (numpy inside onnx.reference); -v
shows those warnings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import onnx
import onnx.parser

from tests.helpers import ROOT, nested_row_maps

# Nested maps (onnxruntime refuses them, onnx.reference runs them) whose inner ReduceMean sees
# empty rows with --dim C=0: numpy warns "Mean of empty slice".
NESTED_MEAN = nested_row_maps("ReduceMean")


def _run(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "nested.onnx"
    onnx.save(onnx.parser.parse_model(NESTED_MEAN), source)
    command = [sys.executable, "-m", "seqlower", str(source), "-o", str(tmp_path / "out.onnx")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [*command, "--dim", "C=0", "--dim", "R=2", *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_quiet_prints_nothing_when_a_runtime_warns(tmp_path: Path) -> None:
    result = _run(tmp_path, "-q")
    assert result.returncode == 0, result.stderr
    assert (result.stdout, result.stderr) == ("", "")
    assert (tmp_path / "out.onnx").exists()


def test_verbose_shows_runtime_warnings(tmp_path: Path) -> None:
    result = _run(tmp_path, "-v")
    assert result.returncode == 0, result.stderr
    assert "RuntimeWarning: Mean of empty slice" in result.stderr
