"""How many times a ``Loop`` runs, when that is fixed before it starts (``LoopToScan``'s analysis).

The loops tf2onnx writes for ``tf.while_loop`` (Keras ``Bidirectional``/``TimeDistributed``,
``tf.map_fn``, ``bidirectional_dynamic_rnn``) stop on a condition that is known when the loop
starts::

    ..., ys = Loop(M, cond0, c0, limit, ...) with body (i, cond_in, c, limit_in, ...) ->
        c1 = Add(c, 1)
        go = And(Less(Cast<float>(i), Cast<float>(max)),          # optional, tf2onnx v1 RNNs
                 Less(Cast<float>(c1), Cast<float>(limit_in)))
        -> (go, c1, limit_in, ..., y)                             # y: a TensorArray write

Every ``And`` leaf is ``Less``/``LessOrEqual``/``Greater``/``GreaterOrEqual`` of an
*iteration-linear* side (the iteration number, a counter state that steps by one from its
initial value, either plus a constant, through integer-to-any ``Cast``s) and a *loop-invariant*
integer side (an outer-scope value or a state the body passes through, through ``Cast``s, or a
value the body recomputes from those: :meth:`Condition.invariant`), so iteration ``i + 1`` runs
iff ``i < bound`` for a bound computed before the loop. The trip count is then
``N = min(M, max(bound + 1, 1))`` (without ``M``: the second term; a condition the body passes
through unchanged: ``M``), zero when the initial condition is false (:func:`trip_count`).
(Comparisons through a float ``Cast`` are taken as exact: they are for counts below 2**24.)
:func:`trip_count_key` tells trip counts computed alike (a bidirectional layer's two
directions), which then share one ``Range``; :func:`evaluate` computes a count made of
constants (and of static shapes) when lowering.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import onnx
import onnx_ir as ir

from seqlower.passes._emit import Emitter
from seqlower.passes._ir import constant_array, constant_int, int_attr, is_onnx, is_static
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = [
    "UNROLL_LIMIT",
    "Condition",
    "Linear",
    "Term",
    "evaluate",
    "extreme",
    "passes_through",
    "through_identity",
    "trip_count",
    "trip_count_key",
]


_INTS = frozenset(
    {
        ir.DataType.INT8,
        ir.DataType.INT16,
        ir.DataType.INT32,
        ir.DataType.INT64,
        ir.DataType.UINT8,
        ir.DataType.UINT16,
        ir.DataType.UINT32,
        ir.DataType.UINT64,
    }
)


@dataclasses.dataclass(frozen=True)
class Linear:
    """``base + offset + i`` at iteration ``i``; ``base`` an outer value (None: 0)."""

    base: ir.Value | None
    offset: int


@dataclasses.dataclass(frozen=True)
class Term:
    """Iteration ``i`` continues while ``i < limit - linear.base - linear.offset + extra``."""

    linear: Linear
    limit: ir.Value  # an outer integer value, or one the body computes from such (hoisted)
    extra: int  # 1 for LessOrEqual


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
    value = cond_out
    while value is not cond_in:
        producer = value.producer()
        if is_onnx(producer, "Identity") and producer is not None:
            value = producer.inputs[0]  # type: ignore[assignment]
            continue
        array = None if producer is None else _bool_constant(value)
        return array is True
    return True


def _bool_constant(value: ir.Value) -> bool | None:
    array = constant_array(value)
    if array is None or array.size != 1:
        return None
    return bool(array.reshape(()))


class Condition:
    """Reads a Loop body's condition as ``And`` of bounds on the iteration number."""

    _COMPARE: ClassVar[dict[str, tuple[int, int]]] = {
        "Less": (0, 0),
        "LessOrEqual": (0, 1),
        "Greater": (1, 0),
        "GreaterOrEqual": (1, 1),
    }

    def __init__(self, node: ir.Node, body: ir.Graph, types: TypeOracle) -> None:
        self.types = types
        self.node = node
        self.body = body
        self.inputs = list(body.inputs)
        self.carried = len(node.inputs) - 2
        self.why = ""
        self._body_ids = {id(v) for v in body.inputs}

    def terms(self, cond: ir.Value) -> list[Term] | None:
        producer = cond.producer()
        if is_onnx(producer, "Identity") and producer is not None and producer.graph is self.body:
            return self.terms(producer.inputs[0])  # type: ignore[arg-type]
        if is_onnx(producer, "And") and producer is not None and producer.graph is self.body:
            found: list[Term] = []
            for operand in producer.inputs:
                if operand is None:
                    return None
                sub = self.terms(operand)
                if sub is None:
                    return None
                found += sub
            return found
        if (
            producer is not None
            and producer.graph is self.body
            and is_onnx(producer, *self._COMPARE)
        ):
            side, extra = self._COMPARE[producer.op_type]
            a, b = producer.inputs[side], producer.inputs[1 - side]
            if a is None or b is None:
                return None
            linear = self.linear(a)
            limit = self.invariant(b)
            if linear is None:
                self.why = f"'{a.name}' does not step by one per iteration"
                return None
            if limit is None:
                self.why = f"'{b.name}' is not fixed when the loop starts"
                return None
            return [Term(linear, limit, extra)]
        self.why = f"'{cond.name}' is not an And of comparisons with the iteration number"
        return None

    def _dtype(self, value: ir.Value) -> ir.DataType | None:
        return value.dtype or element_dtype(self.types.type_of(value))

    def _inside(self, value: ir.Value) -> bool:
        producer = value.producer()
        if producer is None:
            return id(value) in self._body_ids or (
                value.is_initializer() and value.graph is self.body
            )
        return producer.graph is self.body

    def linear(self, value: ir.Value) -> Linear | None:
        producer = value.producer()
        if value is self.inputs[0]:
            return Linear(None, 0)
        if id(value) in self._body_ids:
            k = self.inputs.index(value) - 2
            if k >= 0 and self.is_counter(k):
                return Linear(self.node.inputs[2 + k], 0)
            return None
        if producer is None or producer.graph is not self.body:
            return None
        if is_onnx(producer, "Identity"):
            return self.linear(producer.inputs[0])  # type: ignore[arg-type]
        if is_onnx(producer, "Cast"):
            source = producer.inputs[0]
            if source is None or self._dtype(source) not in _INTS:
                return None
            return self.linear(source)
        if is_onnx(producer, "Add", "Sub") and len(producer.inputs) == 2:
            a, b = producer.inputs
            step = _step(b)
            if step is not None and a is not None:
                inner = self.linear(a)
                sign = 1 if producer.op_type == "Add" else -1
                return None if inner is None else Linear(inner.base, inner.offset + sign * step)
            step = _step(a)
            if step is not None and b is not None and producer.op_type == "Add":
                inner = self.linear(b)
                return None if inner is None else Linear(inner.base, inner.offset + step)
        return None

    def is_counter(self, k: int) -> bool:
        """Whether carried value ``k`` starts from the Loop's input and steps by one."""
        state = self.inputs[2 + k]
        if self._dtype(state) not in _INTS or self.node.inputs[2 + k] is None:
            return False
        out = self.body.outputs[1 + k]
        producer = out.producer()
        while is_onnx(producer, "Identity") and producer is not None:
            producer = producer.inputs[0].producer()  # type: ignore[union-attr]
        if not is_onnx(producer, "Add") or producer is None or producer.graph is not self.body:
            return False
        a, b = producer.inputs
        return (a is state and _step(b) == 1) or (b is state and _step(a) == 1)

    def invariant(self, value: ir.Value) -> ir.Value | None:
        """The outer integer value ``value`` equals at every iteration, if there is one (or a
        float constant of an integer value: tf2onnx's ``Cast<float>(limit)`` once folded at fixed
        input shapes)."""
        if _integral_float(value):
            return value
        if not self._inside(value):
            return value if self._dtype(value) in _INTS else None
        if id(value) in self._body_ids:
            outer = self._pass_through(value)
            return outer if outer is not None and self._dtype(outer) in _INTS else None
        producer = value.producer()
        if is_onnx(producer, "Cast", "Identity") and producer is not None:
            source = producer.inputs[0]
            if source is None or self._dtype(source) not in _INTS:
                return None
            return self.invariant(source)
        if self._dtype(value) in _INTS and self._hoistable(value):
            return value  # the body recomputes it from outer values: computed once, before
        return None

    def _hoistable(self, value: ir.Value, depth: int = 0) -> bool:
        """Whether the body computes ``value`` from outer values, pass-through states and
        constants only, through ops without side effects (PyTorch's ``while_loop`` recomputes
        its limit, ``Squeeze(Shape(xs, 0, 1))``, inside the body on every iteration)."""
        if depth > _HOIST_DEPTH:
            return False
        if not self._inside(value) or constant_array(value) is not None:
            return True
        if id(value) in self._body_ids:
            return self._pass_through(value) is not None
        producer = value.producer()
        if producer is None or producer.graph is not self.body:
            return False
        if not is_onnx(producer, *_HOISTABLE) or producer.outputs[0] is not value:
            return False
        return all(v is None or self._hoistable(v, depth + 1) for v in producer.inputs)

    def _pass_through(self, value: ir.Value) -> ir.Value | None:
        """The Loop input a body input equals at every iteration (a state passed through)."""
        k = self.inputs.index(value) - 2
        if k >= 0 and through_identity(self.body.outputs[1 + k], self.body) is value:
            return self.node.inputs[2 + k]
        return None


