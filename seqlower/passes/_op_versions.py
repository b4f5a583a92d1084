"""Which op versions differ only in their type lists, and re-stamping across them.

ONNX gives an op a new version for every change, most of them new element types (float8,
bfloat16, int4, strings) with the same inputs, outputs and attributes. A node of such an op
means the same under either version, so a model can move to another opset across it as it is,
where onnx's version converter has no adapter (``No Adapter To Version $19 for
ConstantOfShape``) or refuses outright: :func:`same_but_types` compares the schemas of every
version in between (inputs, outputs, attributes with their defaults, type parameters: the same;
type lists: each grown; ``RestampOpVersions`` asks it too), and :func:`convert_version` hides
such nodes from the converter (a private domain), converts the rest with its adapters
(``ReduceMean``-18's ``axes`` input to the attribute of 13, ...), and puts them back. The
checker then verifies that each node's types are in its new type lists.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from typing import Any

import onnx
import onnx_ir as ir

from seqlower._graphs import proto_graphs
from seqlower.passes._ir import ONNX_DOMAINS, is_onnx

__all__ = [
    "convert_model",
    "convert_version",
    "resolved_since_version",
    "same_but_types",
    "since_version",
]

_HIDDEN = "seqlower.restamp"  # the private domain of hidden nodes, gone after the conversion
#: Attributes a newer version added whose absence means the older behaviour for the types the
#: older version has (Cast's ``saturate`` is about float8 alone).
_ADDED_FOR_NEW_TYPES = {("Cast", "saturate"), ("CastLike", "saturate")}
_FLOAT8 = {
    onnx.TensorProto.FLOAT8E4M3FN,
    onnx.TensorProto.FLOAT8E4M3FNUZ,
    onnx.TensorProto.FLOAT8E5M2,
    onnx.TensorProto.FLOAT8E5M2FNUZ,
}


@functools.cache
def since_version(op: str, opset: int, domain: str = "") -> int | None:
    """The ``since_version`` of ``op`` at ``opset`` (None: the op does not exist there)."""
    try:
        return int(onnx.defs.get_schema(op, opset, domain).since_version)
    except onnx.defs.SchemaError:
        return None


@functools.cache
def resolved_since_version(op: str, domain: str, opset: int) -> int | None:
    """The ``since_version`` a converter or runtime resolves ``op`` to at ``opset``; ``opset``
    itself for an op ONNX does not define (resolved as given)."""
    try:
        return int(onnx.defs.get_schema(op, opset, domain).since_version)
    except Exception:
        return opset


def _signature(schema: Any, skip: frozenset[str] = frozenset()) -> tuple[Any, ...]:
    return (
        [(i.name, i.type_str, int(i.option)) for i in schema.inputs],
        [(o.name, o.type_str, int(o.option)) for o in schema.outputs],
        sorted(
            (a.name, int(a.type), a.required, a.default_value.SerializeToString())
            for a in schema.attributes.values()
            if a.name not in skip
        ),
        sorted(t.type_param_str for t in schema.type_constraints),
        (schema.min_input, schema.max_input, schema.min_output, schema.max_output),
    )


@functools.cache
def _history(op: str, domain: str) -> tuple[int, ...]:
    """Every ``since_version`` of ``op``, oldest first."""
    return tuple(
        sorted(
            {
                s.since_version
                for s in onnx.defs.get_all_schemas_with_history()
                if s.name == op and s.domain == domain
            }
        )
    )


def _types_added(op: str, older: int, newer: int, domain: str) -> bool:
    """Whether version ``newer`` of ``op`` changed version ``older`` by adding element types
    alone: the same signature, every type list kept and one grown. A version whose schema is
    the same as the one before changed what the op does (Max-8's broadcasting, Mod-28, Gather-11's
    negative indices), not its types."""
    skip = frozenset(name for o, name in _ADDED_FOR_NEW_TYPES if o == op)
    old, new = onnx.defs.get_schema(op, older, domain), onnx.defs.get_schema(op, newer, domain)
    if _signature(old, skip) != _signature(new, skip):
        return False
    before = {c.type_param_str: set(c.allowed_type_strs) for c in old.type_constraints}
    after = {c.type_param_str: set(c.allowed_type_strs) for c in new.type_constraints}
    return before != after and all(types <= after[name] for name, types in before.items())


@functools.cache
def same_but_types(op: str, opset_a: int, opset_b: int, domain: str = "") -> bool:
    """Whether ``op`` at ``opset_a`` and at ``opset_b`` exists and every version between
    them only added element types (Cast's float8-only ``saturate`` aside): a node of it
    means the same under either."""
    a, b = since_version(op, opset_a, domain), since_version(op, opset_b, domain)
    if a is None or b is None:
        return False
    low, high = min(a, b), max(a, b)
    steps = [v for v in _history(op, domain) if low <= v <= high]
    return all(_types_added(op, x, y, domain) for x, y in itertools.pairwise(steps))


def _pad_uses(node: onnx.NodeProto, since: int) -> bool:
    """Whether a ``Pad`` uses what version ``since`` added (18: ``axes``, 19: ``wrap``)."""
    if since == 18:
        return len(node.input) > 3 and node.input[3] != ""
    return any(a.name == "mode" and a.s == b"wrap" for a in node.attribute)


#: Versions that only added something a node may leave unused (an optional input, an attribute
#: value), the node then meaning the same under the version before: (op, version) -> whether
#: the node uses it (onnx has no adapter from Pad-18 down: seqlower's own padding is plain).
_UNUSED_ADDITIONS = {("Pad", 18): _pad_uses, ("Pad", 19): _pad_uses}


def _same_for_node(node: onnx.NodeProto, current: int, opset: int) -> bool:
    """:func:`same_but_types`, or a version between adds only what this node leaves unused."""
    op = node.op_type
    if same_but_types(op, current, opset):
        return True
    a, b = since_version(op, current), since_version(op, opset)
    if a is None or b is None or not any(key[0] == op for key in _UNUSED_ADDITIONS):
        return False
    steps = [v for v in _history(op, "") if min(a, b) <= v <= max(a, b)]
    return all(
        _types_added(op, x, y, "")
        or ((op, y) in _UNUSED_ADDITIONS and not _UNUSED_ADDITIONS[op, y](node, y))
        for x, y in itertools.pairwise(steps)
    )


#: Attributes a version added whose default is the older versions' behaviour: a node that
#: writes the default loses it where the target version lacks it (dynamo writes
#: ``noop_with_empty_axes=0`` on every reduction; onnx's adapters down from 18 keep it, then
#: fail: "Unrecognized attribute: noop_with_empty_axes for operator ReduceMax").
_NEW_DEFAULTS = {"noop_with_empty_axes": 0}


def _drop_new_defaults(node: onnx.NodeProto, opset: int) -> None:
    if not is_onnx(node):
        return
    for attr in list(node.attribute):
        default = _NEW_DEFAULTS.get(attr.name)
        if default is None or attr.type != onnx.AttributeProto.INT or attr.i != default:
            continue
        try:
            known = onnx.defs.get_schema(node.op_type, opset).attributes
        except onnx.defs.SchemaError:
            continue
        if attr.name not in known:
            node.attribute.remove(attr)


def _hideable(node: onnx.NodeProto, current: int, opset: int) -> bool:
    """Whether ``node`` can be re-stamped as it is: its op differs only in type lists (or in
    what it leaves unused) and so do the ops of its subgraphs (hidden, it hides them from the
    converter)."""
    if not is_onnx(node) or not _same_for_node(node, current, opset):
        return False
    for attr in node.attribute:
        bodies = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        for body in bodies:
            if not all(_hideable(inner, current, opset) for inner in body.node):
                return False
    for attr in node.attribute:
        if (node.op_type, attr.name) in _ADDED_FOR_NEW_TYPES and since_version(
            node.op_type, opset
        ) != since_version(node.op_type, current):
            to = next((a.i for a in node.attribute if a.name == "to"), None)
            if to in _FLOAT8:
                return False
    return True


def _nested(node: onnx.NodeProto) -> Iterator[onnx.NodeProto]:
    for attr in node.attribute:
        bodies = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        for body in bodies:
            for graph in proto_graphs(body):
                yield from graph.node


def _all_graphs(model: onnx.ModelProto) -> Iterator[onnx.GraphProto | onnx.FunctionProto]:
    yield from proto_graphs(model.graph)
    yield from model.functions


def convert_version(
    model: onnx.ModelProto, opset: int, as_is: frozenset[str] = frozenset()
) -> onnx.ModelProto:
    """onnx's version converter to ``opset``, the nodes whose op differs only in type lists
    between the model's opset and ``opset`` re-stamped as they are (a node holding subgraphs
    only when its bodies' nodes are all such). Raises what the converter raises.

    ``as_is``: default-domain ops whose nodes are re-stamped as they are whatever changed, with
    the nodes of their bodies, for the caller to rewrite (``LowerScan8``: the opset-8 ``Scan``,
    whose adapter to 9 drops the batch axis)."""
    current = next((o.version for o in model.opset_import if o.domain in ONNX_DOMAINS), opset)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    hidden: list[onnx.NodeProto] = []
    for graph in _all_graphs(copy):
        for node in graph.node:
            _drop_new_defaults(node, opset)
            forced = node.op_type in as_is and is_onnx(node)
            if node.domain != _HIDDEN and (forced or _hideable(node, current, opset)):
                for inner in [node, *_nested(node)]:
                    inner.domain = _HIDDEN
                    hidden.append(inner)
    if hidden:
        copy.opset_import.append(onnx.helper.make_opsetid(_HIDDEN, 1))
    converted = onnx.version_converter.convert_version(copy, opset)
    for graph in _all_graphs(converted):
        for node in graph.node:
            if node.domain == _HIDDEN:
                node.domain = ""
    kept = [o for o in converted.opset_import if o.domain != _HIDDEN]
    del converted.opset_import[:]
    converted.opset_import.extend(kept)
    for function in converted.functions:
        for entry in function.opset_import:
            if entry.domain in ONNX_DOMAINS and entry.version == current:
                entry.version = opset
    return converted


def convert_model(model: ir.Model, opset: int, as_is: frozenset[str] = frozenset()) -> None:
    """:func:`convert_version` on ``model`` in place (its weights read in; ``model.meta``
    kept). Raises what the converter raises; unchecked (``as_is`` nodes are not valid yet)."""
    import seqlower.io

    proto = seqlower.io.self_contained_proto(model)
    converted = convert_version(proto, opset, as_is)
    new = ir.serde.deserialize_model(converted)
    for slot in ir.Model.__slots__:
        if slot != "_metadata":
            setattr(model, slot, getattr(new, slot))
