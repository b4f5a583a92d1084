"""Whether a ``Loop``'s body can be made safe on iteration 0, given only its initial states.

``LoopToScan`` (tract's variant) runs a Loop that may run zero times as a ``Scan`` of at least
one iteration, its results masked (no runtime runs a ``Scan`` of zero iterations right). That
extra iteration runs the body on ``i = 0`` and the initial states, which the original never
does when it runs zero times: exact only when the body cannot fail there. Proven here from
shapes, for bodies of ops that fail only on shapes (broadcasting, ``MatMul``, ``Gemm``,
``Einsum``, ``Reshape``, ``Split``...) or on an index: ``Gather`` at constant indices in range,
or at the iteration number or a counter (0 on iteration 0) along an axis of at least one row. A
dimension not known when lowering is a symbol: the name ONNX's shape inference (with data
propagation) gives it, the same name for the same size (a batch dimension of the input and of
the zeros a state starts from), else one of its own that equals nothing else; a shape proven
only on known sizes or same symbols. Three repairs make more bodies safe, all applied only when
the Loop runs none (so the iterations that run see what the original does): a counter starting
from a run-time value starts from 0 (tf2onnx's for-loops over ``x[first + i]``); a value read
from outside whose rows are not known in number gets one zero row appended (``Gather(x, i)``
over an ``x`` of any length, tf2onnx's TensorArray reads), as does a state the body passes
through unchanged (jax2onnx carries every scanned input so); and a ``Gather`` at an index the
body computes, along an axis of a known size of at least 1, reads index 0 (a greedy decode's
embedding of the token it carries, whatever token it starts from). What the body does with a
padding row is proven as with any row: only the shapes count, and the few values read from
them (``Shape`` and constant picks of it, an ``Expand`` of one to such a shape: the lengths
tf2onnx's ``map_fn`` over ``tf.reverse`` gives its ``ReverseSequence``, one per batch entry,
each the time length). Sizes not proven to agree (broadcasting, ``MatMul``, ``Gemm``,
``Concat``, ``Einsum``) are accepted when every shape the op reads is the same on every
iteration that runs (``_steady_shapes``): the op then fails on iteration 0 exactly when the
Loop fails on every iteration, so the only difference is a Loop that runs none on inputs its
body rejects, which fails instead of returning empty (tf2onnx's ``bidirectional_dynamic_rnn``
masks its state ``[B, 5]`` by its lengths ``[L, 1]``, two symbols). Anything else (a subgraph,
an integer ``Div``, an index into an axis of unknown size, an unknown shape) is taken as able
to fail, and named.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower._shape_rules import broadcast, infer
from seqlower.errors import describe_node
from seqlower.passes._ir import (
    BROADCASTING_CANNOT_FAIL,
    CANNOT_FAIL,
    FLOAT_TYPES,
    constant_array,
    constant_int,
    graph_attr,
    int_attr,
    ints_attr,
    is_onnx,
)
from seqlower.passes._types import TypeOracle

__all__ = [
    "FirstIteration",
    "GuardDim",
    "GuardedRow",
    "RowRead",
    "Shapes",
    "first_iteration",
]

#: A dimension: a size, or a symbol (equal only to itself).
Dim = int | str
Dims = tuple[Dim, ...]
#: The shape of a value outside the body (inferred with data propagation), None unknown.
Shapes = Callable[[ir.Value], "tuple[int | str | None, ...] | None"]
#: A size of a guarded body's zero row (``FirstIteration.body_guard``): known, or the axis of a
#: value the body reads (a state, an outer value) and its stand-in outside (a state's initial
#: value), for when the Scan's body no longer takes it.
GuardDim = int | tuple[ir.Value, ir.Value, int]
GuardedRow = tuple[tuple[GuardDim, ...], ir.DataType]
#: Ops whose one element is their input's one element (the iteration number stays itself).
_SAME_VALUES = ("Identity", "Cast", "Reshape", "Unsqueeze", "Squeeze")
#: The element types a zero row is written in.
_PADDABLE = frozenset(
    {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16,
     ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64,
     ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64,
     ir.DataType.BOOL}
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class RowRead:
    """``Gather(x, i)`` along axis 0 of an ``x`` read from outside whose number of rows is not
    known when lowering (``i`` the iteration number or a counter): it becomes a scan input over
    ``x``'s rows, one zero row appended when the Loop runs none."""

    node: ir.Node
    row: tuple[int | None, ...]  # the shape of one row of x (None: known only at run time)
    index: tuple[int, ...]  # the index's shape (one element: ``()``, ``(1,)``...)
    dtype: ir.DataType
    counter: int | None  # the counter ``i`` is (None: the iteration number, or a counter from 0)
    #: The value outside the body read: ``x``, or the Loop input a state ``x`` passes through
    #: unchanged equals (jax2onnx carries every scanned input as such a state).
    source: ir.Value


