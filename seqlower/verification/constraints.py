"""What the check's generated inputs must satisfy, read from the model's graph.

Random values of the declared type are wrong for integers that index something: a
``ReverseSequence`` length larger than the time axis, a ``Gather`` index past the end, a
``SequenceAt`` position past the last element make the original model fail, which says nothing
about a lowering. This module walks every scope of a model (If/Loop/Scan/SequenceMap bodies,
model-local functions at each call site), follows each index-like operand back through
value-preserving ops (Cast, Identity, Reshape, Squeeze, Unsqueeze, Expand, Concat, Gather of a
vector, Min, Max, Abs, ...) to the graph input its values come from, and the tensor it indexes
back to the graph input (and axis) its dimension comes from. It also records which dimensions
must agree (a length count and a batch size, the two sides of a broadcast), so that
:mod:`seqlower.verification.inputs` can draw shapes first and then values inside their ranges.

It reads ``onnx`` protos only and knows nothing of seqlower's passes.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import onnx

from seqlower._graphs import is_onnx
from seqlower._shape_rules import BROADCASTING, SAME_SHAPE, broadcast, concat, transpose

__all__ = ["Analysis", "Constraint", "SeqLen", "Slot", "analyze"]


@dataclasses.dataclass(frozen=True)
class Slot:
    """Axis ``axis`` of graph input ``input`` (of each of its elements, for a sequence)."""

    input: str
    axis: int


@dataclasses.dataclass(frozen=True)
class SeqLen:
    """The length of sequence graph input ``input``."""

    input: str


@dataclasses.dataclass(frozen=True)
class Constraint:
    """The values of graph input ``source`` must suit ``node``'s index-like operand.

    ``kind``: ``lengths`` (0..n), ``index`` (0..n-1), ``position`` (-n..n-1), ``insert``
    (-n..n), ``count`` (0..n), ``span`` (-n..n), ``split`` (non-negative, summing to n),
    ``chunk`` (1..n), ``seqlens`` (1..n: RNN/GRU/LSTM), ``positive`` (1..), ``trip`` (0..a
    few). ``limit`` gives n: one dimension or sequence length, or (``index``/``span`` along the
    last axis of the operand, GatherND and Slice) one per position of that axis.
    """

    kind: str
    source: str
    limit: Slot | SeqLen | tuple[Slot | None, ...] | None
    node: str
    #: The source's values reach the node unchanged (no Min/Max/Abs on the way) and the node
    #: runs whenever the model does (not in an If branch or a Loop/Scan body): user inputs
    #: that break it are wrong, not just unlucky.
    exact: bool = False


@dataclasses.dataclass
class Analysis:
    """Every constraint on graph inputs, the dimensions that must be equal, and which graph
    inputs reach each node (to name the input when a node rejects a draw)."""

    constraints: dict[str, list[Constraint]] = dataclasses.field(default_factory=dict)
    ties: list[tuple[Slot, Slot]] = dataclasses.field(default_factory=list)
    #: Axes of sequence elements that must be one size in every element (a stack).
    uniform: set[Slot] = dataclasses.field(default_factory=set)
    #: Axes with a size a constant requires: exactly (a constant lengths' count), at least
    #: (the largest constant length along the time axis).
    exact_sizes: dict[Slot, int] = dataclasses.field(default_factory=dict)
    min_sizes: dict[Slot, int] = dataclasses.field(default_factory=dict)
    reaches: dict[str, set[str]] = dataclasses.field(default_factory=dict)

    def add(self, constraint: Constraint) -> None:
        found = self.constraints.setdefault(constraint.source, [])
        if constraint not in found:
            found.append(constraint)


@dataclasses.dataclass(frozen=True)
class _Info:
    """What the walk knows of one value: graph inputs its values are copied from, the graph
    input axis each of its dimensions equals, and for a sequence its length and elements."""

    values: frozenset[str] = frozenset()
    exact: frozenset[str] = frozenset()  # the sources whose values arrive unchanged
    dims: tuple[Slot | None, ...] | None = None
    const: tuple[int, ...] | None = None  # a constant integer scalar's or vector's values
    length: str | None = None  # a sequence with the length of this sequence graph input
    element: _Info | None = None  # a sequence's elements


_EMPTY = _Info()

# Ops whose output holds (some of) the values of these inputs.
_SAME_VALUES = {
    "Identity": (0,),
    "Cast": (0,),
    "CastLike": (0,),
    "Abs": (0,),
    "Reshape": (0,),
    "Squeeze": (0,),
    "Unsqueeze": (0,),
    "Expand": (0,),
    "Flatten": (0,),
    "Transpose": (0,),
    "Tile": (0,),
    "Slice": (0,),
    "Gather": (0,),
    "GatherElements": (0,),
    "GatherND": (0,),
    "Concat": None,  # every input
    "Min": None,
    "Max": None,
    "TopK": (0,),  # its values (output 0): some of its input's, sorted
}
_CHANGES_VALUES = {"Abs", "Min", "Max"}  # in range if their inputs are, not only then
_MAX_DEPTH = 40  # nested scopes and function calls followed


def analyze(model: onnx.ModelProto) -> Analysis:
    """Walk every scope of ``model`` and collect what its graph inputs must satisfy."""
    walker = _Walker(model)
    initializers = {t.name for t in model.graph.initializer}
    env: dict[str, _Info] = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        env[value.name] = _input_info(value)
    walker.graph(model.graph, _Scope(env), depth=0)
    return walker.analysis


def _input_info(value: onnx.ValueInfoProto) -> _Info:
    type_ = value.type
    if type_.HasField("sequence_type"):
        elem = type_.sequence_type.elem_type
        name = frozenset([value.name])
        return _Info(length=value.name, element=_Info(name, name, _slots(value, elem)))
    return _Info(frozenset([value.name]), frozenset([value.name]), _slots(value, type_))


def _slots(value: onnx.ValueInfoProto, type_: onnx.TypeProto) -> tuple[Slot, ...] | None:
    if not type_.HasField("tensor_type") or not type_.tensor_type.HasField("shape"):
        return None
    return tuple(Slot(value.name, axis) for axis in range(len(type_.tensor_type.shape.dim)))


class _Walker:
    def __init__(self, model: onnx.ModelProto) -> None:
        self.analysis = Analysis()
        self.functions = {(f.domain, f.name): f for f in model.functions}
        self.static = _static_dims(model)
        self.certain = True  # the nodes walked now run whenever the model runs

    # ---------------------------------------------------------------- scopes

    def graph(self, graph: onnx.GraphProto, scope: _Scope, depth: int) -> list[_Info]:
        for init in graph.initializer:
            scope[init.name] = _constant(init)
        self.nodes(graph.node, scope, depth)
        return [scope.get(o.name) for o in graph.output]

    def nodes(self, nodes: Iterable[onnx.NodeProto], scope: _Scope, depth: int) -> None:
        for node in nodes:
            infos = [scope.get(name) if name else _EMPTY for name in node.input]
            outputs = self.node(node, infos, scope, depth)
            for name, info in zip(node.output, outputs, strict=False):
                if name:
                    scope[name] = info
            reaching = set()
            for info in infos:
                reaching |= _inputs_of(info)
            label = _label(node)
            self.analysis.reaches.setdefault(label, set()).update(reaching)

    def node(
        self, node: onnx.NodeProto, infos: list[_Info], scope: _Scope, depth: int
    ) -> list[_Info]:
        op = node.op_type
        attrs = {a.name: a for a in node.attribute}
        key = (node.domain, op)
        if key in self.functions and depth < _MAX_DEPTH:
            return self.call(self.functions[key], infos, depth + 1)
        if not is_onnx(node):
            return [_EMPTY] * len(node.output)
        if op == "Constant" and "value" in attrs:
            return [_constant(attrs["value"].t)]
        self.constrain(node, op, attrs, infos)
        if op == "SequenceMap" and "body" in attrs and depth < _MAX_DEPTH:
            body = attrs["body"].g
            inner = {}
            for name, info in zip((i.name for i in body.input), infos, strict=False):
                inner[name] = info.element if info.element is not None else info
            outs = self.graph(body, scope.child(inner), depth + 1)
            length = infos[0].length if infos else None
            return [_Info(length=length, element=_EMPTY if o is None else o) for o in outs]
        if op in ("Loop", "Scan", "If") and depth < _MAX_DEPTH:
            certain, self.certain = self.certain, False
            try:
                return self.control(node, op, attrs, infos, scope, depth)
            finally:
                self.certain = certain
        for attr in node.attribute:  # any other op holding a graph: walk it for its constraints
            for graph in [attr.g] if attr.HasField("g") else list(attr.graphs):
                self.graph(graph, scope.child({}), depth + 1)
        return self.transfer(op, attrs, infos, len(node.output))

    def call(self, function: onnx.FunctionProto, infos: list[_Info], depth: int) -> list[_Info]:
        scope = _Scope(dict(zip(function.input, infos, strict=False)))
        self.nodes(function.node, scope, depth)
        return [scope.get(name) for name in function.output]

    def control(
        self,
        node: onnx.NodeProto,
        op: str,
        attrs: Mapping[str, onnx.AttributeProto],
        infos: list[_Info],
        scope: _Scope,
        depth: int,
    ) -> list[_Info]:
        if op == "If":
            for branch in ("then_branch", "else_branch"):
                if branch in attrs:
                    self.graph(attrs[branch].g, scope.child({}), depth + 1)
            return [_EMPTY] * len(node.output)
        body = attrs["body"].g
        names = [i.name for i in body.input]
        inner: dict[str, _Info] = {}
        if op == "Loop":
            carried = infos[2:]
            shaped: dict[str, _Info] = {}
            for k, name in enumerate(names[2:]):
                if k >= len(carried):
                    continue
                # A state the body passes on unchanged keeps what is known of its initial
                # value; one it changes keeps the initial value's dimensions if the body's
                # result for it has them too (checked after the walk, which is redone
                # without them otherwise).
                if _passes_through(body, name, k + 1):
                    inner[name] = carried[k]
                elif carried[k].dims is not None:
                    inner[name] = shaped[name] = _Info(dims=carried[k].dims)
            saved = self.snapshot()
            outs = self.graph(body, scope.child(inner), depth + 1)
            kept = all(
                outs[1 + k].dims == shaped[name].dims
                for k, name in enumerate(names[2:])
                if name in shaped and 1 + k < len(outs)
            )
            if not kept:
                self.restore(saved)
                for name in shaped:
                    del inner[name]
                self.graph(body, scope.child(inner), depth + 1)
            return [_EMPTY] * len(node.output)
        # Scan: states, then scan inputs sliced along their scan axis.
        num_scan = int(attrs["num_scan_inputs"].i) if "num_scan_inputs" in attrs else 0
        states = len(infos) - num_scan
        axes = list(attrs["scan_input_axes"].ints) if "scan_input_axes" in attrs else []
        for j, name in enumerate(names[states:]):
            info = infos[states + j] if states + j < len(infos) else _EMPTY
            axis = axes[j] if j < len(axes) else 0
            dims: tuple[Slot | None, ...] | None = None
            if info.dims is not None and -len(info.dims) <= axis < len(info.dims):
                per_step = list(info.dims)
                del per_step[axis % len(info.dims)]
                dims = tuple(per_step)
            inner[name] = _Info(info.values, info.exact, dims)
        self.graph(body, scope.child(inner), depth + 1)
        return [_EMPTY] * len(node.output)

    # ---------------------------------------------------------------- values

    def transfer(
        self, op: str, attrs: Mapping[str, onnx.AttributeProto], infos: list[_Info], count: int
    ) -> list[_Info]:
        if not infos:
            return [_EMPTY] * count
        values: frozenset[str] = frozenset()
        exact: frozenset[str] = frozenset()
        if op in _SAME_VALUES:
            picked = _SAME_VALUES[op]
            sources = infos if picked is None else [infos[i] for i in picked if i < len(infos)]
            for info in sources:
                values |= info.values
                if op not in _CHANGES_VALUES:
                    exact |= info.exact
        dims = None
        if op in SAME_SHAPE:
            dims = infos[0].dims
        elif op in BROADCASTING:
            dims = self.broadcast(infos)
        elif op == "Concat" and "axis" in attrs:
            dims = self.concat(infos, int(attrs["axis"].i))
        elif op in ("Squeeze", "Unsqueeze"):
            dims = _squeeze(op, attrs, infos)
        elif op == "Reshape" and infos[0].dims is not None:
            dims = self.flattened(infos)
        elif op == "Transpose" and infos[0].dims is not None:
            dims = transpose(infos[0].dims, list(attrs["perm"].ints) if "perm" in attrs else None)
        if op == "Identity" and (infos[0].length or infos[0].element):
            return [infos[0]]
        if op in ("SequenceInsert", "SequenceErase"):
            return [_Info(element=infos[0].element)]
        out = _Info(values, exact, dims)
        return [out] + [_EMPTY] * (count - 1)

    def flattened(self, infos: list[_Info]) -> tuple[Slot | None, ...] | None:
        """A Reshape to [-1] of a tensor with one axis not statically 1 (tf2onnx's [N, 1]
        lengths) keeps that axis."""
        dims = infos[0].dims or ()
        if len(infos) < 2 or infos[1].const != (-1,):
            return None
        wide = [d for d in dims if d is None or self.static.get(d) != 1]
        return (wide[0],) if len(wide) == 1 else None

    def broadcast(self, infos: list[_Info]) -> tuple[Slot | None, ...] | None:
        """Tie the dimensions of a broadcasting op's inputs (right-aligned) unless one is a
        static 1; each output axis is the one its sizes not 1 are (:class:`_Ties`)."""
        known = [i.dims for i in infos if i.dims is not None]
        if len(known) != len(infos) or not known:
            return None
        found = broadcast(known, _Ties(self))
        return None if found is None else tuple(None if d is _ANY else d for d in found)

    def concat(self, infos: list[_Info], axis: int) -> tuple[Slot | None, ...] | None:
        known = [i.dims for i in infos if i.dims is not None]
        if len(known) != len(infos) or not known or len({len(d) for d in known}) != 1:
            return None
        found = concat(known, axis, _Ties(self))
        return None if found is None else tuple(None if d is _ANY else d for d in found)

    def snapshot(self) -> tuple[dict[str, list[Constraint]], int, set[Slot]]:
        analysis = self.analysis
        constraints = {k: list(v) for k, v in analysis.constraints.items()}
        return constraints, len(analysis.ties), set(analysis.uniform)

    def restore(self, saved: tuple[dict[str, list[Constraint]], int, set[Slot]]) -> None:
        self.analysis.constraints = saved[0]
        del self.analysis.ties[saved[1] :]
        self.analysis.uniform = saved[2]

    def tie(self, a: Slot | None, b: Slot | None) -> None:
        if a is not None and b is not None and a != b:
            self.analysis.ties.append((a, b))

    # ---------------------------------------------------------------- constraints

    def constrain(
        self,
        node: onnx.NodeProto,
        op: str,
        attrs: Mapping[str, onnx.AttributeProto],
        infos: list[_Info],
    ) -> None:
        """What ``node``'s index-like operands ask of the inputs they come from: the rule
        registered for its op (:func:`_register`), if any."""
        rule = _RULES.get(op)
        if rule is not None:
            rule(_Site(self, node, attrs, infos))


#: A dimension :class:`_Ties` gives the shape rules for one that is no graph input's axis (the
#: rules' None is "fails"), None again in the walk's shapes.
_ANY = Slot("", -1)


class _Ties:
    """The walk's dimensions (a graph input's axis, None: not one) as the shape rules combine
    them: those that must agree are tied, a static 1 broadcasting (tied to nothing)."""

    one: Slot | None = None

    def __init__(self, walker: _Walker) -> None:
        self.walker = walker

    def broadcast(self, dims: list[Slot | None]) -> Slot | None:
        """The axis of the sizes not 1, tied (or a static 1 when all are)."""
        wide = [s for s in dims if s is None or self.walker.static.get(s) != 1]
        self.equal(wide)
        return next((s for s in wide if s is not None), _ANY) if wide else dims[0]

    def equal(self, dims: list[Slot | None]) -> Slot | None:
        tied = [s for s in dims if s is not None]
        for a, b in itertools.pairwise(tied):
            self.walker.tie(a, b)
        return dims[0] if dims and dims[0] is not None else _ANY

    def sum(self, dims: list[Slot | None]) -> Slot | None:
        return _ANY

    def known(self, dim: Slot | None) -> int | None:
        return None if dim is None else self.walker.static.get(dim)

    def size(self, number: int) -> Slot | None:
        return None


@dataclasses.dataclass
class _Site:
    """One node as a rule sees it: its operands' :class:`_Info` and what it may record."""

    walker: _Walker
    node: onnx.NodeProto
    attrs: Mapping[str, onnx.AttributeProto]
    infos: list[_Info]

    def need(self, kind: str, info: _Info, limit: Any) -> None:
        """The values reaching ``info`` must suit a ``kind`` operand bounded by ``limit``."""
        label = _label(self.node)
        for source in info.values:
            exact = self.walker.certain and source in info.exact
            self.walker.analysis.add(Constraint(kind, source, limit, label, exact))

    def attr_int(self, name: str, default: int) -> int:
        return int(self.attrs[name].i) if name in self.attrs else default

    def arg(self, i: int) -> _Info | None:
        """Operand ``i``, or None when the node omits it."""
        return self.infos[i] if i < len(self.infos) and self.node.input[i] else None


