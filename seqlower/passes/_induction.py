"""Induction analysis of a ``Loop``'s states: the facts every loop pass takes its trip count from.

A carried state is an *induction* when the body returns it plus a loop-invariant constant (its
step), through any chain of ``Add``/``Sub``/``Mul`` by integral constants, ``Cast``s between
numeric types and one-element reshapes (``Identity``, ``Reshape``, ``Squeeze``, ``Unsqueeze``,
``Flatten``): tf2onnx's ``counter + 1``, PyTorch's ``Add(i, CastLike(1, i))``, Paddle's
``scale`` (``Cast<int64>(Reshape(Mul(Cast<float>(i), 1.0) + 1.0, [1]))``), jax's ``i + 1``.
The iteration number is one (start 0, step 1). A body value is *affine in the iteration* when it
is such a chain from an induction: ``scale * start + offset + step * i`` at iteration ``i``.

The body's condition (through ``Identity``, ``Cast``s to bool and one-element reshapes: Paddle
writes conditions of shape ``[1]``) is read as an ``And`` of *bounds*: comparisons
(``Less``/``LessOrEqual``/``Greater``/``GreaterOrEqual``, either side, or their ``Not``) of an
affine value with a *loop-invariant limit* (a constant, an outer value, a state the body passes
through, or a value the body recomputes from those: hoisted before the loop), whose step moves
toward the limit. A bound holds at iteration ``i`` iff ``i < ceil(span / |step|)`` (the span from
the value's start to the limit, one more for a non-strict comparison of integers), so the Loop
runs ``N = min(M, 1 + min over bounds of max(ceil(span / |step|), 0))`` iterations, zero when
its initial condition is false (:func:`trip_count` emits it, before the loop; symbolic when a
limit or a start is). A leaf that is the body's condition input is true on every iteration that
runs and bounds nothing; any other leaf is data (``why`` names it).

Exactness: every offset, step and scale is an integer, every start is an integer (a float state
only from an integral constant or a ``Cast`` from an integer), so every value on the chain is an
integer and the ``Cast``s between types are exact (below 2**24 through float32, as the counts
of any loop that runs in memory are); a float limit is compared in float64.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import onnx_ir as ir

from seqlower.passes._ir import constant_array, is_onnx
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = [
    "Affine",
    "Condition",
    "Shaped",
    "Term",
    "passes_through",
    "shape_source",
    "through_identity",
]

_INTS = frozenset(
    {ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64}
)  # unsigned types wrap below zero: a decreasing counter is not affine in them
_FLOATS = frozenset(
    {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16}
)
_NUMERIC = _INTS | _FLOATS

#: Ops that keep the one element of a one-element value (a counter or a condition of shape [1]).
_ONE_ELEMENT = ("Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten")

#: Ops a loop-invariant limit is recomputed with inside a body (no side effects, no subgraphs).
_HOISTABLE = frozenset(
    {
        "Identity", "Cast", "Shape", "Size", "Squeeze", "Unsqueeze", "Reshape", "Gather",
        "Slice", "Concat", "Add", "Sub", "Mul", "Div", "Min", "Max", "Neg", "Abs", "Constant",
        "Flatten", "CastLike",
    }
)  # fmt: skip

#: Ops whose output has the shape of their first input, whatever their other inputs are.
_SHAPE_OF_FIRST = frozenset(
    {
        "Identity", "Cast", "CastLike", "ScatterND", "ScatterElements", "Scatter", "Neg", "Abs",
        "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal", "Not", "Erf", "Softmax",
        "LogSoftmax", "Softplus", "Clip", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos",
        "LeakyRelu", "Elu", "Selu", "HardSigmoid", "IsNaN", "IsInf",
    }
)  # fmt: skip

#: Broadcasting ops: of their inputs' shape when every input has that one shape.
_ELEMENTWISE = frozenset(
    {
        "Add", "Sub", "Mul", "Div", "Pow", "Min", "Max", "Where", "And", "Or", "Xor", "Equal",
        "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
    }
)  # fmt: skip

_DEPTH = 32  # nodes followed back from one value
_INT64_MAX = 2**63 - 1


@dataclasses.dataclass(frozen=True)
class Affine:
    """``scale * start + offset + step * i`` at iteration ``i``: ``start`` the Loop's initial
    value of induction state ``state`` (both None: the iteration number, start 0)."""

    start: ir.Value | None
    state: int | None
    scale: int
    offset: int
    step: int


@dataclasses.dataclass(frozen=True)
class Term:
    """Iteration ``i + 1`` runs only while ``value(i) < limit`` (``below``; ``>`` otherwise),
    or ``<=`` (``>=``) when not ``strict``."""

    value: Affine
    limit: ir.Value  # an outer value, or one the body computes from such (hoisted)
    strict: bool
    below: bool
    limit_dtype: ir.DataType
    start_dtype: ir.DataType | None  # of ``value.start`` (None: no start, the iteration number)

    @property
    def floating(self) -> bool:
        """Whether the count is computed in float64 (a float limit or start)."""
        return self.limit_dtype not in _INTS or self.start_dtype in _FLOATS


def through_identity(value: ir.Value, body: ir.Graph) -> ir.Value:
    """What ``value`` copies through the body's ``Identity`` nodes (itself when none)."""
    producer = value.producer()
    while is_onnx(producer, "Identity") and producer is not None and producer.graph is body:
        source = producer.inputs[0]
        if source is None:
            break
        value, producer = source, source.producer()
    return value


