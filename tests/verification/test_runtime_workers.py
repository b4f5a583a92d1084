"""A stop request is obeyed while a runtime runs, and no runtime worker outlives seqlower.

tract runs in a worker process (it hangs on some models, here ONNX's own float16 LinearAttention
case once lowered for it). SIGTERM or Ctrl-C during the check stops the worker at once and exits
143 or 130 with nothing written; when seqlower itself is killed (SIGKILL, as a CI time-out does),
the worker dies too instead of spinning on as an orphan.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import pytest

from tests.runtimes import require

HANGS = (
    Path(__file__).parent.parent / "data" / "tract_hangs" / "linear_attention_fp16_expanded.onnx"
)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie waiting to be reaped does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _workers(parent: int, script: bytes = b"_tract_worker") -> list[int]:
    """The runtime workers (tract's unless told) whose parent is ``parent``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as file:
                ppid = int(file.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                command = file.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and script in command and _alive(int(entry)):
            found.append(int(entry))
    return found


def _first_worker(process: subprocess.Popen[str], within: float = 120) -> int:
    """The worker ``process`` starts (its check under way), once it has started."""
    end = time.monotonic() + within
    while time.monotonic() < end and process.poll() is None:
        workers = _workers(process.pid)
        if workers:
            return workers[0]
        time.sleep(0.05)
    process.kill()
    _, stderr = process.communicate()
    pytest.fail(f"no tract worker started (exit {process.returncode}): {stderr}")


def _gone(pids: list[int], within: float = 10) -> list[int]:
    """``pids`` still running after ``within`` seconds (killed then, not to spin on)."""
    end = time.monotonic() + within
    while time.monotonic() < end and any(_alive(p) for p in pids):
        time.sleep(0.05)
    left = [p for p in pids if _alive(p)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


def _lower_for_tract(tmp_path: Path) -> subprocess.Popen[str]:
    require("tract")
    command = [sys.executable, "-m", "seqlower", str(HANGS), "-o", str(tmp_path / "out.onnx")]
    command += ["--target", "tract", "--target-timeout", "300"]
    return subprocess.Popen(command, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stop_during_a_hanging_run_ends_it_at_once(
    tmp_path: Path, signum: int, code: int
) -> None:
    process = _lower_for_tract(tmp_path)
    worker = _first_worker(process)
    time.sleep(1)  # the run that hangs has begun
    process.send_signal(signum)
    try:
        _, stderr = process.communicate(timeout=15)  # not the 300 s of --target-timeout
    except subprocess.TimeoutExpired:
        process.kill()
        _gone([worker], 0)
        pytest.fail("seqlower went on after the stop request")
    assert process.returncode == code, stderr
    assert "nothing was written" in stderr and "Traceback" not in stderr, stderr
    assert os.listdir(tmp_path) == []
    assert _gone([worker]) == []


def test_no_worker_outlives_a_killed_seqlower(tmp_path: Path) -> None:
    """SIGKILL runs no cleanup in seqlower: the worker sees its parent go and ends itself."""
    process = _lower_for_tract(tmp_path)
    worker = _first_worker(process)
    time.sleep(1)
    process.kill()
    process.communicate()
    assert _gone([worker]) == [], "the tract worker outlived seqlower"


# A worker that hangs in the load of a model (tract's parse: the wait is in the main thread).
_HANGS_IN_LOAD = """
import pickle, sys, time
pickle.load(sys.stdin.buffer)
time.sleep(3600)
"""

_WITH_WORKER = """
import sys
from seqlower.verification.runtimes.tract import _TractChild
_TractChild.worker = sys.argv[1]
from seqlower.cli import main
main(sys.argv[2:])
"""


def test_a_stop_during_a_hanging_load_stops_the_worker(tmp_path: Path) -> None:
    require("tract")
    worker_script = tmp_path / "_tract_worker.py"  # the name _workers looks for
    worker_script.write_text(_HANGS_IN_LOAD, encoding="utf-8")
    model = tmp_path / "m.onnx"
    onnx.save(
        onnx.parser.parse_model(
            """
            <ir_version: 8, opset_import: ["" : 17]>
            g (float[3] x) => (float[3] y) { y = Neg(x) }
            """
        ),
        model,
    )
    command = [sys.executable, "-c", _WITH_WORKER, str(worker_script), "verify", str(model)]
    command += [str(model), "--target", "tract"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    worker = _first_worker(process)
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 143, stderr
    assert _gone([worker], 5) == [], "the hung worker outlived the stopped check"


def test_a_stop_the_kernel_hands_another_thread_ends_the_wait(tmp_path: Path) -> None:
    """The kernel may deliver SIGTERM to any thread not blocking it (onnxruntime's pools);
    Python then runs the handler when the main thread next runs Python code, so a wait on the
    worker in one long select (the load's: up to a minute) went on, the stop unheard."""
    require("tract")
    from seqlower._signals import Interrupted, signals_as_interrupts
    from seqlower.verification.runtimes import TARGET_ORACLES
    from seqlower.verification.runtimes.tract import _TractChild

    worker_script = tmp_path / "_tract_worker.py"
    worker_script.write_text(_HANGS_IN_LOAD, encoding="utf-8")
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[3] x) => (float[3] y) { y = Neg(x) }
        """
    )
    release = threading.Event()
    other = threading.Thread(target=release.wait, daemon=True)  # a pool thread's stand-in
    other.start()
    hung: list[int] = []

    def stop() -> None:
        end = time.monotonic() + 60
        while _TractChild._process is None and time.monotonic() < end:
            time.sleep(0.01)  # the load has started its worker (slow on a loaded machine)
        hung.append(_TractChild._process.pid)  # the worker the load waits on
        time.sleep(0.2)
        signal.pthread_kill(other.ident or 0, signal.SIGTERM)

    sent = threading.Thread(target=stop, daemon=True)
    saved = _TractChild.worker
    _TractChild._kill()  # a worker left by an earlier test would take the load
    _TractChild.worker = str(worker_script)
    try:
        with signals_as_interrupts():
            sent.start()
            start = time.monotonic()
            with pytest.raises(Interrupted):
                TARGET_ORACLES["tract"].load(model)
            waited = time.monotonic() - start
            gone = not _alive(hung[0])
    finally:
        _TractChild.worker = saved
        release.set()
        _TractChild._kill()
    assert waited < 30, f"the stop was heard after {waited:.0f} s, when the load timed out"
    assert gone, "the hung worker outlived the stopped load"


def _children(parent: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as file:
                if int(file.read().rsplit(")", 1)[1].split()[1]) == parent:
                    found.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return found


def test_no_run_of_a_killed_batch_goes_on(tmp_path: Path) -> None:
    """A batch killed by SIGKILL: each model's run stops (cleaning up), and so does its
    worker."""
    require("tract")
    zoo, out = tmp_path / "zoo", tmp_path / "out"
    zoo.mkdir()
    (zoo / "m.onnx").write_bytes(HANGS.read_bytes())
    command = [sys.executable, "-m", "seqlower", str(zoo), "-o", f"{out}{os.sep}"]
    command += ["--target", "tract", "--target-timeout", "300"]
    batch = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 120
    runs: list[int] = []
    workers: list[int] = []
    while time.monotonic() < end and batch.poll() is None and not workers:
        runs = _children(batch.pid)
        workers = [w for run in runs for w in _workers(run)]
        time.sleep(0.05)
    assert workers, batch.communicate()
    time.sleep(1)
    batch.kill()
    batch.communicate()
    assert _gone(runs + workers, 20) == [], "a run of the batch outlived it"
    assert os.listdir(out) == []  # the run unwound: no staging left behind


@pytest.mark.parametrize(
    ("target", "script"), [("tract", b"_tract_worker"), ("iree", b"_iree_worker")]
)
def test_a_worker_started_by_a_runs_thread_outlives_the_thread(target: str, script: bytes) -> None:
    """PR_SET_PDEATHSIG fires when the *thread* that started the child ends: a worker a run's
    thread restarted (after a time-out) was killed when that run ended, and the next run
    failed ("aborted the process (exit -9)") or started it again."""
    require(target)
    from seqlower.verification.runtimes import TARGET_ORACLES
    from seqlower.verification.runtimes.tract import _TractChild

    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[3] x) => (float[3] y) { y = Neg(x) }
        """
    )
    feeds = {"x": np.arange(3, dtype=np.float32)}
    runner = TARGET_ORACLES[target].load(model)
    # Killed (and reaped): the next run starts the worker, in its thread.
    if target == "tract":
        _TractChild._kill()  # runner.stop() would also keep it from starting one
    elif runner.stop is not None:
        runner.stop()
    thread = threading.Thread(target=runner.run, args=(feeds,))
    thread.start()
    thread.join()
    (worker,) = _workers(os.getpid(), script)
    time.sleep(0.5)  # the parent-death signal, if it comes, has come
    assert _alive(worker)
    (out,) = runner.run(feeds)
    assert np.array_equal(out, -feeds["x"]) and _workers(os.getpid(), script) == [worker]
    if runner.stop is not None:
        runner.stop()
