"""What the passes share: a control-flow node's body, its scan outputs and outer reads, what a
sequence holds when lowering, and the ``ConcatFromSequence`` rewrite onto stacked results.

Passes import these from here, never from one another.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx
import onnx_ir as ir
from onnx_ir.passes.common import InlinePass

from seqlower._graphs import subgraphs_of
from seqlower.errors import InvalidNodeError
from seqlower.passes._base import NameGenerator, Rewrite, rewire
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import ONNX_DOMAINS, is_onnx, nodes_in
from seqlower.passes._types import TypeOracle

__all__ = [
    "body_copy",
    "body_of",
    "concat_problem",
    "concat_stacked",
    "cut_interface",
    "inline_untyped_sequence_map_functions",
    "is_sequence",
    "known_elements",
    "loop_finals",
    "names_defined",
    "narrow_loop_body",
    "narrowed_loop",
    "one_element",
    "outer_reads",
    "outer_reads_as_states",
    "prepend",
    "read_inside",
    "remove_dead",
    "scan_outputs",
    "unit_split",
]


def unit_split(sequence: ir.Value | None) -> tuple[ir.Value, int, bool] | None:
    """``(x, axis, keepdims)`` when ``sequence`` is ``SplitToSequence(x)`` without sizes: one
    piece per index of ``axis``, however many there are at run time."""
    producer = None if sequence is None else sequence.producer()
    if not is_onnx(producer, "SplitToSequence") or producer is None:
        return None
    if len(producer.inputs) > 1 and producer.inputs[1] is not None:
        return None
    x = producer.inputs[0]
    if x is None:
        return None
    axis = producer.attributes["axis"].as_int() if "axis" in producer.attributes else 0
    keep = producer.attributes["keepdims"].as_int() if "keepdims" in producer.attributes else 1
    return x, axis, bool(keep)


def known_elements(sequence: ir.Value | None) -> list[ir.Value] | None:
    """The elements of a sequence fixed when lowering: a ``SequenceConstruct``'s inputs, or none
    for ``SequenceEmpty``; None when only a run can tell."""
    producer = None if sequence is None else sequence.producer()
    if is_onnx(producer, "SequenceEmpty"):
        return []
    if is_onnx(producer, "SequenceConstruct") and producer is not None:
        if any(value is None for value in producer.inputs):
            return None
        return list(producer.inputs)  # type: ignore[arg-type]
    return None


def concat_stacked(
    ctx: Rewrite, stacked: ir.Value, rank: int, named: set[int] | None = None
) -> None:
    """Replace a ConcatFromSequence (``ctx.node``) of results of rank ``rank`` by ops on
    ``stacked``, the same results stacked along a new axis 0 (its axis already checked by
    ``concat_problem``).

    ``named``: ids of values a rewrite made that may take the concat's name themselves rather
    than through an ``Identity`` (each once: the id is then dropped)."""
    concat = ctx.node
    emit = ctx.before()
    axis = concat.attributes["axis"].as_int()
    new_axis = "new_axis" in concat.attributes and concat.attributes["new_axis"].as_int() == 1
    out_rank = rank + 1 if new_axis else rank
    axis = axis + out_rank if axis < 0 else axis
    old = concat.outputs[0]
    moved = stacked
    shape = stacked.shape
    dims = [d for d in shape.dims if isinstance(d, int)] if shape is not None else []
    static = shape is not None and len(dims) == len(shape)
    if axis != 0:
        perm = [*range(1, axis + 1), 0, *range(axis + 1, rank + 1)]
        moved = emit.Transpose(stacked, perm=perm, _hint="moved")
        dims = [dims[p] for p in perm] if static else []
    producer = stacked.producer()
    same_graph = producer is not None and producer.graph is ctx.graph  # else a subgraph's output
    if new_axis and moved is stacked and same_graph and named is not None and id(stacked) in named:
        named.discard(id(stacked))
        ctx.replace([stacked], rename=True)
        stacked.type, stacked.shape = old.type or stacked.type, old.shape or stacked.shape
        return
    if new_axis:
        # Each use gets a value of its own to carry the ConcatFromSequence output's name.
        result = moved if moved is not stacked else emit.Identity(stacked, _hint="y")
    elif static:
        # A static stack: the joined shape is a constant (one node, not six).
        joined = [*dims[:axis], dims[axis] * dims[axis + 1], *dims[axis + 2 :]]
        target = emit.int64s(joined, hint="target")
        if 0 in joined:
            result = emit.reshape(moved, target, hint="concat")
        else:  # no allowzero needed (emit.reshape would read the constant back to see so)
            result = emit.Reshape(moved, target, _hint="concat")
    else:
        result = emit.reshape(moved, _merged_shape(emit, moved, axis, rank), hint="concat")
    result.type = old.type or stacked.type
    result.shape = old.shape
    ctx.replace([result], rename=True)


def _merged_shape(emit: Emitter, moved: ir.Value, axis: int, rank: int) -> ir.Value:
    """The shape of ``moved`` with axis ``axis`` and the next merged into one."""
    pieces = []
    if axis > 0:
        pieces.append(emit.dims(moved, 0, axis, hint="before"))
    merged = emit.Mul(
        emit.dims(moved, axis, axis + 1, hint="count"),
        emit.dims(moved, axis + 1, axis + 2, hint="size"),
        _hint="merged",
    )
    pieces.append(merged)
    if axis + 2 <= rank:
        pieces.append(emit.dims(moved, axis + 2, hint="after"))
    return pieces[0] if len(pieces) == 1 else emit.Concat(*pieces, axis=0, _hint="target")


def outer_reads(body: ir.Graph, inputs: list[ir.Value]) -> list[ir.Value]:
    """The values ``body`` (or a graph in it) reads from outside it, in first-read order;
    ``inputs``: the body's inputs-to-be."""
    defined: set[int] = {id(v) for v in inputs}

    def define(graph: ir.Graph) -> None:
        defined.update(id(v) for v in graph.inputs)
        defined.update(id(v) for v in graph.initializers.values())
        for node in graph:
            defined.update(id(v) for v in node.outputs)
            for subgraph in subgraphs_of(node):
                define(subgraph)

    define(body)
    reads: dict[int, ir.Value] = {}
    for node in nodes_in(body):
        for value in node.inputs:
            if value is not None and id(value) not in defined:
                reads.setdefault(id(value), value)
    for value in body.outputs:
        if id(value) not in defined:
            reads.setdefault(id(value), value)
    return list(reads.values())


