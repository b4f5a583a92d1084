"""Lower ``SequenceMap`` into ``Loop`` over ``SequenceAt``, and back into sequences.

Many runtimes and converters have no ``SequenceMap`` kernel, and onnxruntime's own function
expansion of it fails on valid models (nested maps, body names that clash with its expansion,
function ops such as ``CenterCropPad`` in the body). Every ``SequenceMap`` becomes::

    n   = SequenceLength(input_sequence)
    e_j = SequenceEmpty(dtype=T_j)                        # one per output
    out_1..out_m = Loop(n, "", e_1..e_m) with body:
        (i, cond, acc_1..acc_m) ->
            x_k = SequenceAt(seq_k, i)                    # for each sequence input
            ... the original body, unchanged; tensor inputs read from the outer scope ...
            acc_j' = SequenceInsert(acc_j, r_j)           # r_j: the original body outputs
        -> (cond, acc_1'..acc_m')

When every body output has a static shape, the results are scan outputs instead, and
``SplitToSequence(axis=0, keepdims=0)`` turns each stacked tensor back into the sequence:
carrying a sequence through ``SequenceInsert`` copies it on every iteration in onnxruntime
(quadratic), stacking does not. Both forms return empty sequences of the right type for an
empty input.

When, besides, the map takes one sequence of elements of one declared static shape and its
body is elementwise (unary elementwise ops, and broadcasting ops whose other operands are
constants or outer values of rank at most the element's, so the stacked axis never meets
theirs), no loop is needed: the body runs once on the stacked elements::

    out_1..out_m = If(Greater(SequenceLength(seq), 0))
        then: s = ConcatFromSequence(seq, axis=0, new_axis=1); ... the body on s ...;
              out_j = SplitToSequence(r_j, axis=0, keepdims=0)
        else: out_j = SequenceEmpty(dtype=T_j)   # ConcatFromSequence refuses an empty one

When the sequence is ``SplitToSequence(x, axis=0, keepdims=0)`` (onnxscript's ``SplitToSequence``
→ ``SequenceMap`` → ``ConcatFromSequence``), ``x`` already is the stacked elements: the body's
nodes move into the graph and read ``x``, no ``If``, and each ``ConcatFromSequence`` of ``out_j``
reads ``r_j`` itself (through a ``Transpose`` or ``Reshape`` for other axes), so such a map
leaves no sequence op behind unless something else reads ``out_j``. A sequence a
``SequenceConstruct`` makes is never empty: the same, on ``ConcatFromSequence(seq, axis=0,
new_axis=1)``, with no ``If`` (fewer nodes to build, write and load).

The original body graph object becomes the Loop body, so its nodes, initializers, value infos
and any lowered inner ``SequenceMap`` stay exactly as they were.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx_ir as ir

from seqlower.errors import InvalidNodeError
from seqlower.passes._base import NameGenerator, NodeLoweringPass, Rewrite, Site
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import constant_array, is_onnx, is_static, rank_of
from seqlower.passes._shared import (
    concat_problem,
    concat_stacked,
    cut_interface,
    inline_untyped_sequence_map_functions,
    is_sequence,
    prepend,
    scan_outputs,
)
from seqlower.passes._stacking import elementwise, run_on_stack, stacked_source
from seqlower.passes._types import TypeOracle, element_dtype
from seqlower.passes._validate import validate_sequence_map

__all__ = ["LowerSequenceMap"]

_SCALAR = ir.Shape([])
_INT64 = ir.DataType.INT64


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    opset: int
    input_is_sequence: list[bool]
    output_dtypes: list[ir.DataType]
    static_shapes: list[tuple[int, ...]] | None  # every body output's, when all are static
    vector: bool = False  # an elementwise body over one static sequence: run once, stacked


class LowerSequenceMap(NodeLoweringPass[_Plan]):
    """Replace every ``SequenceMap`` with an equivalent ``Loop`` (see the module docstring);
    the count of each form chosen (``scan``, ``carried``) is in :attr:`forms` after a run."""

    op_type = "SequenceMap"
    takes_handed_walk = True  # ``call`` drops it when it inlines

    def __init__(self, stack_static: bool = True, *, ragged_only: bool = False) -> None:
        """``stack_static``: use scan outputs when every body output's shape is static.
        ``ragged_only``: only the maps over the pieces of a split by run-time sizes
        (``SplitToSequence(x, lens)``, a 1-D ``lens`` computed at run time), which OpenVINO
        runs as a ``Loop`` once ``slice-split-pieces`` reads the pieces as ``Slice``s and
        ``stack-loop-sequences`` grows the results as tensors (the sequence-free passes leave
        such maps: the pieces differ in length)."""
        super().__init__()
        self.stack_static = stack_static
        self.ragged_only = ragged_only
        self.takes_all = not ragged_only
        self.forms: dict[str, int] = {}

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.forms = {}
        # onnxscript's functions leave their maps untyped: inlined, they get the call's types.
        inlined = inline_untyped_sequence_map_functions(model)
        if inlined:
            self.drop_walk()  # the walk handed over saw the calls, not their nodes
        result = super().call(model)
        return ir.passes.PassResult(result.model, modified=result.modified or inlined > 0)

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        if self.ragged_only and not _over_ragged_pieces(site.node):
            return None
        return self._plan_map(site, types)

    def _plan_map(self, site: Site, types: TypeOracle) -> _Plan:
        node = site.node
        body = validate_sequence_map(node)

        sequence_inputs = [is_sequence(node, k, types) for k in range(len(node.inputs))]
        dtypes = [_output_dtype(node, body, j, types) for j in range(len(node.outputs))]
        shapes = [types.static_shape(result) for result in body.outputs]
        static = None
        if self.stack_static and all(shape is not None for shape in shapes):
            static = [shape for shape in shapes if shape is not None]
        vector = False
        if sequence_inputs == [True] and elementwise(body):
            # Split rows have one shape; elements of another sequence must declare theirs.
            element = body.inputs[0].shape
            split = stacked_source(node.inputs[0], body) is not None  # type: ignore[arg-type]
            vector = split or (static is not None and is_static(element))
        return _Plan(node, body, site.opset, sequence_inputs, dtypes, static, vector)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, body, names, base = ctx.node, plan.body, ctx.names, ctx.base
        if plan.vector:
            self.forms["vector"] = self.forms.get("vector", 0) + 1
            _vectorized(ctx, plan)
            return
        form = "carried" if plan.static_shapes is None else "scan"
        self.forms[form] = self.forms.get(form, 0) + 1
        before, after = ctx.before(), ctx.after()  # outer graph, ahead of and after the Loop
        reads, tail = ctx.into(body), ctx.into(body)  # body, ahead of and after its own nodes
        count = before.SequenceLength(node.inputs[0], _hint="length", _dtype=_INT64)
        count.shape = _SCALAR
        # The body becomes the Loop body: element reads first, then the original nodes.
        iteration = _scalar_input(names.fresh(f"{base}_iteration"), _INT64)
        cond_in = _scalar_input(names.fresh(f"{base}_cond_in"), ir.DataType.BOOL)
        results = _read_elements(ctx, plan, reads, iteration)
        cond_out = ir.Value(name=names.fresh(f"{base}_cond_out"), type=_tensor(ir.DataType.BOOL))
        cond_out.shape = _SCALAR
        tail.Identity(cond_in, _hint="cond_out", _output=cond_out)
        loop_outputs = _new_outputs(plan, names, base)
        if plan.static_shapes is not None:
            body.inputs.extend([iteration, cond_in])
            body_outputs, node_outputs, loop_inputs = _stacked(
                plan, names, base, (before, after, tail), count, results, loop_outputs
            )
        else:
            carried_in, body_outputs, loop_inputs = _carried(
                plan, names, base, (before, tail), count, results
            )
            body.inputs.extend([iteration, cond_in, *carried_in])
            node_outputs = loop_outputs
        prepend(body, reads.nodes)
        body.extend(tail.nodes)
        body.outputs.extend([cond_out, *body_outputs])
        del node.attributes["body"]
        before.Loop(*loop_inputs, body=body, _outputs=node_outputs, **_carried_over(ctx, "Loop"))
        ctx.replace(loop_outputs)


def _over_ragged_pieces(node: ir.Node) -> bool:
    """Whether the map reads the pieces of a split by sizes computed at run time."""
    source = node.inputs[0] if node.inputs else None
    split = None if source is None else source.producer()
    if not is_onnx(split, "SplitToSequence") or split is None or len(split.inputs) < 2:
        return False
    sizes = split.inputs[1]
    return sizes is not None and rank_of(sizes) == 1 and constant_array(sizes) is None


def _read_elements(
    ctx: Rewrite, plan: _Plan, reads: Emitter, iteration: ir.Value
) -> list[ir.Value]:
    """Each body input of a sequence read as the iteration's element (``SequenceAt``), each of
    a tensor as the outer tensor itself; returns the body's results, its interface cut."""
    body, names, base = plan.body, ctx.names, ctx.base
    outer_inputs: list[ir.Value] = list(ctx.node.inputs)  # type: ignore[arg-type]
    replacements: dict[ir.Value, ir.Value] = {}
    for k, (param, outer) in enumerate(zip(body.inputs, outer_inputs, strict=True)):
        if not plan.input_is_sequence[k]:
            replacements[param] = outer  # tensors are read from the outer scope
            continue
        element = ir.Value(
            name=names.take_over(param.name, f"{base}_element_{k}"),
            type=param.type or _element_type_of(outer),
            shape=param.shape,
        )
        reads.SequenceAt(outer, iteration, _hint=f"element_{k}", _output=element)
        replacements[param] = element
    return cut_interface(body, replacements, list(body.outputs))


