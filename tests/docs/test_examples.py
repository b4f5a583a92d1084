"""The bundled example: it is what its script builds, and the README's first command works on it."""

from __future__ import annotations

import sys
from pathlib import Path

import onnx
from click.testing import CliRunner

from seqlower.cli.commands import cli
from tests.helpers import ROOT, assert_lowered_ok, assert_same, ort_run, reference_run

sys.path.insert(0, str(ROOT / "examples"))
import build_examples


def test_bundled_example_matches_its_builder() -> None:
    on_disk = onnx.load(ROOT / "examples" / "preprocess.onnx")
    assert on_disk.SerializeToString() == build_examples.preprocess_model().SerializeToString()


def test_readme_main_command_on_the_example(tmp_path: Path) -> None:
    source, target = ROOT / "examples" / "preprocess.onnx", tmp_path / "lowered.onnx"
    result = CliRunner().invoke(cli, [str(source), "-o", str(target)])
    assert result.exit_code == 0, result.stderr
    original, lowered = onnx.load(source), onnx.load(target)
    assert_lowered_ok(original, lowered)
    feeds = {"images": build_examples.sample_images()}
    # onnxruntime 1.31 cannot run the original (onnxruntime issue #22100); it runs the lowered
    # model, whose outputs match onnx.reference's for the original bit for bit.
    (got,) = ort_run(lowered, feeds)
    (expected,) = reference_run(original, feeds)
    assert got.shape == (3, 3, 64, 64)
    assert_same(got, expected, exact=True)


def test_packaged_example_is_the_bundled_one() -> None:
    """The wheel's copy (package data, for ``seqlower example``) is the checkout's example."""
    packaged = ROOT / "seqlower" / "examples" / "preprocess.onnx"
    assert packaged.read_bytes() == (ROOT / "examples" / "preprocess.onnx").read_bytes()


def test_example_command_writes_the_example_to_try(tmp_path: Path) -> None:
    target = tmp_path / "ex.onnx"
    result = CliRunner().invoke(cli, ["example", "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert target.read_bytes() == (ROOT / "examples" / "preprocess.onnx").read_bytes()
    lowered = tmp_path / "ex.lowered.onnx"
    assert f"seqlower {target} -o {lowered}" in result.stdout
    assert CliRunner().invoke(cli, [str(target), "-o", str(lowered)]).exit_code == 0