#: Op type -> what its index-like operands ask of the inputs (see :class:`Constraint`).
_RULES: dict[str, Callable[[_Site], None]] = {}


def _register(*ops: str) -> Callable[[Callable[[_Site], None]], Callable[[_Site], None]]:
    """Make the decorated function the rule of ``ops`` (as onnxscript's rewriter and OnnxSlim's
    shape handlers register theirs): adding an index-like operand is one function."""

    def add(rule: Callable[[_Site], None]) -> Callable[[_Site], None]:
        for op in ops:
            assert op not in _RULES, f"{op}: two rules"
            _RULES[op] = rule
        return rule

    return add


@_register("ReverseSequence")
def _reverse_sequence(site: _Site) -> None:
    data, lengths = site.arg(0), site.arg(1)
    if data is None or lengths is None:
        return
    time_axis, batch_axis = site.attr_int("time_axis", 0), site.attr_int("batch_axis", 1)
    site.need("lengths", lengths, _dim(data, time_axis))
    if lengths.dims is not None and len(lengths.dims) == 1:
        site.walker.tie(lengths.dims[0], _dim(data, batch_axis))
    batch, time = _dim(data, batch_axis), _dim(data, time_axis)
    analysis = site.walker.analysis
    if lengths.const is not None:  # constant lengths fix the batch, bound the time
        if batch is not None:
            analysis.exact_sizes[batch] = len(lengths.const)
        if time is not None and lengths.const:
            analysis.min_sizes[time] = max(max(lengths.const), analysis.min_sizes.get(time, 0))


