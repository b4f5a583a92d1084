"""A sequence a ``Loop`` builds by appending, read only by ``ConcatFromSequence``, as tensors.

tf2onnx writes ``tf.map_fn`` (ragged outputs included) and TensorArray loops as::

    s0 = SequenceEmpty(dtype)
    ..., s = Loop(M, cond, ..., s0) with body (i, c, ..., s_in) ->
        t = ...
        s_out = SequenceInsert(s_in, t)       # appended, no position
        -> (c', ..., s_out)
    y = ConcatFromSequence(s, axis=a, new_axis=n)

Two sequence-free forms, both exact:

- **stacked**: when every iteration's ``t`` has one shape (inferred dimensions that are numbers
  or names of the main graph's input dimensions), ``t`` becomes a scan output of the Loop and
  each ``ConcatFromSequence`` a ``Transpose``/``Reshape`` of the stacked tensor (as in
  :mod:`~seqlower.passes.sequences.scan_sequence_map`);
- **accumulated**: when the pieces are ragged along the concatenation axis (``new_axis=0``, every
  other dimension a known number), the carried sequence becomes a carried tensor, seeded with an
  empty constant of the right shape and grown by ``Concat(acc, t, axis=a)`` each iteration.

For zero iterations the original's ``ConcatFromSequence`` of an empty sequence fails in
onnxruntime; the stacked form returns what the runtime gives a scan output with no iteration and
the accumulated one the empty seed. A carried sequence that is used in any other way is left,
with the reason recorded for the sequence-free check.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from seqlower.errors import describe_node
from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._dims import BROADCASTING, SAME_SHAPE
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import block, constant_array, graph_attr, is_onnx, loop_body
from seqlower.passes._shared import concat_problem, concat_stacked, scan_outputs
from seqlower.passes._types import TypeOracle

__all__ = ["StackLoopSequences"]


@dataclasses.dataclass
class _Carry:
    index: int  # among the Loop's carried values
    insert: ir.Node  # the body's SequenceInsert
    dtype: ir.DataType
    rank: int
    accumulate_shape: list[int] | None  # the empty seed's shape, in the accumulated form
    axis: int  # the accumulated form's concatenation axis (normalized)
    #: Seed dimensions named on a main-graph input, by position: (that input, its axis, name).
    named: dict[int, tuple[ir.Value, int, str]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    opset: int
    carries: list[_Carry]


class StackLoopSequences(NodeLoweringPass[_Plan]):
    """Loop-built sequences read by ConcatFromSequence as scan outputs or carried tensors."""

    op_type = "Loop"
    takes_all = False

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        # Dimensions named on the model's inputs are one size for the whole run.
        self._input_dims = {
            str(d)
            for value in model.graph.inputs
            for d in (value.shape or ())
            if isinstance(d, ir.SymbolicDim) and d.value
        }
        # Where each such name can be read (the first input holding it), for a ragged seed.
        self._dim_at: dict[str, tuple[ir.Value, int]] = {}
        for value in model.graph.inputs:
            for k, d in enumerate(value.shape or ()):
                if isinstance(d, ir.SymbolicDim) and d.value:
                    self._dim_at.setdefault(str(d), (value, k))
        return super().call(model)

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        body = loop_body(node)
        carried = len(node.inputs) - 2
        if body is None or carried < 1:
            return None
        stable_dims = self._input_dims
        carries = []
        for c in range(carried):
            seed = node.inputs[2 + c]
            empty = None if seed is None else seed.producer()
            if not is_onnx(empty, "SequenceEmpty") or empty is None:
                continue
            carry = self._carry(node, body, c, empty, types, stable_dims)
            if carry is not None:
                carries.append(carry)
        if not carries:
            return None
        return _Plan(node, body, site.opset, carries)

    def _carry(
        self,
        node: ir.Node,
        body: ir.Graph,
        c: int,
        empty: ir.Node,
        types: TypeOracle,
        stable_dims: set[str],
    ) -> _Carry | None:
        state, final = body.inputs[2 + c], node.outputs[c]
        insert = _appended_only(node, body, c)
        if insert is None:
            return None
        if final.is_graph_output() or not all(
            is_onnx(use.node, "ConcatFromSequence") and use.idx == 0 for use in final.uses()
        ):
            block(node, f"its sequence '{final.name}' is read by more than ConcatFromSequence")
            return None
        tensor = insert.inputs[1]
        dtype_attr = empty.attributes.get("dtype")
        dtype = ir.DataType(dtype_attr.as_int()) if dtype_attr else ir.DataType.FLOAT
        shape = None if tensor is None else (tensor.shape or _appended_shape(tensor, types))
        if shape is None:
            block(node, f"the rank of what it appends to '{state.name}' is unknown")
            return None
        concats = [use.node for use in final.uses()]
        for concat in concats:
            problem = concat_problem(concat, len(shape))
            if problem:
                block(node, f"{describe_node(concat)} {problem}")
                return None
        stable = all(isinstance(d, int) or (d.value and str(d) in stable_dims) for d in shape)
        if stable:
            return _Carry(c, insert, dtype, len(shape), None, 0)
        carry = self._ragged(node, insert, c, dtype, shape, concats)
        if carry is None:
            block(
                node,
                f"what it appends to '{state.name}' may change shape from one iteration to the "
                f"next (inferred: {shape}) and is not concatenated along one axis with every "
                "other dimension known",
            )
        return carry

    def _ragged(
        self,
        node: ir.Node,
        insert: ir.Node,
        c: int,
        dtype: ir.DataType,
        shape: ir.Shape,
        concats: list[ir.Node],
    ) -> _Carry | None:
        """A carry of tensors whose shape changes: one concatenation along one axis, every
        other dimension a known number (or named on a main-graph input)."""
        settings = {
            (
                concat.attributes["axis"].as_int() % len(shape) if len(shape) else 0,
                _new_axis(concat),
            )
            for concat in concats
        }
        if len(settings) != 1 or len(shape) == 0:
            return None
        ((axis, new_axis),) = settings
        others = [d for k, d in enumerate(shape) if k != axis]
        if not new_axis and all(isinstance(d, int) for d in others):
            seed = [0 if k == axis else int(d) for k, d in enumerate(shape)]  # type: ignore[arg-type]
            return _Carry(c, insert, dtype, len(shape), seed, axis)
        named = self._named_dims(node, shape, axis)
        if not new_axis and named is not None and dtype != ir.DataType.STRING:
            seed = [0 if k == axis or k in named else int(d) for k, d in enumerate(shape)]  # type: ignore[arg-type]
            return _Carry(c, insert, dtype, len(shape), seed, axis, named)
        return None

    def _named_dims(
        self, node: ir.Node, shape: ir.Shape, axis: int
    ) -> dict[int, tuple[ir.Value, int, str]] | None:
        """The dimensions but ``axis`` that are named on a main-graph input (one size for the
        whole run, read from that input's shape for the seed), when all others are numbers and
        the Loop is not in a function (which cannot read the inputs); else None."""
        if isinstance(node.graph, ir.Function) or node.inputs[0] is None:
            return None
        named = {}
        for k, d in enumerate(shape):
            if k == axis or isinstance(d, int):
                continue
            at = self._dim_at.get(str(d)) if isinstance(d, ir.SymbolicDim) and d.value else None
            if at is None:
                return None
            named[k] = (*at, str(d))
        return named or None

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, body, names, base = ctx.node, plan.body, ctx.names, ctx.base
        carried = len(node.inputs) - 2
        before, tail = ctx.before(), ctx.into(body)
        split = _split_carries(plan, before, tail)
        scans = list(body.outputs[1 + carried :])
        appended = [carry.insert.inputs[1] for carry in split.stacked]
        body.inputs.clear()
        body.outputs.clear()
        body.inputs.extend(split.body_inputs)
        scanned = scan_outputs(tail, body, [*scans, *appended])  # type: ignore[list-item]
        for carry in plan.carries:
            body.remove(carry.insert, safe=True)
        body.extend(tail.nodes)
        body.outputs.extend([*split.body_outputs, *scanned])
        old_outputs = [*split.kept_finals, *node.outputs[carried:]]
        new_outputs = [
            ir.Value(name=names.fresh(f"{old.name or base}_new"), type=old.type, shape=old.shape)
            for old in old_outputs
        ]
        stacked = [
            ir.Value(name=names.fresh(f"{base}_stacked"), type=ir.TensorType(carry.dtype))
            for carry in split.stacked
        ]
        del node.attributes["body"]
        before.Loop(
            *split.inputs,
            body=body,
            _outputs=[*new_outputs, *stacked],
            _name=node.name or names.fresh("Loop"),
            _doc_string=node.doc_string,
        )
        new_of = {id(old): new for old, new in zip(old_outputs, new_outputs, strict=True)}
        ctx.redirect([new_of.get(id(old)) for old in node.outputs], rename=True)
        self._concats(ctx, split, old_outputs, new_outputs, stacked)
        ctx.remove()

    def _concats(
        self,
        ctx: Rewrite,
        split: _Split,
        old_outputs: list[ir.Value],
        new_outputs: list[ir.Value],
        stacked: list[ir.Value],
    ) -> None:
        """Each ConcatFromSequence of an accumulated sequence reads the grown tensor, each of a
        stacked one the scan output."""
        for carry, old in split.accumulated:
            new = new_outputs[old_outputs.index(old)]
            new.type, new.shape = ir.TensorType(carry.dtype), _grown_shape(carry)
            for use in list(new.uses()):
                _forward(ctx.at(use.node), new)
        dropped = [ctx.node.outputs[carry.index] for carry in split.stacked]
        for carry, old, value in zip(split.stacked, dropped, stacked, strict=True):
            for use in list(old.uses()):
                concat_stacked(ctx.at(use.node), value, carry.rank)


@dataclasses.dataclass
class _Split:
    """The Loop's carried values sorted: kept as they are, accumulated in a growing tensor, or
    stacked as scan outputs; with the new Loop's inputs and body inputs/outputs so far."""

    inputs: list[ir.Value | None]
    body_inputs: list[ir.Value]
    body_outputs: list[ir.Value]
    kept_finals: list[ir.Value]  # the old Loop outputs the new one keeps, in order
    accumulated: list[tuple[_Carry, ir.Value]]
    stacked: list[_Carry]


def _split_carries(plan: _Plan, before: Emitter, tail: Emitter) -> _Split:
    node, body = plan.node, plan.body
    by_index = {carry.index: carry for carry in plan.carries}
    split = _Split(list(node.inputs[:2]), list(body.inputs[:2]), [body.outputs[0]], [], [], [])
    for c in range(len(node.inputs) - 2):
        carry = by_index.get(c)
        state, result = body.inputs[2 + c], body.outputs[1 + c]
        if carry is None:
            split.inputs.append(node.inputs[2 + c])
            split.body_inputs.append(state)
            split.body_outputs.append(result)
            split.kept_finals.append(node.outputs[c])
        elif carry.accumulate_shape is not None:
            split.inputs.append(_seed(before, carry, node.inputs[0]))
            state.type, state.shape = ir.TensorType(carry.dtype), _grown_shape(carry)
            grown = tail.Concat(state, carry.insert.inputs[1], axis=carry.axis, _hint="grown")
            grown.type, grown.shape = ir.TensorType(carry.dtype), _grown_shape(carry)
            split.body_inputs.append(state)
            split.body_outputs.append(grown)
            split.kept_finals.append(node.outputs[c])
            split.accumulated.append((carry, node.outputs[c]))
        else:
            split.stacked.append(carry)
    return split


def _forward(ctx: Rewrite, tensor: ir.Value) -> None:
    """A ConcatFromSequence (``ctx.node``) of the accumulated tensor: the tensor itself (an
    Identity keeps the output's name)."""
    result = ctx.before(pool=None).Identity(tensor, _hint="y")
    old = ctx.node.outputs[0]
    result.type, result.shape = old.type or tensor.type, old.shape
    ctx.replace([result], rename=True)


def _seed(emit: Emitter, carry: _Carry, trip_count: ir.Value | None) -> ir.Value:
    """The empty tensor the accumulation starts from.

    Computed from the trip count rather than a constant: OpenVINO folds a constant empty seed
    into a static shape that its Loop then cannot grow ("Accessing out-of-range dimension").
    """
    assert carry.accumulate_shape is not None
    zeros = np.zeros(carry.accumulate_shape, dtype=carry.dtype.numpy())
    if trip_count is None or carry.dtype == ir.DataType.STRING:
        return emit.constant(zeros, hint="seed")
    count = emit.Reshape(trip_count, emit.int64s([1], hint="one"), _hint="count")
    none = emit.Mul(count, emit.int64s([0], hint="zero"), _hint="none")
    dims = [
        none
        if k == carry.axis
        else emit.dims(carry.named[k][0], carry.named[k][1], carry.named[k][1] + 1, hint="dim")
        if k in carry.named
        else emit.int64s([d], hint=f"dim_{k}")
        for k, d in enumerate(carry.accumulate_shape)
    ]
    shape = dims[0] if len(dims) == 1 else emit.Concat(*dims, axis=0, _hint="shape")
    value = ir.Tensor(np.zeros([1], dtype=carry.dtype.numpy()))
    return emit.ConstantOfShape(shape, value=value, _hint="seed")


def _grown_shape(carry: _Carry) -> ir.Shape:
    """The accumulated tensor's shape: the seed's, with the growing axis unknown."""
    assert carry.accumulate_shape is not None
    dims = carry.accumulate_shape
    named = {k: ir.SymbolicDim(name) for k, (_, _, name) in carry.named.items()}
    return ir.Shape([None if k == carry.axis else named.get(k, d) for k, d in enumerate(dims)])


def _new_axis(concat: ir.Node) -> bool:
    attr = concat.attributes.get("new_axis")
    return attr is not None and attr.as_int() == 1


_REDUCE = frozenset(
    {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2"}
)
_TRACE_DEPTH = 32


def _appended_only(node: ir.Node, body: ir.Graph, c: int) -> ir.Node | None:
    """The ``SequenceInsert`` that appends to carried sequence ``c`` when that is all the body
    does with it (its one use, at the end, its result carried straight out), else None."""
    state, result = body.inputs[2 + c], body.outputs[1 + c]
    uses = list(state.uses())
    insert = uses[0].node if len(uses) == 1 else None
    if (
        insert is None
        or not is_onnx(insert, "SequenceInsert")
        or insert.graph is not body
        or uses[0].idx != 0
        or (len(insert.inputs) > 2 and insert.inputs[2] is not None)
        or insert.outputs[0] is not result
        or list(result.uses())
        or list(body.outputs).count(result) != 1
    ):
        block(node, f"its carried sequence '{state.name}' is not only appended to")
        return None
    return insert


def _appended_shape(value: ir.Value, types: TypeOracle, depth: int = 0) -> ir.Shape | None:
    """The shape of an appended tensor, traced through the ops PyTorch's ``embedding_bag``
    writes around it (nested ``If``s with untyped branches, ``Slice``, ``Reduce*`` keeping
    dims, broadcasting arithmetic); shape inference gives nothing there because the exporter
    leaves the Loop body's inputs untyped. A dimension one branch or operand leaves unknown takes
    another's known size: a real mismatch fails at run time (stacking or concatenating unequal
    tensors), never gives other numbers."""
    if value.shape is not None:
        return value.shape
    inferred = types.shape_of(value)  # ONNX's inference first (it may run once per model)
    if inferred is not None:
        return inferred
    producer = value.producer()
    if producer is None or depth > _TRACE_DEPTH or not is_onnx(producer):
        return None
    index = list(producer.outputs).index(value)
    op, inputs = producer.op_type, list(producer.inputs)

    def traced(v: ir.Value | None) -> ir.Shape | None:
        return None if v is None else _appended_shape(v, types, depth + 1)

    if op == "If":
        branches = [graph_attr(producer, name) for name in ("then_branch", "else_branch")]
        shapes = [traced(g.outputs[index]) for g in branches if g is not None]
        return _unify(shapes) if len(shapes) == 2 else None
    if index != 0 or not inputs:
        return None
    if op in SAME_SHAPE:
        return traced(inputs[0])
    if op in BROADCASTING:
        shapes = [traced(v) for v in inputs]
        if any(shape is None for shape in shapes):
            return None
        rank = max(len(shape) for shape in shapes if shape is not None)
        aligned = [
            ir.Shape([None] * (rank - len(shape)) + list(shape))
            for shape in shapes
            if shape is not None
        ]
        return _unify(aligned, ones_broadcast=True)
    source = traced(inputs[0])
    if source is None:
        return None
    if op == "Slice":  # the sliced axes change length; which they are, only constant axes say
        axes = constant_array(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else None
        known = None if axes is None else [int(a) % len(source) for a in axes.reshape(-1)]
        return _sliced(source, known)
    if op in _REDUCE:
        keep = producer.attributes.get("keepdims")
        if keep is not None and keep.as_int() == 0:
            return None
        axes = constant_array(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else None
        if axes is None or not len(source):
            return None
        reduced = {int(a) % len(source) for a in axes.reshape(-1)}
        return ir.Shape([1 if k in reduced else d for k, d in enumerate(source)])
    return None


def _sliced(source: ir.Shape, axes: list[int] | None) -> ir.Shape:
    """``source`` with the sliced axes unknown (all of them when ``axes`` is not known)."""
    return ir.Shape([None if axes is None or k in axes else d for k, d in enumerate(source)])


def _unify(shapes: Sequence[ir.Shape | None], ones_broadcast: bool = False) -> ir.Shape | None:
    """One shape for values that must agree: known sizes win over unknown ones; sizes that
    disagree become unknown (with ``ones_broadcast``, a 1 gives way to the other size)."""
    if not shapes or any(shape is None for shape in shapes):
        return None
    ranks = {len(shape) for shape in shapes if shape is not None}
    if len(ranks) != 1:
        return None
    dims: list[int | ir.SymbolicDim | None] = []
    for k in range(ranks.pop()):
        sizes = [shape[k] if isinstance(shape[k], int) else None for shape in shapes if shape]
        if ones_broadcast:  # a 1 says nothing of the result; an unknown size may be anything
            sizes = [d for d in sizes if d != 1] or [1]
            known = set(sizes)
            dims.append(known.pop() if len(known) == 1 else None)
            continue
        known = {d for d in sizes if d is not None}
        dims.append(known.pop() if len(known) == 1 else None)
    return ir.Shape(dims)