def concat_problem(concat: ir.Node, rank: int) -> str | None:
    """Why a ConcatFromSequence of results of rank ``rank`` cannot be rewritten, if it cannot."""
    if "axis" not in concat.attributes:
        return "has no axis"
    axis = concat.attributes["axis"].as_int()
    new_axis = "new_axis" in concat.attributes and concat.attributes["new_axis"].as_int() == 1
    out_rank = rank + 1 if new_axis else rank
    if not -out_rank <= axis < out_rank:
        return f"has axis {axis}, out of range for results of rank {rank}"
    return None


def scan_outputs(tail: Emitter, body: ir.Graph, results: list[ir.Value]) -> list[ir.Value]:
    """The results as Loop scan outputs: each produced in the body, each listed once.

    onnxruntime refuses an outer-scope value returned directly from a subgraph, and a graph
    cannot list one value twice, so those pass through an Identity.
    """
    scanned: list[ir.Value] = []
    for j, result in enumerate(results):
        producer = result.producer()
        if producer is None or producer.graph is not body or result in scanned:
            result = tail.Identity(result, _hint=f"scan_{j}")
        scanned.append(result)
    return scanned


def body_of(node: ir.Node) -> ir.Graph:
    attr = node.attributes.data.get("body")
    if attr is None:
        raise InvalidNodeError(node, "it has no 'body' attribute")
    if attr.is_ref():
        raise InvalidNodeError(node, "its 'body' refers to a function attribute; inline it first")
    if attr.type != ir.AttributeType.GRAPH:
        raise InvalidNodeError(node, f"its 'body' attribute is a {attr.type.name}, not a GRAPH")
    return attr.as_graph()


def is_sequence(node: ir.Node, k: int, types: TypeOracle) -> bool:
    value = node.inputs[k]
    assert value is not None
    # The first input must be a sequence: only a declared type can say otherwise, so nothing
    # is traced or inferred for it.
    type_ = value.type if k == 0 else types.type_of(value)
    if isinstance(type_, ir.SequenceType):
        return True
    if k == 0:
        if type_ is not None:
            raise InvalidNodeError(
                node, f"its first input '{value.name}' must be a sequence but is {type_}"
            )
        return True  # The spec requires a sequence here; nothing says otherwise.
    if isinstance(type_, ir.TensorType):
        return False
    raise InvalidNodeError(
        node,
        f"cannot tell whether input {k} '{value.name}' is a sequence or a tensor: "
        "it has no type and shape inference found none; annotate its type (value_info)",
    )