@_register("SequenceAt", "SequenceErase")
def _sequence_position(site: _Site) -> None:
    data, position = site.arg(0), site.arg(1)
    if data is not None and position is not None and data.length is not None:
        site.need("position", position, SeqLen(data.length))


@_register("SequenceInsert")
def _sequence_insert(site: _Site) -> None:
    data, position = site.arg(0), site.arg(2)
    if data is not None and position is not None and data.length is not None:
        site.need("insert", position, SeqLen(data.length))


@_register("Gather", "GatherElements", "ScatterElements")
def _gather(site: _Site) -> None:
    data, indices = site.arg(0), site.arg(1)
    if data and indices:
        limit = _dim(data, site.attr_int("axis", 0))
        if limit is not None:
            site.need("index", indices, limit)


@_register("ScatterND", "GatherND")
def _nd(site: _Site) -> None:
    data, indices = site.arg(0), site.arg(1)
    if data is not None and indices is not None and data.dims is not None:
        batch_dims = site.attr_int("batch_dims", 0) if site.node.op_type == "GatherND" else 0
        site.need("index", indices, tuple(data.dims[batch_dims:]))


@_register("Slice")
def _slice(site: _Site) -> None:
    data = site.arg(0)
    if data is None or data.dims is None:
        return
    if len(site.node.input) < 4 or not site.node.input[3]:  # axes omitted: 0, 1, ... in order
        for i in (1, 2):
            bound = site.arg(i)
            if bound is not None:
                site.need("span", bound, tuple(data.dims))


