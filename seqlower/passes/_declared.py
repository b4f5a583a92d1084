"""Declared sizes of computed values, which no runtime enforces, kept out of the passes' facts.

A runtime refuses a feed whose shape differs from a main-graph input's declared static shape,
and an initializer or a ``Constant`` is its own shape. A node output's declared shape
(``value_info``), a graph output's and a subgraph input's are hints: onnxruntime runs a model
whose ``value_info`` says [5, 3, 8] while the value is [7, 3, 8] (a warning for an output at
most), and exporters write such stale hints (TorchScript's traced sizes under ``dynamic_axes``,
hand-edited models). A pass reading one as a fact would build a form right only for that size: a
constant ``ReverseSequence`` index of the declared T, a folded ``Shape``, an unrolled count,
with nothing at run time to notice.

So ``run_pipeline`` replaces each such declared integer dimension, before any pass runs, by
what is proven of it (:func:`forget_declared_sizes`): it stays where ONNX's shape inference, run
on a copy whose hints are removed, derives the same integer from what is enforced (the inputs,
the initializers and constants), and becomes unknown elsewhere. Every pass then reads sizes that
are proven, whatever helper it reads them through. The lowered model keeps the sizes so
replaced: onnxruntime's own optimizer trusts a declared static shape too (with its default
graph optimizations, ``Shape`` of a value declared [5, 3, 8] is folded to [5, 3, 8] whatever
the value is), so a hint put back on a value a lowering reads the shape of would make the
lowered model wrong there. Only the main graph's outputs that nothing reads get their declared
shapes back (:meth:`Forgotten.restore_interface`): the interface stays the user's.

The static rules (:class:`_StaticShapes`: :mod:`seqlower._shape_rules` over static sizes,
linear) give a value declaring no shape the shape and element type they prove (issue 45's 200
blocks computed 995 ``Shape`` nodes at run time without it): facts for the passes, the values'
own declarations back in the lowered model where no pass changed them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import onnx
import onnx_ir as ir

from seqlower._graphs import all_graphs, constant_shape, iter_graph_likes, subgraphs_of
from seqlower._shape_rules import (
    BROADCASTING,
    PARTIAL,
    SAME_SHAPE,
    STATIC,
    Partial,
    infer,
    partial_rule,
)
from seqlower.passes._ir import constant_array, graph_attr, int_attr, is_onnx
from seqlower.passes._types import inference_affordable

__all__ = ["Forgotten", "forget_declared_sizes"]

# Initializers of at most this many elements stay in inference's copy: Reshape targets, Slice
# bounds and Split sizes are read from them.
_KEEP = 1024
# Rounds of the states' induction (:func:`_induction`) before it assumes nothing.
_ROUNDS = 4


def _hinted(model: ir.Model, graphs: list[ir.Graph | ir.Function]) -> list[ir.Value]:
    """The values whose declared shape nothing enforces and that declare an integer size: node
    outputs, graph outputs (main graph too) and subgraph inputs, in every scope."""
    found: list[ir.Value] = []
    seen: set[int] = set()  # those found: a value met again declares the same

    def add(value: ir.Value | None) -> None:
        shape = None if value is None else value.shape
        if shape is not None and any(_claims(d) for d in shape) and id(value) not in seen:
            seen.add(id(value))
            found.append(value)  # type: ignore[arg-type]

    for graph in graphs:
        if graph is not model.graph:
            for value in graph.inputs:
                add(value)
        for node in graph:
            for value in node.outputs:
                if value.shape is not None:  # most computed values declare none
                    add(value)
        for value in graph.outputs:
            if not (value.is_graph_input() or value.is_initializer()):
                add(value)
    return found


def _derived(model: ir.Model, hinted: list[ir.Value]) -> _Derived:
    """Each value's shape as ONNX's inference derives it with the ``hinted`` values' shapes
    removed (None: not derived; empty: inference failed). The model itself is serialized, its
    large initializers as inputs (no clone, no weights copied), and the shapes read back by
    name, graph by graph: a clone and a deserialized copy cost 30 s at 120k nodes."""
    removed = [(value, value.shape) for value in hinted]
    for value in hinted:
        value.shape = None
    try:
        with _weights_as_inputs(model.graph):
            proto = ir.serde.serialize_model(model)
    except Exception:  # best effort: what stays unknown is forgotten
        return _Derived()
    finally:
        for value, shape in removed:
            value.shape = shape
    try:
        inferred = onnx.shape_inference.infer_shapes(
            proto, check_type=False, strict_mode=False, data_prop=True
        )
    except Exception:  # best effort: what stays unknown is forgotten
        return _Derived()
    found = _Derived()
    _read_shapes(model.graph, inferred.graph, found.types)
    return found


class _Derived:
    """Inferred shapes by value id, each read from its ``TypeProto`` when first asked (most
    values' never are); empty when inference failed."""

    def __init__(self) -> None:
        self.types: dict[int, onnx.TypeProto | None] = {}
        self._shapes: dict[int, ir.Shape | None] = {}

    def get(self, key: int, default: ir.Shape | None = None) -> ir.Shape | None:
        if key not in self.types:
            return default
        if key not in self._shapes:
            self._shapes[key] = _shape(self.types[key])
        return self._shapes[key]


@contextlib.contextmanager
def _weights_as_inputs(graph: ir.Graph) -> Iterator[None]:
    """``graph``'s initializers of more than ``_KEEP`` elements as typed inputs without data
    while serializing (what inference needs), put back as they were, in their order."""
    inputs = list(graph.inputs)
    initializers = list(graph.initializers.values())
    already = {id(value) for value in inputs}
    large = [
        value
        for value in initializers
        if value.const_value is not None
        and value.const_value.size > _KEEP
        and id(value) not in already
    ]
    types = [(value, value.type, value.shape) for value in large]
    try:
        for value in large:
            tensor = value.const_value
            assert tensor is not None
            if value.type is None:
                value.dtype = tensor.dtype
                value.shape = ir.Shape(tensor.shape.numpy())
            assert value.name is not None
            graph.initializers.pop(value.name)
        graph.inputs.extend(large)
        yield
    finally:
        graph.inputs.clear()
        graph.inputs.extend(inputs)
        graph.initializers.clear()
        for value in initializers:
            graph.initializers.add(value)
        for value, type_, shape in types:
            value.type, value.shape = type_, shape


def _read_shapes(
    graph: ir.Graph, inferred: onnx.GraphProto, found: dict[int, onnx.TypeProto | None]
) -> None:
    """The shape inference gave each value of ``graph`` (and of its subgraphs), by name."""
    types = {info.name: info.type for info in [*inferred.input, *inferred.value_info]}
    types.update((info.name, info.type) for info in inferred.output)
    for value in [*graph.inputs, *(out for node in graph for out in node.outputs), *graph.outputs]:
        if value.name:
            found[id(value)] = types.get(value.name)
    for node, twin in zip(graph, inferred.node, strict=True):
        for attr in twin.attribute:
            held = node.attributes.get(attr.name)
            if held is None or held.is_ref():
                continue
            if attr.type == onnx.AttributeProto.GRAPH:
                _read_shapes(held.as_graph(), attr.g, found)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub, sub_twin in zip(held.as_graphs(), attr.graphs, strict=True):
                    _read_shapes(sub, sub_twin, found)


def _shape(type_: onnx.TypeProto | None) -> ir.Shape | None:
    if type_ is None or not type_.HasField("tensor_type"):
        return None
    tensor = type_.tensor_type
    if not tensor.HasField("shape"):
        return None
    return ir.Shape(
        [
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in tensor.shape.dim
        ]
    )


def _claims(dim: int | ir.SymbolicDim) -> bool:
    """Whether a declared dimension says something: a size, or a name (equal to the
    dimensions of that name: a pass may read the size from a main-graph input of that name)."""
    return isinstance(dim, int) or dim.value is not None


def _kept(declared: ir.Shape, derived: ir.Shape | None) -> ir.Shape:
    """``declared`` with each size or name that ``derived`` does not repeat unknown."""
    if derived is None or len(derived) != len(declared):
        same = [False] * len(declared)
    else:
        same = [_claims(d) and _equal(d, e) for d, e in zip(declared, derived, strict=True)]
    dims = [d if not _claims(d) or keep else None for d, keep in zip(declared, same, strict=True)]
    return ir.Shape(dims)


def _equal(a: int | ir.SymbolicDim, b: int | ir.SymbolicDim) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int) and a == b
    return a.value is not None and a.value == b.value


