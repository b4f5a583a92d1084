"""What every runtime adapter shares: :class:`Oracle`, the base class with defaults each runtime's
module (:mod:`.onnxruntime`, :mod:`.tract`, ...) subclasses, the :class:`Runner` a load returns,
the errors runtimes raise, and the helpers several of them use (model files, feeds, one-line
errors, reading a worker's answer within a time limit).

An adapter loads and runs; nothing here compares outputs (:mod:`seqlower.verification.compare`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import importlib.util
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import onnx

from seqlower.errors import BadOptionError


@dataclasses.dataclass
class Runner:
    """A model loaded by an oracle: ``run(feeds)`` returns the outputs in graph order."""

    name: str
    run: Callable[[Mapping[str, Any]], list[Any]]
    #: Asks a run in progress to stop (onnxruntime's RunOptions.terminate); None: cannot.
    stop: Callable[[], None] | None = None
    #: Float types it computes in a narrower one (``{"float64": "float32"}``), which the check
    #: compares at the narrower type's tolerance (:attr:`Tolerances.narrowed`).
    narrows: Mapping[str, str] = dataclasses.field(default_factory=dict)


class Oracle:
    """A runtime that loads a model for running (:meth:`load`, which raises, any exception, when
    it cannot), with what the check asks of every runtime given once here, with defaults: its
    label, how its packages are found and imported, why it cannot run though installed, and its
    run time limit."""

    name: str = ""
    #: The distribution whose version labels it (None: the name alone).
    package: str | None = None
    #: The module ``package`` installs (None: the package's name).
    module: str | None = None
    #: The distribution a converter runs the model on (onnx2torch: torch), and its module.
    runs_on: str | None = None
    runs_on_module: str | None = None
    #: seqlower's extra that installs it (None: the target's name).
    extra: str | None = None
    #: The oldest Python it installs on (None: any).
    python: tuple[int, int] | None = None

    def load(self, model: onnx.ModelProto) -> Runner:
        raise NotImplementedError

    def importer(self) -> None:
        """Import the runtime's package (converters stand in for what it imports needlessly)."""
        __import__(self.module or self.package or self.name)

    def missing(self) -> str | None:
        """Why it cannot run here though installed (None: it can)."""
        return None

    def with_timeout(self, timeout: float | None) -> Oracle:
        """The oracle with runs stopped after ``timeout`` seconds (None: the default); only
        those that run in a child process can stop a run, the others are bounded by the
        check's time limit."""
        return self

    def label(self) -> str:
        """``name version`` for messages (``onnxruntime 1.32.0``), with the version of the
        runtime a converter runs on, its build label dropped (``onnx2torch 1.5.15 (torch
        2.13.0)``, not ``2.13.0+cpu``); the name alone when unknown."""
        if self.package is None:
            return self.name
        try:
            version = importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            return self.name
        base, _, variant = self.name.partition(" ")  # "tract (symbolic facts)"
        label = f"{base} {version}" + (f" {variant}" if variant else "")
        if self.runs_on is not None:
            with contextlib.suppress(importlib.metadata.PackageNotFoundError):
                label += (
                    f" ({self.runs_on} {importlib.metadata.version(self.runs_on).split('+')[0]})"
                )
        return label


class TargetUnavailableError(BadOptionError):
    """``--target NAME`` names a runtime that is not installed, or one seqlower cannot run
    (exit 2, with the pip command and the way to lower it unproven)."""


class RuntimeRefusal(RuntimeError):
    """A target runtime's error, as one line: its own first words and the innermost cause."""


class NotLoaded(RuntimeRefusal):
    """Raised by a run when the runtime could not prepare the model for the given inputs (tract
    types the model once their shapes are known): a load failure, not a wrong result, so
    nothing ran on those inputs."""


class KnownHang(NotLoaded):
    """Raised instead of a run the runtime is known to hang on, by a bug of its own on a valid
    model (its adapter says which, and why): said at once, the runtime's fault, not after
    ``--target-timeout`` and blamed on the lowering."""


class KnownAbort(RuntimeRefusal):
    """Raised instead of a run that would abort the whole process (a runtime's bug on valid
    inputs, in a runtime seqlower runs in its own process): said as a failure of that run."""


def types_at(
    model: onnx.ModelProto, shapes: Mapping[str, tuple[int, ...]]
) -> dict[str, onnx.TypeProto] | None:
    """Every value's type ONNX's inference gives ``model`` with its inputs of ``shapes`` (None
    when inference fails): what an adapter reads to foresee a runtime's known failure."""
    import onnx.shape_inference

    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for value in fixed.graph.input:
        if value.name in shapes and value.type.HasField("tensor_type"):
            dims = value.type.tensor_type.shape.dim
            del dims[:]
            for size in shapes[value.name]:
                dims.add().dim_value = size
    try:
        inferred = onnx.shape_inference.infer_shapes(fixed, data_prop=True)
    except Exception:  # no sizes known: nothing foreseen
        return None
    return {v.name: v.type for v in [*inferred.graph.input, *inferred.graph.value_info]}


def sizes_of(type_proto: onnx.TypeProto | None) -> list[int] | None:
    """A tensor type's sizes (-1 where not known), None for another type or none."""
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return None
    dims = type_proto.tensor_type.shape.dim
    return [d.dim_value if d.HasField("dim_value") else -1 for d in dims]


#: How long one run on a target that runs in a child process (tract) may take, in seconds
#: (``--target-timeout``): tract 0.23.9 hung over 10 minutes on ONNX's expanded LinearAttention.
DEFAULT_TARGET_TIMEOUT = 120.0


@contextlib.contextmanager
def runtime_errors() -> Iterator[None]:
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
        if not causes and "Caused by:" in lines:  # tract's one cause is not numbered
            causes = lines[lines.index("Caused by:") + 1 :][:1]
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
def model_file(model: onnx.ModelProto | bytes) -> Iterator[str]:
    """The model in a private temporary file (OpenVINO and tract load ONNX from paths)."""
    data = model if isinstance(model, bytes) else model.SerializeToString()
    with tempfile.TemporaryDirectory(prefix="seqlower-target-") as folder:
        path = os.path.join(folder, "model.onnx")
        with open(path, "wb") as file:
            file.write(data)
        yield path


def ml_dtype(value: Any) -> bool:
    """Whether ``value`` is an array of one of ml_dtypes' types (bfloat16, float8s)."""
    return isinstance(value, np.ndarray) and value.dtype.kind == "V" and value.dtype.names is None


def c_order(value: Any) -> np.ndarray:
    """``value`` as a C-ordered array of its own rank (``np.ascontiguousarray`` makes a
    scalar 1-D, which a runtime then refuses for a scalar input)."""
    array = np.asarray(value)
    return array if array.flags.c_contiguous else array.copy(order="C")


def feed_names(model: onnx.ModelProto) -> list[str]:
    """The graph inputs a run feeds (initializers listed as inputs are not fed)."""
    initializers = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]


def read_within(stream: Any, size: int, timeout: float | None) -> bytes | None:
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