@_register("TopK")
def _top_k(site: _Site) -> None:
    data, k = site.arg(0), site.arg(1)
    if data is not None and k is not None:
        limit = _dim(data, site.attr_int("axis", -1))
        if limit is not None:
            site.need("count", k, limit)


@_register("ConcatFromSequence")
def _concat_from_sequence(site: _Site) -> None:
    data = site.arg(0)
    if data is None or data.element is None or data.element.dims is None:
        return
    dims = data.element.dims  # stacked: equal shapes; concatenated: equal but on the axis
    new_axis = site.attr_int("new_axis", 0)
    axis = site.attr_int("axis", 0) % max(len(dims) + new_axis, 1)
    for a, slot in enumerate(dims):
        if slot is not None and (new_axis or a != axis):
            site.walker.analysis.uniform.add(slot)


@_register("Split")
def _split(site: _Site) -> None:
    data, sizes = site.arg(0), site.arg(1)
    if data is not None and sizes is not None:
        site.need("split", sizes, _dim(data, site.attr_int("axis", 0)))


@_register("SplitToSequence")
def _split_to_sequence(site: _Site) -> None:
    data, split = site.arg(0), site.arg(1)
    if data is not None and split is not None:
        limit = _dim(data, site.attr_int("axis", 0))
        site.need("chunk" if split.dims == () else "split", split, limit)