_State = tuple[ir.Value, ir.Value, ir.Value, ir.Value]


def _states(model: ir.Model, hinted: list[ir.Value]) -> list[_State]:
    """(initial value, body input, body output, final value) of each state of a ``Loop`` or an
    opset-9+ ``Scan`` whose body input is hinted: ONNX's inference leaves a state's shape
    unknown in the body and after the node (it may change from one iteration to the next), so
    it is proven by induction instead."""
    ids = {id(value) for value in hinted}
    found: list[_State] = []
    for graph in all_graphs(model):
        for node in graph:
            body = graph_attr(node, "body")
            if not is_onnx(node) or body is None:
                continue
            if node.op_type == "Loop":
                pairs = zip(
                    node.inputs[2:], body.inputs[2:], body.outputs[1:], node.outputs, strict=False
                )
            elif node.op_type == "Scan" and model.opset_imports.get("", 9) >= 9:
                count = len(node.inputs) - (int_attr(node, "num_scan_inputs", 0) or 0)
                ends = node.inputs[:count], body.inputs[:count], body.outputs[:count]
                pairs = zip(*ends, node.outputs, strict=False)
            else:
                continue
            found += [
                (initial, inner, out, final)
                for initial, inner, out, final in pairs
                if initial is not None and id(inner) in ids
            ]
    return found


