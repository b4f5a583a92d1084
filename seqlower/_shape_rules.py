"""Per-op shape rules, written once, generic over what a dimension is to the prover asking.

Five provers reason about shapes: the declared-sizes step (static sizes, and sizes proven per
axis), the first-iteration proof (sizes and symbols, equal only to themselves), the dimension
prover (the outer axis a dimension is), ragged-maps-as-scans (the outer dimensions that
broadcast to one) and the check's input constraints (the graph-input axis a dimension is, tied
to the ones it must equal). What an op does to shapes is the same for all of them; only how the
dimensions of one axis combine differs. So each prover supplies an :class:`Algebra` (a size of
1, the size of dimensions that broadcast, of dimensions that must be equal, of a concatenated
axis), and the rules here, registered per op with :func:`register` as onnxscript's constant
folder registers its evaluators, do the rest: a new op is taught once. A rule gives None when
the op is not proven to succeed on such inputs (an algebra's None: its dimensions do not
combine). Which ops a prover takes stays its own (the first-iteration proof only those that
cannot fail on any value). The pure rules (:func:`broadcast`, :func:`matmul`, :func:`concat`,
...) take numbers, not nodes, so the check, which reads protos, calls them too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

import numpy as np
import onnx_ir as ir

from seqlower._graphs import constant_array, int_attr, ints_attr

__all__ = [
    "BROADCASTING",
    "ELEMENTWISE",
    "PARTIAL",
    "REDUCTIONS",
    "RULES",
    "SAME_SHAPE",
    "STATIC",
    "Algebra",
    "Partial",
    "aligned",
    "broadcast",
    "concat",
    "infer",
    "matmul",
    "one_size",
    "partial_rule",
    "reduced_axes",
    "reduced_dims",
    "reduction_axes",
    "register",
    "reshape",
    "slice_size",
    "squeeze",
    "transpose",
    "unsqueeze",
]

D = TypeVar("D")
#: A shape: one dimension per axis, each what the prover makes of one.
Shape = tuple[D, ...]

#: Ops whose inputs broadcast multidirectionally (numpy's rule) to their output's shape (PRelu's
#: slope broadcasts one way to X, a case of it).
BROADCASTING = frozenset(
    {
        "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "And", "Or",
        "Xor", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Where", "PRelu",
        "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
    }
)  # fmt: skip
#: Unary ops that act on each element alone, whatever the axes of their input.
ELEMENTWISE = frozenset(
    {
        "Identity", "Cast", "Abs", "Neg", "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt",
        "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Not", "Erf", "Softplus", "Softsign",
        "LeakyRelu", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Gelu", "Mish", "IsNaN",
        "IsInf", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh",
        "Atanh", "BitwiseNot", "ThresholdedRelu", "Shrink",
    }
)  # fmt: skip
#: Ops whose first output has the first input's shape (some act along an axis).
SAME_SHAPE = ELEMENTWISE | {
    "CastLike", "Clip", "Dropout", "Softmax", "LogSoftmax", "ReverseSequence", "Hardmax",
}  # fmt: skip


#: Reductions over constant axes; of floats, over an empty axis they give their identity.
REDUCTIONS = frozenset(
    {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
     "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"}
)  # fmt: skip


class Algebra(Protocol[D]):
    """How one prover's dimensions combine; None: they are not proven to."""

    @property
    def one(self) -> D:
        """The dimension of size 1 (what ``Unsqueeze`` inserts, a promoted vector's axis)."""
        ...

    def broadcast(self, dims: list[D]) -> D | None:
        """The size of one axis's dimensions that broadcast (aligned, in input order)."""
        ...

    def equal(self, dims: list[D]) -> D | None:
        """The size of dimensions that must be equal (``MatMul``'s inner ones, a ``Concat``'s
        other axes)."""
        ...

    def sum(self, dims: list[D]) -> D | None:
        """The size of a ``Concat``'s joined axis."""
        ...

    def known(self, dim: D) -> int | None:
        """The number ``dim`` is when lowering, if one."""
        ...

    def size(self, number: int) -> D:
        """The dimension of a number."""
        ...


