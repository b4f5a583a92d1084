"""tract runs in a child process for the check: a run that hangs is stopped after
``--target-timeout`` and fails (the runtime's fault when the original hangs there too), and a
run that aborts the process (tract's panics) fails with tract's message, the check going on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import pytest

from seqlower.verification import verify
from seqlower.verification.runtimes import TARGET_ORACLES, RuntimeRefusal
from seqlower.verification.runtimes.tract import _TractChild
from tests.helpers import run_cli
from tests.runtimes import require

ORIGINAL = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[3] x) => (float[3] y) { y = Neg(x) }
    """
)
# The same function another way; the fake worker below hangs on models holding "Sub".
LOWERED = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[3] x) => (float[3] y) {
        zero = Constant<value = float[1] {0}>()
        y = Sub(zero, x)
    }
    """
)

# Answers like _tract_worker.py, but hangs in a run of a model whose bytes hold the marker
# (always when it is empty) and aborts when they hold b"Abs".
FAKE = """
import os, pickle, sys, time, numpy as np
answers = os.fdopen(os.dup(1), "wb")
models = {}
def send(answer):
    data = pickle.dumps(answer)
    answers.write(len(data).to_bytes(8, "little") + data)
    answers.flush()
while True:
    try:
        request = pickle.load(sys.stdin.buffer)
    except EOFError:
        break
    if request[0] == "load":
        models[request[1]] = request[2]
        send(("ok", None))
    elif request[0] == "run":
        if MARKER in models[request[1]]:
            time.sleep(3600)
        if b"Abs" in models[request[1]]:
            sys.stderr.write("thread '<unnamed>' panicked at src/lib.rs:1:1:\\nboom\\n")
            sys.stderr.flush()
            os.abort()
        send(("ok", [-request[2][0]]))
"""


@pytest.fixture
def fake_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Point the tract oracle at a fake worker; ``fake_worker(marker)`` writes it."""
    require("tract")  # the oracle's label reads tract's version

    def use(marker: bytes) -> None:
        path = tmp_path / "worker.py"
        path.write_text(FAKE.replace("MARKER", repr(marker)), encoding="utf-8")
        _TractChild._kill()
        monkeypatch.setattr(_TractChild, "worker", str(path))

    yield use
    _TractChild._kill()  # the next test starts a real worker


def test_a_hanging_run_times_out_and_the_next_run_works(fake_worker) -> None:  # type: ignore[no-untyped-def]
    fake_worker(b"Sub")
    feeds = {"x": np.arange(3, dtype=np.float32)}
    runner = TARGET_ORACLES["tract"].with_timeout(0.5).load(LOWERED)
    with pytest.raises(RuntimeRefusal, match=r"^timed out after 0\.5 s on tract \S+"):
        runner.run(feeds)
    # A new worker for the next model and run.
    (out,) = TARGET_ORACLES["tract"].load(ORIGINAL).run(feeds)
    assert np.array_equal(out, -feeds["x"])


def test_the_lowering_is_blamed_when_only_it_hangs(fake_worker) -> None:  # type: ignore[no-untyped-def]
    fake_worker(b"Sub")
    report = verify(ORIGINAL, LOWERED, runtimes=("tract",), target_timeout=0.5, n=1)
    assert report.status == "mismatch"
    (run,) = next(iter(report.target_runs.values()))
    assert run.culprit == "lowering" and "timed out after 0.5 s on tract" in (run.error or "")


def test_the_runtime_is_blamed_when_the_original_hangs_too(fake_worker) -> None:  # type: ignore[no-untyped-def]
    fake_worker(b"")  # every run hangs
    report = verify(ORIGINAL, LOWERED, runtimes=("tract",), target_timeout=0.5, n=1)
    # Matches on onnxruntime, but fails on tract: never ok there, tract named as the culprit.
    assert report.status == "mismatch" and report.culprit == "runtime"
    (run,) = next(iter(report.target_runs.values()))
    assert run.culprit == "runtime" and "timed out after 0.5 s" in (run.original_error or "")
    assert "timed out after 0.5 s on tract" in report.reason and not report.warnings


def test_an_abort_fails_the_run_with_tract_s_message(fake_worker) -> None:  # type: ignore[no-untyped-def]
    fake_worker(b"never")
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[3] x) => (float[3] y) { y = Abs(x) }
        """
    )
    runner = TARGET_ORACLES["tract"].load(model)
    with pytest.raises(RuntimeRefusal, match=r"tract aborted the process \(exit -6\): boom"):
        runner.run({"x": np.zeros(3, np.float32)})


def test_the_cli_flag(fake_worker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """--target-timeout reaches the oracle through the command line (one line, exit 1)."""
    fake_worker(b"Sub")
    original, lowered = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(ORIGINAL, original)
    onnx.save(LOWERED, lowered)
    result = run_cli("verify", original, lowered, "--target", "tract", "--target-timeout", "0.5")
    assert result.exit_code == 1, result.output
    assert "timed out after 0.5 s on tract" in result.output