@dataclasses.dataclass
class FirstIteration:
    """What makes the body safe on iteration 0 when the Loop runs none."""

    rows: list[RowRead] = dataclasses.field(default_factory=list)
    #: Counters (carried value ``k``) that start from 0.
    starts: set[int] = dataclasses.field(default_factory=set)
    #: Whether rows of a size unknown when lowering are read in place (from ``x`` and a zero
    #: row, at indices scanned) instead of scanned (``LoopToScan``: tract types no such scan
    #: input over a count from values).
    in_place: bool = False
    #: ``Gather`` nodes at an index the body computes (a token a greedy decode carries), along
    #: an axis of a known size of at least 1: their index is 0 when the Loop runs none.
    guards: list[tuple[ir.Node, ir.DataType]] = dataclasses.field(default_factory=list)
    #: When the body is not proven safe: the whole body runs under an ``If`` on the Loop running
    #: at all, whose other branch passes the states on and writes zero rows, of these shapes and
    #: element types by Loop output (a scan output's row, a state's own).
    body_guard: dict[int, GuardedRow] | None = None


def first_iteration(
    loop: ir.Node, types: TypeOracle, counters: list[int], shapes: Shapes
) -> FirstIteration | str:
    """The repairs that make every node of ``loop``'s body safe on iteration 0, or why none do
    (the node, and what may fail)."""
    body = graph_attr(loop, "body")
    if body is None or len(body.inputs) != len(loop.inputs) or len(body.inputs) < 2:
        return "its body is not one of a Loop's interface"
    proof = _Proof(body, types, shapes, steady=_steady_shapes(loop, body, types, shapes))
    proof.invariant = _passed_through(loop, body)
    proof.known[id(body.inputs[0])] = ()
    proof.known[id(body.inputs[1])] = ()
    proof.zero[id(body.inputs[0])] = None
    for k, (state, initial) in enumerate(zip(body.inputs[2:], loop.inputs[2:], strict=True)):
        dims = None if initial is None else proof.outer(initial)
        if dims is None:
            return f"the initial value of its state '{state.name}' has no known rank"
        proof.known[id(state)] = dims
        if k in counters and dims == ():
            proof.zero[id(state)] = None if constant_int(initial) == 0 else k
    for node in body:
        why = proof.node(node)
        if why is not None:
            return f"its body's {describe_node(node)} {why}"
    return proof.repairs


def _steady_shapes(loop: ir.Node, body: ir.Graph, types: TypeOracle, shapes: Shapes) -> _Proof:
    """The body's shapes on every iteration that does not fail, a dimension that may differ
    from one iteration to the next a symbol of ``~``: the proof accepts an op failing on shapes
    alone when they hold none (it then fails on iteration 0 exactly when the Loop fails on
    every iteration). A state's dimension is steady while the body returns it unchanged
    (assumed of all, dropped where it does not: the greatest such set), or when an op that
    needs equal sizes (``Concat``, ``MatMul``'s inner ones) ties it to a steady one (pinned)."""
    varying: set[str] = set()  # the states' dimensions, "~s<k>.<j>", that may change
    pinned: set[str] = set()
    while True:
        proof = _Proof(body, types, shapes)
        proof.known[id(body.inputs[0])] = proof.known[id(body.inputs[1])] = ()
        initials: list[Dims | None] = []
        for k, (state, initial) in enumerate(zip(body.inputs[2:], loop.inputs[2:], strict=True)):
            dims = None if initial is None else proof.outer(initial)
            initials.append(dims)
            if dims is not None:
                named = (f"~s{k}.{j}" for j in range(len(dims)))
                proof.known[id(state)] = tuple(
                    d if n not in varying - pinned else n for n, d in zip(named, dims, strict=True)
                )
        for node in body:
            proof.node(node)
        changed = set()
        for k, dims in enumerate(initials):
            out = proof.dims(body.outputs[1 + k]) if 1 + k < len(body.outputs) else None
            for j, d in enumerate(dims or ()):
                name = f"~s{k}.{j}"
                if name not in varying and (
                    out is None or len(out) != len(dims or ()) or out[j] != d
                ):
                    changed.add(name)
        if changed:
            varying |= changed
            pinned = set()  # pins proven under the states assumed steady
        elif proof.pins - pinned:
            pinned |= proof.pins
        else:
            return proof