def _agreed(assumed: ir.Shape, *shapes: ir.Shape | None) -> ir.Shape:
    """``assumed`` with each size or name that one of ``shapes`` does not repeat unknown."""
    for shape in shapes:
        assumed = _kept(assumed, shape)
    return assumed


#: A value given a proven shape: its type and shape before, and the shape set.
_Proven = tuple[ir.Value, ir.TypeProtocol | None, ir.Shape | None, ir.Shape]


@dataclass
class Forgotten:
    """What :func:`forget_declared_sizes` changed: how many values, and the main graph's
    outputs among them (its interface) with their declared shapes."""

    changed: int = 0
    outputs: list[tuple[ir.Value, ir.Shape, ir.Shape]] = field(default_factory=list)
    #: Values that declared no size, given the static shape (and element type) the rules
    #: prove, with what they had before: the passes read them; the lowered model gets the
    #: values' own declarations back.
    proven: list[_Proven] = field(default_factory=list)

    def restore_interface(self, model: ir.Model) -> None:
        """The declared shape back on each main-graph output that nothing in the lowered
        model reads (no node can fold its shape) and that no pass has given another shape;
        a value's own declaration back where the rules gave it a proven shape no pass
        changed."""
        for value, declared, set_here in self.outputs:
            if value.shape is set_here and value in model.graph.outputs and not value.uses():
                value.shape = declared
        for value, type_, before, set_here in self.proven:
            if value.shape is set_here:
                value.type, value.shape = type_, before
        if self.proven:  # a shape passes copied from a proven one onto an untyped value
            for graph in iter_graph_likes(model):
                _untyped_shapes_dropped(graph)


def _untyped_shapes_dropped(graph: ir.Graph | ir.Function) -> None:
    """No shape on an untyped node output of ``graph`` or its subgraphs (onnx_ir writes none)."""
    for node in graph:
        for value in node.outputs:
            if value.type is None and value.shape is not None:
                value.shape = None
        if node.attributes.data:
            for subgraph in subgraphs_of(node):
                _untyped_shapes_dropped(subgraph)