@_register("OneHot")
def _one_hot(site: _Site) -> None:
    depth = site.arg(1)
    if depth is not None:
        site.need("positive", depth, None)


@_register("Range")
def _range(site: _Site) -> None:
    delta = site.arg(2)
    if delta is not None:
        site.need("positive", delta, None)


@_register("Loop")
def _loop(site: _Site) -> None:
    trips = site.arg(0)
    if trips is not None:
        site.need("trip", trips, None)


@_register("RNN", "GRU", "LSTM")
def _recurrent(site: _Site) -> None:
    data, lens = site.arg(0), site.arg(4)
    if data is None or lens is None:
        return
    # sequence_lens: one length per batch row, at most the time axis (layout 1: [B, T]).
    time_axis, batch_axis = (1, 0) if site.attr_int("layout", 0) else (0, 1)
    site.need("seqlens", lens, _dim(data, time_axis))
    if lens.dims is not None and len(lens.dims) == 1:
        site.walker.tie(lens.dims[0], _dim(data, batch_axis))


@_register("Tile", "ConstantOfShape")
def _count(site: _Site) -> None:
    target = site.arg(1) if site.node.op_type == "Tile" else site.arg(0)
    if target is not None:
        site.need("count", target, None)


def _dim(info: _Info, axis: int) -> Slot | None:
    """The slot of ``info``'s axis ``axis`` (negative counts from the end), if known."""
    if info.dims is None or not -len(info.dims) <= axis < len(info.dims):
        return None
    return info.dims[axis]


