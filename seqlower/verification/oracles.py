"""Oracles: the runtimes that run a model for the check, each one small class behind one protocol.

:data:`ORACLES` is the order they are tried in for each model, reference and candidate alike:

1. :class:`OnnxRuntime`: onnxruntime's CPU provider, graph optimizations off.
2. :class:`RestampedOnnxRuntime`: the same on a copy re-stamped to an older IR version, for
   models only their IR version keeps from onnxruntime (onnx writes newer ones than it reads).
3. :class:`Reference`: ``onnx.reference`` with corrected implementations of the ops it gets
   wrong (:mod:`seqlower.verification._reference_ops`): ``SequenceMap`` reading outer-scope
   values or mapping empty sequences, ``Loop`` with an omitted condition, zero-trip ``Loop`` with
   scan outputs. It runs what onnxruntime cannot (a ``SequenceMap`` over a function op such as
   ``CenterCropPad``, onnxruntime issue #22100; nested maps), independently of seqlower.

The first that loads the *reference* runs both models (:func:`load_pair`): a candidate that
oracle refuses is a failed check, never a reason to run it somewhere more lenient. No oracle
knows anything of seqlower's lowering, so the lowered model is never its own oracle.

:data:`TARGET_ORACLES` holds the runtimes a lowered model can also be proven on (``--target``): one
class each for OpenVINO (:class:`OpenVino`), tract (:class:`Tract`, concrete or symbolic
input facts) and the converters (:class:`Tinygrad`, :class:`Onnx2Torch`, :class:`Onnx2Tf`,
:class:`Tvm`; IREE's, :class:`~._iree.Iree`, lives in its own module, which the package adds
here); they run the candidate, and the original only to blame a failure there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.metadata
import importlib.util
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np
import onnx

from seqlower._graphs import proto_graphs
from seqlower.errors import BadOptionError, CheckLimitError, first_line

__all__ = [
    "DEFAULT_TARGET_TIMEOUT",
    "ORACLES",
    "TARGET_ORACLES",
    "CandidateRefused",
    "NotLoaded",
    "OnnxRuntime",
    "OpenVino",
    "Oracle",
    "Reference",
    "RestampedOnnxRuntime",
    "Runner",
    "TargetUnavailableError",
    "Tract",
    "bounded",
    "cannot_run",
    "load_pair",
    "load_runner",
    "load_target",
    "oracle_label",
    "ort_run",
]


@dataclasses.dataclass
class Runner:
    """A model loaded by an oracle: ``run(feeds)`` returns the outputs in graph order."""

    name: str
    run: Callable[[Mapping[str, Any]], list[Any]]
    #: Asks a run in progress to stop (onnxruntime's RunOptions.terminate); None: cannot.
    stop: Callable[[], None] | None = None


class Oracle(Protocol):
    """Loads a model for running, or raises (any exception) when it cannot."""

    name: str

    def load(self, model: onnx.ModelProto) -> Runner: ...


def oracle_label(oracle: Oracle) -> str:
    """``name version`` for messages (``onnxruntime 1.32.0``), with the version of the runtime
    a converter runs on, its build label dropped (``onnx2torch 1.5.15 (torch 2.13.0)``, not
    ``2.13.0+cpu``); the name alone when unknown."""
    package = getattr(oracle, "package", None)
    if package is None:
        return oracle.name
    try:
        version = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return oracle.name
    base, _, variant = oracle.name.partition(" ")  # "tract (symbolic facts)"
    label = f"{base} {version}" + (f" {variant}" if variant else "")
    runs_on = getattr(oracle, "runs_on", None)
    if runs_on is not None:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            label += f" ({runs_on} {importlib.metadata.version(runs_on).split('+')[0]})"
    return label


class OnnxRuntime:
    """onnxruntime's CPU provider with graph optimizations off (nothing rewritten under us)."""

    name = "onnxruntime"
    package = "onnxruntime"

    def load(self, model: onnx.ModelProto) -> Runner:
        return _ort_runner(model, self.name)


class RestampedOnnxRuntime:
    """onnxruntime on a copy with an older IR version: onnx writes IR versions newer than the
    installed onnxruntime may read, though nothing else in the model needs them."""

    name = "onnxruntime (re-stamped)"
    package = "onnxruntime"
    versions = (13, 12, 11, 10)

    def load(self, model: onnx.ModelProto) -> Runner:
        last: Exception = RuntimeError("the model's IR version is already old enough")
        for ir_version in self.versions:
            if ir_version >= model.ir_version:
                continue
            copy = onnx.ModelProto()
            copy.CopyFrom(model)
            copy.ir_version = ir_version
            try:
                return _ort_runner(copy, f"onnxruntime (re-stamped to IR version {ir_version})")
            except Exception as e:
                last = e
        raise last


