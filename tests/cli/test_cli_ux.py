"""The command line as a new user meets it: exit codes, one-line messages, help, the summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

import seqlower.job
from seqlower.cli.output import seconds
from tests.helpers import assert_one_line_error, run_cli
from tests.sequence_map_cases import CASES

NEG = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 3] x) => (float[N, 3] y) { y = Neg(x) }
    """
)


one_line_error = assert_one_line_error


@pytest.fixture
def sequence_model(tmp_path: Path) -> Path:
    model, _ = CASES["multi_io"]()
    path = tmp_path / "in.onnx"
    onnx.save(model, path)
    return path


# ----------------------------------------------------------------- 1. a closed stdout


def test_closed_stdout_does_not_stop_the_run(sequence_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.onnx"
    command = [sys.executable, "-m", "seqlower", str(sequence_model), "-o", str(out)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()  # as `| head -1` does
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 0, stderr
    assert "internal error" not in stderr and "Broken" not in stderr
    onnx.checker.check_model(onnx.load(out), full_check=True)


def test_list_passes_into_a_closed_pipe() -> None:
    shell = f"{sys.executable} -m seqlower --list-passes | head -1; exit ${{PIPESTATUS[0]}}"
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.startswith("lower-"), done.stderr
    assert done.stderr == ""


# ------------------------------------------------------------------ 2. bad flag values


@pytest.mark.parametrize(
    ("flags", "word"),
    [
        (["--seed", "-1"], "--seed"),
        (["--seed", "99999999999"], "--seed"),
        (["--dim", "height=-1"], "--dim"),
        (["--rtol", "-1"], "--rtol"),
        (["--atol", "nan"], "--atol"),
        (["--rtol", "o1:-1e-3"], "--rtol"),
        (["--input-shape", "x:1,-2"], "--input-shape"),
        (["--check-n", "0"], "--check-n"),
    ],
)
def test_bad_flag_values(sequence_model: Path, tmp_path: Path, flags: list[str], word: str) -> None:
    result = run_cli(sequence_model, "-o", tmp_path / "out.onnx", *flags)
    one_line_error(result, word)
    assert not (tmp_path / "out.onnx").exists()


# ---------------------------------------------------------- 4. names the model must have


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--dim", "nosuch=4"], ["--dim nosuch", "no dimension"]),
        (["--rtol", "nosuch:1e-3"], ["--rtol nosuch", "no output"]),
        (["--atol", "nosuch:1e-3"], ["--atol nosuch", "no output"]),
        (["--input-shape", "nosuch:1,3"], ["--input-shape nosuch", "no input"]),
        (["--input-shape", "x:2,4"], ["axis 1 is declared 3", "--force-input-shape"]),
        (["--input-shape", "x:2"], ["1 dimensions given"]),
    ],
)
def test_names_are_checked_against_the_model(
    tmp_path: Path, flags: list[str], words: list[str]
) -> None:
    source = tmp_path / "neg.onnx"
    onnx.save(NEG, source)
    one_line_error(run_cli(source, "-o", tmp_path / "out.onnx", *flags), *words)
    one_line_error(run_cli("verify", source, source, *flags), *words)


def test_forced_input_shape_and_combined_tolerances(tmp_path: Path) -> None:
    source = tmp_path / "neg.onnx"
    onnx.save(NEG, source)
    # Through verify: NEG has nothing to lower, so `seqlower NEG -o OUT` runs no check.
    flags = ["--input-shape", "x:2,3", "--rtol", "1e-3", "--rtol", "y:1e-4"]
    assert run_cli("verify", source, source, *flags).exit_code == 0
    forced = ["--input-shape", "x:2,4", "--force-input-shape"]
    result = run_cli("verify", source, source, *forced)
    # Accepted as a flag; onnxruntime then refuses the shape (the model really declares 3).
    assert result.exit_code == 3 and "invalid dimensions" in result.stdout + result.stderr


# ----------------------------------------------------------------- 5. seqlower verify


