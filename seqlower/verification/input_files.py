"""Input files for the check: the user's inputs and the framework's outputs read from ``.npz``
archives (plain, ``input.``/``output.`` keys, ``__inputs__``/``__outputs__`` lists) and ONNX
test-data folders (``test_data_set_N/input_K.pb``, ``output_K.pb``), and written back in the
latter form for a run to be reproduced (``--save-inputs``, ``--save-failing-inputs``).

What the model takes and which values it accepts is :mod:`seqlower.verification.inputs`'s.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from seqlower.errors import first_line
from seqlower.verification.inputs import InputError, InputSpec, input_specs

__all__ = ["load_inputs", "load_outputs", "save_inputs", "save_outputs"]


def load_inputs(
    path: str | os.PathLike[str], model: onnx.ModelProto, flag: str = "--inputs"
) -> list[dict[str, Any]]:
    """Feeds from an ``.npz`` file (one run) or an ONNX test-data directory (one run per set).

    An ``.npz`` holds inputs under their names (sequences as ``NAME/0``, ``NAME/1``, ...), or as
    exporters' test data comes: ``input.NAME``/``output.NAME`` keys, or ``__inputs__``/
    ``__outputs__`` name lists with bare keys; entries that name graph outputs are not inputs. A
    test-data directory is either one ``test_data_set_N`` folder or a folder holding several;
    each holds ``input_K.pb`` files (TensorProto or SequenceProto), matched to inputs by the
    proto's name or else by position (``output_K.pb`` are :func:`load_outputs`'s). ``flag``
    names the file in errors (``--expected`` when that file supplies the inputs).
    """
    return [feeds for feeds, _ in _load(path, model, flag)]


def load_outputs(path: str | os.PathLike[str], model: onnx.ModelProto) -> list[dict[str, Any]]:
    """The expected (framework) outputs in the same files :func:`load_inputs` reads, one dict
    per set; InputError when a set holds none."""
    sets = _load(path, model, "--expected")
    for k, (_, outputs) in enumerate(sets):
        if not outputs:
            where = f" (set {k + 1})" if len(sets) > 1 else ""
            raise InputError(
                f"--expected {path}{where}: no output of the model in it (outputs: "
                f"{', '.join(o.name for o in model.graph.output)})"
            )
    return [outputs for _, outputs in sets]


def _load(
    path: str | os.PathLike[str], model: onnx.ModelProto, flag: str
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    path = Path(path)
    specs = input_specs(model)
    outputs = [o.name for o in model.graph.output]
    if not path.exists():
        raise InputError(f"{flag} {path}: no such file or directory")
    if path.is_file():
        types = {o.name: o.type.tensor_type.elem_type for o in model.graph.output}
        return [_load_npz(path, specs, outputs, flag, types)]
    if not path.is_dir():
        raise InputError(f"{flag} {path}: not a regular file or a folder")
    sets = sorted(p for p in path.iterdir() if p.is_dir() and p.name.startswith("test_data_set"))
    sets = sets or [path]
    return [_load_test_data_set(folder, specs, outputs, flag) for folder in sets]


def _npz_roles(
    keys: list[str],
    listed: Mapping[str, list[str]],
    specs: list[InputSpec],
    outputs: list[str],
    where: str,
) -> tuple[dict[str, str], dict[str, str]]:
    """Where each input's and output's arrays are stored: key -> the name it stands for."""
    prefixed = any(k.startswith(("input.", "output.")) for k in keys)
    as_input: dict[str, str] = {}
    as_output: dict[str, str] = {}
    for key in keys:
        if prefixed:
            kind, _, name = key.partition(".")
            if kind == "input" and name:
                as_input[key] = name
            elif kind == "output" and name:
                as_output[key] = name
            else:
                raise InputError(f"{where}: '{key}' is neither input.NAME nor output.NAME")
        elif key in listed.get("__outputs__", []) or (
            key in outputs and key not in {spec.name for spec in specs}
        ):
            as_output[key] = key
        else:
            as_input[key] = key
    return as_input, as_output


def _load_npz(
    path: Path,
    specs: list[InputSpec],
    outputs: list[str],
    flag: str,
    types: Mapping[str, int],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``types``: each output's ONNX element type (bfloat16 is stored as bytes)."""
    try:
        archive = np.load(path, allow_pickle=False)
    except Exception as e:
        raise InputError(f"{flag} {path}: not a readable .npz file ({first_line(e)})") from e
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise InputError(f"{flag} {path}: a single array, not an .npz archive of named ones")

    def read(key: str) -> np.ndarray:
        try:
            return archive[key]
        except Exception as e:  # object arrays (allow_pickle=False), corrupt members
            raise InputError(f"{flag} {path}: cannot read '{key}' ({first_line(e)})") from e

    with archive:
        keys = [k for k in archive.files if k not in ("__inputs__", "__outputs__")]
        listed: dict[str, list[str]] = {
            key: [str(n) for n in read(key).reshape(-1)]
            for key in ("__inputs__", "__outputs__")
            if key in archive.files
        }
        as_input, as_output = _npz_roles(keys, listed, specs, outputs, f"{flag} {path}")
        _check_npz_inputs(as_input, specs, outputs, f"{flag} {path}")
        by_name = {name: key for key, name in as_input.items()}
        feeds = _npz_feeds(specs, by_name, read, f"{flag} {path}")
        expected = {
            name: _typed(read(key), types.get(name, 0))
            for key, name in as_output.items()
            if name in outputs
        }
        unknown = [key for key, name in as_output.items() if name not in outputs]
        if unknown:
            raise InputError(
                f"{flag} {path}: '{unknown[0]}' names no output of the model (outputs: "
                f"{', '.join(outputs)})"
            )
    return feeds, expected


