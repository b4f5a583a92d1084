"""IREE as a target runtime of the check (``--target iree``): the model imported by torch-mlir's
ONNX importer (what ``iree-import-onnx`` runs), compiled by ``iree-compile`` for ``llvm-cpu``
and run by ``iree-base-runtime``'s ``local-task`` driver, as a CPU deployment of IREE does.

Everything IREE does happens in a child process (:mod:`._iree_worker`), one per model loaded:
its compiler and runtime can hang or abort the process, which a thread cannot stop. A load
(import and compile) or a run past the target timeout kills the child and fails; the next run
starts and compiles again. The child dies with the check (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from seqlower._graphs import ONNX_DOMAINS
from seqlower._signals import spawn
from seqlower.verification.runtimes.base import (
    DEFAULT_TARGET_TIMEOUT,
    Oracle,
    Runner,
    RuntimeRefusal,
    feed_names,
    read_within,
)

__all__ = ["Iree"]

#: The worker script (tests may point it at another), run by path from verification/ (from this
#: folder, ``import iree`` would find this module).
WORKER = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_iree_worker.py"
)


class Iree(Oracle):
    """IREE 3.x on the CPU (llvm-cpu, local-task), each model in its own child process; runs
    past ``timeout`` seconds are stopped and fail."""

    name = "iree"
    package = "iree-base-compiler"
    module = "iree.compiler"
    runs_on = "iree-base-runtime"
    #: Found without loading the runtime's bindings (they report leaks on stderr at exit).
    runs_on_module = "iree._runtime_libs"
    extra = "iree"

    def importer(self) -> None:
        """Whether IREE's compiler is there, without loading it into the check's process (the
        child imports it)."""
        import importlib.util

        if importlib.util.find_spec("iree.compiler") is None:
            raise ImportError("iree.compiler")

    def __init__(self, *, timeout: float = DEFAULT_TARGET_TIMEOUT) -> None:
        self.timeout = timeout

    def with_timeout(self, timeout: float | None) -> Iree:
        """The same oracle with runs stopped after ``timeout`` seconds (None: the default)."""
        return Iree(timeout=timeout or DEFAULT_TARGET_TIMEOUT)

    def load(self, model: onnx.ModelProto) -> Runner:
        for value in model.graph.input:
            if not value.type.HasField("tensor_type"):
                raise RuntimeRefusal(f"IREE takes tensors only: input '{value.name}' is not one")
        names = feed_names(model)
        label = self.label()
        child = _Child(model.SerializeToString(), self.timeout, label)
        try:
            child.load()  # a model IREE cannot import or compile is refused at load
        except RuntimeRefusal as e:
            raise RuntimeRefusal(str(e) + _older_forms(model, str(e))) from None

        def run(feeds: Mapping[str, Any]) -> list[Any]:
            return child.run([np.asarray(feeds[name]) for name in names])

        return Runner(label, run, child.stop)


#: The opset whose forms IREE 3.13.0's importer converts: many ops only as defined there or later
#: (measured: ``Unsqueeze`` with its ``axes`` attribute at opset 11, ``Less`` at 9 to 12 and
#: ``Slice`` with attributes at 9 are not converted; as of opset 13 they are).
CONVERTED_AS_OF = 13


def _older_forms(model: onnx.ModelProto, message: str) -> str:
    """The fix when IREE refused an op of a model older than the forms it converts: the model
    converted to a newer opset (``--opset``), as ``iree-import-onnx --opset-version`` does."""
    opset = next((o.version for o in model.opset_import if o.domain in ONNX_DOMAINS), None)
    if " not converted" not in message or opset is None or opset >= CONVERTED_AS_OF:
        return ""
    return (
        f"; IREE converts many ops only as defined in opset {CONVERTED_AS_OF} or later and the "
        f"model's opset is {opset}: --opset {CONVERTED_AS_OF} converts the lowered model"
    )


class _Child:
    """One model's worker process: started and compiled when needed, killed on a time-out, a
    Ctrl-C or the check's time limit, and when the model is dropped."""

    def __init__(self, data: bytes, timeout: float, label: str) -> None:
        self.data, self.timeout, self.label = data, timeout, label
        self.lock = threading.Lock()
        self.process: Any = None
        self.stderr: Any = None
        weakref.finalize(self, _Child._end, self.__dict__)

    def load(self) -> None:
        with self.lock:
            self._ensure_loaded()

    def run(self, arrays: list[np.ndarray]) -> list[Any]:
        with self.lock:
            self._ensure_loaded()
            answer = self._ask(("run", arrays), self.timeout)
        if answer[0] == "error":
            raise RuntimeRefusal(_one_line(answer[2]))
        return list(answer[1])

    def stop(self) -> None:
        _Child._end(self.__dict__)

    def _ensure_loaded(self) -> None:
        if self.process is not None and self.process.poll() is None:
            return
        _Child._end(self.__dict__)
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (the worker's, kept)
        # Started by seqlower._signals's long-lived thread: PR_SET_PDEATHSIG fires when the
        # thread that started the child ends, and a run's thread ends after each run.
        self.process = spawn(
            [sys.executable, WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            start_new_session=True,  # Ctrl-C reaches the check, which stops the worker
        )
        _LIVE.add(self.process)
        # Importing and compiling are not the run the limit is for: a minute at least.
        answer = self._ask(("load", self.data), max(self.timeout, 60))
        if answer[0] == "error":
            _Child._end(self.__dict__)
            raise RuntimeRefusal(_one_line(answer[2]))

    def _ask(self, request: tuple[Any, ...], timeout: float) -> tuple[Any, ...]:
        """Send one request and wait for its answer, at most ``timeout`` seconds."""
        process = self.process
        try:
            pickle.dump(request, process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            process.stdin.flush()
            head = read_within(process.stdout, 8, timeout)
            if head is None:
                _Child._end(self.__dict__)
                raise RuntimeRefusal(
                    f"timed out after {timeout:g} s on {self.label} (--target-timeout)"
                )
            body = read_within(process.stdout, int.from_bytes(head, "little"), None)
        except (BrokenPipeError, EOFError, OSError):
            body = None
        if body is None:
            raise RuntimeRefusal(self._death())
        answer: tuple[Any, ...] = pickle.loads(body)
        return answer

    def _death(self) -> str:
        """Why the worker died, with the last line it wrote."""
        code = None if self.process is None else self.process.wait()
        text = ""
        if self.stderr is not None:
            self.stderr.seek(0)
            text = self.stderr.read()[-20000:].decode("utf-8", "replace")
        _Child._end(self.__dict__)
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return f"IREE aborted the process (exit {code})" + (f": {lines[-1]}" if lines else "")

    @staticmethod
    def _end(state: dict[str, Any]) -> None:
        """Kill the worker (a static method over the instance's fields, so the finalizer holds
        no reference to the instance)."""
        process, state["process"] = state.get("process"), None
        if process is not None:
            _LIVE.discard(process)
            process.kill()
            process.wait()
            for stream in (process.stdin, process.stdout):
                with contextlib.suppress(OSError):
                    stream.close()
        stderr, state["stderr"] = state.get("stderr"), None
        if stderr is not None:
            stderr.close()


#: Workers alive, killed when the check's process exits (PR_SET_PDEATHSIG covers a crash).
_LIVE: set[Any] = set()


@atexit.register
def _kill_all() -> None:
    for process in list(_LIVE):
        with contextlib.suppress(OSError):
            process.kill()


def _one_line(message: str) -> str:
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return lines[0] if lines else "failed"