class _Scope:
    """Names visible in one graph: its own, then the enclosing graphs' (outer-scope reads)."""

    def __init__(self, own: dict[str, _Info], parent: _Scope | None = None) -> None:
        self.own = own
        self.parent = parent

    def get(self, name: str) -> _Info:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.own:
                return scope.own[name]
            scope = scope.parent
        return _EMPTY

    def __setitem__(self, name: str, info: _Info) -> None:
        self.own[name] = info

    def child(self, own: dict[str, _Info]) -> _Scope:
        return _Scope(dict(own), self)


def _constant(tensor: onnx.TensorProto) -> _Info:
    if tensor.data_type not in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
        return _EMPTY
    if len(tensor.dims) > 1 or (tensor.dims and tensor.dims[0] > 4096):
        return _EMPTY
    try:
        values = onnx.numpy_helper.to_array(tensor).reshape(-1).tolist()
    except Exception:
        return _EMPTY
    return _Info(const=tuple(int(v) for v in values))


def _squeeze(
    op: str, attrs: Mapping[str, onnx.AttributeProto], infos: list[_Info]
) -> tuple[Slot | None, ...] | None:
    """The dimensions after Squeeze/Unsqueeze with known axes (input since opset 13)."""
    dims = infos[0].dims
    if "axes" in attrs:
        axes: tuple[int, ...] | None = tuple(attrs["axes"].ints)
    else:
        axes = infos[1].const if len(infos) > 1 else None
    if dims is None or axes is None:
        return None
    if op == "Squeeze":
        gone = {a % len(dims) for a in axes if -len(dims) <= a < len(dims)}
        return tuple(d for a, d in enumerate(dims) if a not in gone)
    rank = len(dims) + len(axes)
    new = {a % rank for a in axes}
    rest = iter(dims)
    return tuple(None if a in new else next(rest, None) for a in range(rank))


