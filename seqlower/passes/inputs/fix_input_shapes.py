"""Fix input shapes (``--overwrite-input-shape NAME=D0,D1,...``) or values
(``--constant-input NAME=VALUE``) on request, then fold.

Converters compile for one shape (TFLite, TVM) or unroll only loops whose count is a constant
(onnx2tf, onnx2torch, tinygrad), and every tf2onnx ``Loop`` counts an input's time axis. Once
the inputs' shapes are static, ``Shape`` and the arithmetic on it are constants: onnxscript's
folder folds them (``_fold.fold_model``, the whole model, as onnxsim's
``--overwrite-input-shape`` does), so loop counts become constants the later passes unroll.
Dimensions sharing a symbolic name with a fixed one take its size in every input. A shape
that contradicts the model (rank, a declared size, a name fixed twice differently, or one ONNX's
strict shape inference rejects where the model's own shapes pass) is a
:class:`~seqlower.errors.BadOptionError` naming the input. This changes the interface's
declared shapes only: the check runs the original at the same shapes.

Some exports choose what they compute by the value of an input: an audio model's int64
``mode`` picks, through ``If``s, a 1-D or a 2-D convolution, so one branch's output has rank 3
and the other's rank 4. OpenVINO refuses a ``Conv`` reading a value of unknown rank and tract
one ``If`` whose branches disagree, whatever the input holds, and no rewrite can keep both
branches for them. A caller who always feeds one value knows the branch: every reader of the
input reads that value as a ``Constant`` instead, and onnxscript's folder (the whole model, as
``--overwrite-input-shape`` does) folds what it decides: the comparisons, the ``If``s (their
taken branch inlined), the ``Shape``s of what they return, everything constant after.

The input stays in the interface by default, read by nothing: the lowered model accepts it and
computes what the original computes at VALUE, whatever it is fed (the check feeds VALUE). With
``drop`` it is removed (the check compares with the original given VALUE as a constant). A
value the input cannot hold (another type, a fraction for an integer, out of range, another
shape), an unknown name or one not a tensor is a BadOptionError naming the input and the flag.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from seqlower.errors import BadOptionError
from seqlower.io import strict_inference_problem
from seqlower.passes._base import model_names, rewire
from seqlower.passes._fold import fold_model
from seqlower.passes._ir import is_onnx, model_nodes
from seqlower.passes._types import weightless_proto

__all__ = [
    "CONSTANT_FLAG",
    "DROP_FLAG",
    "FLAG",
    "FixConstantInputs",
    "FixInputShapes",
    "constant_input_hints",
    "resolve_constant_inputs",
    "resolve_input_shapes",
    "spelled_constant",
]

FLAG = "--overwrite-input-shape"
CONSTANT_FLAG = "--constant-input"
DROP_FLAG = "--drop-constant-inputs"

#: Initializers of at most this many elements keep their data for the strict inference (shape
#: data propagation reads Reshape targets and Slice bounds from them).
_SMALL = 64


def _spelled(name: str, shape: Sequence[int]) -> str:
    return f"{FLAG} {name}={','.join(map(str, shape))}"


def resolve_input_shapes(
    model: ir.Model, shapes: Mapping[str, Sequence[int]]
) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    """The named inputs' shapes and the sizes they give symbolic names (which other inputs
    sharing a name take too); BadOptionError naming the input for a shape that contradicts the
    model."""
    inputs = {value.name: value for value in model.graph.inputs}
    initializers = set(model.graph.initializers)
    sizes: dict[str, tuple[int, str]] = {}  # symbolic name -> (size, the input fixing it)
    given: dict[str, tuple[int, ...]] = {}
    for name, dims in shapes.items():
        dims = tuple(int(d) for d in dims)
        flag = _spelled(name, dims)
        value = inputs.get(name)
        if value is None or name in initializers:
            known = ", ".join(n for n in inputs if n and n not in initializers) or "none"
            raise BadOptionError(f"{flag}: the model has no input of that name (inputs: {known})")
        if value.type is not None and not isinstance(value.type, ir.TensorType):
            raise BadOptionError(f"{flag}: that input is not a tensor ({value.type})")
        if any(d < 0 for d in dims):
            raise BadOptionError(f"{flag}: sizes must be at least 0")
        declared = value.shape
        if declared is not None and len(declared) != len(dims):
            raise BadOptionError(
                f"{flag}: {len(dims)} dimensions given, the input has {len(declared)}"
            )
        for axis, size in enumerate(dims):
            dim = None if declared is None else declared[axis]
            if isinstance(dim, int) and dim != size:
                raise BadOptionError(f"{flag}: axis {axis} is declared {dim}, not {size}")
            symbol = dim.value if isinstance(dim, ir.SymbolicDim) else None
            if symbol is None:
                continue
            earlier = sizes.setdefault(symbol, (size, name))
            if earlier[0] != size:
                raise BadOptionError(
                    f"{flag}: axis {axis} is '{symbol}', which {earlier[1]} fixes to {earlier[0]}"
                )
        given[name] = dims
    by_name = {symbol: size for symbol, (size, _) in sizes.items()}
    return given, by_name


class FixInputShapes(ir.passes.InPlacePass):
    """Give the named inputs static shapes and fold what they make constant (module
    docstring)."""

    def __init__(self, shapes: Mapping[str, Sequence[int]]) -> None:
        super().__init__()
        self.shapes = {name: tuple(dims) for name, dims in shapes.items()}
        self.rewritten = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        fixed, sizes = resolve_input_shapes(model, self.shapes)
        new_shapes: list[tuple[ir.Value, ir.Shape]] = []
        for value in model.graph.inputs:
            old = value.shape
            if value.name in fixed:
                new = ir.Shape(fixed[value.name])
            elif old is not None:
                new = ir.Shape([_size(d, sizes) for d in old])
            else:
                continue
            if old is None or list(old) != list(new):
                new_shapes.append((value, new))
        if new_shapes:
            before = weightless_proto(model, _SMALL)
            for value, new in new_shapes:
                value.shape = new
            self._refuse_failing(model, before)
        folded = fold_model(model, model_names(model))
        self.rewritten = len(new_shapes) + folded
        return ir.passes.PassResult(model, modified=bool(self.rewritten))

    def _refuse_failing(self, model: ir.Model, before: onnx.ModelProto) -> None:
        """BadOptionError when strict shape inference (data propagated) rejects the model at
        the fixed shapes but not at its own."""
        problem = strict_inference_problem(weightless_proto(model, _SMALL), 300)
        if problem and not strict_inference_problem(before, 300):
            flags = "; ".join(_spelled(n, s) for n, s in self.shapes.items())
            raise BadOptionError(f"{flags}: the model cannot take these shapes: {problem}")


def _size(dim: int | ir.SymbolicDim, sizes: Mapping[str, int]) -> int | ir.SymbolicDim:
    if isinstance(dim, ir.SymbolicDim) and dim.value is not None:
        return sizes.get(dim.value, dim)
    return dim


def spelled_constant(name: str, value: Any) -> str:
    """``--constant-input NAME=VALUE`` as the user wrote it (or would, for an API value)."""
    return f"{CONSTANT_FLAG} {name}={value if isinstance(value, str) else _text(value)}"


def _text(value: Any) -> str:
    array = np.asarray(value)
    if array.ndim == 0:
        item = array.item()
        return str(item).lower() if isinstance(item, bool) else str(item)
    return json.dumps(array.tolist())


def resolve_constant_inputs(model: ir.Model, values: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Each named input's value as an array of its element type and declared shape;
    BadOptionError naming the input and the flag for a value that contradicts the model.

    A ``str`` is read as the command line reads VALUE (a number, ``true``/``false``, a
    comma-separated list or a JSON list), except for a string input, which it fills. One value
    fills an input declared ``[1]`` (any rank of ones or unknown sizes), as Paddle declares its
    scalars."""
    inputs = {value.name: value for value in model.graph.inputs}
    initializers = set(model.graph.initializers)
    resolved: dict[str, np.ndarray] = {}
    for name, given in values.items():
        flag = spelled_constant(name, given)
        value = inputs.get(name)
        if value is None or name in initializers:
            known = ", ".join(n for n in inputs if n and n not in initializers) or "none"
            raise BadOptionError(f"{flag}: the model has no input of that name (inputs: {known})")
        if not isinstance(value.type, ir.TensorType):
            raise BadOptionError(f"{flag}: that input is not a tensor ({value.type})")
        dtype = value.type.dtype
        array = _as_array(given, dtype, flag)
        resolved[name] = _shaped(array, value.shape, flag)
    return resolved


