"""Check that a model is sequence-free, naming everything that stops it.

The last step of ``--sequence-free``: after the sequence-free rewrites and dead-node removal, the
model may hold no sequence op (``SequenceMap``, ``SequenceConstruct``, ``SequenceEmpty``,
``SequenceAt``, ``SequenceInsert``, ``SequenceErase``, ``SequenceLength``, ``SplitToSequence``,
``ConcatFromSequence``) and no sequence-typed value, in any scope. Runtimes without sequences
refuse such a model outright, so a partial result is no use: the pass raises
:class:`~seqlower.errors.SequenceFreeError` listing every blocker with its reason (the reason a
rewrite recorded on the node, or what the node's sequence comes from), and changes nothing.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower._graphs import subgraphs_of
from seqlower.errors import SequenceFreeError, describe_node
from seqlower.passes._ir import SEQUENCE_OPS, blocked, is_onnx, origin

__all__ = ["RequireSequenceFree"]


class RequireSequenceFree(ir.passes.InPlacePass):
    """Raise SequenceFreeError unless no sequence op or sequence-typed value is left."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        blockers = sequence_blockers(model)
        if blockers:
            raise SequenceFreeError(blockers)
        return ir.passes.PassResult(model, modified=False)


def sequence_blockers(model: ir.Model) -> list[str]:
    """What keeps ``model`` from being sequence-free, one message per node or value."""
    blockers: list[str] = []
    graph = model.graph
    for value in graph.inputs:
        if _is_sequence_type(value.type) and not value.is_initializer():
            blockers.append(
                f"graph input '{value.name}' is a sequence: a sequence-free model cannot take "
                "it without changing the model's interface; when it always holds K tensors, "
                f"--unroll-input {value.name}=K takes them as K inputs"
            )
    for value in graph.outputs:
        producer = value.producer()
        makes_sequence = producer is not None and producer.op_type in _MAKE_SEQUENCES
        if _is_sequence_type(value.type) or (is_onnx(producer, *SEQUENCE_OPS) and makes_sequence):
            blockers.append(
                f"graph output '{value.name}' is a sequence: a sequence-free model cannot "
                "return it without changing the model's interface"
            )
    _graph(graph, blockers)
    for function in model.functions.values():
        _graph(function, blockers)
    return blockers


def _graph(graph: ir.Graph | ir.Function, blockers: list[str]) -> None:
    for node in graph:
        for subgraph in subgraphs_of(node):
            for value in subgraph.inputs:
                if _is_sequence_type(value.type):
                    blockers.append(
                        f"'{value.name}', an input of the body of {describe_node(node)}, is "
                        "a sequence"
                    )
            _graph(subgraph, blockers)
        if is_onnx(node, *SEQUENCE_OPS):
            blockers.append(f"{describe_node(node)} remains: {_reason(node)}")
            continue
        why = blocked(node)
        sequences = [value for value in node.outputs if _is_sequence_type(value.type)]
        for value in sequences:
            blockers.append(
                f"'{value.name}' from {describe_node(node)} is a sequence"
                + (f" ({why})" if why else "")
            )
        if why and not sequences:
            blockers.append(f"{describe_node(node)} keeps a sequence: {why}")


def _reason(node: ir.Node) -> str:
    recorded = blocked(node)
    if recorded:
        return str(recorded)
    sequences = [v for v in node.inputs if v is not None and _is_sequence_input(node, v)]
    if node.op_type in ("SequenceConstruct", "SequenceEmpty", "SplitToSequence"):
        users = sorted({describe_node(use.node) for out in node.outputs for use in out.uses()})
        return "its sequence is read by " + (", ".join(users) or "a graph output")
    if sequences:
        source = sequences[0]
        return f"its sequence '{source.name}' comes from {origin(source)}"
    return "no sequence-free form is known for it"


def _is_sequence_input(node: ir.Node, value: ir.Value) -> bool:
    return node.inputs.index(value) == 0 and node.op_type != "SequenceConstruct"


#: The sequence ops whose output is a sequence (the others return tensors).
_MAKE_SEQUENCES = frozenset(
    {
        "SequenceMap",
        "SequenceConstruct",
        "SequenceEmpty",
        "SequenceInsert",
        "SequenceErase",
        "SplitToSequence",
    }
)


def _is_sequence_type(type_: ir.TypeProtocol | None) -> bool:
    return isinstance(type_, ir.SequenceType)