def _check_npz_inputs(
    as_input: Mapping[str, str], specs: list[InputSpec], outputs: list[str], where: str
) -> None:
    """Every array read as an input names an input, a sequence's element or an output."""
    names = {spec.name for spec in specs}
    sequences = {spec.name for spec in specs if spec.is_sequence}
    for key, name in as_input.items():
        base, _, position = name.rpartition("/")
        if name in names or (base in sequences and position.isdigit()) or name in outputs:
            continue
        raise InputError(
            f"{where}: '{key}' names no input or output of the model (inputs: "
            f"{', '.join(spec.name for spec in specs)}; sequences as NAME/0, NAME/1, ...)"
        )


def _npz_feeds(
    specs: list[InputSpec],
    by_name: Mapping[str, str],
    read: Callable[[str], np.ndarray],
    where: str,
) -> dict[str, Any]:
    """Each input's value from the archive's arrays (``by_name``: input name -> key)."""
    feeds: dict[str, Any] = {}
    for spec in specs:
        if spec.is_sequence:
            # Sequences are stored as NAME/0, NAME/1, ...; an empty one as a size-0 NAME.
            elements: list[np.ndarray] = []
            while f"{spec.name}/{len(elements)}" in by_name:
                element = read(by_name[f"{spec.name}/{len(elements)}"])
                elements.append(_typed(element, spec.dtype))
            if not elements and (spec.name not in by_name or read(by_name[spec.name]).size != 0):
                raise InputError(
                    f"{where}: no value for the sequence input '{spec.name}' "
                    f"({spec.name}/0, {spec.name}/1, ...; an empty one as a size-0 "
                    f"'{spec.name}')"
                )
            feeds[spec.name] = elements
        elif spec.name in by_name:
            feeds[spec.name] = _typed(read(by_name[spec.name]), spec.dtype)
        else:
            raise InputError(f"{where}: no value for the input '{spec.name}'")
    return feeds