def _as_array(given: Any, dtype: ir.DataType, flag: str) -> np.ndarray:
    """``given`` as an array of ``dtype``, only when every element keeps its value."""
    if dtype == ir.DataType.STRING:
        array = np.asarray(given, dtype=object)
        if not all(isinstance(v, (str, bytes)) for v in array.reshape(-1)):
            raise BadOptionError(f"{flag}: the input holds strings")
        return array
    if isinstance(given, str):
        given = _read(given, flag)
    try:
        array = np.asarray(given)
    except (ValueError, OverflowError):  # ragged nested lists, integers past 64 bits
        raise BadOptionError(f"{flag}: not a value of one shape and number type") from None
    what = dtype.name.lower()
    kind = array.dtype.kind
    if kind == "O" and all(isinstance(v, int) for v in array.reshape(-1).tolist()):
        raise BadOptionError(f"{flag}: the input is {what}, and that is out of its range")
    if kind not in "biuf":
        raise BadOptionError(f"{flag}: the input is {what}, and that is not a number")
    if kind == "b" and dtype != ir.DataType.BOOL:
        raise BadOptionError(f"{flag}: the input is {what}, not bool")
    numbers = array.reshape(-1).tolist()
    try:
        target = dtype.numpy()
    except Exception:
        raise BadOptionError(f"{flag}: seqlower cannot make a {what} constant") from None
    if dtype == ir.DataType.BOOL:
        if any(v not in (0, 1) for v in numbers):
            raise BadOptionError(f"{flag}: the input is bool: give true, false, 1 or 0")
        return array.astype(np.bool_)
    if dtype.is_integer():
        info = np.iinfo(target)
        for v in numbers:
            if isinstance(v, float) and not v.is_integer():
                raise BadOptionError(f"{flag}: the input is {what}, and {v} is not an integer")
            if not info.min <= v <= info.max:
                raise BadOptionError(
                    f"{flag}: the input is {what}, which holds {info.min}..{info.max}, not {v}"
                )
        return np.array([int(v) for v in numbers], dtype=target).reshape(array.shape)
    if dtype.is_floating_point():
        with np.errstate(over="ignore"):  # said below, naming the value
            cast = array.astype(np.float64).astype(target)
        for v, c in zip(numbers, cast.reshape(-1).tolist(), strict=True):
            if math.isfinite(v) and not math.isfinite(float(c)):
                raise BadOptionError(f"{flag}: {v} is out of the range of {what}")
        return cast
    raise BadOptionError(f"{flag}: seqlower cannot make a {what} constant")


