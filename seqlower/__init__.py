"""seqlower: lower ONNX SequenceMap and ReverseSequence into ops every runtime has, and prove it.

>>> import seqlower
>>> lowered = seqlower.lower("model.onnx")  # doctest: +SKIP
>>> seqlower.verify("model.onnx", lowered).ok  # doctest: +SKIP
True
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from seqlower.errors import (
    InvalidModelError,
    InvalidNodeError,
    ModelLoadError,
    OutputError,
    SeqlowerError,
)
from seqlower.pipeline import build_pipeline, lower


def __getattr__(name: str) -> Any:
    # verify pulls in onnxruntime (slow to import); load it on first use, not with the package.
    if name in ("verify", "VerifyReport"):
        from seqlower import verification

        return getattr(verification, name)
    raise AttributeError(f"module 'seqlower' has no attribute {name!r}")


try:
    __version__ = version("seqlower")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = [
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