class _Proof:
    """The body's nodes in order: each one's output shape once it is proven safe."""

    def __init__(
        self, body: ir.Graph, types: TypeOracle, shapes: Shapes, steady: _Proof | None = None
    ) -> None:
        self.body = body
        self.types = types
        self.shapes = shapes
        #: The proof of iteration 0: the shapes on every iteration (``_steady_shapes``);
        #: None: this is that pass, over every iteration that does not fail.
        self.steady = steady
        #: The states' dimensions an op needing equal sizes ties to a steady one.
        self.pins: set[str] = set()
        self.known: dict[int, Dims] = {}
        #: Values that are 0 on iteration 0, by id: the counter to start from 0 for it, if any.
        self.zero: dict[int, int | None] = {}
        self.repairs = FirstIteration()
        #: 1-D integer values whose elements are known dims (``Shape`` of a proven value and
        #: what picks from it), and values all of whose elements are one known dim: enough to
        #: prove an ``Expand`` to a read shape and the lengths a ``ReverseSequence`` is given
        #: (tf2onnx's ``tf.reverse`` in ``map_fn``).
        self.values: dict[int, Dims] = {}
        self.uniform: dict[int, Dim] = {}
        self._outer: dict[int, Dims | None] = {}
        self._symbols = itertools.count()
        #: The Loop input each state the body passes through unchanged equals, by the state.
        self.invariant: dict[int, ir.Value] = {}

    def node(self, node: ir.Node) -> str | None:
        """Why ``node`` may fail on iteration 0, or None (its outputs' shapes then known)."""
        if not is_onnx(node) or not node.outputs:
            return "is not an ONNX op"
        if any(a.type == ir.AttributeType.GRAPH for a in node.attributes.values()):
            return "holds a graph"
        shapes = [None if v is None else self.dims(v) for v in node.inputs]
        outputs: list[Dims] | str | None
        if is_onnx(node, "Split"):
            outputs = _split(node, shapes)
        elif len(node.outputs) != 1:
            return "has more than one output"
        elif is_onnx(node, "Gather") and len(shapes) == 2 and shapes[1] is not None:
            gathered = self.gather(node, shapes[1])
            outputs = [gathered] if isinstance(gathered, tuple) else gathered
        elif is_onnx(node, "Shape") and node.inputs and node.inputs[0] is not None:
            values = None if shapes[0] is None else _shape_values(node, shapes[0])
            outputs = None if values is None else [(len(values),)]
            if values is not None:
                self.values[id(node.outputs[0])] = values
        elif is_onnx(node, "Expand", "ReverseSequence"):
            outputs = _one(
                self.expand(node, shapes)
                if node.op_type == "Expand"
                else self.reverse(node, shapes)
            )
        else:
            outputs = _one(self.rule(node, shapes))
        if outputs is None:
            return _why(node, shapes, None if self.steady is None else self.varying(node))
        if isinstance(outputs, str):
            return outputs
        for value, dims in zip(node.outputs, outputs, strict=True):
            self.known[id(value)] = dims
        dims = outputs[0]
        source_id = id(node.inputs[0]) if node.inputs and node.inputs[0] is not None else None
        if is_onnx(node, "Cast", "Identity") and _integral(node.outputs[0], self.types):
            if source_id in self.values:
                self.values[id(node.outputs[0])] = self.values[source_id]
            if source_id in self.uniform:
                self.uniform[id(node.outputs[0])] = self.uniform[source_id]
        if is_onnx(node, "Gather") and source_id in self.values and int_attr(node, "axis", 0) == 0:
            picked = _picked(self.values[source_id], node.inputs[1])
            if picked is not None:
                self.values[id(node.outputs[0])] = picked
        if is_onnx(node, *_SAME_VALUES) and node.inputs and node.inputs[0] is not None:
            # still i (or the counter), in one element: 0 on iteration 0
            source = self.zero.get(id(node.inputs[0]), -1)
            if source != -1 and dims == (1,) * len(dims) and _integral(node.outputs[0], self.types):
                self.zero[id(node.outputs[0])] = source
        return None

    def rule(self, node: ir.Node, shapes: list[Dims | None]) -> Dims | None:
        """``_rule`` on iteration 0, then, where sizes are not proven to agree but are the same
        on every iteration, as if they agreed; over every iteration, as if they agreed."""
        if self.steady is None:
            return _rule(node, shapes, self.types, self.fresh_for(node), self.agree)
        dims = _rule(node, shapes, self.types, self.fresh)
        if dims is None and self.varying(node) is None:
            dims = _rule(node, shapes, self.types, self.fresh, self.agree)
        return dims

    def agree(self, dims: list[Dim], exact: bool) -> Dim | None:
        """The size of sizes not proven to agree (``exact``: equal; else broadcasting, ones
        left out) when the op does not fail: None when two are known and differ."""
        sizes = {d for d in dims if isinstance(d, int)}
        if len(sizes) > 1:
            return None
        steady = sorted(d for d in dims if isinstance(d, str) and _steady(d))
        if exact and (sizes or steady):  # a varying state's dimension equals a steady one
            self.pins |= {d for d in dims if isinstance(d, str) and d.startswith("~s")}
        if sizes:
            return sizes.pop()
        if exact and steady:
            return steady[0]
        return self.fresh() if len(steady) == len(dims) else self.vary()

    def varying(self, node: ir.Node) -> str | None:
        """The first input of ``node`` whose shape may change from one iteration to the next
        (``self.steady``'s, or not known there)."""
        for value in node.inputs:
            dims = None if value is None or self.steady is None else self.steady.dims(value)
            if value is not None and (dims is None or not all(_steady(d) for d in dims)):
                return value.name
        return None

    def fresh_for(self, node: ir.Node) -> Callable[[], str]:
        """A new symbol for what ``node`` computes over every iteration: steady when its
        inputs' shapes are, and a ``Slice``'s bounds the same values every time."""
        steady = all(
            v is None or ((dims := self.dims(v)) is not None and all(_steady(d) for d in dims))
            for v in node.inputs
        )
        if is_onnx(node, "Slice"):
            steady = steady and all(v is None or self.fixed(v) for v in node.inputs[1:])
        return self.fresh if steady else self.vary

    def fixed(self, value: ir.Value) -> bool:
        """Whether ``value`` holds the same values on every iteration: a constant, or read
        from outside."""
        outside = value.graph is not None and value.graph is not self.body
        return outside or constant_array(value) is not None

    def expand(self, node: ir.Node, shapes: list[Dims | None]) -> Dims | None:
        """``Expand`` of a value of ones in every dimension to a shape known as dims (no
        dimension negative, none to disagree with): the shape it makes."""
        first = shapes[0] if shapes else None
        target = node.inputs[1] if len(node.inputs) > 1 else None
        dims = None if target is None else self.values.get(id(target))
        if first is None or dims is None or len(first) > len(dims) or set(first) - {1}:
            return None
        if node.inputs[0] is not None and len(dims) == 1:
            value = self.values.get(id(node.inputs[0]))
            if value is not None and len(value) == 1:
                self.uniform[id(node.outputs[0])] = value[0]
        return dims

    def reverse(self, node: ir.Node, shapes: list[Dims | None]) -> Dims | None:
        """``ReverseSequence`` given one length per batch entry, each the full time length."""
        if len(shapes) != 2 or shapes[0] is None or node.inputs[1] is None:
            return None
        x, lens = shapes[0], shapes[1]
        if self.steady is None:
            return x  # its lengths are values: proven on iteration 0 only
        time_axis, batch_axis = int_attr(node, "time_axis", 0), int_attr(node, "batch_axis", 1)
        if len(x) < 2 or {time_axis, batch_axis} != {0, 1} or lens is None:
            return None
        assert time_axis is not None and batch_axis is not None
        full = self.uniform.get(id(node.inputs[1]))
        return x if lens == (x[batch_axis],) and full == x[time_axis] else None

    def fresh(self) -> str:
        """A symbol equal to no other."""
        return f"?{next(self._symbols)}"

    def vary(self) -> str:
        """A symbol equal to no other, which may differ from one iteration to the next."""
        return f"~{next(self._symbols)}"

    def outer(self, value: ir.Value) -> Dims | None:
        """The shape of a value read from outside (or an initializer): sizes, symbols."""
        if id(value) not in self._outer:
            array = constant_array(value)
            shape = tuple(array.shape) if array is not None else self.shapes(value)
            self._outer[id(value)] = (
                None if shape is None else tuple(self.fresh() if d is None else d for d in shape)
            )
        return self._outer[id(value)]

    def dims(self, value: ir.Value) -> Dims | None:
        """A body value's proven shape, or the shape of a value read from outside."""
        if id(value) in self.known:
            return self.known[id(value)]
        if self.inside(value):
            return None  # computed in the body by a node not (yet) proven
        return self.outer(value)

    def inside(self, value: ir.Value) -> bool:
        return value.graph is self.body and value.producer() is not None

    def gather(self, node: ir.Node, index: Dims) -> Dims | str | None:
        """``Gather`` at the iteration number or a counter (0 on iteration 0) or at constant
        indices, in range on its axis; an axis of unknown length read from outside is padded."""
        data = node.inputs[0]
        axis = int_attr(node, "axis", 0)
        shape = None if data is None else self.dims(data)
        if data is None or shape is None or axis is None or not -len(shape) <= axis < len(shape):
            return None
        axis %= len(shape)
        size, rest = shape[axis], (*shape[:axis], *shape[axis + 1 :])
        if self.steady is None:  # its index is a value: proven on iteration 0 only
            return (*rest[:axis], *index, *rest[axis:])
        source = node.inputs[1]
        while source is not None and is_onnx(source.producer(), "Identity"):
            source = source.producer().inputs[0]  # type: ignore[union-attr]
        if size == 0:
            return None  # a static empty axis: what else reads it is proven on that
        if source is not None and id(source) in self.zero:
            counter = self.zero[id(source)]
            if not isinstance(size, int):
                outer = self.invariant.get(id(data), data)
                if (
                    self.inside(outer)
                    or id(outer) in self.known
                    or constant_array(outer) is not None
                ):
                    return None
                type_ = outer.type or self.types.type_of(outer) or data.type
                if type_ is None or type_.dtype not in _PADDABLE:
                    return f"reads rows of '{data.name}', a {type_}, which no zero row pads"
                if axis != 0:
                    return f"reads '{data.name}' along axis {axis}, of a length unknown"
                row = tuple(d if isinstance(d, int) else None for d in rest)
                flat = tuple(int(d) for d in index)
                self.repairs.rows.append(RowRead(node, row, flat, type_.dtype, counter, outer))
            if counter is not None:
                self.repairs.starts.add(counter)
        else:
            array = None if source is None else constant_array(source)
            if not isinstance(size, int):
                return None
            if array is None:  # a computed index: 0, in range, when the Loop runs none
                index_type = None if source is None else source.type or self.types.type_of(source)
                if size < 1 or index_type is None or not index_type.dtype.is_integer():
                    return None
                self.repairs.guards.append((node, index_type.dtype))
            elif not np.all((array >= -size) & (array < size)):
                return None
        return (*rest[:axis], *index, *rest[axis:])


