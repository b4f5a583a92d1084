"""The check is bounded: memory, time, Ctrl-C; and files given as --inputs are checked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

import seqlower.verification.check
from seqlower.errors import CheckLimitError
from tests.helpers import assert_one_line_error, neg_loop, run_cli


def one_line(result: Any, code: int, *words: str) -> None:
    assert_one_line_error(result, *words, code=code)


def save(text: str, path: Path) -> Path:
    onnx.save(onnx.parser.parse_model(text), path)
    return path


HUGE = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[200000, 200000] x) => (float[200000, 200000] y) { y = Neg(x) }
"""

ENDLESS = neg_loop(10**12, 1)

NEG = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 3] x) => (float[N, 3] y) { y = Neg(x) }
"""

# These models have nothing to lower, so `seqlower MODEL -o OUT` writes them unchecked: the
# check's bounds are exercised through `seqlower verify MODEL MODEL`.


def test_inputs_over_the_memory_budget_are_refused_before_allocating(tmp_path: Path) -> None:
    source = save(HUGE, tmp_path / "huge.onnx")
    start = time.monotonic()
    result = run_cli("verify", source, source)
    one_line(result, 3, "'x'", "float[200000, 200000]", "--check-memory")
    assert time.monotonic() - start < 30
    assert sorted(os.listdir(tmp_path)) == ["huge.onnx"]


@pytest.mark.parametrize("flag", ["--check-memory=1K", "--check-memory=0.001M"])
def test_memory_budget_flag(tmp_path: Path, flag: str) -> None:
    source = save(NEG, tmp_path / "neg.onnx")
    one_line(run_cli("verify", source, source, flag, "--dim", "N=1000"), 3, "'x'")
    assert run_cli("verify", source, source, "--check-memory", "1M").exit_code == 0


@pytest.mark.parametrize("value", ["-1", "0", "lots", "12Q"])
def test_bad_memory_budget(tmp_path: Path, value: str) -> None:
    source = save(NEG, tmp_path / "neg.onnx")
    one_line(
        run_cli(source, "-o", tmp_path / "o.onnx", "--check-memory", value), 2, "--check-memory"
    )


def test_string_inputs_count_too(tmp_path: Path) -> None:
    source = save(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (string[100000000] x) => (string[100000000] y) { y = Identity(x) }
        """,
        tmp_path / "s.onnx",
    )
    one_line(run_cli("verify", source, source, "--check-memory", "1G"), 3, "string")


def test_time_limit_stops_a_runaway_loop(tmp_path: Path) -> None:
    source = save(ENDLESS, tmp_path / "loop.onnx")
    start = time.monotonic()
    result = run_cli("verify", source, source, "--check-timeout", "1")
    one_line(result, 3, "--check-timeout")
    assert time.monotonic() - start < 20
    assert sorted(os.listdir(tmp_path)) == ["loop.onnx"]


def test_ctrl_c_stops_the_check_promptly(tmp_path: Path) -> None:
    source = save(ENDLESS, tmp_path / "loop.onnx")
    command = [sys.executable, "-m", "seqlower", "verify", str(source), str(source)]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    time.sleep(4)  # start-up, lowering, loading both sessions: the endless run has begun
    process.send_signal(signal.SIGINT)
    start = time.monotonic()
    _, stderr = process.communicate(timeout=30)
    assert time.monotonic() - start < 10
    assert process.returncode == 130 and "Traceback" not in stderr, stderr
    assert sorted(os.listdir(tmp_path)) == ["loop.onnx"]


def test_running_out_of_memory_is_not_a_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    model = onnx.parser.parse_model(NEG)
    real = seqlower.verification.check.load_pair

    def starving(reference: onnx.ModelProto, candidate: onnx.ModelProto, oracles: Any) -> Any:
        pair = real(reference, candidate, oracles)

        def run(_feeds: Any) -> Any:
            raise MemoryError()

        for runner in pair:
            runner.run = run
        return pair

    monkeypatch.setattr(seqlower.verification.check, "load_pair", starving)
    with pytest.raises(CheckLimitError, match="ran out of memory"):
        seqlower.verification.verify(model, model)


# ------------------------------------------------------------- files given as --inputs


def _input_folder(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / "data" / "test_data_set_0"
    folder.mkdir(parents=True)
    tensor = onnx.numpy_helper.from_array(np.zeros((2, 3), np.float32), "x")
    if name == "input_a.pb":
        (folder / name).write_bytes(tensor.SerializeToString())
    elif name == "folder":
        (folder / "input_0.pb").mkdir()
    elif name == "fifo":
        os.mkfifo(folder / "input_0.pb")
    return folder.parent


@pytest.mark.parametrize(
    ("kind", "word"),
    [("input_a.pb", "input_a.pb"), ("folder", "not a regular file"), ("fifo", "not a regular")],
)
def test_bad_test_data_folders(tmp_path: Path, kind: str, word: str) -> None:
    source = save(NEG, tmp_path / "neg.onnx")
    folder = _input_folder(tmp_path, kind)
    one_line(run_cli(source, "-o", tmp_path / "o.onnx", "--inputs", folder), 2, word)


def test_npz_holding_object_arrays(tmp_path: Path) -> None:
    source = save(NEG, tmp_path / "neg.onnx")
    np.savez(tmp_path / "in.npz", x=np.array([object(), 1], dtype=object))
    one_line(run_cli(source, "-o", tmp_path / "o.onnx", "--inputs", tmp_path / "in.npz"), 2, "'x'")


def test_device_as_inputs(tmp_path: Path) -> None:
    source = save(NEG, tmp_path / "neg.onnx")
    one_line(run_cli(source, "-o", tmp_path / "o.onnx", "--inputs", "/dev/zero"), 2, "/dev/zero")