def passes_through(cond_out: ir.Value, cond_in: ir.Value) -> bool:
    """Whether the body's condition is its condition input (or a constant true): the Loop runs
    ``M`` iterations unless its initial condition is false."""
    value = cond_out
    while value is not cond_in:
        producer = value.producer()
        if is_onnx(producer, *_ONE_ELEMENT) and producer is not None:
            value = producer.inputs[0]  # type: ignore[assignment]
            continue
        array = constant_array(value)
        return array is not None and array.size == 1 and bool(array.reshape(()))
    return True


#: A value and the axes of it another value's shape is in (None: its own order): that shape is
#: ``Shape(Transpose(value, perm))``.
Shaped = tuple[ir.Value, tuple[int, ...] | None]


def shape_source(node: ir.Node, body: ir.Graph, value: ir.Value) -> Shaped | None:
    """A value of the Loop's scope whose shape (in the order ``perm``) ``value`` has on every
    iteration, or None: an outer value, through ops that keep their data's shape or transpose
    it; or a state's start when the body returns that state in the shape it read it (a buffer
    the body writes rows into with ``ScatterND``: by induction its shape is its start's).
    PyTorch's ``while_loop`` reads its limit as ``Shape`` of such a buffer."""
    found = _shape_root(body, value, 0)
    if found is None or found[0] not in body.inputs:
        return found
    k = list(body.inputs).index(found[0])
    returned = None if k < 2 else _shape_root(body, body.outputs[k - 1], 0)
    if returned is None or returned[0] is not found[0] or not _identity(returned[1]):
        return None
    start = node.inputs[k]
    return None if start is None else (start, found[1])


def _identity(perm: tuple[int, ...] | None) -> bool:
    return perm is None or perm == tuple(range(len(perm)))


def _shape_root(body: ir.Graph, value: ir.Value, depth: int) -> Shaped | None:
    """A body input or an outer value whose shape, in the order given, is ``value``'s (None:
    none proven)."""
    producer = value.producer()
    if value in body.inputs:
        return value, None
    if producer is None:  # an initializer: of the body (None) or an outer one
        return None if value.graph is body else (value, None)
    if producer.graph is not body:
        return value, None
    if depth > _DEPTH or not is_onnx(producer) or producer.outputs[0] is not value:
        return None
    first = producer.inputs[0] if producer.inputs else None
    if producer.op_type in _SHAPE_OF_FIRST and first is not None:
        return _shape_root(body, first, depth + 1)
    perm = producer.attributes.get("perm")
    if producer.op_type == "Transpose" and first is not None and perm is not None:
        inner = _shape_root(body, first, depth + 1)
        if inner is None:
            return None
        axes = tuple(perm.as_ints())
        if inner[1] is not None:
            if len(inner[1]) != len(axes):
                return None
            axes = tuple(inner[1][a] for a in axes)
        return inner[0], None if _identity(axes) else axes
    if producer.op_type in _ELEMENTWISE and producer.inputs and None not in producer.inputs:
        roots = [_shape_root(body, v, depth + 1) for v in producer.inputs if v is not None]
        if all(r is not None and r[0] is roots[0][0] and r[1] == roots[0][1] for r in roots):  # type: ignore[index]
            return roots[0]
    return None