def test_verify_models_with_different_names_is_a_usage_error(tmp_path: Path) -> None:
    other = onnx.ModelProto.FromString(NEG.SerializeToString())
    other.graph.output[0].name = "z"
    other.graph.node[0].output[0] = "z"
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(NEG, a)
    onnx.save(other, b)
    one_line_error(run_cli("verify", a, b), "different outputs")


def test_verify_mismatch_saves_inputs_and_a_repro(tmp_path: Path) -> None:
    other = onnx.ModelProto.FromString(NEG.SerializeToString())
    other.graph.node[0].op_type = "Abs"
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(NEG, a)
    onnx.save(other, b)
    # A compare leaves the models' folder alone unless asked (issue 43).
    result = run_cli("verify", a, b)
    assert result.exit_code == 1 and "MISMATCH" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.onnx", "b.onnx"]
    assert "reproduce" not in result.stderr
    result = run_cli("verify", a, b, "--save-failing-inputs", tmp_path / "failing")
    assert result.exit_code == 1 and "MISMATCH" in result.stderr
    saved = tmp_path / "failing" / "test_data_set_0" / "input_0.pb"
    assert saved.exists()
    repro = next(line for line in result.stderr.splitlines() if "--inputs" in line).split()
    assert repro[:4] == ["seqlower", "verify", str(a), str(b)]
    assert run_cli(*repro[1:]).exit_code == 1


# ------------------------------------------------------------- 6. usage errors, one line


@pytest.mark.parametrize(
    "args",
    [["--bogus"], ["-o"], ["verify", "only-one.onnx"], ["help", "nosuch"]],
)
def test_usage_errors_are_one_line(sequence_model: Path, args: list[str]) -> None:
    result = run_cli(*([sequence_model, *args] if args[0].startswith("-") else args))
    one_line_error(result)


def test_empty_output_path(sequence_model: Path) -> None:
    one_line_error(run_cli(sequence_model, "-o", ""), "-o", "empty path")


# -------------------------------------------- 7. flags and paths checked before the work


def test_missing_inputs_file_fails_before_reading(
    sequence_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_loading(*_: Any, **__: Any) -> None:
        raise AssertionError("the model was read first")

    monkeypatch.setattr(seqlower.job, "load_model", no_loading)
    result = run_cli(sequence_model, "-o", tmp_path / "o.onnx", "--inputs", tmp_path / "nope.npz")
    one_line_error(result, "--inputs", "no such file")


# ---------------------------------------------------------- 8, 9. what a person sees


def test_summary_says_it_once(sequence_model: Path, tmp_path: Path) -> None:
    result = run_cli(sequence_model, "-o", tmp_path / "out.onnx")
    verdict = next(line for line in result.stdout.splitlines() if line.startswith("check:"))
    assert verdict.count("match") == 1, verdict


def test_nothing_to_lower(tmp_path: Path) -> None:
    source = tmp_path / "neg.onnx"
    onnx.save(NEG, source)
    result = run_cli(source, "-o", tmp_path / "out.onnx")
    assert result.exit_code == 0 and (tmp_path / "out.onnx").exists()
    assert "nothing to lower: no ReverseSequence or SequenceMap in the model" in result.stdout
    assert "rewritten" not in result.stdout


def test_verbose_shows_no_library_chatter(sequence_model: Path, tmp_path: Path) -> None:
    result = run_cli(sequence_model, "-o", tmp_path / "out.onnx", "-v")
    assert result.exit_code == 0
    assert "onnx_ir" not in result.stdout + result.stderr


def test_durations_read_as_people_read_them() -> None:
    assert seconds(0.0123) == "12.3ms" and seconds(83.4) == "83.4s"


# ------------------------------------------------------------------------- 11. help


def test_help_texts() -> None:
    passes = run_cli("--list-passes")
    assert passes.exit_code == 0 and "``" not in passes.stdout and ":class:" not in passes.stdout
    top = run_cli("--help")
    assert "ReverseSequence" in top.stdout and "SequenceMap" in top.stdout
    assert run_cli("help").stdout == top.stdout
    verify_help = run_cli("help", "verify")
    assert verify_help.exit_code == 0 and "seqlower verify model.onnx" in verify_help.stdout
    assert "seqlower model.onnx -o" not in verify_help.stdout
    lower_help = run_cli("lower", "--help").stdout
    assert "Lower MODEL, check it against MODEL, write OUT." in lower_help


# --------------------------------------------------------- 13. IR version and opset


def test_ir_version_warning_and_restamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sequence_model: Path
) -> None:
    # An onnxruntime that reads up to IR 7 (older than seqlower takes: asked, not assumed).
    monkeypatch.setattr(seqlower.job, "ir_version_every_onnxruntime_reads", lambda: 0)
    monkeypatch.setattr(seqlower.job, "newest_ir_version_onnxruntime_reads", lambda: 7)
    out = tmp_path / "out.onnx"
    result = run_cli(sequence_model, "-o", out)
    assert result.exit_code == 0
    assert "warning: OUT has IR version 8" in result.stderr and "--ir-version 7" in result.stderr
    one_line_error(run_cli(sequence_model, "-o", out, "--ir-version", "7"), "need IR version 8")
    monkeypatch.undo()
    result = run_cli(sequence_model, "-o", out, "--ir-version", "9")
    assert result.exit_code == 0 and onnx.load(out).ir_version == 9


