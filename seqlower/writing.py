"""Writing OUT and its weights so that readers never see a mix: staged beside OUT, renamed in
with signals held back, the replaced model's weights removed only when seqlower named them and
nothing else reads them (:func:`save_model`)."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import glob
import mmap
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import onnx
import onnx_ir as ir

import seqlower.io
from seqlower._fs import (
    check_external_data_name,
    check_target,
    deferred_signals,
    folder_lock,
    give_default_mode,
    note_written,
    same_file,
)
from seqlower.errors import InvalidModelError, OutputError
from seqlower.io import (
    all_proto_tensors,
    checker_message,
    has_external_data,
    initializer_values,
    weights_nbytes,
)

__all__ = ["save_model"]

#: onnx_ir's default: initializers up to this size stay in the model file when weights go out.
_SIZE_THRESHOLD = 256


def _external_threshold(initializers: list[ir.Value]) -> int:
    """The size from which initializers go to the weights file: onnx_ir's 256 bytes, lowered to
    the smallest weight that was external, so that what was external stays so (a model whose
    small weights were all external came back with them inline and no weights file)."""
    sizes = [
        value.const_value.nbytes
        for value in initializers
        if isinstance(value.const_value, ir.ExternalTensor)
    ]
    return min([_SIZE_THRESHOLD, *(size - 1 for size in sizes)])  # onnx_ir moves only larger


def save_model(
    model: ir.Model,
    path: str | os.PathLike[str],
    *,
    external_data: str | None = None,
    check: bool = False,
    keep: Sequence[Path] = (),
    exact: onnx.ModelProto | None = None,
    warnings: list[str] | None = None,
) -> str | None:
    """Write ``model`` to ``path``, its weights with it, so that readers never see a mix.

    ``exact``: the proto to write as it is, when no weights go to a file (a model with nothing
    to lower is written as read; onnx_ir's round trip would add value_info and the like).

    Everything is written under private names in a staging folder beside ``path``, then moved
    into place in a few renames, with signals held back and other seqlower runs writing into the
    same folder locked out. Weights go to the file ``external_data`` (a name in ``path``'s
    folder) when given; otherwise, when the model had external weights or is too big for one
    protobuf, to ``<OUT>.data``, or, while an older ``<OUT>.data`` is in place, to a fresh
    ``<OUT>.<random>.data``: the old model keeps reading its own weights until the new model
    replaces it in one rename. The weights files the replaced model used are then removed when
    they are named as seqlower names them, nothing reads them any more, and they are not in
    ``keep`` (the files this run read), nor another model in the folder (a copy of the old OUT):
    those are kept, and ``warnings`` (when given) says so, as it says when the weights replace a
    file named by ``external_data`` another model there reads. With ``check``, ONNX's checker
    reads the staged files before anything is replaced. Returns the weights file name used, if
    any.
    """
    path = Path(path)
    folder = path.parent
    check_target(path, "-o")
    if external_data is not None:
        check_external_data_name(external_data, path, inputs=keep)
    initializers = initializer_values(model)
    wants_data = external_data is not None or (
        has_external_data(model, initializers)
        or weights_nbytes(model, initializers) > seqlower.io.INLINE_LIMIT
    )
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".seqlower", dir=folder))
    except OSError as e:
        raise OutputError(f"{path}: cannot write there ({_strerror(e)})") from e
    try:
        with folder_lock(folder):
            data_name = _weights_name(path, external_data, wants_data)
            staged = staging / path.name
            data_name = _stage(model, staged, data_name, exact, initializers, check=check)
            said = _put_in_place(staged, path, data_name, keep, replaced=external_data)
    except OSError as e:
        raise OutputError(f"{path}: cannot write the model ({_strerror(e)})") from e
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if warnings is not None:
        warnings += said.lines
    return data_name


def _put_in_place(
    staged: Path, path: Path, data_name: str | None, keep: Sequence[Path], *, replaced: str | None
) -> _Shared:
    """The staged model (and its weights ``data_name`` beside it) renamed in over ``path``, the
    replaced model's weights removed unless another model reads them (then said, and kept)."""
    folder, staging = path.parent, staged.parent
    give_default_mode(staged, path)
    stale = _stale_weights(path, data_name, keep)
    said = _shared_weights(path, stale, data_name, replaced=replaced)
    stale = [p for p in stale if p not in said.kept]
    if data_name is not None:
        give_default_mode(staging / data_name, folder / data_name)
    _commit(
        staged,
        path,
        None if data_name is None else (staging, folder, data_name),
        stale,
        fresh=replaced is None,
    )
    return said


def _weights_name(path: Path, external_data: str | None, wants_data: bool) -> str | None:
    """The weights file's name: the one given, else (when weights go out) ``<OUT>.data``, or a
    fresh ``<OUT>.<random>.data`` while an older one is in place for the old model to read."""
    if external_data is not None or not wants_data:
        return external_data
    name = f"{path.name}.data"
    if os.path.lexists(path.parent / name):
        name = f"{path.name}.{secrets.token_hex(4)}.data"
    return name


def _stage(
    model: ir.Model,
    staged: Path,
    data_name: str | None,
    exact: onnx.ModelProto | None,
    initializers: list[ir.Value],
    *,
    check: bool,
) -> str | None:
    """Write ``model`` (or ``exact``, when no weights go out) to ``staged``, its weights beside
    it as ``data_name``; checked by ONNX's checker with ``check``. Returns the weights file's
    name, None when no weight was big enough to go out (no empty weights file is left)."""
    if exact is not None and data_name is None:
        staged.write_bytes(exact.SerializeToString())
    else:
        threshold = _external_threshold(initializers)
        ir.save(model, staged, external_data=data_name, size_threshold_bytes=threshold)
    staged_data = None if data_name is None else staged.parent / data_name
    if staged_data is not None and (not staged_data.exists() or staged_data.stat().st_size == 0):
        staged_data.unlink(missing_ok=True)
        data_name = None
    if check:
        try:
            onnx.checker.check_model(str(staged))
        except Exception as e:
            raise InvalidModelError(
                f"the lowered model is not valid ONNX: {checker_message(e)}"
            ) from e
    return data_name


@dataclasses.dataclass
class _Shared:
    """Weights files other models in OUT's folder read: those kept, and what to say."""

    kept: list[Path] = dataclasses.field(default_factory=list)
    lines: list[str] = dataclasses.field(default_factory=list)


def _shared_weights(
    path: Path, stale: list[Path], data_name: str | None, *, replaced: str | None
) -> _Shared:
    """Which of ``stale`` (the replaced OUT's weights) another model in the folder reads (a
    ``cp OUT backup.onnx``): those stay, or that model would no longer load; and whether the
    weights file ``replaced`` (``--external-data``, replaced in place) is another model's."""
    shared = _Shared()
    folder = path.parent
    named = None if replaced is None else folder / replaced
    wanted = [*stale, *([named] if named is not None and named.is_file() else [])]
    if not wanted:
        return shared
    readers = _readers(folder, wanted, skip=path)
    where = "inline" if data_name is None else f"in {folder / data_name}"
    for weights in stale:
        if readers.get(weights):
            shared.kept.append(weights)
            shared.lines.append(
                f"kept {weights}, which {_names(readers[weights])} still reads (the new "
                f"{path}'s weights are {where})"
            )
    if named is not None and readers.get(named):
        shared.lines.append(
            f"--external-data {replaced}: replaced {named}, which {_names(readers[named])} "
            "also read: that model now reads the new weights (give another name to keep both)"
        )
    return shared


def _names(paths: list[Path]) -> str:
    return ", ".join(str(p) for p in paths[:3]) + (
        f" and {len(paths) - 3} more" if len(paths) > 3 else ""
    )


def _readers(folder: Path, weights: list[Path], *, skip: Path) -> dict[Path, list[Path]]:
    """For each of ``weights`` (files in ``folder``), the other ``.onnx`` models in ``folder``
    whose tensors name it. A model is parsed only when its bytes hold one of the names."""
    found: dict[Path, list[Path]] = {}
    names = {w.name.encode() for w in weights}
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return found
    for entry in entries:
        model = folder / entry.name
        if (
            not entry.name.endswith(".onnx")
            or not entry.is_file(follow_symlinks=False)
            or entry.name == skip.name  # by name: a hard link to the old OUT is a copy
            or not _holds_any(model, names)
        ):
            continue
        try:
            used = {os.path.normpath(folder / loc) for loc in _references(model)}
        except Exception:  # not a model: it reads nothing
            continue
        for w in weights:
            if os.path.normpath(w) in used:
                found.setdefault(w, []).append(model)
    return found


def _holds_any(path: Path, needles: set[bytes]) -> bool:
    """Whether the file's bytes hold one of ``needles`` (memory-mapped: no copy)."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return False
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return any(data.find(needle) >= 0 for needle in needles)
    except (OSError, ValueError):
        return False


def _commit(
    staged: Path,
    path: Path,
    data: tuple[Path, Path, str] | None,
    stale: list[Path],
    *,
    fresh: bool,
) -> None:
    """Move the staged weights, then the staged model, into place; then drop stale weights.

    A fresh weights name is linked in (never replacing anything) and unlinked again if the model
    cannot follow; a name the user chose replaces what is there. Signals wait until the end.
    """
    placed: Path | None = None
    done = False
    try:
        with deferred_signals():
            if data is not None:
                staging, folder, name = data
                placed = folder / name
                if fresh:
                    os.link(staging / name, placed)
                else:
                    os.replace(staging / name, placed)
            try:
                os.replace(staged, path)
            except BaseException:
                if placed is not None and fresh:
                    placed.unlink(missing_ok=True)
                raise
            done = True
            note_written(path, *([] if placed is None else [placed]))
            for old in stale:
                if placed is None or not same_file(old, placed):
                    with contextlib.suppress(OSError):
                        old.unlink()
    except KeyboardInterrupt as e:
        # A signal held during the renames arrives once they are done: say what they wrote.
        if done:
            e.written = [path] if placed is None else [path, placed]  # type: ignore[attr-defined]
        raise


def _references(model_path: Path) -> set[str]:
    """The external-data locations a saved model file names (without reading its weights)."""
    proto = onnx.load(str(model_path), load_external_data=False)
    found: set[str] = set()
    for tensor in all_proto_tensors(proto):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            for entry in tensor.external_data:
                if entry.key == "location":
                    found.add(entry.value)
    return found


def _stale_weights(path: Path, new_name: str | None, keep: Sequence[Path]) -> list[Path]:
    """Weights files of the model now at ``path`` that are seqlower-named for it (``OUT.data``,
    ``OUT.<hex>.data``) and that neither the new model nor this run's inputs use."""
    folder = path.parent
    candidates = [p for p in folder.glob(f"{glob.escape(path.name)}.*data") if _ours(p, path)]
    if not candidates or not path.is_file():
        return []
    try:
        used = {os.path.normpath(folder / loc) for loc in _references(path)}
    except Exception:  # not a model we can read: leave its neighbours alone
        return []
    return [
        p
        for p in candidates
        if os.path.normpath(p) in used
        and p.name != new_name
        and not any(same_file(p, k) for k in keep)
    ]


def _ours(candidate: Path, path: Path) -> bool:
    middle = candidate.name[len(path.name) : -len(".data")]
    return middle == "" or re.fullmatch(r"\.[0-9a-f]{8}", middle) is not None


def _strerror(error: OSError) -> str:
    if error.errno == errno.EROFS:
        return "read-only file system"
    return error.strerror or str(error)