def _passed_through(loop: ir.Node, body: ir.Graph) -> dict[int, ir.Value]:
    """The Loop input each state the body returns unchanged (through ``Identity``) equals on
    every iteration, by the state's id."""
    found: dict[int, ir.Value] = {}
    for k, (state, initial) in enumerate(zip(body.inputs[2:], loop.inputs[2:], strict=True)):
        if initial is None or 1 + k >= len(body.outputs):
            continue
        value = body.outputs[1 + k]
        while value is not state and is_onnx(value.producer(), "Identity"):
            producer = value.producer()
            if producer is None or producer.graph is not body or producer.inputs[0] is None:
                break
            value = producer.inputs[0]
        if value is state:
            found[id(state)] = initial
    return found


def _steady(dim: Dim) -> bool:
    """Whether a dimension of ``_steady_shapes`` is the same on every iteration."""
    return not (isinstance(dim, str) and dim.startswith("~"))


def _why(node: ir.Node, shapes: list[Dims | None], varying: str | None) -> str:
    """What the proof of ``node`` lacks, for the message."""
    unknown = [
        v.name for v, s in zip(node.inputs, shapes, strict=True) if v is not None and s is None
    ]
    if unknown:
        return f"reads '{unknown[0]}', whose shape is not known there"
    shown = ", ".join(
        "["
        + ", ".join(
            d
            if isinstance(d, str) and not d.startswith("?")
            else str(d)
            if isinstance(d, int)
            else "?"
            for d in s
        )
        + "]"
        for s in shapes
        if s is not None
    )
    if varying is not None:
        return (
            f"may fail on inputs of shapes {shown} (sizes not proven to agree, and the shape of "
            f"'{varying}' may change from one iteration to the next)"
        )
    return f"may fail on inputs of shapes {shown} (sizes not proven to agree, or an op not proven)"