def _passes_through(body: onnx.GraphProto, name: str, output: int) -> bool:
    """Whether the body's ``output``-th output is its input ``name`` (directly or by Identity)."""
    if output >= len(body.output):
        return False
    target = body.output[output].name
    producers = {o: n for n in body.node for o in n.output}
    for _ in range(8):
        if target == name:
            return True
        node = producers.get(target)
        if node is None or node.op_type != "Identity" or not node.input:
            return False
        target = node.input[0]
    return False


def _inputs_of(info: _Info | None) -> set[str]:
    if info is None:
        return set()
    found = set(info.values)
    found.update(s.input for s in info.dims or () if s is not None)
    if info.length:
        found.add(info.length)
    found |= _inputs_of(info.element)
    return found


def _label(node: onnx.NodeProto) -> str:
    return f"{node.op_type} node '{node.name}'" if node.name else f"a {node.op_type} node"


def _static_dims(model: onnx.ModelProto) -> dict[Slot, int]:
    found: dict[Slot, int] = {}
    for value in model.graph.input:
        type_ = value.type
        while type_.HasField("sequence_type"):
            type_ = type_.sequence_type.elem_type
        if type_.HasField("tensor_type") and type_.tensor_type.HasField("shape"):
            for axis, d in enumerate(type_.tensor_type.shape.dim):
                if d.HasField("dim_value"):
                    found[Slot(value.name, axis)] = d.dim_value
    return found