#: Ops a loop-invariant limit is recomputed with inside a body (no side effects, no subgraphs).
_HOISTABLE = frozenset(
    {
        "Identity", "Cast", "Shape", "Size", "Squeeze", "Unsqueeze", "Reshape", "Gather",
        "Slice", "Concat", "Add", "Sub", "Mul", "Div", "Min", "Max", "Neg", "Abs", "Constant",
    }
)  # fmt: skip


_HOIST_DEPTH = 32


#: Ops whose output has the shape of their first input: ``Shape`` of their output is ``Shape`` of
#: that input, for telling trip counts computed alike.
_SHAPE_OF_FIRST = frozenset(
    {"ReverseSequence", "Identity", "Cast", "Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Not"}
)


def trip_count_key(node: ir.Node, terms: list[Term] | None) -> Any:
    """A value equal for two Loops whose trip counts are computed alike from the same values."""
    memo: dict[int, Any] = {}

    def key(value: ir.Value | None, depth: int = 0) -> Any:
        if value is None:
            return None
        if id(value) in memo:
            return memo[id(value)]
        array = constant_array(value)
        producer = value.producer()
        result: Any
        if array is not None:
            result = ("const", array.dtype.str, array.shape, array.tobytes())
        elif producer is None or depth > 32 or producer.graph is not node.graph:
            result = ("value", id(value))
        else:
            attributes = tuple(
                sorted((name, repr(attr.value)) for name, attr in producer.attributes.items())
            )
            if is_onnx(producer, "Shape"):
                inputs = (shape_key(producer.inputs[0], depth + 1),)
            else:
                inputs = tuple(key(v, depth + 1) for v in producer.inputs)
            result = (
                producer.domain,
                producer.op_type,
                attributes,
                list(producer.outputs).index(value),
                inputs,
            )
        memo[id(value)] = result
        return result

    def shape_key(value: ir.Value | None, depth: int) -> Any:
        """The key of what decides ``value``'s shape: through shape-keeping ops, and through
        ``Transpose`` (keeping its permutation)."""
        producer = None if value is None else value.producer()
        if producer is not None and producer.graph is node.graph and depth <= 32:
            if is_onnx(producer, *_SHAPE_OF_FIRST):
                return shape_key(producer.inputs[0], depth + 1)
            if is_onnx(producer, "Transpose"):
                perm = producer.attributes.get("perm")
                return (
                    "Transpose",
                    repr(perm.value if perm else None),
                    shape_key(producer.inputs[0], depth + 1),
                )
        return key(value, depth)

    m = node.inputs[0] if node.inputs else None
    cond0 = node.inputs[1] if len(node.inputs) > 1 else None
    term_keys = None
    if terms is not None:
        term_keys = tuple(
            sorted(
                (
                    repr(key(t.limit)),
                    repr(key(t.linear.base)),
                    t.linear.offset,
                    t.extra,
                )
                for t in terms
            )
        )
    return (repr(key(m)), repr(key(cond0)), term_keys)