def _integer(value: ir.Value | None) -> int | None:
    """A one-element constant holding an integer (int, or float of an integral value below
    2**24), also as PyTorch writes it: ``CastLike(1, x)``."""
    if value is None:
        return None
    producer = value.producer()
    if is_onnx(producer, "CastLike") and producer is not None and producer.inputs[0] is not None:
        value = producer.inputs[0]
    array = constant_array(value)
    if array is None or array.size != 1 or array.dtype.kind not in "iuf":
        return None
    number = array.reshape(()).item()
    if array.dtype.kind == "f" and not (float(number).is_integer() and abs(number) < 2**24):
        return None
    return int(number)


class Condition:
    """The induction facts of one Loop: its induction states, the body values affine in the
    iteration, and its condition read as bounds (module docstring)."""

    _COMPARE: ClassVar[dict[str, tuple[bool, bool]]] = {  # op: (strict, value below limit)
        "Less": (True, True),
        "LessOrEqual": (False, True),
        "Greater": (True, False),
        "GreaterOrEqual": (False, False),
    }
    _NEGATED: ClassVar[dict[str, str]] = {
        "Less": "GreaterOrEqual",
        "LessOrEqual": "Greater",
        "Greater": "LessOrEqual",
        "GreaterOrEqual": "Less",
    }

    def __init__(self, node: ir.Node, body: ir.Graph, types: TypeOracle) -> None:
        self.types = types
        self.node = node
        self.body = body
        self.inputs = list(body.inputs)
        self.carried = len(node.inputs) - 2
        self.why = ""
        self._index = {id(v): k for k, v in enumerate(self.inputs)}
        self._steps: dict[int, int | None] = {}
        self._affine: dict[int, tuple[int, int, int] | None] = {}

    # -- types --------------------------------------------------------------------------

    def _dtype(self, value: ir.Value) -> ir.DataType | None:
        return value.dtype or element_dtype(self.types.type_of(value))

    def _state_dtype(self, k: int) -> ir.DataType | None:
        start = self.node.inputs[2 + k]
        return self._dtype(self.inputs[2 + k]) or (None if start is None else self._dtype(start))

    def _inside(self, value: ir.Value) -> bool:
        producer = value.producer()
        if producer is None:
            return id(value) in self._index or (value.is_initializer() and value.graph is self.body)
        return producer.graph is self.body

    # -- inductions ---------------------------------------------------------------------

    def _chain(self, value: ir.Value, depth: int = 0) -> tuple[int, int, int] | None:
        """``(root, scale, offset)``: ``value = scale * root + offset`` for a body input ``root``
        (its index), through the chain of the module docstring."""
        key = id(value)
        if key in self._affine:
            return self._affine[key]
        found: tuple[int, int, int] | None = None
        producer = value.producer()
        if key in self._index:
            found = (self._index[key], 1, 0)
        elif depth <= _DEPTH and producer is not None and producer.graph is self.body:
            found = self._chain_of(producer, value, depth)
        self._affine[key] = found
        return found

    def _chain_of(
        self, producer: ir.Node, value: ir.Value, depth: int
    ) -> tuple[int, int, int] | None:
        inputs = list(producer.inputs)
        if not is_onnx(producer) or producer.outputs[0] is not value or not inputs:
            return None
        if producer.op_type in _ONE_ELEMENT or producer.op_type == "Cast":
            if inputs[0] is None:
                return None
            if producer.op_type == "Cast":
                to = producer.attributes.get("to")
                source = self._dtype(inputs[0])
                if to is None or ir.DataType(to.as_int()) not in _NUMERIC:
                    return None
                if source is not None and source not in _NUMERIC:
                    return None
            return self._chain(inputs[0], depth + 1)
        if producer.op_type in ("Add", "Sub", "Mul") and len(inputs) == 2:
            a, b = inputs
            if a is None or b is None:
                return None
            constant_b, constant_a = _integer(b), _integer(a)
            if constant_b is not None:
                inner, c, sign = self._chain(a, depth + 1), constant_b, 1
            elif constant_a is not None:
                inner, c, sign = self._chain(b, depth + 1), constant_a, -1
            else:
                return None
            if inner is None:
                return None
            root, scale, offset = inner
            if producer.op_type == "Add":
                return root, scale, offset + c
            if producer.op_type == "Mul":
                return (root, scale * c, offset * c) if c != 0 else None
            if sign == 1:  # x - c
                return root, scale, offset - c
            return root, -scale, c - offset  # c - x
        return None

    def step(self, k: int) -> int | None:
        """The constant the body adds to carried value ``k`` each iteration (None: not an
        induction: another update, a type without exact steps, a start not an integer)."""
        if k in self._steps:
            return self._steps[k]
        self._steps[k] = None
        found = None
        start = self.node.inputs[2 + k]
        dtype = self._state_dtype(k)
        if start is not None and dtype is not None and 1 + k < len(self.body.outputs):
            chain = self._chain(self.body.outputs[1 + k])
            steps = chain is not None and chain[0] == 2 + k and chain[1] == 1 and chain[2] != 0
            exact = dtype in _INTS or (dtype in _FLOATS and _integral_start(start))
            if steps and exact and chain is not None:
                found = chain[2]
        self._steps[k] = found
        return found

    def is_counter(self, k: int) -> bool:
        """Whether carried value ``k`` is an integer that starts from the Loop's input and steps
        by one (``LoopToScan`` reads it from the iteration number instead of carrying it)."""
        return self.step(k) == 1 and self._state_dtype(k) in _INTS

    def is_integer(self, k: int) -> bool:
        """Whether carried value ``k`` is of a signed integer type."""
        return self._state_dtype(k) in _INTS

    def affine(self, value: ir.Value) -> Affine | None:
        """``value`` as an affine function of the iteration number, if it is one."""
        chain = self._chain(value)
        if chain is None:
            return None
        root, scale, offset = chain
        if root == 0:
            return Affine(None, None, 1, offset, scale)
        k = root - 2
        step = None if k < 0 else self.step(k)
        if step is None:
            return None
        return Affine(self.node.inputs[2 + k], k, scale, offset, scale * step)

    # -- invariants ---------------------------------------------------------------------

    def invariant(self, value: ir.Value) -> ir.Value | None:
        """The value ``value`` equals at every iteration, computable before the loop (an outer
        value, or ``value`` itself when the body computes it from such: hoisted), typed as a
        number; through an integer's ``Cast`` to a number, the integer (tf2onnx's
        ``Cast<float>(limit)``: loops whose limits are one value then share their counts)."""
        if not self._inside(value):
            return value if self._dtype(value) in _NUMERIC else None
        if id(value) in self._index:
            outer = self._pass_through(value)
            return outer if outer is not None and self._dtype(outer) in _NUMERIC else None
        if constant_array(value) is not None:
            return value if self._dtype(value) in _NUMERIC else None
        producer = value.producer()
        if is_onnx(producer, "Cast", *_ONE_ELEMENT) and producer is not None:
            source = producer.inputs[0]
            if source is not None and self._dtype(source) in _INTS:
                to = producer.attributes.get("to")
                if to is None or ir.DataType(to.as_int()) in _NUMERIC:
                    found = self.invariant(source)
                    if found is not None:
                        return found
        if self._dtype(value) in _NUMERIC and self._hoistable(value):
            return value  # the body recomputes it from outer values: computed once, before
        return None

    def _hoistable(self, value: ir.Value, depth: int = 0) -> bool:
        """Whether the body computes ``value`` from outer values, pass-through states and
        constants only, through ops without side effects (PyTorch's ``while_loop`` recomputes
        its limit, ``Squeeze(Shape(xs, 0, 1))``, inside the body on every iteration)."""
        if depth > _DEPTH:
            return False
        if not self._inside(value) or constant_array(value) is not None:
            return True
        if id(value) in self._index:
            return self._pass_through(value) is not None
        producer = value.producer()
        if producer is None or producer.graph is not self.body:
            return False
        if not is_onnx(producer, *_HOISTABLE) or producer.outputs[0] is not value:
            return False
        source = producer.inputs[0] if producer.inputs else None
        shaped = producer.op_type in ("Shape", "Size") and source is not None
        if shaped and shape_source(self.node, self.body, source) is not None:  # type: ignore[arg-type]
            return True  # of a value whose shape is fixed when the loop starts
        return all(v is None or self._hoistable(v, depth + 1) for v in producer.inputs)

    def _pass_through(self, value: ir.Value) -> ir.Value | None:
        """The Loop input a body input equals at every iteration (a state passed through)."""
        k = self._index[id(value)] - 2
        if k >= 0 and through_identity(self.body.outputs[1 + k], self.body) is value:
            return self.node.inputs[2 + k]
        return None

    # -- the condition ------------------------------------------------------------------

    def terms(self, cond: ir.Value) -> list[Term] | None:
        """The bounds whose ``And`` the body's condition ``cond`` is (empty: always true while
        the loop runs), or None (``why`` says which leaf is not a bound)."""
        return self._terms(cond, negated=False, depth=0)

    def _terms(self, cond: ir.Value, *, negated: bool, depth: int) -> list[Term] | None:
        producer = cond.producer()
        inside = producer is not None and producer.graph is self.body
        if cond is self.inputs[1] and not negated:
            return []  # the condition itself: true on every iteration that runs
        constant = constant_array(cond)
        if constant is not None and constant.size == 1 and bool(constant.reshape(())) != negated:
            return []
        if depth > _DEPTH or not inside or producer is None:
            self.why = f"'{cond.name}' is not a comparison of a counter with a fixed limit"
            return None
        source = producer.inputs[0] if producer.inputs else None
        if is_onnx(producer, *_ONE_ELEMENT) and source is not None:
            return self._terms(source, negated=negated, depth=depth + 1)
        if is_onnx(producer, "Cast") and source is not None:
            to = producer.attributes.get("to")
            if (
                to is not None
                and to.as_int() == ir.DataType.BOOL
                and self._dtype(source)
                in (
                    ir.DataType.BOOL,
                    None,
                )
            ):
                return self._terms(source, negated=negated, depth=depth + 1)
        if is_onnx(producer, "Not") and source is not None:
            return self._terms(source, negated=not negated, depth=depth + 1)
        if is_onnx(producer, "And") and not negated:
            found: list[Term] = []
            for operand in producer.inputs:
                sub = None if operand is None else self._terms(operand, negated=False, depth=depth)
                if sub is None:
                    return None
                found += sub
            return found
        if is_onnx(producer, *self._COMPARE) and len(producer.inputs) == 2:
            op = self._NEGATED[producer.op_type] if negated else producer.op_type
            return self._bound(producer, op)
        self.why = f"'{cond.name}' is not an And of comparisons of a counter with a fixed limit"
        return None

    def _bound(self, compare: ir.Node, op: str) -> list[Term] | None:
        a, b = compare.inputs
        if a is None or b is None:
            return None
        strict, below = self._COMPARE[op]
        value, limit = self.affine(a), b
        if value is None:
            value, limit, below = self.affine(b), a, not below
        if value is None:
            self.why = f"neither '{a.name}' nor '{b.name}' steps by a fixed amount per iteration"
            return None
        fixed = self.invariant(limit)
        if fixed is None:
            self.why = f"'{limit.name}' is not fixed when the loop starts"
            return None
        if value.step == 0 or (value.step > 0) != below:
            self.why = (
                f"'{compare.name or compare.op_type}' compares a value that steps by "
                f"{value.step} {'below' if below else 'above'} a limit: it never stops it"
            )
            return None
        limit_dtype = self._dtype(fixed)
        assert limit_dtype is not None  # invariant() checked it is a number
        start_dtype = None
        if value.state is not None:
            start_dtype = self._state_dtype(value.state)
        return [Term(value, fixed, strict, below, limit_dtype, start_dtype)]


def _integral_start(value: ir.Value) -> bool:
    """Whether a float state's start is an integer: an integral constant, or a ``Cast`` of an
    integer."""
    array = constant_array(value)
    if array is not None:
        return bool(array.size == 1 and float(array.reshape(())).is_integer())
    producer = value.producer()
    if is_onnx(producer, "Cast") and producer is not None and producer.inputs[0] is not None:
        return producer.inputs[0].dtype in _INTS
    return False