def cut_interface(
    body: ir.Graph, replacements: dict[ir.Value, ir.Value], results: list[ir.Value]
) -> list[ir.Value]:
    """Detach ``body``'s inputs and outputs for a new interface: each old input's readers read
    its replacement instead; returns ``results`` with replaced inputs swapped the same way."""
    body.inputs.clear()
    body.outputs.clear()
    for param, replacement in replacements.items():
        rewire(param, replacement, graph_outputs=False)
    return [replacements.get(result, result) for result in results]


def inline_untyped_sequence_map_functions(model: ir.Model) -> int:
    """Inline (in place) the calls of the functions that need it; how many functions that was.
    ``LowerSequenceMap`` and ``FoldSequenceOps`` (the first SequenceMap pass of each pipeline)
    do this first, so the pipelines and their reports are unchanged."""
    wanted = {key for key, function in model.functions.items() if _needs_types(function)}
    if wanted:
        InlinePass(criteria=lambda f: f.identifier() in wanted)(model)
    return len(wanted)


def drop_unused_imports(model: ir.Model, domains: set[str]) -> None:
    """The imports of ``domains`` (inlined functions' own) that no node or function uses."""
    used = {f.domain for f in model.functions.values()}
    used.update(node.domain for node in ir.traversal.RecursiveGraphIterator(model.graph))
    for function in model.functions.values():
        used.update(node.domain for node in ir.traversal.RecursiveGraphIterator(function))
    for domain in domains - used - ONNX_DOMAINS:
        model.opset_imports.pop(domain, None)


def _needs_types(function: ir.Function) -> bool:
    graphs: list[ir.Graph | ir.Function] = [function]
    while graphs:
        graph = graphs.pop()
        for node in graph:
            subgraphs = subgraphs_of(node)
            if is_onnx(node, "SequenceMap"):
                body = subgraphs[0] if subgraphs else None
                if body is not None and any(v.type is None for v in (*body.inputs, *body.outputs)):
                    return True
            graphs += subgraphs
    return False


def read_inside(body: ir.Graph, value: ir.Value, target: ir.Value, inside: set[int]) -> None:
    """Every read of outer ``value`` by the nodes of ``body`` (``inside``: their ids, at any
    depth) and every output of ``body`` that is ``value`` now read ``target``, a value of the
    body: an outer read made a state or a constant of the body."""
    for use in list(value.uses()):
        if id(use.node) in inside:
            use.node.replace_input_with(use.idx, target)
    outputs = list(body.outputs)
    if any(v is value for v in outputs):
        body.outputs.clear()
        body.outputs.extend([target if v is value else v for v in outputs])


def prepend(body: ir.Graph, nodes: Sequence[ir.Node]) -> None:
    """Put ``nodes`` first in ``body`` (reads a rewrite adds ahead of the original nodes)."""
    if not nodes:
        return
    if len(body) > 0:
        body.insert_before(body[0], nodes)
    else:
        body.extend(nodes)


def inline_copy(
    ctx: Rewrite, body: ir.Graph, arguments: Sequence[ir.Value], base: str
) -> tuple[list[ir.Node], list[ir.Value]]:
    """A copy of ``body``'s nodes reading ``arguments`` for its inputs, every node, value and
    subgraph renamed to names of its own (from ``base``), its initializers as Constants (the
    copy may land in a function); returns the nodes, to insert, and what the body's outputs
    are in the copy (an argument, where the body returns an input)."""
    names = ctx.names
    copy = body.clone(allow_outer_scope_values=True)
    outputs = list(copy.outputs)
    copy.outputs.clear()
    for param, argument in zip(list(copy.inputs), arguments, strict=True):
        rewire(param, argument, graph_outputs=False)
    mapping = dict(zip(copy.inputs, arguments, strict=True))
    copy.inputs.clear()
    constants = initializers_as_constants(copy, ctx.into(copy, pool=None, prefix=base), names)
    nodes = [*constants, *copy]
    copy.remove(list(copy))
    for inner in nodes:
        _rename(inner, names, base)
    return nodes, [mapping.get(result, result) for result in outputs]