def _one(dims: Dims | None) -> list[Dims] | None:
    return None if dims is None else [dims]


def _integral(value: ir.Value, types: TypeOracle) -> bool:
    type_ = value.type or types.type_of(value)
    dtype = None if type_ is None else type_.dtype
    return dtype is not None and dtype.is_integer()


#: Sizes that must agree (``exact``: be equal; else broadcast) to the one size they stand for.
Agree = Callable[[list[Dim], bool], "Dim | None"]


def _rule(
    node: ir.Node,
    shapes: list[Dims | None],
    types: TypeOracle,
    fresh: Callable[[], str],
    agree: Agree | None = None,
) -> Dims | None:
    """The output's shape when ``node`` cannot fail on inputs of ``shapes``, else None; with
    ``agree``, when it fails on them only where ``agree`` gives sizes not proven to agree one."""
    op = node.op_type
    if op == "Constant":
        array = constant_array(node.outputs[0])
        return None if array is None else tuple(array.shape)
    if not shapes or any(s is None for s in shapes[:1]):
        return None
    first = shapes[0]
    assert first is not None
    if op in CANNOT_FAIL or op == "CastLike":
        source = node.inputs[0]
        dtype = None if source is None else types.type_of(source)
        if op in ("Cast", "CastLike") and (dtype is None or dtype.dtype == ir.DataType.STRING):
            return None  # a string that does not parse
        return first
    if op in BROADCASTING_CANNOT_FAIL:
        if any(s is None for s in shapes):
            return None
        source = node.inputs[0]
        dtype = None if source is None else types.type_of(source)
        if op == "Div" and (dtype is None or dtype.dtype not in FLOAT_TYPES):
            return None  # an integer division by zero
    elif op == "Slice":
        return _slice(node, shapes, fresh)
    elif op == "Gemm" and len(shapes) in (2, 3) and all(s is not None for s in shapes):
        return _gemm(node, shapes, _Symbols(fresh, agree))  # type: ignore[arg-type]
    elif op not in _SHAPE_ONLY:
        return None
    return infer(node, shapes, _Symbols(fresh, agree))