def _read(text: str, flag: str) -> Any:
    """VALUE as the command line gives it: JSON (``1``, ``2.5``, ``true``, ``[[1,2],[3,4]]``)
    or numbers separated by commas (a 1-D value)."""
    spelled_out = text.strip()
    if not spelled_out:
        raise BadOptionError(f"{flag}: no value given")
    try:
        return json.loads(spelled_out)
    except ValueError:
        pass
    if "," in spelled_out:
        return [_read(part, flag) for part in spelled_out.split(",")]
    try:
        return float(spelled_out)  # nan, inf
    except ValueError:
        raise BadOptionError(
            f"{flag}: cannot read '{text}' (a number, true/false, a list such as 1,2,3 or "
            "[[1,2],[3,4]])"
        ) from None


def _shaped(array: np.ndarray, declared: ir.Shape | None, flag: str) -> np.ndarray:
    """``array`` with the input's declared shape: its own shape where every declared size fits;
    one value reshaped to a declared rank of ones or unknown sizes."""
    if declared is None:
        return array
    dims = list(declared)
    if (
        array.size == 1
        and array.ndim != len(dims)
        and all(not isinstance(d, int) or d == 1 for d in dims)
    ):
        return array.reshape((1,) * len(dims))
    shown = (
        "[" + ",".join(str(d) if isinstance(d, int) else str(d.value or "?") for d in dims) + "]"
    )
    if array.ndim != len(dims):
        raise BadOptionError(
            f"{flag}: a value of shape {list(array.shape)}, the input is declared {shown}"
        )
    for axis, (size, dim) in enumerate(zip(array.shape, dims, strict=True)):
        if isinstance(dim, int) and dim != size:
            raise BadOptionError(f"{flag}: axis {axis} holds {size}, the input is declared {shown}")
    return array