class Reference:
    """``onnx.reference`` with corrected SequenceMap and Loop; pure Python, so slow, and it
    cannot be stopped mid-run (past the time limit its thread is abandoned)."""

    name = "onnx.reference"
    package = "onnx"

    def load(self, model: onnx.ModelProto) -> Runner:
        from seqlower.verification._reference_ops import Evaluator

        evaluator = Evaluator(model)
        return Runner(self.name, lambda feeds: list(evaluator.run(None, dict(feeds))))


ORACLES: tuple[Oracle, ...] = (OnnxRuntime(), RestampedOnnxRuntime(), Reference())


def load_runner(
    model: onnx.ModelProto, oracles: tuple[Oracle, ...] = ORACLES
) -> tuple[Runner | None, list[str]]:
    """The first oracle that loads ``model``, and why the ones before it could not."""
    notes: list[str] = []
    for oracle in oracles:
        try:
            return oracle.load(model), notes
        except Exception as e:
            notes.append(f"{oracle.name}: {first_line(e)}")
    return None, notes


class CandidateRefused(Exception):
    """The oracle that loaded the reference refused the candidate: the check fails."""

    def __init__(self, label: str, error: BaseException) -> None:
        self.label = label
        self.error = error
        super().__init__(f"the lowered model does not load in {label}: {first_line(error)}")


def load_pair(
    reference: onnx.ModelProto,
    candidate: onnx.ModelProto,
    oracles: tuple[Oracle, ...] = ORACLES,
) -> tuple[Runner, Runner] | list[str]:
    """Both models loaded by the first oracle that loads the reference; the notes of the oracles
    that could not when none could. Raises :class:`CandidateRefused` when the oracle that took
    the reference refuses the candidate: trying a more lenient one would prove nothing."""
    notes: list[str] = []
    for oracle in oracles:
        try:
            reference_runner = oracle.load(reference)
        except Exception as e:
            notes.append(f"{oracle.name}: {first_line(e)}")
            continue
        try:
            return reference_runner, oracle.load(candidate)
        except Exception as e:
            restamped = _restamped_candidate(oracle, reference, candidate)
            if isinstance(restamped, Runner):
                return reference_runner, restamped
            raise CandidateRefused(oracle_label(oracle), restamped or e) from None
    return notes


def _restamped_candidate(
    oracle: Oracle, reference: onnx.ModelProto, candidate: onnx.ModelProto
) -> Runner | Exception | None:
    """The candidate at the reference's IR version, if that is all the oracle refused: a newer
    stamp asked for (``--ir-version``) is the user's to choose, and warned about, not a
    difference between the models. Else why that copy was refused (None: no copy tried)."""
    if candidate.ir_version <= reference.ir_version:
        return None
    copy = onnx.ModelProto()
    copy.CopyFrom(candidate)
    copy.ir_version = reference.ir_version
    try:
        runner = oracle.load(copy)
    except Exception as e:
        return e
    runner.name += f" (re-stamped to IR version {reference.ir_version})"
    return runner


def _ort_runner(model: onnx.ModelProto, name: str) -> Runner:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4  # failures surface as exceptions, not as stderr noise
    # onnxruntime's memory-reuse planner compares every new buffer with every freed one it
    # could not match, which is quadratic in the intermediates of unknown shape: a lowered
    # model with 1,700 ReverseSequence took 4 minutes to load with it and seconds without. The
    # check runs small inputs; reuse saves nothing here.
    options.enable_mem_reuse = False
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    run_options: list[Any] = []

    def run(feeds: Mapping[str, Any]) -> list[Any]:
        run_options[:] = [ort.RunOptions()]
        return ort_run(session, feeds, run_options[0])

    def stop() -> None:
        for options in run_options:
            options.terminate = True

    return Runner(name, run, stop)


def ort_run(session: Any, feeds: Mapping[str, Any], run_options: Any = None) -> list[Any]:
    """``session.run`` that also takes and returns bfloat16/float8 (ml_dtypes') arrays: numpy
    has no such type, so onnxruntime refuses them ("Numpy_type 256 can't be converted to
    MLDataType"); they go in and come out as OrtValues."""
    if not any(_ml_dtype(value) for value in feeds.values()):
        return session.run(None, dict(feeds), run_options)
    values = {name: _ort_value(value) for name, value in feeds.items()}
    outputs = session.run_with_ort_values(None, values, run_options)
    return [_from_ort_value(value) for value in outputs]


def _ml_dtype(value: Any) -> bool:
    """Whether ``value`` is an array of one of ml_dtypes' types (bfloat16, float8s)."""
    return isinstance(value, np.ndarray) and value.dtype.kind == "V" and value.dtype.names is None