#: Ops of the shape rules (:mod:`seqlower._shape_rules`) that fail on shapes alone.
_SHAPE_ONLY = frozenset(
    {"Unsqueeze", "Squeeze", "Reshape", "MatMul", "Transpose", "Concat", "CumSum", "Einsum"}
    | {"ArgMax", "ArgMin"}
)


class _Symbols:
    """Sizes and symbols (:data:`Dim`): dimensions combine when proven to (one size or symbol,
    1s broadcasting), or where ``agree`` takes them; a ``Concat`` of symbols is a new one."""

    one = 1

    def __init__(self, fresh: Callable[[], str], agree: Agree | None) -> None:
        self.fresh, self.agree = fresh, agree

    def broadcast(self, dims: list[Dim]) -> Dim | None:
        sizes = set(dims) - {1}
        if len(sizes) > 1:
            return None if self.agree is None else self.agree(sorted(sizes, key=str), False)
        return sizes.pop() if sizes else 1

    def equal(self, dims: list[Dim]) -> Dim | None:
        if len(set(dims)) == 1:
            return dims[0]
        return None if self.agree is None else self.agree(dims, True)

    def sum(self, dims: list[Dim]) -> Dim | None:
        return sum(dims) if all(isinstance(d, int) for d in dims) else self.fresh()  # type: ignore[arg-type]

    def known(self, dim: Dim) -> int | None:
        return dim if isinstance(dim, int) else None

    def size(self, number: int) -> Dim:
        return number


