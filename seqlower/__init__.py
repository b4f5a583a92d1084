"""seqlower: lower ONNX SequenceMap and ReverseSequence into ops every runtime has, and prove it.

>>> import seqlower
>>> lowered = seqlower.lower("model.onnx")  # doctest: +SKIP
>>> seqlower.verify("model.onnx", lowered).ok  # doctest: +SKIP
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from seqlower._version import __version__
from seqlower.errors import (
    InvalidModelError,
    InvalidNodeError,
    ModelLoadError,
    OutputError,
    SeqlowerError,
)

if TYPE_CHECKING:
    from seqlower.pipeline import build_pipeline, lower
    from seqlower.verification import CheckOptions, VerifyReport, verify


def __getattr__(name: str) -> Any:
    # The heavy modules load on first use, not with the package: onnx and onnx_ir take half a
    # second, onnxruntime more, and the command line must be able to handle Ctrl-C before them.
    if name in ("lower", "build_pipeline"):
        from seqlower import pipeline

        return getattr(pipeline, name)
    if name in ("verify", "VerifyReport", "CheckOptions"):
        from seqlower import verification

        return getattr(verification, name)
    raise AttributeError(f"module 'seqlower' has no attribute {name!r}")


__all__ = [
    "CheckOptions",
    "InvalidModelError",
    "InvalidNodeError",
    "ModelLoadError",
    "OutputError",
    "SeqlowerError",
    "VerifyReport",
    "__version__",
    "build_pipeline",
    "lower",
    "verify",
]
