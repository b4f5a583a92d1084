"""Expand ONNX function ops a runtime lacks into the ONNX ops their definition is made of.

Many newer ONNX ops (``CenterCropPad``, ``Gelu``, ``Mish``, ``GroupNormalization``, ...) are
*functions*: ONNX defines each as a small graph of older ops, so a runtime that lacks the op
can still run its body. tract 0.23.9 has no ``CenterCropPad`` (``Unimplemented(CenterCropPad)``),
which PyTorch-exported preprocessing and this project's own example use. Each listed node is
replaced by the body ONNX gives for the opset in force (for context-dependent functions, built
from the node's attributes and input types), inlined by onnx_ir's ``InlinePass``: the node
becomes a call of a model-local function holding that body, and only those calls are inlined.
Nodes whose op has no function at that opset are left for the target's check to name.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import onnx
import onnx_ir as ir
from onnx_ir.passes.common import InlinePass

from seqlower.passes._base import find_sites
from seqlower.passes._converter_ops import ONNX2TORCH
from seqlower.passes._ir import SEQUENCE_OPS, is_onnx
from seqlower.passes._op_versions import since_version

__all__ = ["CONVERTER_TABLES", "ExpandFunctionOps"]

#: The converters whose unconverted function ops can be expanded: op -> since_versions.
CONVERTER_TABLES = {"onnx2torch": ONNX2TORCH}

_DOMAIN = "seqlower.expanded"  # the calls' private domain, gone once they are inlined


class ExpandFunctionOps(ir.passes.InPlacePass):
    """Replace nodes of the ``ops`` (default: every ONNX op defined as a function) by their
    ONNX function bodies; :attr:`rewritten` counts them.

    ``unconverted_by`` (a converter of :data:`CONVERTER_TABLES`) expands instead the nodes that
    converter cannot convert, at the opset it converts at (``max_opset``). onnx2torch 1.5.15 has
    no converter for many function ops (``Gelu``, ``Mish``, ``GroupNormalization``, ...), and
    ops newer than the opset the model is converted to for it (``Gelu`` is of opset 20, its row
    converts to 17) made the conversion fail outright (``--opset 18: Gelu does not exist at
    opset 18``). Their ONNX bodies are made of ops it converts: each node of a function op the
    converter's table lacks, or that does not exist at ``max_opset``, is expanded (the body for
    the opset in force, re-stamped with the model). Ops that are no functions are left for the
    converter's check to name.
    """

    def __init__(
        self,
        ops: Collection[str] | None = None,
        *,
        unconverted_by: str | None = None,
        max_opset: int | None = None,
    ) -> None:
        super().__init__()
        self.ops = None if ops is None else frozenset(ops)
        self.table = None if unconverted_by is None else CONVERTER_TABLES[unconverted_by]
        self.max_opset = max_opset
        self.rewritten = 0

    def matches(self, node: ir.Node) -> bool:
        if self.table is not None:
            return self._unconverted(node, self.table)
        return is_onnx(node) and (self.ops is None or node.op_type in self.ops)

    def _unconverted(self, node: ir.Node, table: dict[str, tuple[int, ...]]) -> bool:
        if not is_onnx(node) or node.op_type in SEQUENCE_OPS:
            return False  # SequenceMap is a function too: the sequence-free passes lower it
        if node.op_type not in table:
            return True
        return self.max_opset is not None and since_version(node.op_type, self.max_opset) is None

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = 0
        planned: list[tuple[ir.Node, ir.Function, list[ir.Attr]]] = []
        # Every scope, with the opset in force there.
        for site in find_sites(model, self.matches):
            found = _function_of(site.node, site.opset, f"{site.node.op_type}_{len(planned)}")
            if found is not None:
                planned.append((site.node, *found))
        if not planned:
            return ir.passes.PassResult(model, modified=False)
        for node, function, defaults in planned:
            for attribute in defaults:
                node.attributes[attribute.name] = attribute
            model.functions[function.identifier()] = function
            node.domain, node.op_type, node.overload = _DOMAIN, function.name, ""
        model.opset_imports[_DOMAIN] = 1
        InlinePass(criteria=lambda f: f.domain == _DOMAIN)(model)
        model.opset_imports.pop(_DOMAIN, None)
        self.rewritten = len(planned)
        return ir.passes.PassResult(model, modified=True)


def _function_of(node: ir.Node, opset: int, name: str) -> tuple[ir.Function, list[ir.Attr]] | None:
    """The op's ONNX function for ``opset`` as a model-local function named ``name``, and the
    schema's defaults of the attributes the node leaves out (the body refers to them by name;
    inlined, an unset reference would drop the attribute instead of taking the default)."""
    try:
        # Any: onnx's stubs lack the per-version function accessors the module has.
        schema: Any = onnx.defs.get_schema(node.op_type, opset)
    except onnx.defs.SchemaError:
        return None
    versions = [v for v in schema.all_function_opset_versions if v <= opset]
    if not versions:
        return None
    version = max(versions)
    if version in schema.context_dependent_function_opset_versions:
        if any(value is not None and value.type is None for value in node.inputs):
            return None  # onnx 1.23's builders crash the process on an unknown input type
        types = [_type_proto(value).SerializeToString() for value in node.inputs]
        node_bytes = ir.serde.serialize_node(node).SerializeToString()
        raw = schema.get_context_dependent_function_with_opset_version(version, node_bytes, types)
        proto = onnx.FunctionProto.FromString(raw)
    else:
        proto = schema.get_function_with_opset_version(version)
        if isinstance(proto, bytes):
            proto = onnx.FunctionProto.FromString(proto)
    if not proto.node:
        return None
    proto.domain, proto.name = _DOMAIN, name
    prefix = node.name or node.op_type  # runtimes name nodes in errors: say where they came from
    for inner in proto.node:
        inner.name = f"{prefix}/{inner.name or inner.op_type}"
    # The body is written for the function's version and runs in the graph's opset (ONNX's
    # own inliner does the same); the check compares the outputs.
    del proto.opset_import[:]
    proto.opset_import.add(domain="", version=opset)
    try:
        function = ir.serde.deserialize_function(proto)
    except ir.serde.SerdeError:  # a body naming outputs it does not make (LayerNormalization's
        return None  # optional Mean for a one-output node): leave the node
    defaults = [
        ir.serde.deserialize_attribute(attribute.default_value)
        for attribute in schema.attributes.values()
        if attribute.name not in node.attributes and attribute.default_value.name
    ]
    return function, defaults


def _type_proto(value: ir.Value | None) -> onnx.TypeProto:
    """What ONNX's function builders read of an input: its type, empty when unknown."""
    proto = onnx.TypeProto()
    if value is not None and value.type is not None:
        ir.serde.serialize_type_into(proto, value.type)
        if value.shape is not None and isinstance(value.type, ir.TensorType):
            ir.serde.serialize_shape_into(proto, value.shape)
    return proto
