"""Runs watched: in a worker thread, stopped past the check's time limit or on Ctrl-C."""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from collections.abc import Mapping
from typing import Any

from seqlower.errors import CheckLimitError, first_line
from seqlower.verification.runtimes.base import (
    Runner,
)

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def bounded(runner: Runner, deadline: float, limit: float) -> Runner:
    """``runner`` whose runs happen in a worker thread, watched: past the deadline or on Ctrl-C
    it is told to stop (onnxruntime checks between kernels, a Loop between iterations); running
    out of memory becomes a CheckLimitError rather than a failed or mismatching run."""
    run = runner.run

    def watched(feeds: Mapping[str, Any]) -> list[Any]:
        box: dict[str, Any] = {}
        # An Event, not Thread.join: a join interrupted by Ctrl-C can mark a running thread as
        # stopped (CPython gh-90882), and a process that exits while onnxruntime still runs in
        # a thread aborts.
        done = threading.Event()

        def work() -> None:
            # Signals go to the main thread, which handles them; onnxruntime's binding, hit by
            # one, drops the thread without a Python exception.
            signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
            try:
                box["value"] = run(feeds)
            except BaseException as e:
                box["error"] = e
            finally:
                done.set()

        try:  # an interrupt while the thread starts must stop its run too
            threading.Thread(target=work, name="seqlower-check", daemon=True).start()
            while not done.wait(min(max(deadline - time.monotonic(), 0), 0.1)):
                if time.monotonic() >= deadline:
                    _stop(runner, done)
                    raise CheckLimitError(
                        f"the check took longer than its time limit ({limit:g} s, "
                        f"--check-timeout); {runner.name} was stopped"
                    )
        except KeyboardInterrupt:
            _stop(runner, done)
            raise
        error = box.get("error")
        if error is not None:
            if isinstance(error, MemoryError) or "Failed to allocate" in str(error):
                raise CheckLimitError(
                    f"the check ran out of memory in {runner.name} ({first_line(error)}); "
                    "give smaller sizes with --dim/--input-shape"
                ) from None
            raise error
        return box["value"]

    return dataclasses.replace(runner, run=watched)


def _stop(runner: Runner, done: threading.Event) -> None:
    """Ask the run to stop and wait for it; onnx.reference (pure Python) cannot be told, so its
    thread is left to finish in the background (a daemon: it dies with the process)."""
    if runner.stop is not None:
        runner.stop()
        done.wait(10)
