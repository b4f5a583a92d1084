"""Reading and writing models with one-line errors, and writes that never leave half a file."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path

import onnx
import onnx_ir as ir
from onnx_ir.passes.common import CheckerPass

from seqlower._graphs import all_graphs
from seqlower.errors import InvalidModelError, ModelLoadError, OutputError

__all__ = [
    "check_model",
    "has_external_data",
    "load_model",
    "save_model",
    "self_contained_proto",
    "weights_nbytes",
]


def load_model(path: str | os.PathLike[str], *, check: bool = True) -> ir.Model:
    """Read an ONNX file; external weights stay on disk until something needs them.

    With ``check``, ONNX's checker reads the file first (by path, so external data and models
    over 2 GB are fine), so that an invalid model is reported in the checker's words rather than
    as whatever trips first while converting it.
    """
    path = Path(path)
    if not path.exists():
        raise ModelLoadError(f"{path}: no such file")
    if path.is_dir():
        raise ModelLoadError(f"{path}: is a directory, not an ONNX file")
    if path.stat().st_size == 0:
        raise ModelLoadError(f"{path}: the file is empty")
    try:
        proto = onnx.load(path, load_external_data=False)
    except Exception as e:
        raise ModelLoadError(f"{path}: not a readable ONNX model ({_first_line(e)})") from e
    if not proto.HasField("graph"):
        raise ModelLoadError(f"{path}: not an ONNX model (it holds no graph)")
    if check:
        try:
            onnx.checker.check_model(str(path))
        except Exception as e:
            raise InvalidModelError(f"{path} is not valid ONNX: {_checker_message(e)}") from e
    try:
        model = ir.serde.deserialize_model(proto)
    except Exception as e:
        raise InvalidModelError(f"{path}: not a valid ONNX model ({_root_message(e)})") from e
    # Relative external-data locations are relative to the model file, as onnx_ir.load does.
    ir.external_data.set_base_dir(model.graph, path.parent)
    return model


def check_model(
    model: ir.Model | onnx.ModelProto, *, full_check: bool = False, what: str = "model"
) -> None:
    """Run ONNX's checker; raise InvalidModelError with its first line when it rejects.

    Give a ModelProto when one exists anyway: an onnx_ir model is serialized to be checked.
    """
    try:
        if isinstance(model, onnx.ModelProto):
            onnx.checker.check_model(model, full_check=full_check)
        else:
            CheckerPass(full_check=full_check)(model)
    except Exception as e:
        cause = e.__cause__ or e
        raise InvalidModelError(f"the {what} is not valid ONNX: {_checker_message(cause)}") from e


# Protobuf cannot serialize 2 GiB; keep a margin for the graph itself.
INLINE_LIMIT = 1_800_000_000


def has_external_data(model: ir.Model) -> bool:
    """Whether any weight of the model lives in an external file."""
    return any(
        isinstance(value.const_value, ir.ExternalTensor)
        for graph in all_graphs(model)
        if isinstance(graph, ir.Graph)
        for value in graph.initializers.values()
    )


def self_contained_proto(model: ir.Model, *, may_modify: bool = False) -> onnx.ModelProto:
    """``model`` as a ModelProto that holds its weights (external ones read in), as runtimes
    given bytes need. ``may_modify`` lets the weights be read into ``model`` itself."""
    if has_external_data(model):
        model = ir.external_data.load_to_model(model if may_modify else model.clone())
    return ir.serde.serialize_model(model)


def weights_nbytes(model: ir.Model) -> int:
    return sum(
        value.const_value.nbytes
        for graph in all_graphs(model)
        if isinstance(graph, ir.Graph)
        for value in graph.initializers.values()
        if value.const_value is not None
    )


def save_model(
    model: ir.Model,
    path: str | os.PathLike[str],
    *,
    external_data: str | None = None,
    check: bool = False,
) -> str | None:
    """Write ``model`` to ``path`` atomically: a temporary file beside it, renamed when complete.

    Weights go to the external file ``external_data`` (a name relative to ``path``'s folder);
    when it is not given they go to ``<OUT>.data`` if the model had external weights or is too
    big for one protobuf, and inline otherwise. Weights are streamed from their source file, not
    read into memory first. With ``check``, ONNX's checker reads the written file before it
    replaces anything (cheaper than checking in memory, which serializes the model once more).
    Returns the external-data name used, if any.
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise OutputError(f"{path}: the directory {directory} does not exist")
    if external_data is None and (has_external_data(model) or weights_nbytes(model) > INLINE_LIMIT):
        external_data = f"{path.name}.data"
    if external_data is not None and (Path(external_data).is_absolute() or "/" in external_data):
        raise OutputError(f"--external-data {external_data}: give a file name, not a path")
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as e:
        raise OutputError(f"{path}: cannot write there ({e.strerror})") from e
    os.close(fd)
    try:
        # onnx_ir writes the external file beside the temporary model, itself atomically.
        ir.save(model, tmp_name, external_data=external_data)
        if check:
            try:
                onnx.checker.check_model(tmp_name)
            except Exception as e:
                raise InvalidModelError(
                    f"the lowered model is not valid ONNX: {_checker_message(e)}"
                ) from e
        _set_mode(tmp_name, path)
        os.replace(tmp_name, path)
    except OSError as e:
        raise OutputError(f"{path}: cannot write the model ({e.strerror or e})") from e
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
    return external_data


def _set_mode(tmp_name: str, path: Path) -> None:
    """Give the new file the mode a plain write would: the old file's, or 0666 less the umask
    (mkstemp creates files only their owner can read)."""
    if path.exists():
        shutil.copymode(path, tmp_name)
        return
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp_name, 0o666 & ~umask)


def _checker_message(error: BaseException) -> str:
    """The checker's complaint on one line, with the node it names when it names one."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    message = lines[0]
    match = re.search(r"Name: (\S*) OpType: (\S+)", str(error))
    if match:
        name = f" '{match.group(1)}'" if match.group(1) else ""
        message += f" (in {match.group(2)} node{name})"
    return message


def _root_message(error: BaseException) -> str:
    """The first line of the innermost cause: wrappers like onnx_ir's SerdeError say little."""
    while error.__cause__ is not None:
        error = error.__cause__
    return _first_line(error)


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