NO_ORT = """
import sys
from seqlower.cli import main
sys.argv = ["seqlower", *sys.argv[1:]]
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
assert "onnxruntime" not in sys.modules, "onnxruntime imported"
"""


def test_no_check_lowering_imports_no_onnxruntime(tmp_path: Path, sequence_model: Path) -> None:
    """Without the check, nothing asks onnxruntime which IR versions it reads when OUT's (8)
    is one every onnxruntime seqlower takes reads: importing it was 26 of the 122 MiB peak of
    benchmarks/memory.py (issue 33)."""
    assert seqlower.job.ir_version_every_onnxruntime_reads() == 10  # onnxruntime >= 1.20
    out = tmp_path / "out.onnx"
    args = [str(sequence_model), "-o", str(out), "--no-check", "-q"]
    result = subprocess.run([sys.executable, "-c", NO_ORT, *args], capture_output=True, text=True)
    assert result.returncode == 0 and out.exists(), result.stderr


def test_opset_conversion(tmp_path: Path) -> None:
    source, out = tmp_path / "neg.onnx", tmp_path / "out.onnx"
    onnx.save(NEG, source)
    result = run_cli(source, "-o", out, "--opset", "13")
    assert result.exit_code == 0, result.stderr
    assert {o.domain: o.version for o in onnx.load(out).opset_import}[""] == 13
    one_line_error(run_cli(source, "-o", out, "--opset", "99"), "--opset 99")


# ---------------------------------------------------------------------- 14. the report


def test_report_records_arguments_tolerances_and_absolute_paths(
    sequence_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli(sequence_model.name, "-o", "out.onnx", "--rtol", "1e-3", "--report", "r.json")
    assert result.exit_code == 0, result.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["input"] == str(sequence_model) and data["output"] == str(tmp_path / "out.onnx")
    assert data["tolerances"]["rtol"] == 1e-3
    assert "arguments" in data and data["exit_code"] == 0


def test_an_input_nothing_reads_is_named_in_a_warning(tmp_path: Path) -> None:
    """paddle2onnx's LSTM export drops what read its ``sequence_length`` input (issue 44): the
    model runs every sequence to full length whatever the lengths fed, and says nothing; the
    input nothing reads is named, the one read is not."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    weights = [
        numpy_helper.from_array(rng.standard_normal((1, 16, 3)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal((1, 16, 4)).astype(np.float32), "R"),
    ]
    graph = helper.make_graph(
        [helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=4)],
        "paddle_lstm",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", "B", 3]),
            helper.make_tensor_value_info("sequence_length", TensorProto.INT64, ["B"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["T", 1, "B", 4])],
        weights,
    )
    model = tmp_path / "lstm.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), model)
    result = run_cli(model, "-o", tmp_path / "out.onnx")
    assert result.exit_code == 0
    warned = [line for line in result.stderr.splitlines() if "read by no node" in line]
    assert len(warned) == 1 and "'sequence_length'" in warned[0], result.stderr
