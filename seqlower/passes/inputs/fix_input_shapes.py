"""Fix input shapes on request (``--overwrite-input-shape NAME=D0,D1,...``), then fold.

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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx
import onnx_ir as ir

from seqlower.errors import BadOptionError
from seqlower.io import strict_inference_problem
from seqlower.passes._base import model_names
from seqlower.passes._fold import fold_model
from seqlower.passes._types import weightless_proto

__all__ = ["FLAG", "FixInputShapes", "resolve_input_shapes"]

FLAG = "--overwrite-input-shape"

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
