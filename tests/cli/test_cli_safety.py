"""The CLI under abuse: mutated files, interruptions, external weights, and its printed output."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import helper as h

import seqlower.io
import seqlower.writing
from seqlower import passes as seqlower_passes
from seqlower.cli.commands import cli
from tests.helpers import (
    ROOT,
    assert_equivalent,
    assert_one_line_error,
    make_model,
    run_cli,
    seq_info,
)
from tests.passes.test_reverse_sequence import reverse_model
from tests.sequence_map_cases import CASES, body


def _seed_models() -> dict[str, bytes]:
    rs, _ = reverse_model(onnx.TensorProto.FLOAT, ["t", "b", 2], 0, "input", np.array([1, 2]))
    return {
        "example": (ROOT / "examples" / "preprocess.onnx").read_bytes(),
        "multi_io": CASES["multi_io"]()[0].SerializeToString(),
        "nested": CASES["nested_sequence_map"]()[0].SerializeToString(),
        "reverse": rs.SerializeToString(),
    }


def mutate(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    # Mostly one small change, so that many mutants still parse and reach the passes.
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        kind = rng.choice(["flip", "flip", "flip", "delete", "insert", "truncate"])
        if not buf:
            break
        at = rng.randrange(len(buf))
        if kind == "flip":
            buf[at] ^= 1 << rng.randrange(8)
        elif kind == "delete":
            del buf[at : at + rng.randint(1, 4)]
        elif kind == "insert":
            buf[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        else:
            del buf[at:]
    return bytes(buf)


@pytest.mark.parametrize("seed_name", list(_seed_models()))
def test_fuzzed_models_never_crash_or_leave_bad_output(seed_name: str, tmp_path: Path) -> None:
    """80 mutants of each seed model (320 files): only clean exits, no traceback, no debris."""
    data = _seed_models()[seed_name]
    rng = random.Random(f"seqlower-fuzz-{seed_name}")
    outcomes: dict[int, int] = {}
    for i in range(80):
        source = tmp_path / f"mutant_{i}.onnx"
        target = tmp_path / f"mutant_{i}.out.onnx"
        source.write_bytes(mutate(data, rng))
        args = [source, "-o", target] + ([] if i % 8 == 0 else ["--no-check"])
        result = run_cli(*args)
        code = result.exit_code
        outcomes[code] = outcomes.get(code, 0) + 1
        assert code in (0, 1, 2, 3), (i, code, result.stderr)
        assert "Traceback" not in result.stdout + result.stderr, (i, result.stderr)
        if code == 0:
            onnx.checker.check_model(onnx.load(target))
        else:
            assert len(result.stderr.strip().splitlines()) >= 1
            assert not target.exists(), (i, code)
        source.unlink()
        target.unlink(missing_ok=True)
        (tmp_path / f"mutant_{i}.out.onnx.data").unlink(missing_ok=True)
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith("failing-inputs")] == []
    assert outcomes.get(2, 0) > 0, outcomes  # the fuzzing does reach the error paths


def test_interrupted_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model, _ = CASES["multi_io"]()
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)

    def half_write(model: Any, path: str, **_: Any) -> None:
        Path(path).write_bytes(b"half a model")
        raise KeyboardInterrupt

    monkeypatch.setattr(seqlower.writing.ir, "save", half_write)
    result = run_cli(source, "-o", target, "--no-check")
    assert result.exit_code == 130 and "interrupted" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx"]


def test_existing_output_survives_a_failed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, _ = CASES["multi_io"]()
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    target.write_bytes(b"previous result")
    monkeypatch.setattr(
        seqlower.writing.ir,
        "save",
        lambda *a, **k: (_ for _ in ()).throw(OSError(28, "No space left on device")),
    )
    result = run_cli(source, "-o", target, "--no-check")
    assert result.exit_code == 2 and "No space left" in result.stderr
    assert target.read_bytes() == b"previous result"


def _external_model(tmp_path: Path, data_name: str) -> tuple[Path, onnx.ModelProto, np.ndarray]:
    weights = np.arange(70_000, dtype=np.float32)
    b = body([h.make_node("Mul", ["x", "w"], ["y"])], ["x"], ["y"])
    model = make_model(
        [h.make_node("SequenceMap", ["s"], ["out"], body=b)],
        [seq_info("s", 1, [70_000])],
        [seq_info("out")],
        initializers=[onnx.numpy_helper.from_array(weights, "w")],
    )
    on_disk = onnx.ModelProto.FromString(model.SerializeToString())
    path = tmp_path / "model.onnx"
    onnx.save(on_disk, path, save_as_external_data=True, location=data_name, size_threshold=0)
    return path, model, weights


@pytest.mark.parametrize("data_name", ["weights.bin", "model.onnx.data"])
def test_external_weights_go_beside_the_output(tmp_path: Path, data_name: str) -> None:
    path, model, weights = _external_model(tmp_path, data_name)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    result = run_cli(path, "-o", out_dir / "lowered.onnx")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in out_dir.iterdir()) == ["lowered.onnx", "lowered.onnx.data"]
    assert (out_dir / "lowered.onnx.data").stat().st_size == weights.nbytes
    assert (out_dir / "lowered.onnx").stat().st_size < 10_000
    lowered = onnx.load(out_dir / "lowered.onnx")
    onnx.checker.check_model(lowered, full_check=True)
    feeds = {"s": [np.ones(70_000, np.float32)]}
    assert_equivalent(model, lowered, feeds)
    # In place, even when the data file has the name the output would use.
    result = run_cli(path, "-o", path)
    assert result.exit_code == 0, result.stderr
    assert_equivalent(model, onnx.load(path), feeds)


def test_external_data_flag(tmp_path: Path) -> None:
    source, model, _ = _external_model(tmp_path, "in.bin")
    result = run_cli(source, "-o", tmp_path / "o.onnx", "--external-data", "w.bin")
    assert result.exit_code == 0 and "weights in w.bin" in result.stdout
    assert (tmp_path / "w.bin").exists()
    feeds = {"s": [np.ones(70_000, np.float32)]}
    assert_equivalent(model, onnx.load(tmp_path / "o.onnx"), feeds)
    result = run_cli(source, "-o", tmp_path / "p.onnx", "--external-data", "../escape.bin")
    assert result.exit_code == 2 and not (tmp_path / "p.onnx").exists()


def test_external_data_flag_without_big_weights_writes_no_file(tmp_path: Path) -> None:
    model, feeds = CASES["outer_scope_read"]()  # one small initializer: stays inline
    source = tmp_path / "in.onnx"
    onnx.save(model, source)
    result = run_cli(source, "-o", tmp_path / "o.onnx", "--external-data", "w.bin")
    assert result.exit_code == 0, result.stderr
    assert "weights in" not in result.stdout and "all are inline" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx", "o.onnx"]
    assert_equivalent(model, onnx.load(tmp_path / "o.onnx"), feeds)


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    model, _ = CASES["multi_io"]()
    source = tmp_path / "in.onnx"
    onnx.save(model, source)
    result = run_cli(source, "--dry-run")
    assert result.exit_code == 0 and "dry run" in result.stdout
    result = run_cli(source, "-o", tmp_path / "out.onnx", "--dry-run")
    assert result.exit_code == 0 and not (tmp_path / "out.onnx").exists()
    assert run_cli(source).exit_code == 2  # -o is required without --dry-run


def test_skip_and_report(tmp_path: Path) -> None:
    model, _ = CASES["multi_io"]()
    source, target, report = tmp_path / "in.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    onnx.save(model, source)
    result = run_cli(source, "-o", target, "--skip", "lower-reverse-sequence", "--report", report)
    assert result.exit_code == 0
    data = json.loads(report.read_text())
    assert [p["name"] for p in data["passes"]] == [
        "forget-declared-sizes",  # a step of every run, before the passes (issue 45, item 5)
        "lower-sequence-map",
        "remove-unused-nodes",
        "topological-sort",
    ]
    assert data["passes"][1]["rewritten"] == 1 and data["passes"][1]["seconds"] >= 0
    assert data["ops"]["before"]["SequenceMap"] == 1 and "SequenceMap" not in data["ops"]["after"]
    assert data["verification"]["ok"] and data["written"]
    assert run_cli(source, "-o", target, "--skip", "nope").exit_code == 2
    everything = "lower-sequence-map,lower-reverse-sequence"
    assert run_cli(source, "-o", target, "--skip", everything).exit_code == 2


def test_colour_follows_no_color(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model, _ = CASES["multi_io"]()
    source = tmp_path / "in.onnx"
    onnx.save(model, source)
    coloured = CliRunner().invoke(cli, [str(source), "--dry-run"], color=True)
    assert "\x1b[" in coloured.stdout
    monkeypatch.setenv("NO_COLOR", "1")
    plain = CliRunner().invoke(cli, [str(source), "--dry-run"], color=True)
    assert plain.exit_code == 0 and "\x1b[" not in plain.stdout
    piped = CliRunner().invoke(cli, [str(source), "--dry-run"])
    assert "\x1b[" not in piped.stdout  # never on when not a terminal


class Broken(seqlower_passes.LowerSequenceMap):
    """A pass with a bug in it."""

    def call(self, model: Any) -> Any:
        raise RuntimeError("boom")


def test_internal_error_asks_for_a_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(seqlower_passes.PASSES, "broken", Broken)
    model, _ = CASES["multi_io"]()
    source = tmp_path / "in.onnx"
    onnx.save(model, source)
    result = run_cli(source, "-o", tmp_path / "out.onnx", "--passes", "broken")
    assert result.exit_code == 70
    assert "Traceback" not in result.stderr and "bug in seqlower" in result.stderr
    assert "rerun with -v" in result.stderr
    verbose = run_cli(source, "-o", tmp_path / "out.onnx", "--passes", "broken", "-v")
    assert verbose.exit_code == 70 and "Traceback" in verbose.stderr and "boom" in verbose.stderr
    assert not (tmp_path / "out.onnx").exists()


def test_output_gets_ordinary_permissions(tmp_path: Path) -> None:
    """The temporary file is private; the model it becomes must not be."""
    import os
    import stat

    model, _ = CASES["multi_io"]()
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    umask = os.umask(0o022)
    try:
        assert run_cli(source, "-o", target, "--no-check").exit_code == 0
        assert stat.S_IMODE(target.stat().st_mode) == 0o644
        os.chmod(target, 0o640)  # an existing file keeps its mode
        assert run_cli(source, "-o", target, "--no-check").exit_code == 0
        assert stat.S_IMODE(target.stat().st_mode) == 0o640
    finally:
        os.umask(umask)


def test_models_too_big_to_check_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, model, _ = _external_model(tmp_path, "unused.bin")  # 280 kB of weights
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)  # inline
    monkeypatch.setattr(seqlower.io, "INLINE_LIMIT", 1)  # every model counts as over 2 GB
    result = run_cli(source, "-o", target)
    assert_one_line_error(result, "--no-check", code=3)
    assert not target.exists()
    result = run_cli(source, "-o", target, "--no-check")
    assert result.exit_code == 0 and (tmp_path / "out.onnx.data").exists()
