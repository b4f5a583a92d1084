"""An audio model's ``If``s choosing by an int64 input (issue 44, item 5): tract and OpenVINO
fail on it as written and after ``--target``; with ``--constant-input mode=VALUE`` it runs and
matches there, the input kept or dropped, in the main graph or in a ``Loop`` body."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

import seqlower
from seqlower.errors import ProofFailedError
from tests.constant_input_cases import audio_like, feeds
from tests.helpers import all_op_types, run_cli
from tests.runtimes import RuntimeFailure, assert_close, require, run

TARGETS = ["tract", "openvino"]


@pytest.mark.parametrize("in_loop", [False, True])
@pytest.mark.parametrize("target", TARGETS)
def test_the_original_fails_there_at_every_value(target: str, in_loop: bool) -> None:
    for mode in (1, 0):
        with pytest.raises(RuntimeFailure):
            run(target, audio_like(in_loop=in_loop), feeds(mode))


@pytest.mark.parametrize("in_loop", [False, True])
@pytest.mark.parametrize("target", TARGETS)
def test_target_alone_does_not_reach_it(target: str, in_loop: bool, tmp_path: Path) -> None:
    require(target)
    source, out = tmp_path / "audio.onnx", tmp_path / "out.onnx"
    onnx.save(audio_like(in_loop=in_loop), source)
    code, _, err = run_cli(source, "-o", out, "--target", target)
    assert code == 1 and "does not load on" in err, err
    assert not out.exists()
    hint = (
        "warning: 2 If (choose_conv, choose_head) choose by the value of input 'mode': if it is "
        "always fed one value, --constant-input mode=VALUE folds them"
    )
    assert hint in err


@pytest.mark.parametrize(("mode", "drop"), [(1, False), (0, True)])
@pytest.mark.parametrize("in_loop", [False, True])
@pytest.mark.parametrize("target", TARGETS)
def test_with_the_value_fixed_it_runs_and_matches_there(
    target: str, in_loop: bool, mode: int, drop: bool, tmp_path: Path
) -> None:
    require(target)
    original = audio_like(in_loop=in_loop)
    source, out = tmp_path / "audio.onnx", tmp_path / "out.onnx"
    onnx.save(original, source)
    flags = ["--constant-input", f"mode={mode}"] + (["--drop-constant-inputs"] if drop else [])
    code, stdout, err = run_cli(source, "-o", out, "--target", target, *flags)
    assert code == 0, stdout + err
    assert f"check: runs and matches on {target}" in stdout
    lowered = onnx.load(out)
    assert "If" not in all_op_types(lowered)
    assert [i.name for i in lowered.graph.input] == (["x"] if drop else ["x", "mode"])
    expected = run("onnxruntime", original, feeds(mode))
    assert_close(expected, run(target, lowered, feeds(None if drop else mode)), atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_the_api_proves_it_there_too(target: str) -> None:
    require(target)
    original = audio_like()
    with pytest.raises(ProofFailedError):
        seqlower.lower(original, target=target)
    lowered = seqlower.lower(original, target=target, constant_inputs={"mode": 0})
    expected = run("onnxruntime", original, feeds(0))
    assert_close(expected, run(target, lowered, feeds(0)), atol=1e-4)
    report = seqlower.lower_with_report(
        original, target=target, constant_inputs={"mode": "1"}, drop_constant_inputs=True
    )
    assert "fix-constant-inputs" in [row.name for row in report.passes]
    assert report.ops_after["If"] == 0 and report.ops_before["If"] == 2
    assert [i.name for i in report.model.graph.input] == ["x"]
