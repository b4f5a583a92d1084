"""A model that runs on a target as exported is never lost by ``--target`` (issue 44): when the
target's lowering is refused, the model as exported is proven on the target by the same check a
lowering gets and, when it runs and matches there, written unchanged (exit 0, with a warning);
unproven (``--no-check``) or failing there, the refusal stands (exit 2, nothing written)."""

from __future__ import annotations

import warnings
from pathlib import Path

import onnx
import onnx_ir as ir
import pytest

import seqlower
from seqlower.errors import TargetError
from tests.helpers import parse, run_cli

#: tract folds ``Sign`` of a constant when it loads the model, so it runs this Slice, but its
#: step is a ``Sign`` node's output, which the tract row counts as a run-time bound and
#: ``require-shape-slice-bounds`` refuses.
RUNS_AS_EXPORTED = """
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[N] x) => (float[M] y) {
    c = Constant <value = int64[1] {2}> ()
    step = Sign(c)
    s = Constant <value = int64[1] {0}> ()
    e = Constant <value = int64[1] {3}> ()
    a = Constant <value = int64[1] {0}> ()
    y = Slice(x, s, e, a, step)
}
"""

#: The same refusal for a step computed from an input: tract cannot load that Slice either.
FAILS_AS_EXPORTED = """
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[N] x, int64[1] k) => (float[M] y) {
    sign = Sign(k)
    size = Abs(sign)
    one = Constant <value = int64[1] {1}> ()
    step = Add(size, one)
    s = Constant <value = int64[1] {0}> ()
    e = Constant <value = int64[1] {5}> ()
    a = Constant <value = int64[1] {0}> ()
    y = Slice(x, s, e, a, step)
}
"""


def _saved(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "model.onnx"
    onnx.save(parse(text), path)
    return path


def test_a_refused_model_that_runs_on_the_target_is_written_unchanged(tmp_path: Path) -> None:
    model, out = _saved(tmp_path, RUNS_AS_EXPORTED), tmp_path / "out.onnx"
    result = run_cli(model, "-o", out, "--target", "tract")
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == model.read_bytes()
    assert "seqlower cannot lower the model (Slice node producing 'y'" in result.stderr
    assert "runs on tract as exported and matches there (proven by the check on tract" in (
        result.stderr
    )
    assert "runs and matches on tract" in result.stdout
    assert "nothing to lower" not in result.stdout


def test_without_the_check_the_refusal_stands(tmp_path: Path) -> None:
    model, out = _saved(tmp_path, RUNS_AS_EXPORTED), tmp_path / "out.onnx"
    result = run_cli(model, "-o", out, "--target", "tract", "--no-check")
    assert result.exit_code == 2 and "cannot lower the model for tract" in result.stderr
    assert not out.exists()


def test_a_flag_that_changes_the_model_keeps_the_refusal(tmp_path: Path) -> None:
    model, out = _saved(tmp_path, RUNS_AS_EXPORTED), tmp_path / "out.onnx"
    result = run_cli(model, "-o", out, "--target", "tract", "--opset", "18")
    assert result.exit_code == 2 and "cannot lower the model for tract" in result.stderr
    assert not out.exists()


def test_a_refused_model_that_fails_on_the_target_stays_refused(tmp_path: Path) -> None:
    model, out = _saved(tmp_path, FAILS_AS_EXPORTED), tmp_path / "out.onnx"
    result = run_cli(model, "-o", out, "--target", "tract")
    assert result.exit_code == 2, result.output
    assert "cannot lower the model for tract" in result.stderr
    assert "its steps 'step' depends on the values of 'sign'" in result.stderr
    assert not out.exists() and "as exported" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_the_api_returns_the_model_as_exported_with_a_warning() -> None:
    proto = parse(RUNS_AS_EXPORTED)
    with pytest.warns(UserWarning, match="target='tract': seqlower cannot lower the model"):
        kept = seqlower.lower(proto, target="tract")
    assert kept == proto and kept is not proto
    ir_model = ir.serde.deserialize_model(proto)
    before = ir.serde.serialize_model(ir_model)
    with pytest.warns(UserWarning, match="the result is the model unchanged"):
        report = seqlower.lower_with_report(ir_model, target="tract")
    assert report.model is ir_model and report.passes == []
    assert report.ops_before == report.ops_after and report.ops_before["Sign"] == 1
    assert ir.serde.serialize_model(ir_model) == before  # put back whole
    with pytest.raises(TargetError, match="cannot lower the model for tract"):
        seqlower.lower(proto, target="tract", check=False)


def test_the_api_raises_the_refusal_when_the_target_fails_on_the_model() -> None:
    proto = parse(FAILS_AS_EXPORTED)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TargetError, match="its steps 'step' depends on the values"):
            seqlower.lower(proto, target="tract")


def test_inspect_says_the_lowering_is_refused_and_what_lower_does_instead(
    tmp_path: Path,
) -> None:
    result = run_cli("inspect", _saved(tmp_path, RUNS_AS_EXPORTED), "--target", "tract")
    assert "blocked by 1:" in result.output
    assert "writes the model as exported instead if the check proves it" in result.output