def forget_declared_sizes(model: ir.Model) -> Forgotten:
    """Replace the unenforced declared integer sizes of ``model`` by what is proven of them.
    No hint, no cost: inference runs only when a computed value declares an integer size that
    the static rules do not prove (once more per round of the states' induction, rare)."""
    forgotten = Forgotten()
    graphs = all_graphs(model)
    hinted = _hinted(model, graphs)
    if not hinted:
        _StaticShapes({}, forgotten).graph(model.graph)
        return forgotten
    declared: dict[int, ir.Shape] = {}
    for value in hinted:
        assert value.shape is not None  # _hinted's
        declared[id(value)] = value.shape
    # First every hint forgotten but what the static rules prove (linear): when they prove them
    # all, or ONNX's inference costs too much to run, that is all.
    for value in hinted:
        shape = declared[id(value)]
        _forget(value, shape, _kept(shape, None), model, forgotten)
    _StaticShapes(declared, forgotten).graph(model.graph)
    if not forgotten.changed or not inference_affordable(model, graphs):
        return forgotten
    # Else derived by ONNX's inference, from the declarations as they were.
    for value in hinted:
        value.shape = declared[id(value)]
    forgotten = Forgotten(proven=forgotten.proven)
    states = _states(model, hinted)
    derived, assumed = _induction(model, hinted, states, declared)
    # A final state is the initial value or the body's last result: what both have.
    finals = {
        id(final): _agreed(inner.shape, derived.get(id(out), out.shape))
        for _, inner, out, final in states
        if id(inner) in assumed and inner.shape is not None
    }
    for value in hinted:
        shape = declared[id(value)]
        assert shape is not None
        kept = _kept(shape, derived.get(id(value)))
        if id(value) in assumed and value.shape is not None:
            kept = value.shape
        if id(value) in finals:
            kept = _kept(shape, _more(kept, finals[id(value)]))
        _forget(value, shape, kept, model, forgotten)
    _StaticShapes(declared, forgotten).graph(model.graph)
    return forgotten


def _induction(
    model: ir.Model, hinted: list[ir.Value], states: list[_State], declared: dict[int, ir.Shape]
) -> tuple[_Derived, dict[int, ir.Value]]:
    """Each state's declared sizes assumed in the body, kept when the initial value and the
    body's result (inferred under the assumptions) have them, in rounds until none drops: the
    shapes derived, and the body inputs whose (kept) assumptions hold."""
    assumed = {id(inner): inner for _, inner, _, _ in states}
    derived = _Derived()
    for _ in range(_ROUNDS):
        derived = _derived(model, [v for v in hinted if id(v) not in assumed])

        def now(value: ir.Value, derived: _Derived = derived) -> ir.Shape | None:
            return derived.get(id(value), value.shape)

        dropped = False
        for initial, inner, out, _ in states:
            if id(inner) not in assumed or inner.shape is None:
                continue
            kept = _agreed(inner.shape, now(initial), now(out))
            if list(kept) != list(inner.shape):
                inner.shape, dropped = kept, True
        if not dropped:
            return derived, assumed
    for inner in assumed.values():  # no fixed point reached: assume nothing
        inner.shape = declared[id(inner)]
    return _derived(model, hinted), {}


def _forget(
    value: ir.Value, declared: ir.Shape, kept: ir.Shape, model: ir.Model, forgotten: Forgotten
) -> None:
    if list(kept) == list(declared):
        return
    value.shape = kept
    forgotten.changed += 1
    if value in model.graph.outputs:
        forgotten.outputs.append((value, declared, kept))


def _more(derived: ir.Shape | None, proven: ir.Shape) -> ir.Shape:
    """``derived`` with the integers ``proven`` adds where it has none."""
    if derived is None or len(derived) != len(proven):
        return proven
    return ir.Shape([d if _claims(d) else p for d, p in zip(derived, proven, strict=True)])


Static = tuple[int, ...]
#: A shape proven per dimension: a size, or None where that one is not proven.


class _Seq(NamedTuple):
    """A sequence of ``length`` tensors of one static shape."""

    length: int
    element: Static


#: Ruled ops whose outputs are booleans.
_BOOLEAN = frozenset(
    {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not",
     "IsNaN", "IsInf"}
)  # fmt: skip
#: The ops of the shape rules (:mod:`seqlower._shape_rules`) :class:`_StaticShapes` takes.
_SHAPE_RULED = SAME_SHAPE | BROADCASTING | {
    "MatMul", "Transpose", "Reshape", "Concat", "Gather", "Squeeze", "Unsqueeze", "Shape",
    "Slice",
}  # fmt: skip
#: Ruled ops whose rule reads nothing of the node but its inputs' shapes (one rule for all of
#: :data:`BROADCASTING`, one for ``MatMul``).
_SHAPE_ONLY = BROADCASTING | {"MatMul"}
#: The ops :class:`_StaticShapes` has a rule for.
_RULED = _SHAPE_RULED | {
    "SequenceConstruct", "SplitToSequence", "SequenceAt", "ConcatFromSequence", "SequenceMap",
}  # fmt: skip


