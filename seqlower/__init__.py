"""seqlower: lower ONNX SequenceMap and ReverseSequence into ops every runtime has, and prove it.

>>> import seqlower
>>> lowered = seqlower.lower("model.onnx")  # doctest: +SKIP
>>> seqlower.verify("model.onnx", lowered).ok  # doctest: +SKIP
True
>>> print(seqlower.lower_with_report("model.onnx"))  # doctest: +SKIP
pass                       rewritten       time
...

Every name below is listed by ``dir(seqlower)``; the heavy ones (onnx, onnx_ir, onnxruntime)
load on first use.
"""

from __future__ import annotations

import sys as _sys


def _quiet_start_up_interrupts() -> None:
    """The console script and ``python -m seqlower`` import this package (and what it
    imports) before :func:`seqlower.cli.main` can catch Ctrl-C: until main takes over, a
    Ctrl-C ends the run with main's one line and exit code, never a traceback (3 tries in 4 at
    0.05-0.2 s printed one). Only for the command line: a library sets no signal handler."""
    import os
    import signal

    def stop(signum: int, _frame: object) -> None:
        os.write(2, b"seqlower: interrupted; nothing was written\n")
        os._exit(128 + signum)

    stop.seqlower_start_up = True  # type: ignore[attr-defined]  # main() puts Python's back
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when ignored
        signal.signal(signal.SIGINT, stop)


if _sys.argv[:1] and (
    _sys.argv[0].replace("\\", "/").rsplit("/", 1)[-1] in ("seqlower", "seqlower.exe")
    or getattr(_sys, "orig_argv", [])[1:3] == ["-m", "seqlower"]
):
    _quiet_start_up_interrupts()
del _sys, _quiet_start_up_interrupts  # not part of the package's names

from seqlower._version import __version__  # noqa: E402
from seqlower.errors import (  # noqa: E402
    BadArgumentError,
    BadOptionError,
    CannotVerifyError,
    CheckLimitError,
    ExitCode,
    InvalidModelError,
    InvalidNodeError,
    ModelLoadError,
    ModelTypeError,
    OutputError,
    ProofFailedError,
    SeqlowerError,
    SequenceFreeError,
    TargetError,
)

#: typing.TYPE_CHECKING without importing typing (20 ms): the console script imports this
#: package before the command line can catch Ctrl-C, so it imports as little as it can.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from seqlower.inspect import inspect_model
    from seqlower.job import LowerOptions, LowerResult, lower_file
    from seqlower.pipeline import PassRow
    from seqlower.plan import LowerReport, build_pipeline, lower, lower_with_report
    from seqlower.verification import CheckOptions, Tolerances, VerifyReport, verify

#: The lazily loaded names, by module: onnx and onnx_ir take half a second, onnxruntime more,
#: and the command line must be able to handle Ctrl-C before them.
_LAZY = {
    "seqlower.pipeline": ("PassRow",),
    "seqlower.plan": ("LowerReport", "build_pipeline", "lower", "lower_with_report"),
    "seqlower.verification": ("CheckOptions", "Tolerances", "VerifyReport", "verify"),
    "seqlower.job": ("LowerOptions", "LowerResult", "lower_file"),
    "seqlower.inspect": ("inspect_model",),
}


def __getattr__(name: str) -> Any:
    import importlib

    for module, names in _LAZY.items():
        if name in names:
            return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'seqlower' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "BadArgumentError",
    "BadOptionError",
    "CannotVerifyError",
    "CheckLimitError",
    "CheckOptions",
    "ExitCode",
    "InvalidModelError",
    "InvalidNodeError",
    "LowerOptions",
    "LowerReport",
    "LowerResult",
    "ModelLoadError",
    "ModelTypeError",
    "OutputError",
    "PassRow",
    "ProofFailedError",
    "SeqlowerError",
    "SequenceFreeError",
    "TargetError",
    "Tolerances",
    "VerifyReport",
    "__version__",
    "build_pipeline",
    "inspect_model",
    "lower",
    "lower_file",
    "lower_with_report",
    "verify",
]