def initializers_as_constants(
    body: ir.Graph, emit: Emitter, names: NameGenerator
) -> Sequence[ir.Node]:
    """The body's own initializers as Constant nodes, built by ``emit`` (unpooled, named from
    its prefix) for the caller to place (the copy may land in a function)."""
    base = emit.prefix
    for name in list(body.initializers):
        value = body.initializers.pop(name)
        tensor = value.const_value
        if tensor is None:
            continue
        node_name = names.fresh(f"{base}_Constant")
        result = ir.Value(name=names.fresh(f"{base}_{name}"), type=value.type, shape=value.shape)
        emit.Constant(value=tensor, _outputs=[result], _name=node_name)
        rewire(value, result, graph_outputs=False)
    return emit.nodes


def _rename(node: ir.Node, names: NameGenerator, base: str) -> None:
    """Give a copied node, its outputs and everything in its subgraphs names of their own."""
    node.name = names.fresh(f"{base}_{node.name or node.op_type}")
    for value in node.outputs:
        value.name = names.fresh(f"{base}_{value.name or 'value'}")
    for subgraph in subgraphs_of(node):
        _rename_graph(subgraph, names, base)


def _rename_graph(subgraph: ir.Graph, names: NameGenerator, base: str) -> None:
    """Give a copied body's inputs, initializers, name and nodes names of their own."""
    for value in subgraph.inputs:
        value.name = names.fresh(f"{base}_{value.name or 'input'}")
    for name in list(subgraph.initializers):
        value = subgraph.initializers.pop(name)
        # Renaming a value renames its tensor, which the body copied from shares (and,
        # read from a proto, the proto's own TensorProto): the copy gets a tensor of its own.
        if isinstance(value.const_value, ir.serde.TensorProtoTensor):
            own = onnx.TensorProto()
            own.CopyFrom(value.const_value.raw)
            value.const_value = ir.serde.TensorProtoTensor(own)
        value.name = names.fresh(f"{base}_{name}")
        subgraph.register_initializer(value)
    if subgraph.name:
        subgraph.name = names.fresh(f"{base}_{subgraph.name}")
    for inner in subgraph:
        _rename(inner, names, base)


def body_copy(body: ir.Graph, names: NameGenerator, base: str) -> ir.Graph:
    """A copy of ``body`` for another node (outer reads kept), every name in it its own."""
    copy = body.clone(allow_outer_scope_values=True)
    _rename_graph(copy, names, base)
    return copy


def narrow_loop_body(
    body: ir.Graph, kept: Sequence[int], scans: Sequence[int], extra: Sequence[ir.Value] = ()
) -> None:
    """A ``Loop`` body's interface with only the states ``kept`` (then the scan outputs
    ``scans``, by the Loop's output index, then ``extra`` outputs), and the nodes that computed
    the others removed."""
    states_in = [body.inputs[2 + k] for k in kept]
    outs = [body.outputs[1 + k] for k in [*kept, *scans]]
    head, cond = list(body.inputs[:2]), body.outputs[0]
    body.inputs.clear()
    body.inputs.extend([*head, *states_in])
    body.outputs.clear()
    body.outputs.extend([cond, *outs, *extra])
    remove_dead(body)


def loop_finals(ctx: Rewrite, indices: Sequence[int]) -> list[ir.Value]:
    """New values for the Loop's outputs at ``indices``, typed as they are."""
    node, finals = ctx.node, []
    for k in indices:
        final = ir.Value(name=ctx.names.fresh(f"{node.outputs[k].name or ctx.base}_loop"))
        final.type, final.shape = node.outputs[k].type, node.outputs[k].shape
        finals.append(final)
    return finals


def narrowed_loop(
    ctx: Rewrite,
    op: Emitter,
    body: ir.Graph,
    kept: Sequence[int],
    scans: Sequence[int],
    outputs: Sequence[ir.Value],
) -> list[ir.Value | None]:
    """The Loop of ``body`` (:func:`narrow_loop_body`) over the states ``kept``, giving
    ``outputs`` (:func:`loop_finals` of ``kept`` and ``scans`` first), in place of the node;
    what replaces its outputs: those finals, None for the others."""
    node = ctx.node
    del node.attributes["body"]
    op.Loop(
        *node.inputs[:2], *(node.inputs[2 + k] for k in kept), body=body, _outputs=list(outputs),
        _name=node.name or ctx.names.fresh("Loop"), _doc_string=node.doc_string,
    )  # fmt: skip
    replaced: list[ir.Value | None] = [None] * len(node.outputs)
    for k, final in zip([*kept, *scans], outputs, strict=False):
        replaced[k] = final
    return replaced