def _carried_over(ctx: Rewrite, op_type: str) -> dict[str, Any]:
    """What the node that replaces the map keeps of it: its name (a fresh one without), doc
    string and metadata."""
    node = ctx.node
    return {
        "_name": node.name or ctx.names.fresh(f"SequenceMap_{op_type}"),
        "_doc_string": node.doc_string,
        "_metadata": node.metadata_props,
    }


def _new_outputs(plan: _Plan, names: NameGenerator, base: str) -> list[ir.Value]:
    """The sequences that replace the map's outputs: their names, docs and metadata kept."""
    return [
        ir.Value(
            name=old.name or names.fresh(f"{base}_out_{j}"),
            type=_sequence(plan.output_dtypes[j]),
            doc_string=old.doc_string,
            metadata_props=dict(old.metadata_props) or None,
        )
        for j, old in enumerate(plan.node.outputs)
    ]


def _stacked(
    plan: _Plan,
    names: NameGenerator,
    base: str,
    emitters: tuple[Emitter, Emitter, Emitter],
    count: ir.Value,
    results: list[ir.Value],
    sequences: list[ir.Value],
) -> tuple[list[ir.Value], list[ir.Value], list[ir.Value | None]]:
    """Static result shapes: each iteration's results are stacked as scan outputs (no sequence
    is copied per iteration), then split back into the ``sequences`` SequenceMap returns.
    Returns the body's outputs after the condition, the Loop's outputs and its inputs."""
    before, after, tail = emitters
    assert plan.static_shapes is not None
    scanned = scan_outputs(tail, plan.body, results)
    stacked = [
        ir.Value(
            name=names.fresh(f"{base}_stacked_{j}"),
            type=_tensor(dtype),
            shape=ir.Shape([None, *plan.static_shapes[j]]),
        )
        for j, dtype in enumerate(plan.output_dtypes)
    ]
    for j, (tensor, sequence) in enumerate(zip(stacked, sequences, strict=True)):
        after.SplitToSequence(tensor, axis=0, keepdims=0, _hint=f"split_{j}", _output=sequence)
    # An explicit true condition: a trailing empty input would be dropped by onnx_ir's
    # RemoveUnusedNodesPass, leaving a Loop with one input, which is invalid.
    keep_going = before.constant(np.array(True), hint="true")
    return scanned, stacked, [count, keep_going]


