"""Lower ``SequenceMap`` into ``Loop`` over ``SequenceAt``/``SequenceInsert``.

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

The original body graph object becomes the Loop body, so its nodes, initializers, value infos
and any lowered inner ``SequenceMap`` stay exactly as they were. Zero iterations return the
empty sequences, which is what ``SequenceMap`` gives for an empty input.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from seqlower.errors import InvalidNodeError
from seqlower.passes._base import NameGenerator, NodeLoweringPass, Site
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["LowerSequenceMap"]

_SCALAR = ir.Shape([])


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    input_is_sequence: list[bool]
    output_dtypes: list[ir.DataType]


class LowerSequenceMap(NodeLoweringPass):
    """Replace every ``SequenceMap`` with an equivalent ``Loop`` (see the module docstring)."""

    op_type = "SequenceMap"

    def plan(self, site: Site, types: TypeOracle) -> _Plan:
        node = site.node
        body = _body_of(node)
        if len(body.inputs) != len(node.inputs):
            raise InvalidNodeError(
                node,
                f"the body takes {len(body.inputs)} input(s) but the node has "
                f"{len(node.inputs)}; SequenceMap needs one body input per node input",
            )
        if len(body.outputs) != len(node.outputs):
            raise InvalidNodeError(
                node,
                f"the body returns {len(body.outputs)} output(s) but the node has "
                f"{len(node.outputs)}; SequenceMap needs one body output per node output",
            )
        if not node.outputs:
            raise InvalidNodeError(node, "SequenceMap needs at least one output")
        if any(value is None for value in node.inputs):
            raise InvalidNodeError(node, "an input is empty; SequenceMap inputs cannot be omitted")

        is_sequence = [_is_sequence(node, k, types) for k in range(len(node.inputs))]
        dtypes = [
            _output_dtype(node, body, j, is_sequence, types) for j in range(len(node.outputs))
        ]
        return _Plan(node, body, is_sequence, dtypes)

    def rewrite(self, plan: _Plan, names: NameGenerator) -> None:
        node, body = plan.node, plan.body
        graph = node.graph
        assert graph is not None
        base = node.name or "SequenceMap"
        body_results = list(body.outputs)
        body_params = list(body.inputs)
        outer_inputs: list[ir.Value] = list(node.inputs)  # type: ignore[arg-type]

        # Outside the loop: trip count and one empty sequence per output.
        count = ir.Value(name=names.fresh(f"{base}_length"), type=_tensor(ir.DataType.INT64))
        count.shape = _SCALAR
        length_node = ir.Node(
            "",
            "SequenceLength",
            [outer_inputs[0]],
            outputs=[count],
            name=names.fresh(f"{base}_SequenceLength"),
        )
        empty_nodes = []
        for j, dtype in enumerate(plan.output_dtypes):
            empty = ir.Value(name=names.fresh(f"{base}_empty_{j}"), type=_sequence(dtype))
            empty_nodes.append(
                ir.Node(
                    "",
                    "SequenceEmpty",
                    [],
                    [ir.AttrInt64("dtype", dtype.value)],
                    outputs=[empty],
                    name=names.fresh(f"{base}_SequenceEmpty_{j}"),
                )
            )

        # The body becomes the Loop body: new signature, element reads first, inserts last.
        iteration = _scalar_input(names.fresh(f"{base}_iteration"), ir.DataType.INT64)
        cond_in = _scalar_input(names.fresh(f"{base}_cond_in"), ir.DataType.BOOL)
        carried_in = [
            ir.Value(name=names.fresh(f"{base}_acc_in_{j}"), type=_sequence(dtype))
            for j, dtype in enumerate(plan.output_dtypes)
        ]
        replacements: dict[ir.Value, ir.Value] = {}
        reads: list[ir.Node] = []
        for k, (param, outer) in enumerate(zip(body_params, outer_inputs, strict=True)):
            if plan.input_is_sequence[k]:
                element = ir.Value(
                    name=names.take_over(param.name, f"{base}_element_{k}"),
                    type=param.type or _element_type_of(outer),
                    shape=param.shape,
                )
                reads.append(
                    ir.Node(
                        "",
                        "SequenceAt",
                        [outer, iteration],
                        outputs=[element],
                        name=names.fresh(f"{base}_SequenceAt_{k}"),
                    )
                )
                replacements[param] = element
            else:
                replacements[param] = outer

        body.inputs.clear()
        body.inputs.extend([iteration, cond_in, *carried_in])
        body.outputs.clear()
        for param, replacement in replacements.items():
            param.replace_all_uses_with(replacement)
        results = [replacements.get(result, result) for result in body_results]

        cond_out = ir.Value(
            name=names.fresh(f"{base}_cond_out"), type=_tensor(ir.DataType.BOOL), shape=_SCALAR
        )
        tail = [
            ir.Node(
                "",
                "Identity",
                [cond_in],
                outputs=[cond_out],
                name=names.fresh(f"{base}_cond_Identity"),
            )
        ]
        carried_out = []
        for j, (acc, result) in enumerate(zip(carried_in, results, strict=True)):
            acc_out = ir.Value(name=names.fresh(f"{base}_acc_out_{j}"), type=acc.type)
            tail.append(
                ir.Node(
                    "",
                    "SequenceInsert",
                    [acc, result],
                    outputs=[acc_out],
                    name=names.fresh(f"{base}_SequenceInsert_{j}"),
                )
            )
            carried_out.append(acc_out)
        if reads:
            if len(body) > 0:
                body.insert_before(body[0], reads)
            else:
                body.extend(reads)
        body.extend(tail)
        body.outputs.extend([cond_out, *carried_out])

        # Replace the node, keeping its output names so consumers and graph outputs are untouched.
        loop_outputs = [
            ir.Value(
                name=old.name or names.fresh(f"{base}_out_{j}"),
                type=_sequence(plan.output_dtypes[j]),
                doc_string=old.doc_string,
                metadata_props=dict(old.metadata_props) or None,
            )
            for j, old in enumerate(node.outputs)
        ]
        del node.attributes["body"]
        loop = ir.Node(
            "",
            "Loop",
            [count, None, *(n.outputs[0] for n in empty_nodes)],
            [ir.AttrGraph("body", body)],
            outputs=loop_outputs,
            name=node.name or names.fresh("SequenceMap_Loop"),
            doc_string=node.doc_string,
            metadata_props=dict(node.metadata_props) or None,
        )
        graph.insert_before(node, [length_node, *empty_nodes, loop])
        for old, new in zip(node.outputs, loop_outputs, strict=True):
            old.replace_all_uses_with(new, replace_graph_outputs=True)
        graph.remove(node, safe=True)


def _body_of(node: ir.Node) -> ir.Graph:
    attr = node.attributes.get("body")
    if attr is None:
        raise InvalidNodeError(node, "it has no 'body' attribute")
    if attr.is_ref():
        raise InvalidNodeError(node, "its 'body' refers to a function attribute; inline it first")
    if attr.type != ir.AttributeType.GRAPH:
        raise InvalidNodeError(node, f"its 'body' attribute is a {attr.type.name}, not a GRAPH")
    return attr.as_graph()


def _is_sequence(node: ir.Node, k: int, types: TypeOracle) -> bool:
    value = node.inputs[k]
    assert value is not None
    type_ = types.type_of(value)
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


def _output_dtype(
    node: ir.Node, body: ir.Graph, j: int, is_sequence: list[bool], types: TypeOracle
) -> ir.DataType:
    result = body.outputs[j]
    candidates: list[ir.TypeProtocol | None] = [result.type, node.outputs[j].type]
    if result in body.inputs:
        # An identity-like body: the output is an element of (or the whole) input k.
        k = body.inputs.index(result)
        outer = node.inputs[k]
        assert outer is not None
        candidates.append(types.type_of(outer))
    candidates.append(types.type_of(node.outputs[j]))
    for candidate in candidates:
        dtype = element_dtype(candidate)
        if dtype is not None:
            return dtype
    raise InvalidNodeError(
        node,
        f"the element type of output {j} '{node.outputs[j].name}' is unknown: the body output "
        f"'{result.name}' has no type and shape inference found none; annotate its type",
    )


def _element_type_of(sequence: ir.Value) -> ir.TensorType | None:
    dtype = element_dtype(sequence.type)
    return None if dtype is None else _tensor(dtype)


def _tensor(dtype: ir.DataType) -> ir.TensorType:
    return ir.TensorType(dtype)


def _sequence(dtype: ir.DataType) -> ir.SequenceType:
    return ir.SequenceType(ir.TensorType(dtype))


def _scalar_input(name: str, dtype: ir.DataType) -> ir.Value:
    return ir.Value(name=name, type=_tensor(dtype), shape=_SCALAR)
