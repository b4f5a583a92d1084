"""Check that a converter has a converter for every node left, naming each one it lacks.

A converter target turns each node into its own form by looking the op up in a registry and
refuses the whole model for one it lacks: onnx2torch by (domain, op, the op's ONNX
``since_version`` at the model's opset: ``Converter is not implemented ... 'Scan'``), TVM's
Relax ONNX frontend by op type alone (``The following operators are not supported``), tinygrad's
``OnnxRunner`` by op type and, for a few ops, the newest version at most the opset of the
node's domain (``op='Loop' is not supported``). The registries are copied into
``_converter_ops.py`` by ``benchmarks/converter_ops.py``; this pass, last in the target's
pipeline, resolves each node the way its converter does (at the opset the model is converted
to for the target, when newer), in the main graph and the subgraphs of the nodes it converts
(TVM's and tinygrad's ``If``), and raises :class:`~seqlower.errors.TargetError` naming every
node without a converter, before any check (otherwise the proof fails, exit 1, on the runtime's
own words). It changes nothing.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from seqlower._graphs import subgraphs_of
from seqlower.errors import TargetError, describe_node
from seqlower.passes._converter_ops import (
    ONNX2TORCH,
    ONNX2TORCH_VERSION,
    TINYGRAD,
    TINYGRAD_VERSION,
    TVM,
    TVM_VERSION,
)
from seqlower.passes._ir import CONVERTER_OPS, NO_LOOP, blocked, is_onnx
from seqlower.passes._op_versions import resolved_since_version

__all__ = ["CONVERTERS", "Converter", "RequireConverterOps"]


@dataclasses.dataclass(frozen=True)
class Converter:
    """What one converter converts, read from its source."""

    #: The converter's name and version, for messages.
    name: str
    #: Op (``domain::Op`` outside the default domain) -> the versions it converts.
    table: dict[str, tuple[int, ...]]
    #: (op, attribute, value) the converter refuses (or fails on when run), read in its source.
    refused: tuple[tuple[str, str, int], ...] = ()
    #: How the converter picks a node's version: ``since``, the op's ONNX ``since_version`` at
    #: the opset must be one of the table's (onnx2torch); ``newest``, the newest of them at most
    #: the opset of the node's domain (tinygrad); ``any``, every listed op converts (TVM: the
    #: newest at most the opset, else the oldest).
    resolves: str = "since"
    #: Whether an op type is found whatever its domain (``Op`` read for ``domain::Op``).
    any_domain: bool = False
    #: The only domains the converter loads a model importing or using (None: any).
    domains: frozenset[str] | None = None


#: The converters by name: onnx2torch (no Loop, Scan, If, LSTM, GRU, sequence op, ...; Reshape
#: with allowzero=1, Flatten with axis=0), TVM's Relax ONNX frontend (no Loop, Scan, LSTM, GRU,
#: RNN; it converts If and the nodes of its branches) and tinygrad's OnnxRunner (no Loop, Scan,
#: LSTM, GRU, RNN, sequence op; it runs If and the nodes of its branches).
CONVERTERS = {
    "onnx2torch": Converter(
        f"onnx2torch {ONNX2TORCH_VERSION}",
        ONNX2TORCH,
        # reshape.py raises for allowzero=1; flatten.py's axis=0 module flattens to one
        # dimension, then asks torch.flatten(start_dim=1) of it (IndexError when run).
        refused=(("Reshape", "allowzero", 1), ("Flatten", "axis", 0)),
    ),
    "tvm": Converter(f"TVM {TVM_VERSION}", TVM, resolves="any", any_domain=True),
    "tinygrad": Converter(
        f"tinygrad {TINYGRAD_VERSION}",
        TINYGRAD,
        resolves="newest",
        any_domain=True,
        # tinygrad.nn.onnx.Domain (0.14.0): its parser raises for any other domain, imported or
        # used ("'this' is not a valid Domain").
        domains=frozenset(
            {
                "ai.onnx",
                "ai.onnx.ml",
                "ai.onnx.training",
                "ai.onnx.preview.training",
                "com.microsoft",
                "com.microsoft.nchwc",
                "com.microsoft.experimental",
                "org.pytorch.aten",
            }
        ),
    ),
}


class RequireConverterOps(ir.passes.InPlacePass):
    """Raise TargetError naming every node ``converter`` (a name in :data:`CONVERTERS`) has no
    converter for, the model converted to ``max_opset`` (its row's) when newer."""

    def __init__(self, converter: str, *, max_opset: int | None = None) -> None:
        super().__init__()
        spec = CONVERTERS[converter]
        self.converter = spec.name
        self.table = spec.table
        self.refused = spec.refused
        self.resolves = spec.resolves
        self.any_domain = spec.any_domain
        self.domains = spec.domains
        self.max_opset = max_opset

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        newest = self.max_opset
        opsets = dict(model.opset_imports)
        if newest is not None and opsets.get("", 1) > newest:
            opsets[""] = newest
        dynamic = any(
            isinstance(value.type, ir.TensorType)
            and (value.shape is None or not value.shape.is_static())
            for value in model.graph.inputs
        )
        blockers = [
            f"the model imports domain {domain!r}, which {self.converter} does not load"
            for domain in model.opset_imports
            if not self._loads(domain)
        ]
        graphs = [model.graph]
        while graphs:
            for node in graphs.pop(0):
                why = self._missing(node, opsets)
                if why:
                    blockers.append(f"{describe_node(node)} remains: {why}{_help(node, dynamic)}")
                else:
                    graphs += subgraphs_of(node)
        if blockers:
            raise TargetError(self.converter, blockers)
        return ir.passes.PassResult(model, modified=False)

    def _loads(self, domain: str) -> bool:
        return self.domains is None or (domain or "ai.onnx") in self.domains

    def _missing(self, node: ir.Node, opsets: dict[str, int]) -> str | None:
        domain = "" if is_onnx(node) else node.domain
        if not self._loads(domain):
            return f"{self.converter} loads no node of domain {domain!r}"
        op = node.op_type if not domain else f"{domain}::{node.op_type}"
        known = self.table.get(op)
        if not known and self.any_domain:
            known = self.table.get(node.op_type)
        if not known:
            why = blocked(node, CONVERTER_OPS)  # a pass that could have rewritten it says why not
            return f"{self.converter} has no converter for {op}" + (f" ({why})" if why else "")
        for refused_op, name, value in self.refused:
            attr = node.attributes.get(name)
            if op == refused_op and attr is not None and not attr.is_ref() and attr.value == value:
                return f"{self.converter} cannot convert {op} with {name}={value}"
        opset = opsets.get(domain)
        if self.resolves == "any" or opset is None:
            return None
        if self.resolves == "newest":
            if min(known) <= opset:
                return None
            return f"{self.converter} converts {op} only as of opset {min(known)}, not {opset}"
        since = resolved_since_version(node.op_type, domain, opset)
        if since is None or since in known:
            return None
        versions = ", ".join(str(v) for v in known)
        return (
            f"{self.converter} converts {op} only as defined in opsets {versions}, not as of "
            f"opset {since} (the model's opset is {opset})"
        )


def _help(node: ir.Node, dynamic: bool) -> str:
    """What makes a loop the converter lacks go: a constant trip count unrolls it."""
    if node.op_type not in ("Loop", "Scan") or not is_onnx(node):
        return ""
    why = blocked(node, NO_LOOP)
    reason = f" ({why})" if why else ""
    if not dynamic:
        return f"; its trip count is not a constant at these input shapes{reason}"
    return f"; unrolled when its trip count is a constant: --overwrite-input-shape{reason}"