def _c_order(value: Any) -> np.ndarray:
    """``value`` as a C-ordered array of its own rank (``np.ascontiguousarray`` makes a
    scalar 1-D, which a runtime then refuses for a scalar input)."""
    array = np.asarray(value)
    return array if array.flags.c_contiguous else array.copy(order="C")


def _ort_value(value: Any) -> Any:
    import onnxruntime as ort

    if not _ml_dtype(value):
        return (
            value
            if isinstance(value, ort.OrtValue)
            else ort.OrtValue.ortvalue_from_numpy(_c_order(value))
        )
    array = _c_order(value)
    onnx_type = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
    bits = np.dtype(f"u{array.dtype.itemsize}")
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(bits), onnx_type)


def _from_ort_value(value: Any) -> Any:
    """An output as numpy, those numpy lacks as ml_dtypes' arrays (copied from its buffer)."""
    try:
        return value.numpy()
    except Exception:
        kind = value.data_type()  # "tensor(bfloat16)"
        if not (kind.startswith("tensor(") and value.is_tensor()):
            raise
        onnx_type = getattr(onnx.TensorProto, kind[len("tensor(") : -1].upper())
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(onnx_type))
        shape = tuple(value.shape())
        count = int(np.prod(shape, dtype=np.int64))
        if count == 0:
            return np.zeros(shape, dtype)
        import ctypes

        buffer = (ctypes.c_char * (count * dtype.itemsize)).from_address(value.data_ptr())
        return np.frombuffer(bytes(buffer), dtype=dtype).reshape(shape)


# ---------------------------------------------------------------- targets


class TargetUnavailableError(BadOptionError):
    """``--target NAME`` names a runtime that is not installed, or one seqlower cannot run
    (exit 2, with the pip command and the way to lower it unproven)."""


class OpenVino:
    """OpenVINO's CPU plugin in float32: its default on CPUs with bf16 is bf16, whose errors
    (near 1e-3) would fail every float32 comparison. Outputs are matched by name."""

    name = "openvino"
    package = "openvino"
    extra = "runtimes"

    def load(self, model: onnx.ModelProto) -> Runner:
        with _model_file(model) as path, _runtime_errors():
            compiled = _openvino_core().compile_model(
                path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
            )
        names = [o.name for o in model.graph.output]
        ports = list(compiled.outputs)

        def port(name: str, index: int) -> Any:
            for candidate in ports:
                if name in candidate.get_names():
                    return candidate
            return ports[index]  # OpenVINO may drop the name of an output it folded

        chosen = [port(name, k) for k, name in enumerate(names)]

        def run(feeds: Mapping[str, Any]) -> list[Any]:
            given = {name: _openvino_feed(value) for name, value in feeds.items()}
            with _runtime_errors():
                result = compiled.create_infer_request().infer(given)
            return [_openvino_output(result[p], p) for p in chosen]

        return Runner(oracle_label(self), run)


#: ml_dtypes' types by OpenVINO's name for them. OpenVINO 2026.4.1 takes an ml_dtypes array as
#: float16 values (bfloat16 1.5 in, 0.125 read: wrong numbers, no error) and returns these
#: types as float16 arrays of their bits, so both ways go through the bits.
_OPENVINO_BITS = {"bf16": "bfloat16", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}


def _openvino_feed(value: Any) -> Any:
    if not _ml_dtype(value):
        return value
    import openvino as ov

    array = _c_order(value)
    names = {v: k for k, v in _OPENVINO_BITS.items()}
    if array.dtype.name not in names:
        raise TypeError(f"OpenVINO takes no {array.dtype.name} input here")
    bits = array.view(np.dtype(f"u{array.dtype.itemsize}"))
    return ov.Tensor(bits, list(array.shape), getattr(ov.Type, names[array.dtype.name]))


def _openvino_output(value: Any, port: Any) -> np.ndarray:
    array = np.array(value)
    wanted = _OPENVINO_BITS.get(port.get_element_type().get_type_name())
    if wanted is None:
        return array
    import ml_dtypes

    dtype = np.dtype(getattr(ml_dtypes, wanted))
    return array.view(np.dtype(f"u{dtype.itemsize}")).view(dtype)


@functools.cache
def _openvino_core() -> Any:
    """One OpenVINO Core for the process. Each Core's CPU plugin gives the thread that first
    compiles with it a new alternate signal stack and, when the Core goes, puts back the one it
    found, which is already freed when Cores go in another order than they came (OpenVINO
    2026.4.1: the original and the lowered model loaded side by side); the next signal handled
    on that thread (Ctrl-C, SIGTERM) then crashes the process."""
    import openvino as ov

    return ov.Core()


