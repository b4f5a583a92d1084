"""Check that a converter has a converter for every node left, naming each one it lacks.

A converter target (onnx2torch) turns each node of the main graph into a module by looking
up (domain, op, version) in its registry, the version being the op's ONNX ``since_version``
at the model's opset, and refuses the whole model for one it lacks (``Converter is not
implemented ... 'Scan'``). The registry is copied into ``_converter_ops.py`` by
``benchmarks/converter_ops.py``; this pass, last in the target's pipeline, resolves each node's
version the same way (at the opset the model is converted to for the target, when newer) and
raises :class:`~seqlower.errors.TargetError` naming every node without a converter, before
any check. It changes nothing.
"""

from __future__ import annotations

import functools
from typing import ClassVar

import onnx
import onnx_ir as ir

from seqlower.errors import TargetError, describe_node
from seqlower.passes._ir import is_onnx
from seqlower.passes.targets._converter_ops import ONNX2TORCH, ONNX2TORCH_VERSION

__all__ = ["RequireConverterOps", "RequireOnnx2TorchOps"]


class RequireConverterOps(ir.passes.InPlacePass):
    """Raise TargetError unless ``table`` has a converter for every node of the main graph."""

    #: The converter's name and version, for messages.
    converter: ClassVar[str]
    #: Op (``domain::Op`` outside the default domain) -> the since_versions it converts.
    table: ClassVar[dict[str, tuple[int, ...]]]
    #: The target row whose ``max_opset`` the model is converted to.
    target: ClassVar[str]
    #: (op, attribute, value) the converter refuses (or fails on when run), read in its source.
    refused: ClassVar[tuple[tuple[str, str, int], ...]] = ()

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        from seqlower.targets import get_target

        newest = get_target(self.target).max_opset
        opsets = dict(model.opset_imports)
        if newest is not None and opsets.get("", 1) > newest:
            opsets[""] = newest
        blockers = []
        for node in model.graph:
            why = self._missing(node, opsets)
            if why:
                blockers.append(f"{describe_node(node)} remains: {why}")
        if blockers:
            raise TargetError(self.converter, blockers)
        return ir.passes.PassResult(model, modified=False)

    def _missing(self, node: ir.Node, opsets: dict[str, int]) -> str | None:
        domain = "" if is_onnx(node) else node.domain
        op = node.op_type if not domain else f"{domain}::{node.op_type}"
        known = self.table.get(op)
        if not known:
            return f"{self.converter} has no converter for {op}"
        for refused_op, name, value in self.refused:
            attr = node.attributes.get(name)
            if op == refused_op and attr is not None and not attr.is_ref() and attr.value == value:
                return f"{self.converter} cannot convert {op} with {name}={value}"
        opset = opsets.get(domain)
        since = _since_version(node.op_type, domain, opset) if opset is not None else None
        if since is None or since in known:
            return None
        versions = ", ".join(str(v) for v in known)
        return (
            f"{self.converter} converts {op} only as defined in opsets {versions}, not as of "
            f"opset {since} (the model's opset is {opset})"
        )


@functools.cache
def _since_version(op: str, domain: str, opset: int) -> int | None:
    try:
        return int(onnx.defs.get_schema(op, opset, domain).since_version)
    except Exception:  # not an ONNX op: the converter resolves it as given
        return opset


class RequireOnnx2TorchOps(RequireConverterOps):
    """Raise TargetError naming every node onnx2torch cannot convert (no Loop, Scan, If, LSTM,
    GRU, sequence op, ...; Reshape with allowzero=1, Flatten with axis=0)."""

    converter = f"onnx2torch {ONNX2TORCH_VERSION}"
    table = ONNX2TORCH
    target = "onnx2torch"
    # reshape.py raises for allowzero=1; flatten.py's axis=0 module flattens to one dimension,
    # then asks torch.flatten(start_dim=1) of it (IndexError when run).
    refused = (("Reshape", "allowzero", 1), ("Flatten", "axis", 0))