def trip_count(emit: Emitter, node: ir.Node, terms: list[Term] | None) -> ir.Value:
    """The Loop's trip count as an int64 scalar, computed before it."""
    m = node.inputs[0] if node.inputs else None
    scalar = emit.int64s([], hint="scalar")
    count: ir.Value | None = None
    if m is not None:
        count = emit.reshape(m, scalar, hint="max_trip_count")
    if terms is not None:
        bound: ir.Value | None = None
        hoisted: dict[int, ir.Value] = {}
        body = node.attributes["body"].as_graph()
        for j, term in enumerate(terms):
            limit = _int64(emit, _hoist(emit, node, body, term.limit, hoisted), f"limit_{j}")
            shift = term.extra - term.linear.offset
            if term.linear.base is not None:
                limit = emit.Sub(
                    limit, _int64(emit, term.linear.base, f"start_{j}"), _hint=f"span_{j}"
                )
            # iteration i + 1 runs while i < limit + shift, so i + 1 iterations while i < that.
            value = emit.Add(limit, emit.int64s(shift + 1, hint="shift"), _hint=f"runs_{j}")
            bound = value if bound is None else extreme(emit, "Min", bound, value, "runs")
        assert bound is not None
        bound = extreme(emit, "Max", bound, emit.int64s(1, hint="one"), "at_least_one")
        count = bound if count is None else extreme(emit, "Min", count, bound, "trips")
    assert count is not None
    count = emit.reshape(count, scalar, hint="trip_count")
    cond0 = node.inputs[1] if len(node.inputs) > 1 else None
    if cond0 is not None:
        cond0 = emit.reshape(cond0, scalar, hint="runs_at_all")
        count = emit.Where(cond0, count, emit.int64s(0, hint="zero"), _hint="trips")
    count = extreme(emit, "Max", count, emit.int64s(0, hint="zero"), "trip_count")
    count.dtype = ir.DataType.INT64
    count.shape = ir.Shape([])
    return count