#: How long one run on a target that runs in a child process (tract) may take, in seconds
#: (``--target-timeout``): tract 0.23.9 hung over 10 minutes on ONNX's expanded LinearAttention.
DEFAULT_TARGET_TIMEOUT = 120.0


class Tract:
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
        label = oracle_label(self)
        child = _TractChild(model.SerializeToString(), self.concrete, self.timeout, label)
        child.load()  # refuses what it cannot parse, at load like the others

        def run(feeds: Mapping[str, Any]) -> list[Any]:
            return child.run([np.asarray(feeds[name]) for name in names])

        return Runner(label, run, child.stop)


class _TractChild:
    """One model in the tract worker process (one worker per process, started when needed,
    shared by every model loaded; killed on a time-out, a Ctrl-C or the check's time limit,
    and started again for the next run)."""

    #: The worker script (tests point it at one that hangs).
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_tract_worker.py")
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
                with _runtime_errors():
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
            with _runtime_errors():
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
            head = _read_within(process.stdout, 8, timeout)
            if head is None:
                _TractChild._kill()
                raise RuntimeRefusal(
                    f"timed out after {timeout:g} s on {self.label} (--target-timeout)"
                )
            body = _read_within(process.stdout, int.from_bytes(head, "little"), None)
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


def _read_within(stream: Any, size: int, timeout: float | None) -> bytes | None:
    """``size`` bytes from ``stream``; None when it ends first or nothing comes within
    ``timeout`` seconds (then the caller decides)."""
    import select

    if timeout is not None:
        # In slices: a stop signal the kernel hands to another thread (a runtime's pool) does
        # not end a wait in this one; its handler runs once this thread runs Python code.
        end = time.monotonic() + timeout
        while not select.select([stream], [], [], min(max(end - time.monotonic(), 0), 0.1))[0]:
            if time.monotonic() >= end:
                return None
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def import_onnx2torch() -> Any:
    """onnx2torch, imported. It imports torchvision for its NonMaxSuppression and RoiAlign
    converters alone; a torchvision that does not load beside a CPU torch (the CUDA wheels) is
    stood in for, so every other op converts (those two then fail when converted)."""
    try:
        import torchvision  # noqa: F401
    except Exception:
        import types

        stub = types.ModuleType("torchvision")
        stub.ops = types.SimpleNamespace(nms=None, roi_align=None)  # type: ignore[attr-defined]
        sys.modules["torchvision"] = stub
        sys.modules["torchvision.ops"] = stub.ops
    import onnx2torch

    return onnx2torch


class Onnx2Torch:
    """onnx2torch: the model converted to a ``torch.nn.Module`` and run in torch on the CPU
    without gradients, as a PyTorch user deploys it. Conversion is at load (an op it has no
    converter for is a refusal); outputs in graph order."""

    name = "onnx2torch"
    package = "onnx2torch"
    runs_on = "torch"
    extra = "onnx2torch"
    importer = staticmethod(import_onnx2torch)

    def load(self, model: onnx.ModelProto) -> Runner:
        import torch

        convert = import_onnx2torch().convert
        copy = onnx.ModelProto()
        copy.CopyFrom(model)  # the converter may annotate what it is given
        module = convert(copy).eval()
        names = _feed_names(model)

        def run(feeds: Mapping[str, Any]) -> list[Any]:
            arrays = [torch.from_numpy(np.array(feeds[name], copy=True)) for name in names]
            with torch.no_grad():
                out = module(*arrays)
            outputs = out if isinstance(out, (list, tuple)) else [out]
            return [o.numpy() if isinstance(o, torch.Tensor) else np.asarray(o) for o in outputs]

        return Runner(oracle_label(self), run)


class Tinygrad:
    """tinygrad's ONNX runner (``tinygrad.nn.onnx.OnnxRunner``) on its CPU device, which
    compiles each kernel with clang (``CC``). A model with an op it lacks is refused at load,
    as its runner would refuse it at the op. A new runner each run: one keeps the symbolic
    sizes and the shape-derived constants of its first run. Its disk cache is off: the check
    runs each run in a new thread, and the cache's SQLite connection serves only one."""

    name = "tinygrad"
    package = "tinygrad"
    extra = "runtimes"

    @staticmethod
    def missing() -> str | None:
        """Why tinygrad cannot run here though installed: its CPU device needs clang."""
        compiler = os.environ.get("CC", "clang")
        if shutil.which(compiler) is None:
            return (
                f"tinygrad's CPU device compiles with {compiler}, which is not on PATH "
                "(apt-get install clang, or CC=/path/to/clang)"
            )
        return None

    def load(self, model: onnx.ModelProto) -> Runner:
        reason = self.missing()
        if reason is not None:
            raise RuntimeError(reason)
        from tinygrad import Tensor
        from tinygrad.helpers import Context
        from tinygrad.nn.onnx import onnx_ops

        ops = {node.op_type for graph in proto_graphs(model.graph) for node in graph.node}
        lacking = sorted(ops - set(onnx_ops))
        if lacking:
            raise NotImplementedError(f"tinygrad has no {', '.join(lacking)}")
        data = np.frombuffer(model.SerializeToString(), dtype=np.uint8)
        names = [o.name for o in model.graph.output]

        def run(feeds: Mapping[str, Any]) -> list[Any]:
            from tinygrad.nn.onnx import OnnxRunner

            with Context(DEV="CPU", CACHELEVEL=0), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # its dtype notes, not errors
                runner = OnnxRunner(Tensor(data, device="CPU"))
                out = runner({name: _tinygrad_feed(value) for name, value in feeds.items()})
                return [_tinygrad_numpy(out[name]) for name in names]

        return Runner(oracle_label(self), run)