def _vectorized(ctx: Rewrite, plan: _Plan) -> None:
    """The map as one run of its elementwise body on the stacked elements (module docstring),
    the body graph becoming the ``If``'s then branch."""
    node, body, names, base = ctx.node, plan.body, ctx.names, ctx.base
    sequence = node.inputs[0]
    assert sequence is not None
    split = stacked_source(sequence, body)
    if split is not None:
        _vectorized_in_place(ctx, plan, split)
        return
    elements = _constructed(sequence)
    if elements is not None:
        _vectorized_constructed(ctx, plan, sequence, elements)
        return
    before = ctx.before()
    reads, tail = ctx.into(body), ctx.into(body)
    count = before.SequenceLength(sequence, _hint="length", _dtype=_INT64)
    nonempty = before.Greater(count, before.int64s(0, hint="zero"), _hint="nonempty")
    param = body.inputs[0]
    stacked = reads.ConcatFromSequence(sequence, axis=0, new_axis=1, _hint="stacked")
    stacked.type = param.type or _element_type_of(sequence)
    stacked.shape = None if param.shape is None else ir.Shape([None, *param.shape])
    # Every value the body computes now has the stacked axis in front (its Constants aside).
    for inner in body:
        if inner.op_type != "Constant":
            for value in inner.outputs:
                if value.shape is not None:
                    value.shape = ir.Shape([None, *value.shape])
    results = cut_interface(body, {param: stacked}, list(body.outputs))
    pieces = []
    for j, (result, dtype) in enumerate(zip(results, plan.output_dtypes, strict=True)):
        piece = tail.SplitToSequence(result, axis=0, keepdims=0, _hint=f"split_{j}")
        piece.type = _sequence(dtype)
        pieces.append(piece)
    prepend(body, reads.nodes)
    body.extend(tail.nodes)
    body.outputs.extend(pieces)
    empty = ctx.into(body, pool=None)
    empties = []
    for j, dtype in enumerate(plan.output_dtypes):
        value = empty.SequenceEmpty(dtype=dtype.value, _hint=f"empty_{j}")
        value.type = _sequence(dtype)
        empties.append(value)
    nothing = ir.Graph(
        [], empties, nodes=empty.nodes, name=names.fresh(f"{base}_empty"), opset_imports={}
    )
    outputs = _new_outputs(plan, names, base)
    del node.attributes["body"]
    before.If(
        nonempty,
        then_branch=body,
        else_branch=nothing,
        _outputs=outputs,
        **_carried_over(ctx, "If"),
    )
    ctx.replace(outputs)


