"""Inputs for checking a model: generated from its declared input types, or read from files.

Generated inputs follow the declared types: every dtype, sequences as lists of tensors whose
symbolic dimensions are drawn per element (real sequences hold images or sentences of different
sizes), and integers that index something drawn inside the valid range, so that a failure is
the model's and not the generator's.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from seqlower.errors import SeqlowerError, first_line

__all__ = [
    "InputError",
    "InputSpec",
    "estimate_input_bytes",
    "generate_inputs",
    "input_specs",
    "load_inputs",
    "save_inputs",
]

DEFAULT_DIM = 3
DEFAULT_SEQ_LEN = 3
_WORDS = np.array(["", "a", "seq", "lower", "éè", "日本", "x y"], dtype=object)


class InputError(SeqlowerError):
    """User-supplied inputs or input options that cannot be used."""


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """What one graph input takes: a tensor, or a sequence of tensors, of ``dtype``."""

    name: str
    dtype: int  # onnx.TensorProto data type
    shape: tuple[int | str | None, ...] | None  # None: rank unknown
    is_sequence: bool


def input_specs(model: onnx.ModelProto) -> list[InputSpec]:
    """The graph inputs a caller must feed (initializers that are also inputs have defaults)."""
    initializers = {init.name for init in model.graph.initializer}
    specs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        type_ = value.type
        is_sequence = type_.HasField("sequence_type")
        if is_sequence:
            type_ = type_.sequence_type.elem_type
        if not type_.HasField("tensor_type"):
            raise InputError(
                f"input '{value.name}': only tensors and sequences of tensors are supported"
            )
        tensor = type_.tensor_type
        shape = None
        if tensor.HasField("shape"):
            shape = tuple(
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in tensor.shape.dim
            )
        specs.append(InputSpec(value.name, tensor.elem_type, shape, is_sequence))
    return specs


def generate_inputs(
    model: onnx.ModelProto,
    rng: np.random.Generator,
    *,
    dims: Mapping[str, int] | None = None,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    seq_len: int | None = None,
) -> dict[str, Any]:
    """Random feeds for every input of ``model``.

    ``dims`` sizes symbolic dimensions by name, ``input_shapes`` fixes whole shapes per input,
    ``seq_len`` sets the length of every sequence input (0 makes them empty).
    """
    dims = dict(dims or {})
    input_shapes = dict(input_shapes or {})
    specs = input_specs(model)
    unknown = set(input_shapes) - {s.name for s in specs}
    if unknown:
        raise InputError(f"--input-shape names no input of the model: {', '.join(sorted(unknown))}")
    bounds = _index_bounds(model)
    _tie_batch_dims(model, specs, dims)
    feeds: dict[str, Any] = {}
    # Bounded integers last: their range depends on the tensors they index.
    for spec in sorted(specs, key=lambda s: s.name in bounds):
        length = DEFAULT_SEQ_LEN if seq_len is None else seq_len
        fixed = input_shapes.get(spec.name)
        if spec.is_sequence:
            feeds[spec.name] = [
                _tensor(rng, spec, _shape(rng, spec, dims, fixed, per_element=True), None, feeds)
                for _ in range(length)
            ]
        else:
            shape = _shape(rng, spec, dims, fixed, per_element=False)
            feeds[spec.name] = _tensor(rng, spec, shape, bounds.get(spec.name), feeds)
    return feeds


def _shape(
    rng: np.random.Generator,
    spec: InputSpec,
    dims: Mapping[str, int],
    fixed: tuple[int, ...] | None,
    *,
    per_element: bool,
) -> tuple[int, ...]:
    if fixed is not None:
        if spec.shape is not None and len(fixed) != len(spec.shape):
            raise InputError(
                f"--input-shape {spec.name}: rank {len(fixed)}, but the input has rank "
                f"{len(spec.shape)}"
            )
        return tuple(fixed)
    if spec.shape is None:
        return (DEFAULT_DIM,)
    shape = []
    for dim in spec.shape:
        if isinstance(dim, int):
            shape.append(dim)
        elif isinstance(dim, str) and dim in dims:
            shape.append(dims[dim])
        elif per_element:
            shape.append(int(rng.integers(1, DEFAULT_DIM + 3)))  # elements differ in size
        else:
            shape.append(DEFAULT_DIM)
    return tuple(shape)


#: What one generated string costs in memory: a Python str object and its pointer.
STRING_BYTES = 64


def estimate_input_bytes(
    model: onnx.ModelProto,
    *,
    dims: Mapping[str, int] | None = None,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    seq_len: int | None = None,
) -> list[tuple[str, str, int]]:
    """(input, its type as written, bytes) for the largest feeds :func:`generate_inputs` could
    draw with these options, the 64-bit draws they are cast from included: computed from
    shapes, before anything is allocated."""
    dims = dict(dims or {})
    input_shapes = dict(input_shapes or {})
    estimates = []
    for spec in input_specs(model):
        fixed = input_shapes.get(spec.name)
        if fixed is not None:
            shape: list[int] = list(fixed)
        elif spec.shape is None:
            shape = [DEFAULT_DIM]
        else:
            shape = [
                d
                if isinstance(d, int)
                else dims[d]
                if isinstance(d, str) and d in dims
                else DEFAULT_DIM + 2
                if spec.is_sequence
                else DEFAULT_DIM
                for d in spec.shape
            ]
        if spec.dtype == onnx.TensorProto.STRING:
            item = STRING_BYTES
        else:  # numbers are drawn as 64-bit values first, then cast
            item = 8 + np.dtype(onnx.helper.tensor_dtype_to_np_dtype(spec.dtype)).itemsize
        count = math.prod(shape) * (
            (DEFAULT_SEQ_LEN if seq_len is None else seq_len) if spec.is_sequence else 1
        )
        type_name = onnx.TensorProto.DataType.Name(spec.dtype).lower()
        written = f"{type_name}[{', '.join(map(str, shape))}]"
        if spec.is_sequence:
            written = f"sequence of {written}"
        estimates.append((spec.name, written, count * item))
    return estimates


def _tie_batch_dims(model: onnx.ModelProto, specs: list[InputSpec], dims: dict[str, int]) -> None:
    """Give ReverseSequence's data a batch size equal to its lengths' count, where one is static.

    Otherwise a model declaring ``lens: int64[4]`` and ``x: float[T, B, F]`` would be fed B=3
    and rejected by its own runtime, which says nothing about the model.
    """
    shapes = {spec.name: spec.shape for spec in specs}
    for node in model.graph.node:
        if node.op_type != "ReverseSequence" or len(node.input) < 2:
            continue
        data, lens = shapes.get(node.input[0]), shapes.get(node.input[1])
        if not data or not lens or len(lens) != 1:
            continue
        attrs = {a.name: a.i for a in node.attribute}
        batch_axis = attrs.get("batch_axis", 1)
        if batch_axis >= len(data):
            continue
        batch, count = data[batch_axis], lens[0]
        if isinstance(count, int) and isinstance(batch, str):
            dims.setdefault(batch, count)
        elif isinstance(batch, int) and isinstance(count, str):
            dims.setdefault(count, batch)
        elif isinstance(batch, str) and isinstance(count, str) and batch in dims:
            dims.setdefault(count, dims[batch])


@dataclasses.dataclass(frozen=True)
class _Bound:
    """An integer input that indexes another input: ``kind`` says how."""

    kind: str  # "lengths" (ReverseSequence), "position" (SequenceAt/Insert), "index" (Gather)
    target: str
    axis: int = 0


def _index_bounds(model: onnx.ModelProto) -> dict[str, _Bound]:
    inputs = {value.name for value in model.graph.input}
    bounds: dict[str, _Bound] = {}
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx") or len(node.input) < 2:
            continue
        data, index = node.input[0], node.input[1]
        if index not in inputs or data not in inputs:
            continue
        attrs = {a.name: a for a in node.attribute}
        if node.op_type == "ReverseSequence":
            axis = attrs["time_axis"].i if "time_axis" in attrs else 0
            bounds[index] = _Bound("lengths", data, axis)
        elif node.op_type in ("SequenceAt", "SequenceErase"):
            bounds[index] = _Bound("position", data)
        elif node.op_type == "SequenceInsert" and len(node.input) > 2 and node.input[2] in inputs:
            bounds[node.input[2]] = _Bound("insert", data)
        elif node.op_type in ("Gather", "GatherElements"):
            axis = attrs["axis"].i if "axis" in attrs else 0
            bounds[index] = _Bound("index", data, axis)
    return bounds


def _tensor(
    rng: np.random.Generator,
    spec: InputSpec,
    shape: tuple[int, ...],
    bound: _Bound | None,
    feeds: Mapping[str, Any],
) -> np.ndarray:
    if bound is not None and bound.target in feeds:
        target = feeds[bound.target]
        if bound.kind in ("position", "insert"):
            size = len(target) + (1 if bound.kind == "insert" else 0)
            low, high = (-size, size - 1) if size else (0, 0)
            return np.asarray(rng.integers(low, high, endpoint=True, size=shape)).astype(
                onnx.helper.tensor_dtype_to_np_dtype(spec.dtype)
            )
        target_shape = np.shape(target)
        if bound.axis < len(target_shape):
            limit = target_shape[bound.axis]
            if bound.kind == "lengths":
                return rng.integers(0, limit, endpoint=True, size=shape).astype(np.int64)
            if limit > 0:
                return rng.integers(0, limit, size=shape).astype(
                    onnx.helper.tensor_dtype_to_np_dtype(spec.dtype)
                )
    return random_tensor(rng, spec.dtype, shape)


def random_tensor(rng: np.random.Generator, dtype: int, shape: tuple[int, ...]) -> np.ndarray:
    """Values of ``dtype``: normal floats, small ints, random bools and words."""
    if dtype == onnx.TensorProto.STRING:
        return np.asarray(rng.choice(_WORDS, size=shape), dtype=object)
    np_dtype = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    if dtype == onnx.TensorProto.BOOL:
        return np.asarray(rng.integers(0, 2, size=shape).astype(bool))
    if np.issubdtype(np_dtype, np.integer):
        low = 0 if np.issubdtype(np_dtype, np.unsignedinteger) else -10
        return np.asarray(rng.integers(low, 10, endpoint=True, size=shape).astype(np_dtype))
    if np.issubdtype(np_dtype, np.complexfloating):
        real, imag = rng.standard_normal(shape), rng.standard_normal(shape)
        return np.asarray((real + 1j * imag).astype(np_dtype))
    return np.asarray(rng.standard_normal(shape).astype(np_dtype))


# ---------------------------------------------------------------- files


def load_inputs(path: str | os.PathLike[str], model: onnx.ModelProto) -> list[dict[str, Any]]:
    """Feeds from an ``.npz`` file (one run) or an ONNX test-data directory (one run per set).

    A test-data directory is either one ``test_data_set_N`` folder or a folder holding several;
    each holds ``input_K.pb`` files (TensorProto or SequenceProto), matched to inputs by the
    proto's name or else by position.
    """
    path = Path(path)
    specs = input_specs(model)
    if not path.exists():
        raise InputError(f"--inputs {path}: no such file or directory")
    if path.is_file():
        return [_load_npz(path, specs)]
    if not path.is_dir():
        raise InputError(f"--inputs {path}: not a regular file or a folder")
    sets = sorted(p for p in path.iterdir() if p.is_dir() and p.name.startswith("test_data_set"))
    sets = sets or [path]
    runs = [_load_test_data_set(folder, specs) for folder in sets]
    if not runs:
        raise InputError(f"--inputs {path}: no test_data_set_* folders or input_*.pb files")
    return runs


def _load_npz(path: Path, specs: list[InputSpec]) -> dict[str, Any]:
    try:
        archive = np.load(path, allow_pickle=False)
    except Exception as e:
        raise InputError(f"--inputs {path}: not a readable .npz file ({first_line(e)})") from e
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise InputError(f"--inputs {path}: a single array, not an .npz archive of named ones")

    def read(key: str) -> np.ndarray:
        try:
            return archive[key]
        except Exception as e:  # object arrays (allow_pickle=False), corrupt members
            raise InputError(f"--inputs {path}: cannot read '{key}' ({first_line(e)})") from e

    feeds: dict[str, Any] = {}
    with archive:
        for spec in specs:
            if spec.is_sequence:
                # Sequences are stored as NAME/0, NAME/1, ... (a missing NAME/0 is an empty one).
                elements = []
                while f"{spec.name}/{len(elements)}" in archive:
                    elements.append(read(f"{spec.name}/{len(elements)}"))
                feeds[spec.name] = elements
            elif spec.name in archive:
                feeds[spec.name] = read(spec.name)
            else:
                raise InputError(f"--inputs {path}: no array named '{spec.name}'")
    return feeds


def _load_test_data_set(folder: Path, specs: list[InputSpec]) -> dict[str, Any]:
    named = list(folder.glob("input_*.pb"))
    for file in named:
        if not re.fullmatch(r"input_\d+\.pb", file.name):
            raise InputError(f"--inputs {file}: expected names input_0.pb, input_1.pb, ...")
        if not file.is_file():  # a folder, or a FIFO that would block the read forever
            raise InputError(f"--inputs {file}: not a regular file")
    files = sorted(named, key=lambda p: int(p.stem.split("_")[1]))
    if not files:
        raise InputError(f"--inputs {folder}: no input_*.pb files")
    by_name = {spec.name: spec for spec in specs}
    feeds: dict[str, Any] = {}
    for position, file in enumerate(files):
        if position >= len(specs):
            raise InputError(f"--inputs {file}: the model has only {len(specs)} inputs")
        data = file.read_bytes()
        spec = specs[position]
        value, name = _parse_value(data, spec.is_sequence, file)
        if name and name in by_name and name != spec.name:
            spec = by_name[name]  # named for another input: trust the name
            value, name = _parse_value(data, spec.is_sequence, file)
        feeds[spec.name] = value
    missing = set(by_name) - set(feeds)
    if missing:
        raise InputError(f"--inputs {folder}: no value for {', '.join(sorted(missing))}")
    return feeds


def _parse_value(data: bytes, is_sequence: bool, file: Path) -> tuple[Any, str]:
    try:
        if is_sequence:
            sequence = onnx.SequenceProto.FromString(data)
            return [numpy_helper.to_array(t) for t in sequence.tensor_values], sequence.name
        tensor = onnx.TensorProto.FromString(data)
        return numpy_helper.to_array(tensor), tensor.name
    except Exception as e:
        kind = "SequenceProto" if is_sequence else "TensorProto"
        raise InputError(f"--inputs {file}: not a readable {kind}") from e


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