class _StaticShapes:
    """Static shapes proven forward from what is enforced (graph inputs, constants) and what
    ONNX's inference derived, by exact rules for a few common ops, sequences included (ONNX's
    inference knows no ``ConcatFromSequence`` length, and is not run at all past the budget); a
    forgotten declaration the rules prove to the integer is put back. Linear in the nodes: a
    declared size behind a ``SequenceMap`` is what made issue 33's reversals constant."""

    def __init__(self, declared: dict[int, ir.Shape], forgotten: Forgotten) -> None:
        self.declared = declared
        self.forgotten = forgotten
        self.tensors: dict[int, Static] = {}
        self.sequences: dict[int, _Seq] = {}
        self.dtypes: dict[int, ir.DataType] = {}  # proven element types, by value id
        self.seq_dtypes: dict[int, ir.DataType] = {}  # a sequence's elements'
        self.map_dtypes: list[ir.DataType | None] = []  # the last SequenceMap's outputs
        #: Shapes proven per dimension only (None: a dimension not proven), by value id.
        self.partial: dict[int, Partial] = {}
        #: What the rules of :data:`_SHAPE_ONLY` gave, by (a broadcasting op?, input shapes),
        #: and ``Slice``'s, by ("Slice", input shapes, which values its bounds are).
        self.memo: dict[tuple[bool | str | int | Static | None, ...], Static | None] = {}
        #: Static shapes of values no ruled node makes (unchanged by this step), by value id.
        self.fixed: dict[int, Static | None] = {}

    def graph(self, graph: ir.Graph) -> None:
        ruled, node_shapes, record = _RULED, self.node, self._record
        for node in graph:
            op = node.op_type
            if op not in ruled or not is_onnx(node):
                continue
            shapes = node_shapes(node) or []
            if shapes.count(None) != len(shapes):  # one proven
                record(node, shapes)
            if op in PARTIAL and node.outputs and not any(shapes):
                self._partly(node)

    def _record(self, node: ir.Node, shapes: Sequence[Static | _Seq | None]) -> None:
        """The shapes proven of ``node``'s outputs (and their element types) recorded, a
        declaration they prove put back, a value declaring none given them."""
        tensors, declared = self.tensors, self.declared
        dtypes = self.map_dtypes if node.op_type == "SequenceMap" else None
        dtype = None if dtypes is not None else self.out_dtype(node)
        for k, (value, shape) in enumerate(zip(node.outputs, shapes, strict=False)):
            if dtypes is not None:
                dtype = dtypes[k] if k < len(dtypes) else None
            key = id(value)
            if isinstance(shape, _Seq):
                self.sequences[key] = shape
                if dtype is not None:
                    self.seq_dtypes[key] = dtype
            elif shape is not None:
                tensors[key] = shape
                if dtype is not None:
                    self.dtypes[key] = dtype
                if key in declared:
                    self._restore(value, shape)
                else:
                    self._prove(value, shape, dtype)

    def _partly(self, node: ir.Node) -> None:
        """A tensor op's output shape proven per dimension where not all its sizes are: a
        ``MatMul`` by a [16, 64] weight ends in 64 whatever the symbolic batch, which a
        chunk of it counts its pieces by (issue 44); each size so proven replaces what the value
        declares there (a size, or the name or nothing an exporter wrote for it)."""
        value = node.outputs[0]
        found = partial_rule(node, [self.partial_shape(v) for v in node.inputs])
        if found is None or not any(isinstance(d, int) for d in found):
            return
        self.partial[id(value)] = found
        declared, now = self.declared.get(id(value)), value.shape
        if declared is None or now is None or not len(declared) == len(now) == len(found):
            return
        dims = [p if isinstance(p, int) else n for p, n in zip(found, now, strict=True)]
        if dims == list(now):
            return
        value.shape = ir.Shape(dims)
        self.forgotten.outputs = [
            (v, d, value.shape if v is value else s) for v, d, s in self.forgotten.outputs
        ]

    def partial_shape(self, value: ir.Value | None) -> Partial | None:
        """A value's shape with each size proven (a fully static one included), else None."""
        if value is None:
            return None
        full = self.shape(value)
        if full is not None:
            return full
        found = self.partial.get(id(value))
        if found is not None:
            return found
        shape = value.shape  # enforced, derived or forgotten by now
        return None if shape is None else tuple(d if isinstance(d, int) else None for d in shape)

    def _restore(self, value: ir.Value, shape: Static) -> None:
        declared = self.declared.get(id(value))
        if declared is None or value.shape is declared or list(declared) != list(shape):
            return
        value.shape = declared
        self.forgotten.changed -= 1
        self.forgotten.outputs = [o for o in self.forgotten.outputs if o[0] is not value]

    def _prove(self, value: ir.Value, shape: Static, dtype: ir.DataType | None) -> None:
        """A value that declares no size gets its proven static shape (for the passes), and
        its element type where it has none (onnx_ir writes no shape without one)."""
        before, type_ = value.shape, value.type
        if before is not None and all(isinstance(d, int) for d in before):
            return
        if type_ is None:
            if dtype is None:
                return
            value.type = ir.TensorType(dtype)
        value.shape = set_here = ir.Shape(shape)
        self.forgotten.proven.append((value, type_, before, set_here))

    def dtype(self, value: ir.Value | None) -> ir.DataType | None:
        """A tensor's element type: declared, proven here, or a constant's."""
        if value is None:
            return None
        type_ = value.type
        if type_ is not None:
            return type_.dtype
        found = self.dtypes.get(id(value))
        if found is not None:
            return found
        array = constant_array(value)
        return None if array is None else ir.DataType.from_numpy(array.dtype)

    def out_dtype(self, node: ir.Node) -> ir.DataType | None:
        """The element type of a node's (tensor) outputs, by ONNX's type rules of the ruled
        ops: the first input's but for a few."""
        op = node.op_type
        if op == "Shape":
            return ir.DataType.INT64
        if op == "Cast":
            to = int_attr(node, "to")
            return None if to is None else ir.DataType(to)
        if op in _BOOLEAN:
            return ir.DataType.BOOL
        if op in ("CastLike", "Where"):
            return self.dtype(node.inputs[1] if len(node.inputs) > 1 else None)
        if op in ("SequenceAt", "ConcatFromSequence"):
            source = node.inputs[0] if node.inputs else None
            found = None if source is None else self.seq_dtypes.get(id(source))
            if found is None and source is not None and isinstance(source.type, ir.SequenceType):
                found = source.type.elem_type.dtype
            return found
        return self.dtype(node.inputs[0] if node.inputs else None)

    def shape(self, value: ir.Value | None) -> Static | None:
        if value is None:
            return None
        key = id(value)
        found = self.tensors.get(key)
        if found is not None:
            return found
        if key in self.fixed:
            return self.fixed[key]
        found = _static(value)
        producer = value.producer()
        if producer is None or producer.op_type not in _RULED or not is_onnx(producer):
            self.fixed[key] = found  # a shape this step never changes: asked once
        return found

    def node(self, node: ir.Node) -> list[Static | _Seq | None] | None:
        """The output shapes of a node of :data:`_RULED` (None: not proven)."""
        op = node.op_type
        inputs = [self.shape(v) for v in node.inputs]
        first = inputs[0] if inputs else None
        key: tuple[bool | str | int | Static | None, ...] = ()
        if op in _SHAPE_ONLY:  # the same shapes in, the same shape out: computed once
            key = (op in BROADCASTING, *inputs)
        elif op == "Slice":  # the same with the same bounds (values, constant here)
            key = (op, *inputs, *[id(v) for v in node.inputs[1:]])
        if key:
            if key not in self.memo:
                self.memo[key] = infer(node, inputs, STATIC)
            return [self.memo[key]]
        if op in _SHAPE_RULED:
            return [infer(node, inputs, STATIC)]
        if op == "SequenceConstruct" and inputs and None not in inputs:
            same = all(s == first for s in inputs)
            return [_Seq(len(inputs), first)] if same and first is not None else None
        if op == "SplitToSequence" and first is not None:
            return [_split(node, first)]
        if op == "SequenceAt" and node.inputs:
            return [self._element(node)]
        if op == "ConcatFromSequence" and node.inputs:
            return [self._concat(node)]
        if op == "SequenceMap":
            return self._map(node)
        return None

    def _element(self, node: ir.Node) -> Static | None:
        seq = self.sequences.get(id(node.inputs[0]))
        index = constant_array(node.inputs[1]) if len(node.inputs) > 1 else None
        if seq is None or index is None or index.size != 1:
            return None
        return seq.element if -seq.length <= int(index.reshape(())) < seq.length else None

    def _concat(self, node: ir.Node) -> Static | None:
        seq = self.sequences.get(id(node.inputs[0]))
        axis, new_axis = int_attr(node, "axis", None), int_attr(node, "new_axis", 0)
        if seq is None or seq.length < 1 or axis is None:
            return None
        count, element = seq
        rank = len(element) + (1 if new_axis else 0)
        if not -rank <= axis < rank:
            return None
        axis %= rank
        if new_axis:
            return (*element[:axis], count, *element[axis:])
        return (*element[:axis], element[axis] * count, *element[axis + 1 :])

    def _map(self, node: ir.Node) -> list[Static | _Seq | None] | None:
        body = graph_attr(node, "body")
        seq = self.sequences.get(id(node.inputs[0])) if node.inputs else None
        if body is None or seq is None or len(body.inputs) != len(node.inputs):
            return None
        for value, inner in zip(node.inputs, body.inputs, strict=True):
            if value is not None and id(value) in self.sequences:
                count, element = self.sequences[id(value)]
                if count != seq.length:
                    return None
                self.tensors[id(inner)] = element
            elif (shape := self.shape(value)) is not None:
                self.tensors[id(inner)] = shape
            else:
                return None
        for inner in body.inputs:
            self._restore(inner, self.tensors[id(inner)])
        self.graph(body)
        self.map_dtypes = [self.dtype(v) for v in body.outputs]
        outs = [self.tensors.get(id(v)) for v in body.outputs]
        return [None if o is None else _Seq(seq.length, o) for o in outs]