def _vectorized_constructed(ctx: Rewrite, plan: _Plan, sequence: ir.Value, elements: int) -> None:
    """The map of a ``SequenceConstruct``'s ``elements`` values, never empty (it takes one or
    more): the body runs on them stacked, no ``If`` to guard it."""
    body = plan.body
    stack = ctx.before()
    stacked = stack.ConcatFromSequence(sequence, axis=0, new_axis=1, _hint="stacked")
    param = body.inputs[0]
    assert param.shape is not None  # the vector form needs the element's static shape
    stacked.type = param.type or _element_type_of(sequence)
    # The count goes into the stacked shapes (and so into a constant Reshape target) only
    # where every element and every result is declared with the element's static shape: a
    # declaration the values contradict must not become a constant.
    known = elements if _declared_alike(sequence, body) else None
    stacked.shape = ir.Shape([known, *param.shape])
    ctx.insert()
    _vectorized_in_place(ctx, plan, stacked, count=known)


def _constructed(sequence: ir.Value) -> int | None:
    """How many elements ``sequence`` holds when a ``SequenceConstruct`` makes it (one or
    more), else None."""
    producer = sequence.producer()
    if is_onnx(producer, "SequenceConstruct") and producer.inputs:
        return len(producer.inputs)
    return None


def _declared_alike(sequence: ir.Value, body: ir.Graph) -> bool:
    """Whether the ``SequenceConstruct`` making ``sequence`` takes values all declared with the
    static shape the body's input declares, and the body's outputs are declared so too."""
    element = body.inputs[0].shape
    producer = sequence.producer()
    if element is None or not is_static(element) or producer is None:
        return False
    values = [*producer.inputs, *body.outputs]
    return all(value is not None and value.shape == element for value in values)


def _vectorized_in_place(
    ctx: Rewrite, plan: _Plan, stacked: ir.Value, count: int | None = None
) -> None:
    """The map of a split tensor (module docstring): its body runs on the tensor that was split,
    no ``If`` needed (zero rows run as well); each ``ConcatFromSequence`` of a result reads the
    result, and only an output something else reads is split back into a sequence. ``count``:
    the number of elements, when known."""
    node, body, graph = ctx.node, plan.body, ctx.graph
    assert body.inputs[0].shape is not None
    rank = len(body.inputs[0].shape)  # every result's: the body is elementwise
    results, named = run_on_stack(ctx, body, stacked, count)
    # A result the body computed may take a concat's name; a tensor it passes through may not.
    for result, old in zip(results, node.outputs, strict=True):
        for use in list(old.uses()):
            concat = use.node
            if (
                is_onnx(concat, "ConcatFromSequence")
                and concat.graph is graph
                and concat_problem(concat, rank) is None
            ):
                concat_stacked(ctx.at(concat), result, rank, named)
    emit = ctx.before()
    outputs = _new_outputs(plan, ctx.names, ctx.base)
    replacements: list[ir.Value | None] = []
    for j, (result, old, sequence) in enumerate(zip(results, node.outputs, outputs, strict=True)):
        if old.uses() or old.is_graph_output():
            emit.SplitToSequence(result, axis=0, keepdims=0, _hint=f"split_{j}", _output=sequence)
            replacements.append(sequence)
        else:
            replacements.append(None)
    ctx.replace(replacements)