def _tinygrad_feed(value: Any) -> Any:
    """A feed as tinygrad's runner takes it: an array, a list of them (a sequence), or None
    (an empty optional)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [np.asarray(v) for v in value]
    return np.asarray(value)


def _tinygrad_numpy(value: Any) -> Any:
    """A tinygrad output as numpy (a sequence output as a list of arrays)."""
    if isinstance(value, (list, tuple)):
        return [_tinygrad_numpy(v) for v in value]
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


class Tvm:
    """Apache TVM: the Relax ONNX frontend, compiled for ``llvm`` (the host CPU) and run in
    the Relax virtual machine; symbolic sizes stay symbolic, so one build serves every run."""

    name = "tvm"
    package = "apache-tvm"
    module = "tvm"
    extra = "tvm"

    def load(self, model: onnx.ModelProto) -> Runner:
        import tvm
        from tvm import relax
        from tvm.relax.frontend.onnx import from_onnx

        module = from_onnx(model, keep_params_in_input=False)
        types = [o.type.tensor_type.elem_type for o in model.graph.output]
        machine = relax.VirtualMachine(tvm.compile(module, target="llvm"), tvm.cpu())
        names = _feed_names(model)

        def run(feeds: Mapping[str, Any]) -> list[Any]:
            arrays = [tvm.runtime.tensor(_c_order(feeds[n])) for n in names]
            out = machine["main"](*arrays)
            return [_declared(a, t) for a, t in zip(_flat_numpy(out), types, strict=False)]

        return Runner(oracle_label(self), run)


class Onnx2Tf:
    """onnx2tf 2.x: the model converted to a float32 ``.tflite`` (its default ``flatbuffer_direct``
    backend, no TensorFlow) in a private temporary folder, and run in LiteRT's interpreter with
    its default delegates (XNNPACK), as a TFLite user deploys it. Every input keeps the ONNX
    layout (``keep_shape_absolutely_input_names``: onnx2tf would make 4-D inputs NHWC).

    onnx2tf rewrites names it dislikes (``out:0`` becomes ``out__0``), so the copy converted has
    its inputs and outputs renamed to plain positional names (inputs through ``Identity`` nodes,
    which onnx2tf removes; outputs where they are computed): feeds and outputs are matched by
    those names, never by position. TFLite
    narrows 64-bit integers to 32 bits; an integer output narrowed so (its values exact) is
    widened back to the declared type, an input is narrowed only when its values fit."""

    name = "onnx2tf"
    package = "onnx2tf"
    runs_on = "ai-edge-litert"
    runs_on_module = "ai_edge_litert"
    extra = "onnx2tf"
    python = (3, 12)  # onnx2tf 2.x: on older Pythons the extra installs nothing

    def load(self, model: onnx.ModelProto) -> Runner:
        from ai_edge_litert.interpreter import Interpreter

        converted, inputs, outputs = _positional_names(model)
        with tempfile.TemporaryDirectory(prefix="seqlower-onnx2tf-") as folder:
            source = os.path.join(folder, "model.onnx")
            onnx.save(converted, source)
            with _runtime_errors():
                _onnx2tf_convert(source, os.path.join(folder, "tflite"), list(inputs))
                tflite = os.path.join(folder, "tflite", "model_float32.tflite")
                _refuse_custom_ops(tflite)
                interpreter = Interpreter(model_path=tflite)
                signature = interpreter.get_signature_list()
        (key, names), *others = signature.items()
        if others or set(names["inputs"]) != set(inputs) or set(names["outputs"]) != set(outputs):
            raise RuntimeRefusal(
                f"onnx2tf's .tflite signature {signature} does not name the model's inputs and "
                "outputs, so its outputs cannot be matched to the model's"
            )
        runner = interpreter.get_signature_runner(key)
        details = runner.get_input_details()
        declared = {k: details[k]["dtype"] for k in inputs}  # what the .tflite takes
        widths = {o.name: o.type.tensor_type.elem_type for o in model.graph.output}

        def run(feeds: Mapping[str, Any]) -> list[Any]:
            given = {k: _litert_feed(feeds[name], declared[k], name) for k, name in inputs.items()}
            with _runtime_errors():
                result = runner(**given)
            return [_widened(np.asarray(result[k]), widths[name]) for k, name in outputs.items()]

        return Runner(oracle_label(self), run)


#: onnx2tf's conversion, run in a child process (see :func:`_onnx2tf_convert`).
_ONNX2TF_CHILD = """
import contextlib, importlib.util, io, json, sys
spec = importlib.util.spec_from_file_location("_seqlower_signals", sys.argv[4])
children = importlib.util.module_from_spec(spec)
spec.loader.exec_module(children)
children.die_with_parent()
import onnx2tf
printed = io.StringIO()
try:
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        onnx2tf.convert(
            input_onnx_file_path=sys.argv[1],
            output_folder_path=sys.argv[2],
            keep_shape_absolutely_input_names=json.loads(sys.argv[3]),
            non_verbose=True,
        )