def _shape_values(node: ir.Node, shape: Dims) -> Dims | None:
    """The dims ``Shape`` returns, ``start``/``end`` clamped (it never fails once its input has
    a rank: its output is 1-D, of their number)."""
    rank = len(shape)
    start, end = int_attr(node, "start", 0), int_attr(node, "end", rank)
    if start is None or end is None:
        return None
    start, end = (max(0, min(rank, d + rank if d < 0 else d)) for d in (start, end))
    return shape[start:end]


def _picked(values: Dims, index: ir.Value | None) -> Dims | None:
    """The dims a ``Gather`` at constant 1-D indices picks (a scalar index: None, the rank
    changes)."""
    array = constant_array(index)
    if array is None or array.ndim != 1:
        return None
    size = len(values)
    if not np.all((array >= -size) & (array < size)):
        return None
    return tuple(values[int(k)] for k in array)


def _slice(node: ir.Node, shapes: list[Dims | None], fresh: Callable[[], str]) -> Dims | None:
    """``Slice`` clamps its starts and ends: it fails only on its axes and steps (constants
    here, steps not 0); a sliced dimension is a new symbol."""
    first = shapes[0]
    starts = shapes[1] if len(shapes) > 1 else None
    if first is None or starts is None or len(starts) != 1 or not isinstance(starts[0], int):
        return None
    if len(shapes) < 3 or shapes[2] != starts:
        return None
    count = starts[0]
    axes: list[int] = list(range(count))
    if len(node.inputs) > 3 and node.inputs[3] is not None:
        array = constant_array(node.inputs[3])
        if array is None or array.size != count:
            return None
        axes = [int(a) for a in array.reshape(-1)]
    if len(node.inputs) > 4 and node.inputs[4] is not None:
        steps = constant_array(node.inputs[4])
        if steps is None or steps.size != count or not np.all(steps != 0):
            return None
    rank = len(first)
    if any(not -rank <= a < rank for a in axes) or len({a % rank for a in axes}) != len(axes):
        return None
    sliced = {a % rank for a in axes}
    return tuple(fresh() if k in sliced else d for k, d in enumerate(first))


def _gemm(node: ir.Node, shapes: list[Dims], symbols: _Symbols) -> Dims | None:
    """``Gemm``: A and B of rank 2 (each transposed as its attribute says), inner sizes equal,
    C broadcasting to the result one way (PyTorch's ``nn.Linear`` in a ``while_loop``)."""
    a, b = shapes[0], shapes[1]
    trans_a, trans_b = int_attr(node, "transA", 0), int_attr(node, "transB", 0)
    if len(a) != 2 or len(b) != 2 or trans_a is None or trans_b is None:
        return None
    (m, k), (k2, n) = (a[::-1] if trans_a else a), (b[::-1] if trans_b else b)
    if symbols.equal([k, k2]) is None:
        return None
    out, agree = (m, n), symbols.agree
    strict = _Symbols(symbols.fresh, None)
    if len(shapes) == 3 and (len(shapes[2]) > 2 or broadcast([out, shapes[2]], strict) != out):
        c = shapes[2]  # broadcast to the result one way: each dimension 1 or the result's
        if len(c) > 2 or agree is None:
            return None
        if any(
            d not in (1, o) and agree([d, o], False) is None
            for d, o in zip(c[::-1], out[::-1], strict=False)
        ):
            return None
    return out


def _split(node: ir.Node, shapes: list[Dims | None]) -> list[Dims] | None:
    """``Split`` along an axis of known size, by constant sizes adding up to it or in equal
    parts."""
    first = shapes[0] if shapes else None
    axis = int_attr(node, "axis", 0)
    if first is None or axis is None or not -len(first) <= axis < len(first):
        return None
    axis %= len(first)
    size, parts = first[axis], len(node.outputs)
    if not isinstance(size, int):
        return None
    sizes = ints_attr(node, "split")
    if sizes is None and len(node.inputs) > 1 and node.inputs[1] is not None:
        array = constant_array(node.inputs[1])
        if array is None:
            return None
        sizes = [int(d) for d in array.reshape(-1)]
    if sizes is None:
        if int_attr(node, "num_outputs") not in (None, parts) or size % parts:
            return None  # opset 18's uneven last part: left unproven
        sizes = [size // parts] * parts
    if len(sizes) != parts or sum(sizes) != size or min(sizes) < 0:
        return None
    return [(*first[:axis], d, *first[axis + 1 :]) for d in sizes]
