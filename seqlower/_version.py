"""seqlower's version, the one place it is written (pyproject.toml reads it from here), and the
versions of what it runs with, for ``--version``, reports and bug reports."""

from __future__ import annotations

__all__ = ["__version__", "dependency_versions", "version_text"]

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
    "iree-base-compiler",
    "iree-base-runtime",
)


def version_text() -> str:
    """What ``seqlower --version`` prints: seqlower's version, then every library and runtime
    that decides what a run does."""
    lines = [f"seqlower {__version__}"]
    lines += [f"  {name} {version}" for name, version in dependency_versions().items()]
    return "\n".join(lines) + "\n"


def dependency_versions() -> dict[str, str]:
    """Installed versions by distribution name, the ``Version:`` of each one's metadata as
    ``importlib.metadata.version`` reads it (the first distribution of that name along
    ``sys.path``); an optional runtime that is not installed is left out. Nothing is imported.

    The metadata directories are found by listing each ``sys.path`` directory once and reading
    the few header lines of the matching ``METADATA``/``PKG-INFO``: importlib.metadata (its import
    and a search of every path per name) took 16 ms of ``--version``'s 0.1 s. A name this cannot
    settle (a zip file on the path, unreadable metadata) is asked of importlib.metadata."""
    names = (*_REQUIRED, *_OPTIONAL)
    found, settled = _scan_path({_normalized(name): name for name in names})
    unsettled = [name for name in names if name not in found and not settled]
    if unsettled:
        import contextlib
        import importlib.metadata

        for name in unsettled:
            with contextlib.suppress(importlib.metadata.PackageNotFoundError):
                found[name] = importlib.metadata.version(name)
    return {
        name: found.get(name, "not installed")
        for name in names
        if name in found or name in _REQUIRED
    }


def _normalized(name: str) -> str:
    """A distribution name as metadata directories spell it for matching (PEP 503, with ``_``):
    lower case, every run of ``-``, ``_`` and ``.`` one ``_``."""
    out: list[str] = []
    for char in name.lower():
        if char in "-_.":
            if out and out[-1] == "_":
                continue
            char = "_"
        out.append(char)
    return "".join(out)


def _scan_path(wanted: dict[str, str]) -> tuple[dict[str, str], bool]:
    """The versions of ``wanted`` (normalized name -> name) found in the ``sys.path``
    directories, first found first, and whether the search was complete (no zip file on the
    path, every metadata file read)."""
    import os
    import sys

    found: dict[str, str] = {}
    complete = True
    for entry in sys.path:
        directory = entry or "."
        try:
            children = os.listdir(directory)
        except OSError:
            complete = complete and not os.path.isfile(directory)  # a zip: not searched here
            continue
        for child in children:
            stem, dot, suffix = child.rpartition(".")
            if not dot or suffix not in ("dist-info", "egg-info"):
                continue
            name = wanted.get(_normalized(stem.partition("-")[0]))
            if name is None or name in found:
                continue
            version = _metadata_version(os.path.join(directory, child), suffix)
            if version is None:
                complete = False
            else:
                found[name] = version
    return found, complete


def _metadata_version(path: str, suffix: str) -> str | None:
    """The ``Version:`` header of a ``.dist-info`` directory's ``METADATA`` or an ``.egg-info``
    directory's (or file's) ``PKG-INFO``; None when it cannot be read."""
    import os

    if os.path.isdir(path):
        path = os.path.join(path, "METADATA" if suffix == "dist-info" else "PKG-INFO")
    try:
        with open(path, encoding="utf-8") as metadata:
            for line in metadata:
                if line.startswith("Version:"):
                    return line[len("Version:") :].strip()
                if not line.strip():
                    return None  # the headers ended
    except (OSError, UnicodeDecodeError):
        pass
    return None