except SystemExit:
    sys.stdout.write(printed.getvalue())
    sys.exit(1)
"""


def _onnx2tf_convert(source: str, folder: str, inputs: list[str]) -> None:
    """onnx2tf's conversion to ``folder``, in a child process, its progress bars and notes
    kept off the console. onnx2tf 2.6.9 crashes the process writing the float16 ``.tflite`` of
    some models (a segmentation fault; it has no option to skip that file): the float32 one,
    written before, is the one proven; a crash before it is a refusal, as is a conversion it
    ends with ``sys.exit(1)`` after printing why (with its last error line)."""
    import json
    import subprocess

    from seqlower._signals import spawn

    argv = [sys.executable, "-c", _ONNX2TF_CHILD, source, folder, json.dumps(inputs)]
    # It dies with seqlower (seqlower/_signals.py, loaded by path: no package to import).
    argv.append(
        os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_signals.py")
    )
    with spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
        try:
            stdout, stderr = child.communicate()
        except BaseException:
            child.kill()
            raise
    done = subprocess.CompletedProcess(argv, child.returncode, stdout, stderr)
    if done.returncode < 0:
        if os.path.exists(os.path.join(folder, "model_float32.tflite")):
            return  # written before the float16 one it crashed on: what a user deploys
        name = signal.Signals(-done.returncode).name
        raise RuntimeError(f"onnx2tf crashed converting the model ({name})")
    if done.returncode != 0:
        text = done.stdout + done.stderr
        lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in text.splitlines()]
        errors = [line for line in lines if "ERROR" in line or "Error" in line] or lines or [""]
        raise RuntimeError(f"onnx2tf could not convert the model: {errors[-1]}")


def _refuse_custom_ops(path: str) -> None:
    """onnx2tf writes ops it cannot express as TFLite custom ops (``ONNX_SCAN``, ``ONNX_LOOP``,
    ``ONNX_SEQUENCEINSERT`` in a Loop body) that LiteRT has no kernel for: a refusal at load,
    as a converter's missing op is, not a failure of the runs that reach it (which the check
    could blame on the original sharing it, or never reach). Read from the ``.tflite``'s
    operator codes, which list the ops of every subgraph."""
    from ai_edge_litert import schema_py_generated as schema

    with open(path, "rb") as file:
        model = schema.Model.GetRootAs(file.read(), 0)
    codes = (model.OperatorCodes(k) for k in range(model.OperatorCodesLength()))
    custom = sorted(
        (code.CustomCode() or b"?").decode()
        for code in codes
        if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) == schema.BuiltinOperator.CUSTOM
    )
    if custom:
        raise RuntimeError(f"onnx2tf wrote custom ops LiteRT cannot run: {', '.join(custom)}")


def _positional_names(
    model: onnx.ModelProto,
) -> tuple[onnx.ModelProto, dict[str, str], dict[str, str]]:
    """A copy whose fed inputs and outputs are named ``seqlower_input_K``/``seqlower_output_K``
    (an ``Identity`` each to the original names), with ``{new: original}`` for each."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    taken = {
        name for g in proto_graphs(graph) for node in g.node for name in (*node.input, *node.output)
    }
    taken |= {value.name for value in (*graph.input, *graph.output)}

    def fresh(stem: str) -> str:
        name = stem
        while name in taken:
            name += "_"
        taken.add(name)
        return name

    fed = set(_feed_names(model))
    inputs: dict[str, str] = {}
    for k, value in enumerate(graph.input):
        if value.name in fed:
            new = fresh(f"seqlower_input_{k}")
            inputs[new] = value.name
            graph.node.insert(
                len(inputs) - 1, onnx.helper.make_node("Identity", [new], [value.name])
            )
            value.name = new
    outputs: dict[str, str] = {}
    produced = {name for node in graph.node for name in node.output if name}
    renamed: set[str] = set()
    for k, value in enumerate(graph.output):
        new = fresh(f"seqlower_output_{k}")
        outputs[new] = value.name
        if value.name in produced and value.name not in renamed:
            # Renamed where it is computed: onnx2tf 2.6.9 drops an Identity to an output whose
            # value other nodes also read, and LiteRT then fails ("Input tensor 1 lacks data").
            renamed.add(value.name)
            _rename(graph, value.name, new)
        else:  # an input passed through, or an output listed twice: an Identity
            graph.node.append(onnx.helper.make_node("Identity", [value.name], [new]))
        value.name = new
    return copy, inputs, outputs


