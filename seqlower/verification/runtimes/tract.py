"""tract as a target oracle (``--target tract``, ``tract-symbolic``), run in a child process
(:mod:`seqlower.verification._tract_worker`) that is killed past the target timeout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from seqlower._graphs import ONNX_DOMAINS
from seqlower.verification.runtimes.base import (
    DEFAULT_TARGET_TIMEOUT,
    KnownHang,
    NotLoaded,
    Oracle,
    Runner,
    RuntimeRefusal,
    read_within,
    runtime_errors,
    sizes_of,
    types_at,
)


class Tract(Oracle):
    """tract, with input facts (shape and dtype) set from each run's feeds, as a deployment
    gives them (``concrete``); or the model's declared, often symbolic, facts. It runs in a
    child process (:mod:`._tract_worker`): tract aborts the process on some models and hangs
    on others; a run past ``timeout`` seconds is stopped and fails."""

    package = "tract"
    extra = "runtimes"

    def __init__(self, *, concrete: bool = True, timeout: float = DEFAULT_TARGET_TIMEOUT) -> None:
        self.concrete = concrete
        self.timeout = timeout
        self.name = "tract" if concrete else "tract (symbolic facts)"

    def with_timeout(self, timeout: float | None) -> Tract:
        """The same oracle with runs stopped after ``timeout`` seconds (None: the default)."""
        return Tract(concrete=self.concrete, timeout=timeout or DEFAULT_TARGET_TIMEOUT)

    def load(self, model: onnx.ModelProto) -> Runner:
        initializers = {t.name for t in model.graph.initializer}
        names = [i.name for i in model.graph.input if i.name not in initializers]
        label = self.label()
        child = _TractChild(model.SerializeToString(), self.concrete, self.timeout, label)
        child.load()  # refuses what it cannot parse, at load like the others

        def run(feeds: Mapping[str, Any]) -> list[Any]:
            arrays = [np.asarray(feeds[name]) for name in names]
            if self.concrete:
                hang = hangs_typing(model, {n: a.shape for n, a in zip(names, arrays, strict=True)})
                if hang is not None:
                    raise KnownHang(f"{label} {hang}")
            return child.run(arrays)

        return Runner(label, run, child.stop)


def hangs_typing(model: onnx.ModelProto, shapes: Mapping[str, tuple[int, ...]]) -> str | None:
    """Why tract 0.23.9 would never finish typing ``model`` with input facts of ``shapes``
    (None: not known to hang): a top-level ``Scan`` with scan outputs whose body holds an
    ``If`` and whose state is empty (the zero-trip guarded form over a batch of 0). Measured:
    without the ``If`` it fails at once ('Trying to substitute'), without scan outputs or with
    a state of rows it types (``tests/verification/test_tract_empty_states.py``)."""
    opset = next((o.version for o in model.opset_import if o.domain in ONNX_DOMAINS), 0)
    if opset < 9 or not any(0 in shape for shape in shapes.values()):
        return None
    guarded = [
        (scan, states)
        for scan in model.graph.node
        if scan.op_type == "Scan" and (states := _states(scan))
    ]
    if not guarded:
        return None
    known = types_at(model, shapes)
    if known is None:  # no sizes known: nothing said, tract decides
        return None
    for scan, states in guarded:
        for state in states:
            sizes = sizes_of(known.get(state))
            if sizes is not None and 0 in sizes:
                node = scan.name or scan.output[0]
                return (
                    f"hangs typing Scan node '{node}' with these inputs' shapes: its state "
                    f"'{state}' is empty ({sizes}) and its body holds an If (a bug of tract's "
                    "with input facts set from the inputs; the run would wait for "
                    "--target-timeout)"
                )
    return None


def _states(scan: onnx.NodeProto) -> list[str] | None:
    """The initial states of an opset-9+ ``Scan`` with scan outputs whose body holds an
    ``If``; None for any other."""
    attributes = {a.name: a for a in scan.attribute}
    body = attributes["body"].g if "body" in attributes else None
    scanned = attributes["num_scan_inputs"].i if "num_scan_inputs" in attributes else 0
    if body is None or not any(node.op_type == "If" for node in body.node):
        return None
    count = len(scan.input) - scanned
    if len(scan.output) <= count or count <= 0:
        return None
    return list(scan.input[:count])


class _TractChild:
    """One model in the tract worker process (one worker per process, started when needed,
    shared by every model loaded; killed on a time-out, a Ctrl-C or the check's time limit,
    and started again for the next run)."""

    #: The worker script (tests point it at one that hangs), run by path from verification/
    #: (from this folder, ``import tract`` would find this module).
    worker = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_tract_worker.py"
    )
    _lock = threading.Lock()
    _spawning = threading.RLock()  # held while the worker is started or killed
    _stopped = False  # stop() was called: no worker starts until the next load
    _process: Any = None
    _ended: list[Any] = []  # noqa: RUF012 (the workers killed, see _kill)
    _stderr: Any = None
    _generation = 0
    _keys = 0

    def __init__(self, data: bytes, concrete: bool, timeout: float, label: str) -> None:
        self.data, self.concrete, self.timeout, self.label = data, concrete, timeout, label
        _TractChild._keys += 1
        self.key = _TractChild._keys
        self.generation = -1  # the worker this model is loaded in

    def load(self) -> None:
        _TractChild._stopped = False  # a check is loading its models: runs may start workers
        with self._lock:
            self._ensure_loaded()

    def run(self, arrays: list[np.ndarray]) -> list[Any]:
        with self._lock:
            self._ensure_loaded()
            answer = self._ask(("run", self.key, arrays), self.timeout)
        if answer[0] == "error":
            try:
                with runtime_errors():
                    raise RuntimeError(answer[2])
            except RuntimeRefusal as e:
                if answer[1] == "load":  # typing the model with these shapes: its load
                    raise NotLoaded(str(e)) from None
                raise
        return list(answer[1])

    def stop(self) -> None:
        _TractChild._kill(stop=True)

    def _ensure_loaded(self) -> None:
        if self.generation == _TractChild._generation and _TractChild._alive():
            return
        # Starting the worker and parsing are not the run the limit is for: a minute at least.
        answer = self._ask(("load", self.key, self.data, self.concrete), max(self.timeout, 60))
        if answer[0] == "error":
            with runtime_errors():
                raise RuntimeError(answer[2])
        self.generation = _TractChild._generation

    def _ask(self, request: tuple[Any, ...], timeout: float) -> tuple[Any, ...]:
        """Send one request and wait for its answer, at most ``timeout`` seconds. Interrupted
        (Ctrl-C, SIGTERM in the main thread), the worker is stopped at once: it may be hung,
        and an answer left unread would be taken for the next request's."""
        import pickle

        process = _TractChild._start()
        try:
            pickle.dump(request, process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            process.stdin.flush()
            head = read_within(process.stdout, 8, timeout)
            if head is None:
                _TractChild._kill()
                raise RuntimeRefusal(
                    f"timed out after {timeout:g} s on {self.label} (--target-timeout)"
                )
            body = read_within(process.stdout, int.from_bytes(head, "little"), None)
        except (BrokenPipeError, EOFError, OSError):
            body = None
        except BaseException:
            _TractChild._kill()
            raise
        if body is None:
            raise RuntimeRefusal(_TractChild._death())
        answer: tuple[Any, ...] = pickle.loads(body)
        return answer

    @classmethod
    def _alive(cls) -> bool:
        return cls._process is not None and cls._process.poll() is None

    @classmethod
    def _start(cls) -> Any:
        import subprocess

        from seqlower._signals import spawn

        with cls._spawning:  # a stop and a start do not cross: no worker starts after a stop
            if cls._stopped:
                raise RuntimeRefusal(f"{cls.__name__}: stopped")
            if not cls._alive():
                cls._kill()
                if cls._generation == 0:  # a hung worker must not outlive the check
                    import atexit

                    atexit.register(cls._kill)
                cls._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (the worker's, kept)
                cls._process = spawn(
                    [sys.executable, cls.worker],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=cls._stderr,
                    # Its own process group: Ctrl-C reaches the check, which stops the worker.
                    start_new_session=True,
                )
                cls._generation += 1
            return cls._process

    @classmethod
    def _kill(cls, *, stop: bool = False) -> None:
        """Kill the worker (its process group); with ``stop``, start none until the next
        check loads a model (a run's thread may be about to start one)."""
        with cls._spawning:
            if stop:
                cls._stopped = True
            process, cls._process = cls._process, None
        if process is not None:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
            process.kill()
            process.wait()
            for stream in (process.stdin, process.stdout):
                with contextlib.suppress(OSError):
                    stream.close()
            # Kept: Popen.__del__ is Python code, and a stop signal handled while it runs in
            # the main thread is lost ("Exception ignored in ..."), the check going on.
            cls._ended.append(process)

    @classmethod
    def _death(cls) -> str:
        """Why the worker died: tract's panic message, one line."""
        process = cls._process
        code = None if process is None else process.wait()
        text = ""
        if cls._stderr is not None:
            cls._stderr.seek(0)
            text = cls._stderr.read()[-20000:].decode("utf-8", "replace")
        cls._kill()
        lines = [line.strip() for line in text.splitlines()]
        panic = next((k for k, line in enumerate(lines) if " panicked at " in line), None)
        why = lines[panic + 1] if panic is not None and panic + 1 < len(lines) else ""
        return f"tract aborted the process (exit {code})" + (f": {why}" if why else "")
