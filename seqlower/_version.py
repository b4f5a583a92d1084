"""seqlower's version, the one place it is written (pyproject.toml reads it from here), and the
versions of what it runs with, for ``--version``, reports and bug reports."""

from __future__ import annotations

__all__ = ["__version__", "dependency_versions"]

__version__ = "0.1.0"

#: Distributions whose versions matter to a run: the required ones, then the optional runtimes.
_REQUIRED = ("onnx", "onnx-ir", "onnxscript", "onnxruntime", "numpy")
_OPTIONAL = (
    "openvino",
    "tract",
    "tinygrad",
    "onnx2torch",
    "torch",
    "apache-tvm",
    "onnx2tf",
    "ai-edge-litert",
)


def dependency_versions() -> dict[str, str]:
    """Installed versions by distribution name, read from package metadata (nothing imported,
    so ``--version`` stays fast); an optional runtime that is not installed is left out.

    importlib.metadata is imported here, not with the module: it takes 40 ms, and everything
    ``import seqlower`` loads runs before the command line can catch Ctrl-C."""
    import importlib.metadata

    found: dict[str, str] = {}
    for name in (*_REQUIRED, *_OPTIONAL):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            if name in _REQUIRED:
                found[name] = "not installed"
    return found