def _rename(graph: onnx.GraphProto, old: str, new: str) -> None:
    """Every use of ``old`` in ``graph`` and the graphs inside it (names are unique in a valid
    model, so a body that reads ``old`` reads the outer value) as ``new``."""
    for inner in proto_graphs(graph):
        for node in inner.node:
            for names in (node.input, node.output):
                for j, name in enumerate(names):
                    if name == old:
                        names[j] = new
    for info in graph.value_info:
        if info.name == old:
            info.name = new


def _litert_feed(value: Any, dtype: Any, name: str) -> Any:
    """``value`` as the .tflite input takes it: 64-bit integers narrowed to its 32 bits only
    when every value fits (else the run would compute on other inputs than the check's)."""
    array = np.asarray(value)
    if array.dtype == dtype:
        return array
    if array.dtype.kind in "iu" and np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise RuntimeError(
                f"input '{name}' holds values outside the {np.dtype(dtype)} the .tflite takes"
            )
    return array.astype(dtype)


def _widened(array: Any, elem_type: int) -> Any:
    """An integer output TFLite narrowed, back in its declared type (exact: it only widens)."""
    if not elem_type or array.dtype.kind not in "iu":
        return array
    declared = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    if declared != array.dtype and np.can_cast(array.dtype, declared, "safe"):
        return array.astype(declared)
    return array


def _flat_numpy(value: Any) -> list[Any]:
    """TVM's outputs (a tensor, or a tuple of them, nested) as numpy arrays in order; a scalar
    it computed from shapes comes back a Python number (a 0-d array of numpy's type here)."""
    if hasattr(value, "numpy"):
        return [value.numpy()]
    if isinstance(value, bool | int | float):
        return [np.asarray(value)]
    return [array for item in value for array in _flat_numpy(item)]


def _declared(array: Any, elem_type: int) -> Any:
    """A 0-d output in the element type the model declares (TVM gives a scalar it computed from
    shapes as a Python number: float64 or int64 here, where the model says float32, ...)."""
    if not elem_type or array.ndim != 0:
        return array
    declared = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    return array if array.dtype == declared else array.astype(declared)


def _feed_names(model: onnx.ModelProto) -> list[str]:
    """The graph inputs a run feeds (initializers listed as inputs are not fed)."""
    initializers = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]


#: ``--target`` names and the oracle that runs a candidate there (issue 19's target table
#: refers to these names).
TARGET_ORACLES: dict[str, Oracle] = {
    "onnxruntime": OnnxRuntime(),  # for models whose original only onnx.reference runs
    "openvino": OpenVino(),
    "tract": Tract(),
    "tract-symbolic": Tract(concrete=False),
    "tinygrad": Tinygrad(),
    "onnx2torch": Onnx2Torch(),
    "onnx2tf": Onnx2Tf(),
    "tvm": Tvm(),
}


