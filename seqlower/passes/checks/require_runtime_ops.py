"""Check that a runtime target translates every node left, naming each one it lacks (targets
``tract``, ``openvino``, ``iree``).

An op seqlower never rewrites (``NonMaxSuppression``, a string op, an ``LSTM`` with
``sequence_lens`` on tract) that the runtime has no translation for fails the proof at load,
which would say MISMATCH (exit 1) on the runtime's own words. The runtimes list no op set through
their Python APIs, so ``benchmarks/runtime_ops.py`` measures it one op version at a time into
``_runtime_ops.py`` (IREE's importer: ``benchmarks/iree_ops.py``, ``_iree_ops.py``); this pass,
last in the target's pipeline, resolves each default-domain node to its ``since_version`` at the
model's opset (at the row's ``min_opset`` when older: the model is converted up to it), in every
scope, and raises
:class:`~seqlower.errors.TargetError` naming every node the runtime lacks, before any check
(exit 2). Nodes of other domains are left to the proof: the table does not cover them. It
changes nothing.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from seqlower._graphs import all_graphs
from seqlower.errors import TargetError, describe_node
from seqlower.passes._ir import RECURRENT_OPS, is_onnx
from seqlower.passes._iree_ops import IREE_LACKS, IREE_VERSION
from seqlower.passes._op_versions import since_version
from seqlower.passes._runtime_ops import (
    OPENVINO_LACKS,
    OPENVINO_VERSION,
    TRACT_LACKS,
    TRACT_VERSION,
)

__all__ = ["RUNTIMES", "RequireRuntimeOps", "Runtime"]


@dataclasses.dataclass(frozen=True)
class Runtime:
    """What one runtime lacks, measured one op version at a time."""

    #: The runtime's name and version, for messages.
    name: str
    #: Op -> the since_versions the runtime has no translation for.
    lacks: dict[str, tuple[int, ...]]
    #: Ops the runtime cannot load with an input given: op -> (input index, its name).
    refused_inputs: dict[str, tuple[int, str]] = dataclasses.field(default_factory=dict)


#: The runtimes by target name: tract (``_runtime_ops.TRACT_LACKS``, and recurrences given
#: ``sequence_lens``), OpenVINO's ONNX front end (``_runtime_ops.OPENVINO_LACKS``) and IREE's
#: ONNX importer (``_iree_ops.IREE_LACKS``).
RUNTIMES = {
    "tract": Runtime(
        f"tract {TRACT_VERSION}",
        TRACT_LACKS,
        # tract 0.23.9 panics typing an LSTM/GRU/RNN given sequence_lens (measured; without it,
        # all three load).
        dict.fromkeys(RECURRENT_OPS, (4, "sequence_lens")),
    ),
    "openvino": Runtime(f"OpenVINO {OPENVINO_VERSION}", OPENVINO_LACKS),
    "iree": Runtime(f"IREE {IREE_VERSION}", IREE_LACKS),
}


class RequireRuntimeOps(ir.passes.InPlacePass):
    """Raise TargetError naming every default-domain node whose op version ``runtime`` (a name
    in :data:`RUNTIMES`, the target's) lacks, at the model's opset or ``min_opset`` (the row's:
    the opset an older model is converted to)."""

    def __init__(self, runtime: str, *, min_opset: int | None = None) -> None:
        super().__init__()
        self.min_opset = min_opset
        spec = RUNTIMES[runtime]
        self.target = runtime
        self.runtime = spec.name
        self.lacks = spec.lacks
        self.refused_inputs = spec.refused_inputs

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        opset = max(model.opset_imports.get("", 1), self.min_opset or 1)
        blockers = []
        for graph in all_graphs(model):
            for node in graph:
                why = self._missing(node, opset)
                if why:
                    blockers.append(f"{describe_node(node)} remains: {why}")
        if blockers:
            raise TargetError(self.target, blockers)
        return ir.passes.PassResult(model, modified=False)

    def _missing(self, node: ir.Node, opset: int) -> str | None:
        if not is_onnx(node):
            return None
        op = node.op_type
        refused = self.refused_inputs.get(op)
        if refused is not None:
            index, name = refused
            if len(node.inputs) > index and node.inputs[index] is not None:
                return f"{self.runtime} cannot load {op} with {name}"
        since = since_version(op, opset)
        if since is not None and since in self.lacks.get(op, ()):
            return f"{self.runtime} has no {op} (as defined in opset {since})"
        return None