def one_size(dims: Iterable[D | None], one: D) -> D | None:
    """The size of dimensions that broadcast: every one not ``one`` the same (``one`` when all
    are), else None; None too where one is None (not known). Lazy: stops at the first."""
    found: D | None = None
    for dim in dims:
        if dim is None:
            return None
        if dim == one:
            continue
        if found is not None and dim != found:
            return None
        found = dim
    return one if found is None else found


class _Static:
    """Static sizes: the one proof is equality of numbers."""

    one = 1

    def broadcast(self, dims: list[int]) -> int | None:
        return one_size(dims, 1)

    def equal(self, dims: list[int]) -> int | None:
        return dims[0] if len(set(dims)) == 1 else None

    def sum(self, dims: list[int]) -> int | None:
        return sum(dims)

    def known(self, dim: int) -> int | None:
        return dim

    def size(self, number: int) -> int:
        return number


#: The algebra of static sizes.
STATIC: Algebra[int] = _Static()


def aligned(ranks: Sequence[int], axis: int) -> list[tuple[int, int]]:
    """``(input, its axis)`` for each input that has output axis ``axis`` of a broadcast of
    inputs of ``ranks``: aligned on the trailing axes, an input without the axis left out."""
    rank = max(ranks, default=0)
    return [(k, axis - rank + r) for k, r in enumerate(ranks) if axis - rank + r >= 0]


def broadcast(shapes: Sequence[Sequence[D]], dims: Algebra[D]) -> Shape[D] | None:
    """Multidirectional broadcasting: each output axis is the algebra's broadcast of the
    inputs' dimensions aligned with it (in input order), None as soon as one is."""
    ranks = [len(s) for s in shapes]
    out: list[D] = []
    for axis in range(max(ranks, default=0)):
        dim = dims.broadcast([shapes[k][a] for k, a in aligned(ranks, axis)])
        if dim is None:
            return None
        out.append(dim)
    return tuple(out)


def matmul(a: Sequence[D], b: Sequence[D], dims: Algebra[D]) -> Shape[D] | None:
    """numpy's ``matmul`` shape (ONNX's ``MatMul``): a vector operand promoted by a size-1
    axis and that axis dropped after, the batch axes broadcast, the inner sizes equal."""
    if not a or not b:
        return None
    left = (dims.one, *a) if len(a) == 1 else tuple(a)
    right = (*b, dims.one) if len(b) == 1 else tuple(b)
    batch = broadcast([left[:-2], right[:-2]], dims)
    if batch is None or dims.equal([left[-1], right[-2]]) is None:
        return None
    return (*batch, *(left[-2:-1] if len(a) > 1 else ()), *(right[-1:] if len(b) > 1 else ()))


def transpose(shape: Shape[D], perm: list[int] | None) -> Shape[D] | None:
    """``Transpose`` by ``perm`` (None: the axes reversed), a permutation of the axes."""
    if perm is None:
        return shape[::-1]
    return tuple(shape[p] for p in perm) if sorted(perm) == list(range(len(shape))) else None


def unsqueeze(shape: Shape[D], axes: list[int] | None, dims: Algebra[D]) -> Shape[D] | None:
    """``Unsqueeze`` by constant axes, each in range and once."""
    rank = len(shape) + len(axes or [])
    if not axes or any(not -rank <= a < rank for a in axes):
        return None
    inserted = {a % rank for a in axes}
    if len(inserted) != len(axes):
        return None
    rest = iter(shape)
    return tuple(dims.one if k in inserted else next(rest) for k in range(rank))


def squeeze(shape: Shape[D], axes: list[int] | None, dims: Algebra[D]) -> Shape[D] | None:
    """``Squeeze`` by constant axes of size 1 (none given: every axis of size 1, all sizes
    known)."""
    if axes is None or any(not -len(shape) <= a < len(shape) for a in axes):
        return None
    if not axes:  # every dimension of size 1: known only if each is a size
        known = [dims.known(d) for d in shape]
        if None in known:
            return None
        return tuple(d for d, n in zip(shape, known, strict=True) if n != 1)
    dropped = {a % len(shape) for a in axes}
    if any(dims.known(shape[a]) != 1 for a in dropped):
        return None
    return tuple(d for k, d in enumerate(shape) if k not in dropped)


