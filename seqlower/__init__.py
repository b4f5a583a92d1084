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

from seqlower._version import __version__
from seqlower.errors import (
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
    from seqlower.pipeline import PassRow, build_pipeline
    from seqlower.plan import LowerReport, lower, lower_with_report
    from seqlower.verification import CheckOptions, Tolerances, VerifyReport, verify

#: The lazily loaded names, by module: onnx and onnx_ir take half a second, onnxruntime more,
#: and the command line must be able to handle Ctrl-C before them.
_LAZY = {
    "seqlower.pipeline": ("PassRow", "build_pipeline"),
    "seqlower.plan": ("LowerReport", "lower", "lower_with_report"),
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