def _step(value: ir.Value | None) -> int | None:
    """A constant integer step, also as PyTorch writes it: ``CastLike(1, counter)`` (the
    counter is an integer, or the comparison it feeds is refused as not stepping by one)."""
    if value is None:
        return None
    producer = value.producer()
    if is_onnx(producer, "CastLike") and producer is not None and producer.inputs[0] is not None:
        return constant_int(producer.inputs[0])
    return constant_int(value)


def _hoist(
    emit: Emitter, node: ir.Node, body: ir.Graph, value: ir.Value, done: dict[int, ir.Value]
) -> ir.Value:
    """``value`` computed before the Loop: a body value ``Condition._hoistable`` accepted is
    rebuilt from the Loop's inputs with the same ops; an outer value is itself."""
    if id(value) in done:
        return done[id(value)]
    producer = value.producer()
    inside = (producer.graph is body) if producer is not None else value.graph is body
    result = value
    if value in body.inputs:
        outer = node.inputs[list(body.inputs).index(value)]
        assert outer is not None  # a pass-through state, checked when planning
        result = outer
    elif inside and (array := constant_array(value)) is not None:
        result = emit.constant(array, hint=f"{value.name}_outside")
    elif inside and producer is not None:
        inputs = [None if v is None else _hoist(emit, node, body, v, done) for v in producer.inputs]
        result = getattr(emit, producer.op_type)(
            *inputs, **dict(producer.attributes), _hint=f"{value.name}_outside"
        )
        if value.dtype is not None:
            result.dtype = value.dtype
    done[id(value)] = result
    return result


def extreme(emit: Emitter, op: str, a: ir.Value, b: ir.Value, hint: str) -> ir.Value:
    """``Min``/``Max`` of two int64 values (int64 ``Min``/``Max`` exist from opset 12; before,
    a ``Where`` on ``Less``)."""
    if emit.opset >= 12:
        return getattr(emit, op)(a, b, _hint=hint)
    less = emit.Less(a, b, _hint=f"{hint}_less")
    first, second = (a, b) if op == "Min" else (b, a)
    return emit.Where(less, first, second, _hint=hint)