def load_target(
    name: str, *, api: bool = False, lowering: bool = True, imports: bool = True
) -> Oracle:
    """The oracle of target ``name``; TargetUnavailableError when unknown or not installed,
    naming the extra that installs it and, when ``lowering``, the way to lower without the
    proof (``--no-check``; ``check=False`` from Python, ``api``). Without ``imports`` its
    packages are only found, not imported: the check imports them when it runs, so a model
    refused before the check does not wait for torch (6 s)."""
    where, unproven = _wording(name, api)
    oracle = TARGET_ORACLES.get(name)
    if oracle is None:
        raise TargetUnavailableError(
            f"{where}: unknown target (known: {', '.join(TARGET_ORACLES)})"
        )
    python = getattr(oracle, "python", None)
    if python is not None and sys.version_info < python:
        raise TargetUnavailableError(
            f"{where}: {oracle.name} needs Python >= {'.'.join(map(str, python))} (this is "
            f"{sys.version_info.major}.{sys.version_info.minor}), so the lowered model cannot be "
            "proven here" + (f" ({unproven} lowers it unproven)" if lowering else "")
        )
    package = getattr(oracle, "package", name)
    needs = [(package, getattr(oracle, "module", package))]
    runs_on = getattr(oracle, "runs_on", None)
    if runs_on is not None:
        needs.append((runs_on, getattr(oracle, "runs_on_module", runs_on)))
    importer = getattr(oracle, "importer", None)
    for package, module in needs:
        try:
            importlib.metadata.version(package)
            if not imports:
                if importlib.util.find_spec(module.split(".")[0]) is None:
                    raise ImportError(module)
            elif importer is not None and package == needs[0][0]:
                importer()
            else:
                __import__(module)
        except (ImportError, importlib.metadata.PackageNotFoundError):
            raise TargetUnavailableError(
                f"{where}: {package} is not installed, so the lowered model cannot be "
                f"proven there (pip install 'seqlower[{getattr(oracle, 'extra', name)}]'"
                + (f"; {unproven} lowers it unproven)" if lowering else ")")
            ) from None
    missing = getattr(oracle, "missing", None)
    reason = None if missing is None else missing()
    if reason is not None:
        raise TargetUnavailableError(
            f"{where}: {reason}, so the lowered model cannot be proven there"
            + (f" ({unproven} lowers it unproven)" if lowering else "")
        )
    return oracle


def cannot_run(name: str, *, api: bool = False) -> TargetUnavailableError:
    """The error for a target seqlower has no runtime for (TensorRT): proven nowhere here."""
    where, unproven = _wording(name, api)
    return TargetUnavailableError(
        f"{where}: seqlower cannot run {name}, so it cannot prove the lowered model "
        f"there ({unproven} lowers it unproven; seqlower --list-targets)"
    )


def _wording(name: str, api: bool) -> tuple[str, str]:
    """How the user named the target, and how they lower without the proof."""
    return (f"target={name!r}", "check=False") if api else (f"--target {name}", "--no-check")


class RuntimeRefusal(RuntimeError):
    """A target runtime's error, as one line: its own first words and the innermost cause."""


class NotLoaded(RuntimeRefusal):
    """Raised by a run when the runtime could not prepare the model for the given inputs (tract
    types the model once their shapes are known): a load failure, not a wrong result, so
    nothing ran on those inputs."""


@contextlib.contextmanager
def _runtime_errors() -> Iterator[None]:
    """OpenVINO's and tract's errors span many lines (source locations, a cause chain, a Rust
    backtrace); the check reports one: the first that says something and the deepest cause."""
    try:
        yield
    except Exception as e:
        lines = [line.strip() for line in str(e).split("Stack backtrace:")[0].splitlines()]
        lines = [
            line
            for line in lines
            if line and not re.match(r"(Exception from|Check '.*' failed at) \S+:\d+:?$", line)
        ]
        causes = [re.sub(r"^\d+: ", "", line) for line in lines if re.match(r"\d+: ", line)]
        head = next((line for line in lines if not re.match(r"\d+: |Caused by", line)), "")
        if head.endswith(":") and head in lines:
            # A heading whose substance follows it (OpenVINO's "OpConversionFailure:", then
            # "No conversion rule found for operations: ..."): the substance names the op.
            after = lines[lines.index(head) + 1 :][:3]
            detail = [line.lstrip("- ") for line in after if line != "Summary:"]
            head = " ".join([head, *detail])
        node = next((k for k, line in enumerate(lines) if "While validating" in line), None)
        if node is not None and node + 1 < len(lines):  # OpenVINO: the node and its problem
            head = f"{lines[node].rstrip(':')}: {lines[node + 1]}"
        text = head + (f" ({causes[-1]})" if causes and causes[-1] != head else "")
        raise RuntimeRefusal(text or type(e).__name__) from e


@contextlib.contextmanager
def _model_file(model: onnx.ModelProto | bytes) -> Iterator[str]:
    """The model in a private temporary file (OpenVINO and tract load ONNX from paths)."""
    data = model if isinstance(model, bytes) else model.SerializeToString()
    with tempfile.TemporaryDirectory(prefix="seqlower-target-") as folder:
        path = os.path.join(folder, "model.onnx")
        with open(path, "wb") as file:
            file.write(data)
        yield path


# ---------------------------------------------------------------- bounded runs

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

    return Runner(runner.name, watched, runner.stop)


def _stop(runner: Runner, done: threading.Event) -> None:
    """Ask the run to stop and wait for it; onnx.reference (pure Python) cannot be told, so its
    thread is left to finish in the background (a daemon: it dies with the process)."""
    if runner.stop is not None:
        runner.stop()
        done.wait(10)
