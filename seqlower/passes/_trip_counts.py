"""A ``Loop``'s trip count emitted as a value computed before it, from the bounds the induction
analysis (:mod:`seqlower.passes._induction`) reads in its condition: ``min(M, runs...)``, zero
when it runs none; and a key telling two Loops whose counts are computed alike."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

from seqlower.passes._emit import Emitter
from seqlower.passes._induction import (
    _DEPTH,
    _INT64_MAX,
    _INTS,
    _ONE_ELEMENT,
    Condition,
    Term,
    _integer,
    shape_source,
)
from seqlower.passes._ir import constant_array, is_onnx

__all__ = ["extreme", "initial_bounds", "trip_count", "trip_count_key"]


#: Ops whose output has the shape of their first input: ``Shape`` of their output is ``Shape`` of
#: that input, for telling trip counts computed alike.
_SHAPE_OF_FIRST = frozenset(
    {"ReverseSequence", "Identity", "Cast", "Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Not"}
)


def trip_count_key(node: ir.Node, terms: list[Term] | None) -> Any:
    """A value equal for two Loops whose trip counts are computed alike from the same values (a
    bidirectional layer's two directions then share one ``Range``)."""
    key = _ComputationKeys(node.graph).key
    m = node.inputs[0] if node.inputs else None
    cond0 = node.inputs[1] if len(node.inputs) > 1 else None
    term_keys = None
    if terms is not None:
        term_keys = tuple(
            sorted(
                (
                    repr(key(t.limit)),
                    repr(key(t.value.start)),
                    t.value.scale,
                    t.value.offset,
                    t.value.step,
                    t.strict,
                    t.below,
                    t.floating,
                )
                for t in terms
            )
        )
    return (repr(key(m)), repr(key(cond0)), term_keys)


class _ComputationKeys:
    """Keys equal for values of ``graph`` computed alike from the same values (constants by
    their contents; a value from elsewhere, or deeper than the analysis goes, by identity)."""

    def __init__(self, graph: ir.Graph | None) -> None:
        self.graph = graph
        self.memo: dict[int, Any] = {}

    def key(self, value: ir.Value | None, depth: int = 0) -> Any:
        if value is None:
            return None
        if id(value) in self.memo:
            return self.memo[id(value)]
        array = constant_array(value)
        producer = value.producer()
        result: Any
        if array is not None:
            result = ("const", array.dtype.str, array.shape, array.tobytes())
        elif producer is None or depth > _DEPTH or producer.graph is not self.graph:
            result = ("value", id(value))
        else:
            attributes = tuple(
                sorted((name, repr(attr.value)) for name, attr in producer.attributes.items())
            )
            if is_onnx(producer, "Shape"):
                inputs = (self.shape_key(producer.inputs[0], depth + 1),)
            else:
                inputs = tuple(self.key(v, depth + 1) for v in producer.inputs)
            result = (
                producer.domain,
                producer.op_type,
                attributes,
                list(producer.outputs).index(value),
                inputs,
            )
        self.memo[id(value)] = result
        return result

    def shape_key(self, value: ir.Value | None, depth: int) -> Any:
        """The key of what decides ``value``'s shape: through shape-keeping ops, and through
        ``Transpose`` (keeping its permutation)."""
        producer = None if value is None else value.producer()
        if producer is not None and producer.graph is self.graph and depth <= _DEPTH:
            if is_onnx(producer, *_SHAPE_OF_FIRST):
                return self.shape_key(producer.inputs[0], depth + 1)
            if is_onnx(producer, "Transpose"):
                perm = producer.attributes.get("perm")
                return (
                    "Transpose",
                    repr(perm.value if perm else None),
                    self.shape_key(producer.inputs[0], depth + 1),
                )
        return self.key(value, depth)


def trip_count(emit: Emitter, node: ir.Node, terms: list[Term] | None) -> ir.Value:
    """The Loop's trip count as an int64 scalar, computed before it (``terms`` None or empty:
    ``M``, which must then be given)."""
    m = node.inputs[0] if node.inputs else None
    if terms and _integer(m) == _INT64_MAX:
        # No bound (jax2onnx writes INT64_MAX for "no M"): a count is an int64, so the Min is
        # the count, and tract 0.23.9 computes Min(INT64_MAX, 4) as -1.
        m = None
    scalar = emit.int64s([], hint="scalar")
    count: ir.Value | None = None
    if m is not None:
        count = emit.reshape(m, scalar, hint="max_trip_count")
    if terms:
        body = node.attributes["body"].as_graph()
        hoisted: dict[int, ir.Value] = {}
        bound: ir.Value | None = None
        # The initial condition is bounds before the first step: Max(count, 0) below is the
        # Where on it, their spans not clamped (tract types this count symbolically).
        signed = _initially_bounds(node.inputs[1], node, terms) if len(node.inputs) > 1 else None
        for j, term in enumerate(terms):
            limit = _hoist(emit, node, body, term.limit, hoisted)
            limit = emit.reshape(limit, scalar, hint=f"limit_{j}")
            runs = _runs(emit, term, limit, j, signed=signed is not None and j in signed)
            bound = runs if bound is None else extreme(emit, "Min", bound, runs, "runs")
        assert bound is not None
        count = bound if count is None else extreme(emit, "Min", count, bound, "trips")
    assert count is not None, "a Loop without M whose condition bounds nothing"
    count = emit.reshape(count, scalar, hint="trip_count")
    cond0 = node.inputs[1] if len(node.inputs) > 1 else None
    if cond0 is not None and not (terms and _initially_bounds(cond0, node, terms) is not None):
        cond0 = emit.reshape(cond0, scalar, hint="runs_at_all")
        count = emit.Where(cond0, count, emit.int64s(0, hint="zero"), _hint="trips")
    count = extreme(emit, "Max", count, emit.int64s(0, hint="zero"), "trip_count")
    count.dtype = ir.DataType.INT64
    count.shape = ir.Shape([])
    return count


def _runs(emit: Emitter, term: Term, limit: ir.Value, j: int, *, signed: bool = False) -> ir.Value:
    """How many iterations the bound lets run (at least one): ``1 + max(ceil(span / |step|),
    0)``, ``span`` from the value's start to the limit; in int64 for integer limits and starts,
    in float64 otherwise. ``signed`` (integers, step 1 or -1): ``1 + span``, 0 or less when the
    bound fails before the first step."""
    value = term.value
    floating = term.floating
    dtype = ir.DataType.DOUBLE if floating else ir.DataType.INT64
    numpy = np.float64 if floating else np.int64
    scalar = emit.int64s([], hint="scalar")

    def typed(x: ir.Value, known: ir.DataType | None, hint: str) -> ir.Value:
        if known == dtype:
            return x
        cast = emit.Cast(x, to=dtype.value, _hint=hint)
        cast.dtype = dtype
        return cast

    first = emit.constant(np.array(value.offset, numpy), hint="offset")
    if value.start is not None:
        start = emit.reshape(value.start, scalar, hint=f"start_{j}")
        start = typed(start, term.start_dtype, f"start_{j}")
        if value.scale != 1:
            start = emit.Mul(start, emit.constant(np.array(value.scale, numpy), hint="scale"))
        first = emit.Add(start, first, _hint=f"first_{j}")
    limit = typed(limit, term.limit_dtype, f"limit_{j}")
    span = emit.Sub(limit, first) if term.below else emit.Sub(first, limit)
    step = abs(value.step)
    if floating:
        ratio = emit.Div(span, emit.constant(np.array(step, numpy), hint="step"))
        if term.strict:
            before = emit.Ceil(ratio, _hint=f"before_{j}")
        else:
            one = emit.constant(np.array(1, numpy), hint="one")
            before = emit.Add(emit.Floor(ratio, _hint="floor"), one, _hint=f"before_{j}")
        before = extreme(emit, "Max", before, emit.constant(np.array(0, numpy), hint="none"), "")
        before = emit.Cast(before, to=ir.DataType.INT64.value, _hint=f"before_{j}")
    else:
        if not term.strict:  # x <= L is x < L + 1 for integers
            span = emit.Add(span, emit.int64s(1, hint="one"), _hint=f"span_{j}")
        if signed:
            return emit.Add(span, emit.int64s(1, hint="one"), _hint=f"runs_{j}")
        before = extreme(emit, "Max", span, emit.int64s(0, hint="none"), f"span_{j}")
        if step != 1:  # ceil(span / step) for span >= 0: Div of non-negatives is exact
            padded = emit.Add(before, emit.int64s(step - 1, hint="round_up"), _hint="padded")
            before = emit.Div(padded, emit.int64s(step, hint="step"), _hint=f"before_{j}")
    return emit.Add(before, emit.int64s(1, hint="one"), _hint=f"runs_{j}")


def _initially_bounds(cond0: ir.Value | None, node: ir.Node, terms: list[Term]) -> set[int] | None:
    """The bounds the Loop's initial condition ``cond0`` is made of, on the value before the
    first step (tf2onnx's ``Less(0.0, Cast(T))`` for a counter from 0 while ``i + 1 < T``): an
    ``And`` of comparisons, each of a bound's start (through exact ``Cast``s, or an equal
    constant) with its hoisted limit (the same outer value), of integer bounds of step 1 or -1;
    None when any part of it is not such. Then ``cond0`` holds iff each of those bounds lets
    ``1 + span`` iterations run, one or more: the count is ``max(min(M, runs...), 0)``, theirs
    ``1 + span``, with no ``Where`` on ``cond0`` (a bound it does not hold lets one or more run
    whenever it holds: the others' bounds imply theirs on the first step)."""
    if cond0 is None:
        return None
    matched: set[int] = set()
    for leaf in _and_leaves(cond0, node.graph):
        found = _bound_of(leaf, node, terms)
        if found is None:
            return None
        matched.add(found)
    return matched


def initial_bounds(cond0: ir.Value, node: ir.Node, terms: list[Term]) -> list[ir.Value]:
    """The parts of the Loop's initial condition ``cond0`` (an ``And`` of them) that are
    ``terms``' bounds on the values before the first step (:func:`_initially_bounds`): what
    decides whether the bounds let the loop start, without its data."""
    return [
        leaf for leaf in _and_leaves(cond0, node.graph) if _bound_of(leaf, node, terms) is not None
    ]


def _and_leaves(cond: ir.Value, graph: ir.Graph | None) -> list[ir.Value]:
    """``cond``'s operands through ``And``s of ``graph`` (and exact ``Cast``s)."""
    leaves: list[ir.Value] = []
    stack = [cond]
    while stack:
        value = _uncast(stack.pop())
        producer = value.producer()
        if is_onnx(producer, "And") and producer is not None and producer.graph is graph:
            stack.extend(v for v in producer.inputs if v is not None)
        else:
            leaves.append(value)
    return leaves


def _bound_of(leaf: ir.Value, node: ir.Node, terms: list[Term]) -> int | None:
    """The index of the term ``leaf`` (a comparison before the Loop) is on its start."""
    producer = leaf.producer()
    if producer is None or producer.graph is not node.graph or len(producer.inputs) != 2:
        return None
    compare = Condition._COMPARE.get(producer.op_type) if is_onnx(producer) else None
    if compare is None:
        return None
    body = node.attributes["body"].as_graph()
    a, b = (_uncast(v) if v is not None else None for v in producer.inputs)
    found = [j for j, t in enumerate(terms) if _bounds(t, compare, a, b, node, body)]
    return found[0] if found else None


def _bounds(
    term: Term,
    compare: tuple[bool, bool],
    a: ir.Value | None,
    b: ir.Value | None,
    node: ir.Node,
    body: ir.Graph,
) -> bool:
    """Whether ``a <op> b`` (``compare``: strict, below) is ``term`` on the value's start."""
    strict, below = compare
    value = term.value
    if term.floating or abs(value.step) != 1 or value.scale != 1 or value.offset != value.step:
        return False  # the value before the first step is not the start, or not exact
    if strict != term.strict:
        return False
    first, limit = (a, b) if below == term.below else (b, a)
    if limit is None or not _alike(limit, term.limit, node, body, 0):
        return False
    if value.start is None:  # the iteration number: 0 before the first step
        return _integer(first) == 0
    start = _uncast(value.start)
    if first is start:
        return True
    known = _integer(start)
    return known is not None and _integer(first) == known


def _alike(outer: ir.Value, limit: ir.Value, node: ir.Node, body: ir.Graph, depth: int) -> bool:
    """Whether ``outer`` (of the Loop's graph) is the value ``limit`` (a bound's) is hoisted to:
    itself, a passed-through state's start, or computed alike from those (PyTorch computes a
    while_loop's limit before it and again in its body, from a buffer the body writes, whose
    shape its start has: :func:`shape_source`)."""
    outer, limit = _uncast(outer), _uncast(limit)
    if limit is outer:
        return True
    if limit in body.inputs:  # a state the body passes through: its initial value
        start = node.inputs[list(body.inputs).index(limit)]
        return start is not None and _uncast(start) is outer
    made, remade = outer.producer(), limit.producer()
    if made is None or remade is None or remade.graph is not body or depth > _DEPTH:
        known, again = constant_array(outer), constant_array(limit)
        return known is not None and again is not None and np.array_equal(known, again)
    attributes = [{k: repr(a.value) for k, a in n.attributes.items()} for n in (made, remade)]
    if (made.domain, made.op_type, len(made.inputs), attributes[0]) != (
        remade.domain,
        remade.op_type,
        len(remade.inputs),
        attributes[1],
    ) or list(made.outputs).index(outer) != list(remade.outputs).index(limit):
        return False
    if is_onnx(remade, "Shape", "Size") and remade.inputs[0] is not None:
        source = shape_source(node, body, remade.inputs[0])
        return source is not None and source[1] is None and source[0] is made.inputs[0]
    return all(
        (x is None and y is None)
        or (x is not None and y is not None and _alike(x, y, node, body, depth + 1))
        for x, y in zip(made.inputs, remade.inputs, strict=True)
    )


def _uncast(value: ir.Value) -> ir.Value:
    """What ``value`` casts from an integer type (exact for the integers of counts, module
    docstring) or reshapes to one element."""
    producer = value.producer()
    while producer is not None and is_onnx(producer, "Cast", *_ONE_ELEMENT):
        source = producer.inputs[0]
        if source is None or (producer.op_type == "Cast" and not _integral(source)):
            break
        value, producer = source, source.producer()
    return value


def _integral(value: ir.Value, depth: int = 0) -> bool:
    """Whether ``value`` is of an integer type: declared so, or made by a ``Shape``, a
    ``Cast`` to one, or ops that keep their data's type from such a value."""
    if value.dtype is not None:
        return value.dtype in _INTS
    array = constant_array(value)
    if array is not None:
        return array.dtype.kind == "i"
    producer = value.producer()
    if producer is None or depth > _DEPTH or not is_onnx(producer):
        return False
    if producer.op_type in ("Shape", "Size"):
        return True
    if producer.op_type == "Cast":
        to = producer.attributes.get("to")
        return to is not None and not to.is_ref() and ir.DataType(to.as_int()) in _INTS
    keeps = ("Slice", "Gather", "Concat", "Expand", "Add", "Sub", "Mul", *_ONE_ELEMENT)
    source = producer.inputs[0] if producer.inputs else None
    return producer.op_type in keeps and source is not None and _integral(source, depth + 1)


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
        source = producer.inputs[0] if producer.inputs else None
        shaped = None
        if is_onnx(producer, "Shape", "Size") and source is not None:
            shaped = shape_source(node, body, source)  # a value of its shape, before the loop
        if shaped is not None:
            outer, perm = shaped
            if perm is not None:
                outer = emit.Transpose(outer, perm=list(perm), _hint=f"{value.name}_axes")
            inputs: list[ir.Value | None] = [outer]
        else:
            inputs = [
                None if v is None else _hoist(emit, node, body, v, done) for v in producer.inputs
            ]
        result = getattr(emit, producer.op_type)(
            *inputs, **dict(producer.attributes), _hint=f"{value.name}_outside"
        )
    if result.dtype is None and value.dtype is not None:
        result.dtype = value.dtype
    done[id(value)] = result
    return result


def extreme(emit: Emitter, op: str, a: ir.Value, b: ir.Value, hint: str) -> ir.Value:
    """``Min``/``Max`` of two values (int64 ``Min``/``Max`` exist from opset 12; before, a
    ``Where`` on ``Less``)."""
    hint = hint or op.lower()
    if emit.opset >= 12:
        return getattr(emit, op)(a, b, _hint=hint)
    less = emit.Less(a, b, _hint=f"{hint}_less")
    first, second = (a, b) if op == "Min" else (b, a)
    return emit.Where(less, first, second, _hint=hint)