def _int64(emit: Emitter, value: ir.Value, hint: str) -> ir.Value:
    flat = emit.reshape(value, emit.int64s([], hint="scalar"), hint=hint)
    if value.dtype == ir.DataType.INT64:
        return flat
    return emit.Cast(flat, to=ir.DataType.INT64.value, _hint=f"{hint}_int64")


def _integral_float(value: ir.Value) -> bool:
    """A one-element float constant holding an integer (exact in float32: below 2**24)."""
    array = constant_array(value)
    if array is None or array.size != 1 or array.dtype.kind != "f":
        return False
    number = float(array.reshape(()))
    return number.is_integer() and abs(number) < 2**24


#: Iterations a Scan of constant count is unrolled up to (``unroll-constant-scans``); past this
#: the model grows more than a converter wants.
UNROLL_LIMIT = 256
_EXPRESSION_LIMIT = 64  # nodes of the constant expression evaluated for the trip count


def evaluate(
    value: ir.Value, opset: int, shapes: Callable[[ir.Value], ir.Shape | None] | None = None
) -> np.ndarray | None:
    """``value`` computed by onnx's reference evaluator, when it depends on constants only
    (Constant nodes and initializers that are not graph inputs), through a few nodes; a
    ``Shape`` of a value whose shape is declared static, or static in ``shapes``, is a
    constant."""
    constant = constant_array(value)
    if constant is not None:
        return constant
    nodes: list[ir.Node] = []
    leaves: dict[str, np.ndarray] = {}
    pending, seen = [value], {id(value)}
    while pending:
        current = pending.pop()
        known = constant_array(current)
        if known is not None and current.name:
            leaves[current.name] = known
            continue
        producer = current.producer()
        shape = _static_shape_of(producer, shapes)
        if shape is not None and current.name:
            leaves[current.name] = shape  # Shape of a value whose shape is declared static
            continue
        if producer is None or producer.graph is not value.graph or current.is_graph_input():
            return None  # a graph input, a body input, or an outer-scope value
        if not is_onnx(producer) or any(
            a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
            for a in producer.attributes.values()
        ):
            return None
        if len(nodes) >= _EXPRESSION_LIMIT:
            return None
        nodes.append(producer)
        for source in producer.inputs:
            if source is not None and id(source) not in seen:
                seen.add(id(source))
                pending.append(source)
    graph = value.graph
    assert graph is not None
    order = {id(node): k for k, node in enumerate(graph)}
    nodes.sort(key=lambda n: order.get(id(n), 0))
    protos = [ir.serde.serialize_node(node) for node in nodes]
    model = onnx.helper.make_model(
        onnx.helper.make_graph(
            protos,
            "trip_count",
            [],
            [onnx.helper.make_value_info(value.name or "", onnx.TypeProto())],
            [onnx.numpy_helper.from_array(array, name) for name, array in leaves.items()],
        ),
        opset_imports=[onnx.helper.make_opsetid("", opset)],
    )
    try:
        from onnx.reference import ReferenceEvaluator

        (result,) = ReferenceEvaluator(model).run(None, {})
    except Exception:  # the expression is not one the evaluator runs: leave the Scan
        return None
    return np.asarray(result)


def _static_shape_of(
    node: ir.Node | None, shapes: Callable[[ir.Value], ir.Shape | None] | None = None
) -> np.ndarray | None:
    """What a ``Shape`` node gives when its input's shape is declared static (the second layer
    of a stacked RNN over a fixed length reads its length so)."""
    if not is_onnx(node, "Shape"):
        return None
    source = node.inputs[0] if node.inputs else None
    shape = None if source is None else source.shape
    if source is not None and shapes is not None and not is_static(shape):
        shape = shapes(source)
    if shape is None or not is_static(shape):
        return None
    dims = np.array([int(d) for d in shape], dtype=np.int64)  # type: ignore[arg-type]
    first, last = int_attr(node, "start", 0), int_attr(node, "end", len(dims))
    if first is None or last is None:
        return None
    return dims[first:last]