class FixConstantInputs(ir.passes.InPlacePass):
    """Make the named inputs constants and fold what they decide (module docstring); with
    ``drop`` the inputs leave the interface, and with ``fold=False`` nothing is folded (the
    check's reference: the original as it is, given the values)."""

    def __init__(self, values: Mapping[str, Any], *, drop: bool = False, fold: bool = True) -> None:
        super().__init__()
        self.values = dict(values)
        self.drop = drop
        self.fold = fold
        self.rewritten = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        resolved = resolve_constant_inputs(model, self.values)
        if not resolved:
            return ir.passes.PassResult(model, modified=False)
        graph = model.graph
        names = model_names(model)
        constants: list[ir.Node] = []
        for value in list(graph.inputs):
            name = value.name or ""
            if name not in resolved:
                continue
            assert isinstance(value.type, ir.TensorType)
            tensor = ir.tensor(resolved[name], dtype=value.type.dtype)
            node = ir.node(
                "Constant",
                [],
                {"value": ir.AttrTensor("value", tensor)},
                name=names.fresh(f"{name}_constant"),
            )
            held = node.outputs[0]
            held.name = names.fresh(f"{name}_value")
            held.type, held.shape = value.type, ir.Shape(resolved[name].shape)
            held.const_value = tensor
            constants.append(node)
            output = value.is_graph_output()
            if self.drop:
                rewire(value, held)
            else:  # a kept input the graph returns stays itself
                for usage in list(value.uses()):
                    usage.node.replace_input_with(usage.idx, held)
            if self.drop:
                graph.inputs.remove(value)
                if output:  # the graph output keeps its name
                    value.name = None
                    held.name = name
        if len(graph) > 0:
            graph.insert_before(graph[0], constants)
        else:
            graph.extend(constants)
        self.rewritten = len(constants)
        if self.fold:
            self.rewritten += fold_model(model, names)
        return ir.passes.PassResult(model, modified=True)


#: Inputs of at most this many elements are named as deciding ``If``s: a mode, a flag, a
#: length, not a signal.
_SMALL_INPUT = 16


def constant_input_hints(model: ir.Model) -> list[str]:
    """For a target run that failed: each small input whose value (not its shape) decides
    ``If``s, with the flag that folds them, e.g. ``2 If (choose_conv, choose_head) choose by
    the value of input 'mode' ...``."""
    inputs = {
        id(value): value.name or ""
        for value in model.graph.inputs
        if value.name not in model.graph.initializers
        and isinstance(value.type, ir.TensorType)
        and value.shape is not None
        and value.shape.is_static()
        and math.prod(value.shape.numpy()) <= _SMALL_INPUT
    }
    deciding: dict[str, list[str]] = {}
    for node in model_nodes(model):
        if not is_onnx(node, "If") or not node.inputs or node.inputs[0] is None:
            continue
        for name in _read_values(node.inputs[0], inputs):
            deciding.setdefault(name, []).append(node.name or "unnamed")
    hints = []
    for name, ifs in deciding.items():
        shown = ", ".join(ifs[:3]) + (f" and {len(ifs) - 3} more" if len(ifs) > 3 else "")
        hints.append(
            f"{len(ifs)} If ({shown}) choose by the value of input '{name}': if it is always "
            f"fed one value, {CONSTANT_FLAG} {name}=VALUE folds them (docs/cli.md, Constant "
            "inputs)"
        )
    return hints


def _read_values(value: ir.Value, inputs: Mapping[int, str]) -> list[str]:
    """The names of ``inputs`` whose values (not only their shapes) ``value`` is computed from."""
    found: dict[str, None] = {}
    stack, seen = [value], {id(value)}
    while stack:
        current = stack.pop()
        if id(current) in inputs:
            found[inputs[id(current)]] = None
        producer = current.producer()
        if producer is None or (producer.op_type in ("Shape", "Size") and producer.domain == ""):
            continue
        for read in producer.inputs:
            if read is not None and id(read) not in seen:
                seen.add(id(read))
                stack.append(read)
    return list(found)