def reshape(
    shape: Shape[D], target: Sequence[int], allow_zero: bool, dims: Algebra[D]
) -> Shape[D] | None:
    """A ``Reshape`` to a constant shape that holds as many elements: every size known, or
    one ``-1`` taking the rest, the sizes given dividing the known part of the input (Python's
    integers: a static size may be past int64's products)."""
    out: list[D] = []
    hole: int | None = None  # where the -1 is
    for k, size in enumerate(target):
        if size == 0 and not allow_zero:  # copies the input's dimension
            if k >= len(shape):
                return None
            out.append(shape[k])
        elif size < -1 or (size == -1 and hole is not None):
            return None
        else:
            hole = k if size == -1 else hole
            out.append(dims.size(size))
    known = [dims.known(d) for d in shape]
    if None in known and hole is None:
        return tuple(out) if tuple(out) == shape else None
    symbols = [d for d, n in zip(shape, known, strict=True) if n is None]
    total = math.prod(n for n in known if n is not None)
    given = [d for k, d in enumerate(out) if k != hole]
    divisor = math.prod(n for d in given if (n := dims.known(d)) is not None)
    for d in given:  # a symbol the target copies takes its part of the input
        if dims.known(d) is None:
            if d not in symbols:
                return None
            symbols.remove(d)
    if hole is None:  # as many elements (none: a 0 on both sides)
        return tuple(out) if not symbols and total == divisor else None
    if divisor == 0 or total % divisor:
        return None
    rest = dims.size(total // divisor)
    if symbols:
        if len(symbols) > 1 or total // divisor != 1:
            return None
        rest = symbols[0]
    return tuple(rest if k == hole else d for k, d in enumerate(out))


def concat(shapes: Sequence[Shape[D]], axis: int | None, dims: Algebra[D]) -> Shape[D] | None:
    """``Concat`` of inputs of one rank: the joined axis their sum, every other one size."""
    rank = len(shapes[0])
    if axis is None or not -rank <= axis < rank:
        return None
    axis %= rank
    out: list[D] = []
    for k in range(rank):
        column = [s[k] for s in shapes]
        size = dims.sum(column) if k == axis else dims.equal(column)
        if size is None:
            return None
        out.append(size)
    return tuple(out)


def reduction_axes(node: ir.Node) -> list[int] | None:
    """A reduction's axes as written: the constant ``axes`` input (``ReduceSum`` from opset 13,
    the others from 18) or attribute; ``[]`` when none are given (an absent or empty input, no
    attribute: every axis, or none with ``noop_with_empty_axes``); None when not known when
    lowering (an input computed at run time, a function's attribute reference ``axes: @a``)."""
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        array = constant_array(node.inputs[1])
        return None if array is None else [int(a) for a in array.reshape(-1)]
    if node.attributes.get("axes") is None:
        return []
    return ints_attr(node, "axes")


def reduced_axes(node: ir.Node, rank: int) -> list[int] | None:
    """The axes a reduction of a rank-``rank`` input reduces, non-negative and sorted: every
    axis when none are given, ``[]`` (no reduction) when none are given with
    ``noop_with_empty_axes``; None when not known when lowering (:func:`reduction_axes`'s None,
    a referenced ``noop_with_empty_axes``, an axis out of range). The one reader of a
    reduction's axes: each pass read them by hand once, and read a reference as "none given"
    (every axis) or a run-time input as every axis, rewriting such models wrongly."""
    axes = reduction_axes(node)
    if axes is None:
        return None
    if not axes:
        noop = int_attr(node, "noop_with_empty_axes", 0)
        return None if noop is None else [] if noop else list(range(rank))
    if not all(-rank <= a < rank for a in axes):
        return None
    return sorted({a % rank for a in axes})


def reduced_dims(node: ir.Node, dims: Sequence[D], one: D) -> list[D] | None:
    """A reduction's result dimensions from its input's ``dims``: each reduced one ``one`` with
    ``keepdims`` (the default), else dropped; None when its axes (:func:`reduced_axes`) or its
    ``keepdims`` (a function's ``keepdims: @k``, read as 0 before) are not known."""
    axes = reduced_axes(node, len(dims))
    keep = int_attr(node, "keepdims", 1)
    if axes is None or keep is None:
        return None
    return [one if k in axes else d for k, d in enumerate(dims) if keep or k not in axes]


# ---------------------------------------------------------------------------- the registry

#: A rule: a node, its inputs' shapes (the first one known; another None where not known) and
#: the prover's algebra -> the first output's shape, None where not proven.
Rule = Callable[[ir.Node, list["Shape[D] | None"], Algebra[D]], "Shape[D] | None"]
#: Op type -> its rule (ONNX domain).
RULES: dict[str, Rule] = {}


def register(*ops: str) -> Callable[[Rule[D]], Rule[D]]:
    """Make the decorated function the shape rule of ``ops``."""

    def add(rule: Rule[D]) -> Rule[D]:
        for op in ops:
            assert op not in RULES, f"{op}: two shape rules"
            RULES[op] = rule
        return rule

    return add


def infer(node: ir.Node, shapes: list[Shape[D] | None], dims: Algebra[D]) -> Shape[D] | None:
    """The registered rule of ``node``'s op on inputs of ``shapes``, None when there is none
    or the first input's shape is not known."""
    rule = RULES.get(node.op_type)
    if rule is None or not shapes or shapes[0] is None:
        return None
    return rule(node, shapes, dims)


@register(*SAME_SHAPE)
def _same_shape(node: ir.Node, shapes: list[Shape[D] | None], dims: Algebra[D]) -> Shape[D] | None:
    return shapes[0]


@register(*BROADCASTING)
def _broadcasting(
    node: ir.Node, shapes: list[Shape[D] | None], dims: Algebra[D]
) -> Shape[D] | None:
    known = [s for s in shapes if s is not None]
    return None if len(known) != len(shapes) else broadcast(known, dims)


@register("MatMul")
def _matmul(node: ir.Node, shapes: list[Shape[D] | None], dims: Algebra[D]) -> Shape[D] | None:
    if len(shapes) != 2 or shapes[0] is None or shapes[1] is None:
        return None
    return matmul(shapes[0], shapes[1], dims)


@register("Transpose")
def _transpose(node: ir.Node, shapes: list[Shape[D] | None], dims: Algebra[D]) -> Shape[D] | None:
    assert shapes[0] is not None
    return transpose(shapes[0], ints_attr(node, "perm"))


def _axes(node: ir.Node) -> list[int] | None:
    """A node's constant ``axes`` (its attribute, or its second input), [] when absent."""
    axes = ints_attr(node, "axes")
    if axes is None and len(node.inputs) > 1 and node.inputs[1] is not None:
        array = constant_array(node.inputs[1])
        return None if array is None else [int(a) for a in array.reshape(-1)]
    return axes or []


@register("Squeeze", "Unsqueeze")
def _squeeze(node: ir.Node, shapes: list[Shape[D] | None], dims: Algebra[D]) -> Shape[D] | None:
    assert shapes[0] is not None
    rule = squeeze if node.op_type == "Squeeze" else unsqueeze
    return rule(shapes[0], _axes(node), dims)


@register("Reshape")
def _reshape(node: ir.Node, shapes: list[Shape[D] | None], dims: Algebra[D]) -> Shape[D] | None:
    target = constant_array(node.inputs[1]) if len(shapes) == 2 else None
    if shapes[0] is None or target is None or target.ndim != 1:
        return None
    allow_zero = int_attr(node, "allowzero", 0) == 1
    return reshape(shapes[0], [int(d) for d in target], allow_zero, dims)


@register("Concat")
def _concat(node: ir.Node, shapes: list[Shape[D] | None], dims: Algebra[D]) -> Shape[D] | None:
    first = shapes[0]
    known = [s for s in shapes if s is not None and first is not None and len(s) == len(first)]
    return concat(known, int_attr(node, "axis"), dims) if len(known) == len(shapes) else None


@register("Gather")
def _gather(node: ir.Node, shapes: list[Shape[D] | None], dims: Algebra[D]) -> Shape[D] | None:
    """The data's axes around ``axis`` replaced by the indices' shape."""
    data, indices = shapes[0], shapes[1] if len(shapes) == 2 else None
    axis = int_attr(node, "axis", 0)
    if data is None or indices is None or axis is None or not -len(data) <= axis < len(data):
        return None
    axis %= len(data)
    return (*data[:axis], *indices, *data[axis + 1 :])


@register("Shape")
def _shape(node: ir.Node, shapes: list[Shape[D] | None], dims: Algebra[D]) -> Shape[D] | None:
    """One entry per axis from ``start`` to ``end`` (clamped)."""
    rank = len(shapes[0] or ())
    start, end = int_attr(node, "start", 0), int_attr(node, "end", rank)
    if start is None or end is None:
        return None
    start, end = (max(0, min(rank, d + rank if d < 0 else d)) for d in (start, end))
    return (dims.size(max(0, end - start)),)


def slice_size(dim: int, start: int, end: int, step: int) -> int | None:
    """The length ``Slice`` leaves of an axis of ``dim``; None where runtimes cut it differently:
    with a negative step and a start before the axis, ONNX clamps the start to the first element
    (onnxruntime, ONNX's inference: one element), numpy to before it (ONNX's reference: none).
    Arithmetic on Python's integers: no memory, whatever the sizes."""
    numpy_cut = len(range(dim)[start:end:step])
    start, end = (d + dim if d < 0 else d for d in (start, end))
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        onnx_cut = max(0, -(-(end - start) // step))
    else:
        start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        onnx_cut = max(0, -(-(start - end) // -step))
    return numpy_cut if numpy_cut == onnx_cut else None


@register("Slice")
def _slice(node: ir.Node, shapes: list[Shape[D] | None], dims: Algebra[D]) -> Shape[D] | None:
    """A ``Slice`` (opset 10+: bounds as inputs) of constant bounds of a static shape."""
    sizes = [n for d in shapes[0] or () if (n := dims.known(d)) is not None]
    bounds = [constant_array(v) if v is not None else None for v in node.inputs[1:]]
    if len(sizes) != len(shapes[0] or ()) or len(bounds) < 2:
        return None
    if bounds[0] is None or bounds[1] is None:
        return None
    starts, ends = bounds[0].reshape(-1), bounds[1].reshape(-1)
    axes = bounds[2] if len(bounds) > 2 else None
    steps = bounds[3] if len(bounds) > 3 else None
    axes = np.arange(len(starts)) if axes is None else axes.reshape(-1)
    steps = np.ones(len(starts), np.int64) if steps is None else steps.reshape(-1)
    if not len(starts) == len(ends) == len(axes) == len(steps) or (steps == 0).any():
        return None
    cuts: dict[int, tuple[int, int, int]] = {}
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        if not -len(sizes) <= int(axis) < len(sizes):
            return None
        cuts[int(axis) % len(sizes)] = (int(start), int(end), int(step))
    out = [slice_size(n, *cuts[k]) if k in cuts else n for k, n in enumerate(sizes)]
    return None if None in out else tuple(dims.size(n) for n in out if n is not None)


@register(*REDUCTIONS)
def _reduce(node: ir.Node, shapes: list[Shape[D] | None], dims: Algebra[D]) -> Shape[D] | None:
    found = reduced_dims(node, shapes[0] or (), dims.one)
    return None if found is None else tuple(found)


@register("CumSum")
def _cumsum(node: ir.Node, shapes: list[Shape[D] | None], dims: Algebra[D]) -> Shape[D] | None:
    """The input's shape, summed along a constant axis in range."""
    axis = constant_array(node.inputs[1]) if len(node.inputs) == 2 else None
    if shapes[0] is None or axis is None or axis.size != 1 or axis.dtype.kind not in "iu":
        return None
    return shapes[0] if -len(shapes[0]) <= int(axis.reshape(())) < len(shapes[0]) else None


@register("ArgMax", "ArgMin")
def _arg_extreme(node: ir.Node, shapes: list[Shape[D] | None], dims: Algebra[D]) -> Shape[D] | None:
    """Along an axis of a known size of at least 1 (of none it fails)."""
    shape = shapes[0]
    axis, keep = int_attr(node, "axis", 0), int_attr(node, "keepdims", 1)
    if shape is None or axis is None or keep is None or not -len(shape) <= axis < len(shape):
        return None
    axis %= len(shape)
    size = dims.known(shape[axis])
    if size is None or size < 1:
        return None
    return (*shape[:axis], *((dims.one,) if keep else ()), *shape[axis + 1 :])


@register("Einsum")
def _einsum(node: ir.Node, shapes: list[Shape[D] | None], dims: Algebra[D]) -> Shape[D] | None:
    """An explicit equation without an ellipsis (jax2onnx writes ``x @ w`` as ``a,ab->b``): it
    fails only where a letter's sizes differ."""
    attr = node.attributes.get("equation")
    equation = "" if attr is None else attr.as_string().replace(" ", "")
    if "->" not in equation or "." in equation:
        return None
    terms, output = equation.split("->")
    letters = terms.split(",")
    if len(letters) != len(shapes):
        return None
    sizes: dict[str, list[D]] = {}
    for term, shape in zip(letters, shapes, strict=True):
        if shape is None or len(term) != len(shape):
            return None
        for letter, size in zip(term, shape, strict=True):
            sizes.setdefault(letter, []).append(size)
    agreed: dict[str, D] = {}
    for letter, found in sizes.items():
        one = dims.equal(found)
        if one is None:
            return None
        agreed[letter] = one
    if any(letter not in agreed for letter in output) or len(set(output)) != len(output):
        return None
    return tuple(agreed[letter] for letter in output)


#: A shape whose None sizes are not proven (the declared-sizes step's sizes proven per axis).
Partial = tuple[int | None, ...]

#: The ops proven per dimension (the declared-sizes step's ``_StaticShapes._partly``).
PARTIAL = SAME_SHAPE | BROADCASTING | {"MatMul", "Transpose"}
#: An unproven dimension inside the shared shape rules, whose None means "fails".
_UNPROVEN = -1


def partial_rule(node: ir.Node, inputs: list[Partial | None]) -> Partial | None:
    """The output shape of a node of :data:`PARTIAL`, per dimension, None where it fails."""
    if not inputs or any(s is None for s in inputs):
        return None
    marked = [tuple(_UNPROVEN if d is None else d for d in s) for s in inputs if s is not None]
    found = infer(node, marked, _PARTLY)  # type: ignore[arg-type]
    return None if found is None else tuple(None if d == _UNPROVEN else d for d in found)


class _Partly:
    """Sizes some of which are not proven (:data:`_UNPROVEN`): an unproven one that runs is
    1 or the size it broadcasts with (unproven when all the others are 1), and equals the size
    it must equal."""

    one = 1

    def broadcast(self, dims: list[int]) -> int | None:
        proven = [d for d in dims if d != _UNPROVEN]
        found = one_size(proven, 1)
        if found == 1 and len(proven) < len(dims):
            return _UNPROVEN
        return found

    def equal(self, dims: list[int]) -> int | None:
        proven = {d for d in dims if d != _UNPROVEN}
        return _UNPROVEN if not proven else proven.pop() if len(proven) == 1 else None

    def sum(self, dims: list[int]) -> int | None:
        return _UNPROVEN if _UNPROVEN in dims else sum(dims)

    def known(self, dim: int) -> int | None:
        return None if dim == _UNPROVEN else dim

    def size(self, number: int) -> int:
        return number


_PARTLY = _Partly()