def _carried(
    plan: _Plan,
    names: NameGenerator,
    base: str,
    emitters: tuple[Emitter, Emitter],
    count: ir.Value,
    results: list[ir.Value],
) -> tuple[list[ir.Value], list[ir.Value], list[ir.Value | None]]:
    """Each result is inserted into a sequence carried from iteration to iteration, starting
    from SequenceEmpty. Returns the carried sequences (the body's inputs after the
    condition), the body's outputs after the condition and the Loop's inputs."""
    before, tail = emitters
    carried_in = [
        ir.Value(name=names.fresh(f"{base}_acc_in_{j}"), type=_sequence(dtype))
        for j, dtype in enumerate(plan.output_dtypes)
    ]
    empties = [
        before.SequenceEmpty(dtype=dtype.value, _hint=f"empty_{j}")
        for j, dtype in enumerate(plan.output_dtypes)
    ]
    for empty, dtype in zip(empties, plan.output_dtypes, strict=True):
        empty.type = _sequence(dtype)
    carried_out = []
    for j, (acc, result) in enumerate(zip(carried_in, results, strict=True)):
        acc_out = tail.SequenceInsert(acc, result, _hint=f"acc_out_{j}")
        acc_out.type = acc.type
        carried_out.append(acc_out)
    return carried_in, carried_out, [count, None, *empties]


def _output_dtype(node: ir.Node, body: ir.Graph, j: int, types: TypeOracle) -> ir.DataType:
    result = body.outputs[j]

    def candidates() -> Iterator[ir.TypeProtocol | None]:
        # Cheapest first: declarations, then tracing or inference only when those are silent.
        yield result.type
        yield node.outputs[j].type
        if result in body.inputs:
            # An identity-like body: the output is an element of (or the whole) input k.
            outer = node.inputs[body.inputs.index(result)]
            assert outer is not None
            yield types.type_of(outer)
        yield types.type_of(node.outputs[j])

    for candidate in candidates():
        dtype = element_dtype(candidate)
        if dtype is not None:
            return dtype
    mixed = _mixed_construct(node, types)
    if mixed is not None:
        raise InvalidNodeError(
            node,
            f"output {j} '{node.outputs[j].name}' has no one element type: {mixed} (a sequence "
            "holds one element type); rerun with --sequence-free, which unrolls the map over "
            "the elements",
        )
    raise InvalidNodeError(
        node,
        f"the element type of output {j} '{node.outputs[j].name}' is unknown: the body output "
        f"'{result.name}' has no type and shape inference found none; annotate its type",
    )


def _mixed_construct(node: ir.Node, types: TypeOracle) -> str | None:
    """Why the map has no element type when an input sequence is built from tensors of
    different types (PyTorch's ``atleast_2d(int_tensor, float_tensor)`` exports so)."""
    for value in node.inputs:
        producer = None if value is None else value.producer()
        if producer is None or producer.op_type != "SequenceConstruct":
            continue
        names = []
        for element in producer.inputs:
            dtype = None if element is None else element_dtype(types.type_of(element))
            if dtype is not None and dtype.name.lower() not in names:
                names.append(dtype.name.lower())
        if len(names) > 1:
            assert value is not None
            return (
                f"its input '{value.name}' comes from a SequenceConstruct that mixes element "
                f"types {' and '.join(names)}"
            )
    return None


def _element_type_of(sequence: ir.Value) -> ir.TensorType | None:
    dtype = element_dtype(sequence.type)
    return None if dtype is None else _tensor(dtype)


def _tensor(dtype: ir.DataType) -> ir.TensorType:
    return ir.TensorType(dtype)


def _sequence(dtype: ir.DataType) -> ir.SequenceType:
    return ir.SequenceType(ir.TensorType(dtype))


def _scalar_input(name: str, dtype: ir.DataType) -> ir.Value:
    return ir.Value(name=name, type=_tensor(dtype), shape=_SCALAR)