def _static(value: ir.Value) -> Static | None:
    """A value's static shape: enforced, derived or forgotten by now, or a constant's."""
    shape = value.shape
    if shape is not None:
        dims = shape.dims
        if all(type(d) is int for d in dims):
            return dims  # type: ignore[return-value]
    if value.const_value is not None:
        return tuple(int(d) for d in value.const_value.shape.numpy())
    return constant_shape(value)


def _split(node: ir.Node, data: Static) -> _Seq | None:
    """``SplitToSequence`` into pieces of one size: no ``split`` (pieces of 1, ``keepdims``),
    or a constant one whose pieces are all equal."""
    axis = int_attr(node, "axis", 0)
    if axis is None or not -len(data) <= axis < len(data):
        return None
    axis %= len(data)
    size = data[axis]
    split = constant_array(node.inputs[1]) if len(node.inputs) > 1 else None
    if len(node.inputs) > 1 and node.inputs[1] is not None and split is None:
        return None  # a split known only at run time
    if split is None:
        keep = int_attr(node, "keepdims", 1)
        rest = (*data[:axis], *data[axis + 1 :])
        return _Seq(size, (*data[:axis], 1, *data[axis + 1 :]) if keep else rest)
    pieces = [int(p) for p in split.reshape(-1)]
    if split.ndim == 0:  # pieces of that size (the last one shorter: not one size)
        if pieces[0] <= 0 or size % pieces[0]:
            return None
        pieces = [pieces[0]] * (size // pieces[0])
    if not pieces or len(set(pieces)) != 1 or sum(pieces) != size:
        return None
    return _Seq(len(pieces), (*data[:axis], pieces[0], *data[axis + 1 :]))