def remove_dead(body: ir.Graph, keep: list[ir.Value] | None = None) -> None:
    """Remove the body's nodes whose outputs nothing reads (the condition, mostly); ``keep``:
    values to keep besides the body's outputs."""
    outputs = {id(v) for v in [*body.outputs, *(keep or [])]}
    for node in reversed(list(body)):
        if any(v.uses() or id(v) in outputs for v in node.outputs):
            continue
        body.remove(node, safe=True)


def one_element(op: Emitter, value: ir.Value, type_: ir.TypeProtocol | None, hint: str) -> ir.Value:
    """``value``'s one element as a scalar of a shape known at load, an index out of range
    (an error) when it holds none (``-1``) or ``n > 1`` (``n * n - 1 >= n``): what tract
    0.23.9 needs where a value of a size known only at run time must hold one element (an
    ``If`` condition; what the condition is computed from, read in its branches)."""
    flat = op.Reshape(value, op.int64s([-1], hint="flat"), _hint=f"{hint}_flat")
    size = op.Size(value, _hint=f"{hint}_size")
    last = op.Sub(op.Mul(size, size, _hint=f"{hint}_size_sq"), op.int64s(1, hint="one"))
    one = op.Gather(flat, last, _hint=f"{hint}_one")
    if type_ is not None:
        one.type, one.shape = type_, ir.Shape([])
    return one


def outer_reads_as_states(
    ctx: Rewrite, body: ir.Graph, body_inputs: list[ir.Value]
) -> tuple[list[ir.Value], list[ir.Value], list[ir.Value]]:
    """Every outer-scope read becomes a state carried through unchanged: OpenVINO's Scan
    takes no outer-scope reads ("Number of Scan node inputs is less than required"). Returns
    the outer values (the Scan's initial states), the body's states and their outputs."""
    names, base = ctx.names, ctx.base
    outer = outer_reads(body, body_inputs)
    passes = ctx.into(body, pool=None)
    states, state_outs = [], []
    inside = {id(n) for n in nodes_in(body)}
    for value in outer:
        state = ir.Value(
            name=names.fresh(f"{base}_{value.name}"), type=value.type, shape=value.shape
        )
        for use in list(value.uses()):
            if id(use.node) in inside:
                use.node.replace_input_with(use.idx, state)
        state_out = passes.Identity(state, _hint=f"{value.name}_out")
        state_out.type, state_out.shape = value.type, value.shape
        states.append(state)
        state_outs.append(state_out)
    body.extend(passes.nodes)
    return outer, states, state_outs


def restate_loop_body(
    body: ir.Graph, states: int, ins: list[ir.Value], outs: list[ir.Value]
) -> None:
    """A ``Loop`` body with ``ins``/``outs`` as states after its own ``states``, and no scan
    output (a pass writing scan outputs into states)."""
    inputs, outputs = list(body.inputs), list(body.outputs[: 1 + states])
    body.inputs.clear()
    body.inputs.extend([*inputs, *ins])
    body.outputs.clear()
    body.outputs.extend([*outputs, *outs])


def names_defined(graph: ir.Graph | ir.Function | None) -> set[str]:
    """The names of the values a graph defines (inputs, initializers, node outputs)."""
    if graph is None:
        return set()
    names = {v.name for v in graph.inputs if v.name}
    if isinstance(graph, ir.Graph):
        names.update(name for name in graph.initializers if name)
    names.update(v.name for node in graph for v in node.outputs if v.name)
    return names


def scalar_body_input(ctx: Rewrite, body: ir.Graph, k: int, dtype: ir.DataType) -> None:
    """A ``Loop`` body's iteration number (``k = 0``) or condition (``k = 1``) declared a scalar,
    as ONNX gives it; the nodes that read it read it in its declared one-element shape. A ``[1]``
    condition (as paddle2onnx writes) contradicts the scalar ``cond = true`` given to the Loop,
    which ONNX's inference types it from (onnxruntime refuses to load the model); a ``[1]``
    iteration number stops IREE 3.13.0's importer ("onnx.Loop not converted")."""
    value = body.inputs[k]
    declared = value.shape
    value.type, value.shape = value.type or ir.TensorType(dtype), ir.Shape([])
    if declared is None or declared.rank() == 0:
        return
    ones = [1] * declared.rank()  # one element: every axis of size 1
    emit = ctx.into(body, pool=None)
    shaped = emit.reshape(
        value, emit.int64s(ones, hint="one_element"), hint=f"{value.name or k}_shaped"
    )
    shaped.type, shaped.shape = ir.TensorType(dtype), ir.Shape(ones)
    read_inside(body, value, shaped, {id(n) for n in nodes_in(body)})
    prepend(body, list(emit.nodes))
