"""A batch says exactly what its runs wrote, however it is stopped (issue 42, items 6 and 7).

Each model of a batch is lowered by its own ``seqlower`` process; a run interrupted after its
renames exits 130 with its OUT written in full, and tells the batch so.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import onnx
import onnx.parser
import pytest

from tests.cli.test_user_expectations import _strace
from tests.runtimes import require
from tests.verification.test_runtime_workers import HANGS, _children, _gone, _workers

REVERSE = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T, 2] x, int64[2] lens) => (float[T, 2] y) {
        y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
    }
    """
)


def _batch(*args: str | Path, strace: list[str] | None = None) -> subprocess.Popen[str]:
    command = [*(strace or []), sys.executable, "-m", "seqlower", *map(str, args)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _interrupt_after_renames() -> list[str]:
    """strace's prefix that sends SIGINT to each run as its first rename returns: its model's
    (these models have no weights file), and signals are held during the commit, so it arrives
    once the renames are done. (``-P OUT`` would pick one run, but strace 6.1 matched none.)"""
    return [
        _strace(), "-f", "-qq", "-o", "/dev/null",
        "-e", "trace=rename,renameat,renameat2",
        "-e", "inject=rename,renameat,renameat2:signal=SIGINT:when=1",
    ]  # fmt: skip


def _table_word(stdout: str, name: str) -> str:
    (row,) = [line for line in stdout.splitlines() if line.split()[:1] == [name]]
    return row.split()[1]


def test_a_run_interrupted_after_its_renames_is_not_marked_interrupted(tmp_path: Path) -> None:
    zoo, out = tmp_path / "zoo", tmp_path / "out"
    zoo.mkdir()
    for name in ("a.onnx", "b.onnx"):
        onnx.save(REVERSE, zoo / name)
    batch = _batch(
        zoo / "a.onnx", zoo / "b.onnx", "-o", f"{out}{os.sep}", "--no-check",
        strace=_interrupt_after_renames(),
    )  # fmt: skip
    stdout, stderr = batch.communicate(timeout=300)
    assert batch.returncode == 130, stderr  # the runs were interrupted: the batch says so
    for name in ("a.onnx", "b.onnx"):
        assert _table_word(stdout, str(zoo / name)) == "written", stdout
        onnx.checker.check_model(onnx.load(out / name), full_check=True)
    assert stdout.splitlines()[-1] == "2 of 2 models lowered", stdout


def _command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _hanging_run_of(batch: subprocess.Popen[str]) -> tuple[list[int], list[int]]:
    """The batch's runs and the tract workers of hangs.onnx's, once one has started."""
    end = time.monotonic() + 120
    while time.monotonic() < end and batch.poll() is None:
        runs = _children(batch.pid)
        hanging = [r for r in runs if b"hangs.onnx" in _command_line(r)]
        workers = [w for run in hanging for w in _workers(run)]
        if workers:
            return runs, workers
        time.sleep(0.05)
    batch.kill()
    pytest.fail(f"no tract worker started: {batch.communicate()}")


@pytest.mark.parametrize(("signum", "code", "what"), [
    (signal.SIGINT, 130, "interrupted"),
    (signal.SIGTERM, 143, "stopped by SIGTERM"),
])  # fmt: skip
def test_a_stopped_batch_says_exactly_what_was_written(
    tmp_path: Path, signum: int, code: int, what: str
) -> None:
    """a.onnx is lowered, hangs.onnx's check hangs on tract when the batch is stopped: the
    signal is passed on to the run, and the last line lists the files written, exactly;
    SIGTERM is exit 143."""
    require("tract")
    zoo, out = tmp_path / "zoo", tmp_path / "out"
    zoo.mkdir()
    onnx.save(REVERSE, zoo / "a.onnx")
    (zoo / "hangs.onnx").write_bytes(HANGS.read_bytes())
    batch = _batch(zoo, "-o", f"{out}{os.sep}", "--target", "tract", "--target-timeout", "300")
    runs, workers = _hanging_run_of(batch)
    time.sleep(1)
    batch.send_signal(signum)
    try:
        stdout, stderr = batch.communicate(timeout=60)
    finally:
        batch.kill()
        _gone(runs + workers, 0)
    assert batch.returncode == code, stderr
    assert _table_word(stdout, str(zoo / "a.onnx")) == "ok", stdout
    assert _table_word(stdout, str(zoo / "hangs.onnx")) == "interrupted", stdout
    written = sorted(str(p) for p in out.iterdir())
    assert Path(written[0]).name == "a.onnx" and not (out / "hangs.onnx").exists()
    assert stderr.splitlines()[-1] == (
        f"seqlower: {what}; {', '.join(written)} "
        f"{'were' if len(written) > 1 else 'was'} written in full; nothing else was written"
    ), stderr


# ------------------------------------------------------- item 7: the batch's arguments


def _zoo(tmp_path: Path, *names: str) -> Path:
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    for name in names:
        onnx.save(REVERSE, zoo / name)
    return zoo


def test_a_model_named_like_an_option_is_batched(tmp_path: Path) -> None:
    """Each run gets its model after ``--``: ``-m.onnx`` was read as an option by its run."""
    zoo = _zoo(tmp_path, "-m.onnx", "b.onnx")
    batch = subprocess.run(
        [sys.executable, "-m", "seqlower", ".", "-o", "../out/", "--check-n", "1"],
        cwd=zoo, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert batch.returncode == 0, batch.stdout + batch.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["-m.onnx", "b.onnx"]


def test_combined_short_flags_reach_each_run(tmp_path: Path) -> None:
    """``-vo out/`` is ``-v -o out/``: the runs got ``-vo`` and ``out/`` (a second model)."""
    zoo = _zoo(tmp_path, "a.onnx", "b.onnx")
    out = tmp_path / "out"
    batch = subprocess.run(
        [sys.executable, "-m", "seqlower", str(zoo), "-qvo", f"{out}{os.sep}", "--check-n", "1"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert batch.returncode == 0, batch.stdout + batch.stderr
    assert sorted(p.name for p in out.iterdir()) == ["a.onnx", "b.onnx"]


def test_child_flags_are_the_parsed_options() -> None:
    from seqlower.cli.batch import child_flags
    from seqlower.cli.commands import cli

    command = cli.commands["lower"]  # type: ignore[attr-defined]
    ctx = command.make_context("lower", ["x.onnx"], resilient_parsing=True)
    raw = ["lower", "zoo", "-vqo", "out/", "--dim=T=3", "-j2", "--no-check", "--", "-m.onnx"]
    assert child_flags(raw, command, ctx) == ["--verbose", "--quiet", "--dim", "T=3", "--no-check"]


@pytest.mark.parametrize("inside", [False, True])
def test_the_output_folder_may_not_be_or_hold_the_input_folder(
    tmp_path: Path, inside: bool
) -> None:
    zoo = _zoo(tmp_path, "a.onnx")
    out = tmp_path if inside else zoo
    batch = subprocess.run(
        [sys.executable, "-m", "seqlower", str(zoo), "-o", f"{out}{os.sep}"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert batch.returncode == 2, batch.stderr
    (line,) = batch.stderr.splitlines()
    why = "holds the input folder" if inside else "is the input folder"
    assert f"-o {out}{os.sep}: the output folder {why}" in line, line
    assert "no .onnx file" not in line
    assert sorted(p.name for p in zoo.iterdir()) == ["a.onnx"]