def _typed(array: np.ndarray, elem_type: int) -> np.ndarray:
    """``array`` as the model's bfloat16 or float8 when ``.npz`` kept only its bytes: numpy
    writes ml_dtypes' arrays as void (``V2``) and reads them back so."""
    if array.dtype.kind != "V" or array.dtype.names is not None or not elem_type:
        return array
    try:
        wanted = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError):
        return array
    if wanted.kind == "V" and wanted.itemsize == array.dtype.itemsize:
        return array.view(wanted)
    return array


def _load_test_data_set(
    folder: Path, specs: list[InputSpec], outputs: list[str], flag: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    feeds = _read_pbs(folder, "input", [(s.name, s.is_sequence) for s in specs], flag)
    missing = [spec.name for spec in specs if spec.name not in feeds]
    if missing:
        raise InputError(f"{flag} {folder}: no value for the input '{missing[0]}'")
    expected = _read_pbs(folder, "output", [(name, False) for name in outputs], flag)
    return feeds, expected


def _read_pbs(folder: Path, kind: str, slots: list[tuple[str, bool]], flag: str) -> dict[str, Any]:
    """``{kind}_K.pb`` files, matched to ``slots`` (name, is_sequence) by name or position."""
    named = list(folder.glob(f"{kind}_*.pb"))
    for file in named:
        if not re.fullmatch(rf"{kind}_\d+\.pb", file.name):
            raise InputError(f"{flag} {file}: expected names {kind}_0.pb, {kind}_1.pb, ...")
        if not file.is_file():  # a folder, or a FIFO that would block the read forever
            raise InputError(f"{flag} {file}: not a regular file")
    files = sorted(named, key=lambda p: int(p.stem.split("_")[1]))
    if not files and kind == "input":
        raise InputError(f"{flag} {folder}: no input_*.pb files")
    by_name = dict(slots)
    values: dict[str, Any] = {}
    for position, file in enumerate(files):
        if position >= len(slots):
            raise InputError(f"{flag} {file}: the model has only {len(slots)} {kind}s")
        data = file.read_bytes()
        name, is_sequence = slots[position]
        value, stored = _parse_value(data, is_sequence, file, flag)
        if stored and stored in by_name and stored != name:
            name = stored  # named for another one: trust the name
            value, stored = _parse_value(data, by_name[name], file, flag)
        values[name] = value
    return values


def _parse_value(data: bytes, is_sequence: bool, file: Path, flag: str) -> tuple[Any, str]:
    try:
        if is_sequence:
            sequence = onnx.SequenceProto.FromString(data)
            return [numpy_helper.to_array(t) for t in sequence.tensor_values], sequence.name
        tensor = onnx.TensorProto.FromString(data)
        return numpy_helper.to_array(tensor), tensor.name
    except Exception as e:
        kind = "SequenceProto" if is_sequence else "TensorProto"
        raise InputError(f"{flag} {file}: not a readable {kind}") from e


def save_inputs(
    folder: str | os.PathLike[str], feeds: Mapping[str, Any], model: onnx.ModelProto
) -> Path:
    """Write ``feeds`` as an ONNX test-data set (``input_K.pb``), as :func:`load_inputs` reads."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for position, spec in enumerate(input_specs(model)):
        value = feeds[spec.name]
        if spec.is_sequence:
            proto = numpy_helper.from_list([np.asarray(v) for v in value], spec.name)
            if not value:
                proto.elem_type = onnx.SequenceProto.TENSOR
        else:
            proto = numpy_helper.from_array(np.asarray(value), spec.name)
        (folder / f"input_{position}.pb").write_bytes(proto.SerializeToString())
    return folder


def save_outputs(
    folder: str | os.PathLike[str], outputs: Mapping[str, Any], model: onnx.ModelProto
) -> Path:
    """Write expected ``outputs`` beside saved inputs (``output_K.pb``, K the output's position,
    each named), as :func:`load_outputs` reads them."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for position, output in enumerate(model.graph.output):
        if output.name in outputs and not isinstance(outputs[output.name], list):
            proto = numpy_helper.from_array(np.asarray(outputs[output.name]), output.name)
            (folder / f"output_{position}.pb").write_bytes(proto.SerializeToString())
    return folder
