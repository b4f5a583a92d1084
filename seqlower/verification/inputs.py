"""Inputs for checking a model: what the model takes (:func:`input_specs`), generated from its
declared input types, and the user's inputs validated against it. Reading and writing input
files is :mod:`seqlower.verification.input_files`'s.

Generated inputs follow the declared types: every dtype, sequences as lists of tensors whose
symbolic dimensions are drawn per element (real sequences hold images or sentences of different
sizes), and integers that index something drawn inside the valid range, so that a failure is
the model's and not the generator's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from seqlower.errors import SeqlowerError
from seqlower.verification.constraints import Analysis, Constraint, SeqLen, Slot, analyze

__all__ = [
    "InputError",
    "InputSpec",
    "estimate_input_bytes",
    "estimate_output_bytes",
    "generate_inputs",
    "input_specs",
    "validate_inputs",
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
        if type_.HasField("optional_type"):  # fed a value (the check does not feed None)
            type_ = type_.optional_type.elem_type
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
    analysis: Analysis | None = None,
) -> dict[str, Any]:
    """Random feeds for every input of ``model``.

    ``dims`` sizes symbolic dimensions by name, ``input_shapes`` fixes whole shapes per input,
    ``seq_len`` sets the length of every sequence input (0 makes them empty). Shapes are drawn
    first, dimensions of one name (or tied by the graph, :mod:`.constraints`) alike;
    then values, integers that index something inside the range of what they index.
    ``analysis`` is :func:`.constraints.analyze`'s result, when the caller has it.
    """
    dims = dict(dims or {})
    input_shapes = dict(input_shapes or {})
    specs = input_specs(model)
    unknown = set(input_shapes) - {s.name for s in specs}
    if unknown:
        raise InputError(f"--input-shape names no input of the model: {', '.join(sorted(unknown))}")
    if analysis is None:
        analysis = analyze(model)
    length = DEFAULT_SEQ_LEN if seq_len is None else seq_len
    shapes = _draw_shapes(rng, specs, analysis, dims, input_shapes, length)
    feeds: dict[str, Any] = {}
    for spec in specs:
        rules = analysis.constraints.get(spec.name, [])
        if spec.is_sequence:
            feeds[spec.name] = [
                _tensor(rng, spec, shape, rules, shapes, i)
                for i, shape in enumerate(shapes[spec.name])
            ]
        else:
            feeds[spec.name] = _tensor(rng, spec, shapes[spec.name], rules, shapes, None)
    return feeds


def _draw_shapes(
    rng: np.random.Generator,
    specs: list[InputSpec],
    analysis: Analysis,
    dims: Mapping[str, int],
    input_shapes: Mapping[str, tuple[int, ...]],
    length: int,
) -> dict[str, Any]:
    """Each input's shape (a list of shapes for a sequence: one per element).

    Dimensions are grouped (union-find) by symbolic name and by the graph's ties; a group takes
    a declared static size, else a ``--dim``/``--input-shape`` size, else a drawn one: 3 when a
    tensor input has it, else one size per element index, shared by every sequence (the i-th
    elements mapped together by one SequenceMap agree; elements of one sequence differ).
    """
    by_name = {spec.name: spec for spec in specs}
    groups = _tied_dims(specs, by_name, analysis, input_shapes)
    sizes: dict[Any, int | list[int]] = {}
    for root, members in groups.members().items():
        slots = [m for m in members if isinstance(m, Slot)]
        names = [m[1] for m in members if isinstance(m, tuple)]
        per_element = not any(slot in analysis.uniform for slot in slots)
        exact = [analysis.exact_sizes[s] for s in slots if s in analysis.exact_sizes]
        size: int | list[int] = _group_size(
            rng, slots, names, by_name, dims, input_shapes, length if per_element else 0, exact
        )
        least = max((analysis.min_sizes.get(s, 0) for s in slots), default=0)
        if least:  # e.g. at least the longest constant length along a time axis
            size = [max(v, least) for v in size] if isinstance(size, list) else max(size, least)
        sizes[root] = size

    def shape_of(spec: InputSpec, element: int | None) -> tuple[int, ...]:
        fixed = input_shapes.get(spec.name)
        if fixed is not None:
            return tuple(fixed)
        if spec.shape is None:
            return (DEFAULT_DIM,)
        shape = []
        for axis, declared in enumerate(spec.shape):
            if isinstance(declared, int):  # even if a tie says otherwise: the model says so
                shape.append(declared)
                continue
            size = sizes[groups.find(Slot(spec.name, axis))]
            shape.append(size[element or 0] if isinstance(size, list) else size)
        return tuple(shape)

    return {
        spec.name: [shape_of(spec, i) for i in range(length)]
        if spec.is_sequence
        else shape_of(spec, None)
        for spec in specs
    }


class _UnionFind:
    """Groups of keys (union-find with path halving), in the order keys were first seen."""

    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}

    def find(self, key: Any) -> Any:
        parent = self.parent
        parent.setdefault(key, key)
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    def union(self, a: Any, b: Any) -> None:
        self.parent[self.find(a)] = self.find(b)

    def members(self) -> dict[Any, list[Any]]:
        groups: dict[Any, list[Any]] = {}
        for key in list(self.parent):
            groups.setdefault(self.find(key), []).append(key)
        return groups


def _tied_dims(
    specs: list[InputSpec],
    by_name: Mapping[str, InputSpec],
    analysis: Analysis,
    input_shapes: Mapping[str, tuple[int, ...]],
) -> _UnionFind:
    """The inputs' axes grouped by symbolic name and by the graph's ties; an ``--input-shape``
    of the wrong rank refused."""
    groups = _UnionFind()
    for spec in specs:
        fixed = input_shapes.get(spec.name)
        if fixed is not None and spec.shape is not None and len(fixed) != len(spec.shape):
            raise InputError(
                f"--input-shape {spec.name}: rank {len(fixed)}, but the input has rank "
                f"{len(spec.shape)}"
            )
        for axis, dim in enumerate(spec.shape or ()):
            groups.find(Slot(spec.name, axis))
            if isinstance(dim, str):
                groups.union(Slot(spec.name, axis), ("name", dim))
    for a, b in analysis.ties:
        if _has_slot(by_name, a) and _has_slot(by_name, b):
            groups.union(a, b)
    return groups


def _group_size(
    rng: np.random.Generator,
    slots: list[Slot],
    names: list[str],
    specs: Mapping[str, InputSpec],
    dims: Mapping[str, int],
    input_shapes: Mapping[str, tuple[int, ...]],
    length: int,
    exact: list[int],
) -> int | list[int]:
    """One size for a group of equal dimensions (a list: one per element index, unless
    ``length`` is 0: the group is one size in every element)."""
    for slot in slots:
        declared = (specs[slot.input].shape or ())[slot.axis]
        if isinstance(declared, int):
            return declared
    for slot in slots:
        fixed = input_shapes.get(slot.input)
        if fixed is not None and slot.axis < len(fixed):
            return fixed[slot.axis]
    for name in names:
        if name in dims:
            return dims[name]
    if exact:  # a constant requires it (the count of constant lengths)
        return exact[0]
    if length and slots and all(specs[s.input].is_sequence for s in slots):
        return [int(rng.integers(1, DEFAULT_DIM + 3)) for _ in range(length)]
    return DEFAULT_DIM


def _has_slot(specs: Mapping[str, InputSpec], slot: Slot) -> bool:
    spec = specs.get(slot.input)
    return spec is not None and spec.shape is not None and 0 <= slot.axis < len(spec.shape)


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


def estimate_output_bytes(
    model: onnx.ModelProto,
    *,
    dims: Mapping[str, int] | None = None,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    seq_len: int | None = None,
) -> list[tuple[str, str, int]]:
    """(output, its type as written, bytes) for what one run of ``model`` returns on the feeds
    :func:`generate_inputs` draws, from the declared output shapes: a dimension named like an
    input's takes the size drawn for it (``dims``, ``input_shapes``), any other unknown one
    :data:`DEFAULT_DIM`. A huge declared output is known before anything runs."""
    sizes = {name: size for name, size in (dims or {}).items()}
    for spec in input_specs(model):
        fixed = (input_shapes or {}).get(spec.name)
        if fixed is not None and spec.shape is not None and len(spec.shape) == len(fixed):
            for dim, size in zip(spec.shape, fixed, strict=True):
                if isinstance(dim, str):
                    sizes.setdefault(dim, size)
    estimates = []
    for value in model.graph.output:
        type_ = value.type
        if type_.HasField("optional_type"):
            type_ = type_.optional_type.elem_type
        is_sequence = type_.HasField("sequence_type")
        if is_sequence:
            type_ = type_.sequence_type.elem_type
        if not type_.HasField("tensor_type") or not type_.tensor_type.HasField("shape"):
            continue  # no shape declared: nothing to go by
        tensor = type_.tensor_type
        shape = [
            d.dim_value if d.HasField("dim_value") else sizes.get(d.dim_param, DEFAULT_DIM)
            for d in tensor.shape.dim
        ]
        if tensor.elem_type == onnx.TensorProto.STRING:
            item = STRING_BYTES
        elif tensor.elem_type == onnx.TensorProto.UNDEFINED:
            continue
        else:
            item = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)).itemsize
        count = math.prod(shape) * (
            (DEFAULT_SEQ_LEN if seq_len is None else seq_len) if is_sequence else 1
        )
        type_name = onnx.TensorProto.DataType.Name(tensor.elem_type).lower()
        written = f"{type_name}[{', '.join(map(str, shape))}]"
        estimates.append((value.name, written, count * item))
    return estimates


_SMALL = 3  # the upper end for counts with no dimension to bound them


def _tensor(
    rng: np.random.Generator,
    spec: InputSpec,
    shape: tuple[int, ...],
    rules: list[Constraint],
    shapes: Mapping[str, Any],
    element: int | None,
) -> np.ndarray:
    """Random values of the spec's type; inside every constraint's range when it has some."""
    np_dtype = onnx.helper.tensor_dtype_to_np_dtype(spec.dtype)
    if not rules or spec.dtype in (onnx.TensorProto.STRING, onnx.TensorProto.BOOL):
        return random_tensor(rng, spec.dtype, shape)
    if np.issubdtype(np_dtype, np.complexfloating):
        return random_tensor(rng, spec.dtype, shape)
    split = next((r for r in rules if r.kind == "split"), None)
    if split is not None and len(shape) == 1:
        total = _limit(split.limit, shapes, element)
        if isinstance(total, int):
            cuts = np.sort(rng.integers(0, total, endpoint=True, size=max(shape[0] - 1, 0)))
            sizes = np.diff(np.concatenate([[0], cuts, [total]])) if shape[0] else cuts
            return np.asarray(sizes).astype(np_dtype)
    last = shape[-1] if shape else 1
    signed = not np.issubdtype(np_dtype, np.unsignedinteger)
    low = np.full(last, -10 if signed else 0, np.int64)
    high = np.full(last, 10, np.int64)
    for rule in rules:
        if rule.kind == "split":
            continue
        limit = _limit(rule.limit, shapes, element)
        # A list: one limit per position of the last axis (GatherND, Slice).
        limits = (limit + [None] * last)[:last] if isinstance(limit, list) else [limit] * last
        for j, n in enumerate(limits):
            lo, hi = _range(rule.kind, n)
            low[j], high[j] = max(low[j], lo), min(high[j], hi)
    if not signed:
        low = np.maximum(low, 0)
    high = np.maximum(high, low)  # unsatisfiable: the reference will say so, naming the node
    if not shape:
        return np.asarray(rng.integers(low[0], high[0], endpoint=True)).astype(np_dtype)
    return np.asarray(rng.integers(low, high, endpoint=True, size=shape)).astype(np_dtype)


_UNBOUNDED = (-(2**62), 2**62)


def _range(kind: str, n: int | None) -> tuple[int, int]:
    """The valid values for a limit ``n`` (None: no dimension known)."""
    if kind == "positive":
        return 1, _SMALL
    if kind == "trip":  # few iterations, zero among them
        return 0, 2
    if kind == "count" and n is None:
        return 0, _SMALL
    if n is None:  # what no dimension of size 1 or more can reject
        return {
            "lengths": (0, 1),
            "index": (0, 0),
            "position": (0, 0),
            "insert": (0, 0),
            "count": (0, 1),
            "chunk": (1, 1),
            "seqlens": (1, 1),
        }.get(kind, _UNBOUNDED)
    return {
        "lengths": (0, n),
        "index": (0, n - 1),
        "position": (-n, n - 1),
        "insert": (-n, n),
        "count": (0, n),
        "span": (-n, n),
        "chunk": (1, max(n, 1)),
        "seqlens": (min(1, n), n),  # RNN/GRU/LSTM: real lengths are 1..T (0 only when T is)
    }.get(kind, _UNBOUNDED)


def _limit(
    limit: Slot | SeqLen | tuple[Slot | None, ...] | None,
    shapes: Mapping[str, Any],
    element: int | None,
) -> Any:
    """The size a constraint's limit names (int, or a list per position, or None): for this
    element of a sequence (paired by index with the sequence the limit reads), or for a whole
    tensor (the smallest over the elements it is used with)."""
    if limit is None:
        return None
    if isinstance(limit, tuple):
        return [_limit(slot, shapes, element) for slot in limit]
    shape = shapes.get(limit.input)
    if shape is None:
        return None
    if isinstance(limit, SeqLen):
        return len(shape) if isinstance(shape, list) else None
    if isinstance(shape, list):  # a sequence: its elements' shapes
        picked = [shape[element]] if element is not None and element < len(shape) else shape
        sizes = [s[limit.axis] for s in picked if limit.axis < len(s)]
        return min(sizes) if sizes else None
    return shape[limit.axis] if limit.axis < len(shape) else None


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


# ---------------------------------------------------------------- validation

#: Values a node accepts (user inputs are checked against these, not the narrower draws).
_VALID = {
    "lengths": lambda n: (0, n),
    "index": lambda n: (-n, n - 1),
    "position": lambda n: (-n, n - 1),
    "insert": lambda n: (-n, n),
    "count": lambda n: (0, n),
    "seqlens": lambda n: (0, n),
}
_ROLES = {
    "lengths": "sequence lengths",
    "seqlens": "sequence lengths",
    "index": "indices",
    "position": "a sequence position",
    "insert": "an insert position",
    "count": "a count",
    "split": "split sizes",
}


def validate_inputs(
    model: onnx.ModelProto,
    feeds: Mapping[str, Any],
    analysis: Analysis | None = None,
    *,
    where: str = "inputs",
) -> None:
    """Raise InputError, naming the input and the problem, when user inputs cannot be the
    model's: a missing or unknown name, a tensor for a sequence (or the reverse), a dtype, rank
    or static dimension other than declared, or an index-like value out of range for the node
    that reads it unchanged (:mod:`seqlower.verification.constraints`)."""
    specs = input_specs(model)
    by_name = {spec.name: spec for spec in specs}
    prefix = f"--inputs {where}"
    unknown = sorted(set(feeds) - set(by_name))
    if unknown:
        raise InputError(
            f"{prefix}: {', '.join(repr(n) for n in unknown)} names no input of the model "
            f"(inputs: {', '.join(by_name)})"
        )
    missing = [name for name in by_name if name not in feeds]
    if missing:
        raise InputError(f"{prefix}: no value for input {', '.join(repr(n) for n in missing)}")
    shapes: dict[str, Any] = {}
    for spec in specs:
        value = feeds[spec.name]
        if spec.is_sequence != isinstance(value, (list, tuple)):
            kind = "a sequence" if spec.is_sequence else "a tensor"
            raise InputError(f"{prefix}: input '{spec.name}' must be {kind}")
        elements = [np.asarray(v) for v in value] if spec.is_sequence else [np.asarray(value)]
        for k, array in enumerate(elements):
            what = f"input '{spec.name}'" + (f" element {k}" if spec.is_sequence else "")
            _check_array(prefix, what, spec, array)
        shapes[spec.name] = [a.shape for a in elements] if spec.is_sequence else elements[0].shape
    analysis = analyze(model) if analysis is None else analysis
    for spec in specs:
        for rule in analysis.constraints.get(spec.name, []):
            if not rule.exact or rule.kind not in (*_VALID, "split"):
                continue
            value = feeds[spec.name]
            elements = list(value) if spec.is_sequence else [value]
            for k, element in enumerate(elements):
                _check_range(prefix, spec, rule, np.asarray(element), shapes, k, len(elements))


def _check_array(prefix: str, what: str, spec: InputSpec, array: np.ndarray) -> None:
    declared = onnx.TensorProto.DataType.Name(spec.dtype).lower()
    if spec.dtype == onnx.TensorProto.STRING:
        if array.dtype.kind not in "OUS":
            raise InputError(f"{prefix}: {what} has dtype {array.dtype}, the model takes string")
    else:
        expected = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(spec.dtype))
        if array.dtype != expected:
            raise InputError(
                f"{prefix}: {what} has dtype {array.dtype}, the model takes {declared}"
            )
    if spec.shape is None:
        return
    written = f"{declared}[{', '.join('?' if d is None else str(d) for d in spec.shape)}]"
    if array.ndim != len(spec.shape):
        raise InputError(
            f"{prefix}: {what} has rank {array.ndim} (shape {list(array.shape)}), the model "
            f"takes {written}"
        )
    for axis, (dim, size) in enumerate(zip(spec.shape, array.shape, strict=True)):
        if isinstance(dim, int) and dim != size:
            raise InputError(
                f"{prefix}: {what} has shape {list(array.shape)}, the model takes {written} "
                f"(axis {axis})"
            )


def _check_range(
    prefix: str,
    spec: InputSpec,
    rule: Constraint,
    values: np.ndarray,
    shapes: Mapping[str, Any],
    element: int,
    count: int,
) -> None:
    what = f"input '{spec.name}'" + (f" element {element}" if spec.is_sequence else "")
    limit = _limit(rule.limit, shapes, element if spec.is_sequence else None)
    if rule.kind == "split":
        if isinstance(limit, int) and values.ndim == 1 and int(values.sum()) != limit:
            raise InputError(
                f"{prefix}: {what} sums to {int(values.sum())}, but {rule.node} splits an axis "
                f"of {limit}"
            )
        return
    if values.size == 0 or values.dtype.kind not in "iuf":
        return
    last = values.shape[-1] if values.ndim else 1
    limits = (limit + [None] * last)[:last] if isinstance(limit, list) else [limit] * last
    flat = values.reshape(-1, last) if values.ndim else values.reshape(1, 1)
    for j, n in enumerate(limits):
        if n is None:
            continue
        low, high = _VALID[rule.kind](n)
        column = flat[:, j]
        bad = np.flatnonzero((column < low) | (column > high))
        if bad.size:
            value = column[bad[0]]
            shown = int(value) if float(value).is_integer() else float(value)
            raise InputError(
                f"{prefix}: {what} holds {shown}, out of range [{low}, {high}] for "
                f"{rule.node} ({_ROLES[rule.kind]}; the size is {n})"
            )
