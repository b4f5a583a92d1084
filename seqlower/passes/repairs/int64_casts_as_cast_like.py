"""A ``Cast`` to int64 that a ``Scan`` state is computed from written as ``CastLike`` (target
``tract``).

tract 0.23.9 types a ``Cast`` to int64 in a ``Scan`` body as a size (``TDim``), so a state
computed from one fails to load: 'Impossible to unify I64 with TDim', either facts (PyTorch's
``scan`` counting positives, ``k + (x > 0).sum()``, casts a bool). ``CastLike(x, like)`` of an
int64 ``like`` is the same cast, exact, and tract types it as a tensor
(``tests/targets/test_targets.py::test_tract_types_a_cast_to_int64_in_a_scan_state_as_a_size``).
Only the casts a state output is computed from change: a cast a shape is computed from stays
one tract can read as a size. Below opset 15, which has no ``CastLike``, nothing changes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from seqlower._graphs import all_graphs
from seqlower.passes._base import RepairPass, model_names
from seqlower.passes._ir import int_attr, is_onnx

__all__ = ["Int64CastsAsCastLike"]

#: The opset ``CastLike`` is in from (an opset-13 model's lowering was invalid ONNX, exit 70).
_CAST_LIKE = 15


class Int64CastsAsCastLike(RepairPass):
    """Every ``Cast`` to int64 a ``Scan`` body computes a state from, as a ``CastLike``."""

    op_type = "Scan"

    def repair(self, model: ir.Model) -> None:
        opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
        if opset is None or opset < _CAST_LIKE:
            return  # no CastLike to write: the Cast stays, and the check names tract's failure
        scans = [n for g in all_graphs(model) for n in g if is_onnx(n, "Scan")]
        names = model_names(model) if scans else None
        for scan in scans:
            body = scan.attributes["body"].as_graph()
            scanned = int_attr(scan, "num_scan_inputs", 0) or 0
            states = len(scan.inputs) - scanned
            casts = [n for n in _feeding(body, body.outputs[:states]) if _to_int64(n)]
            if not casts:
                continue
            assert names is not None
            like = ir.node(
                "Constant",
                [],
                attributes={"value": ir.tensor(np.array(0, np.int64), name="int64")},
                name=names.fresh("int64_like"),
            )
            like.outputs[0].name = names.fresh("int64_like")
            like.outputs[0].dtype = ir.DataType.INT64
            like.outputs[0].shape = ir.Shape([])
            body.insert_before(body[0], like)
            for cast in casts:
                cast.op_type = "CastLike"
                del cast.attributes["to"]
                cast.resize_inputs(2)
                cast.replace_input_with(1, like.outputs[0])
                self.rewritten += 1


def _to_int64(node: ir.Node) -> bool:
    to = node.attributes.get("to") if is_onnx(node, "Cast") else None
    return to is not None and not to.is_ref() and to.as_int() == ir.DataType.INT64


def _feeding(body: ir.Graph, outputs: Sequence[ir.Value]) -> list[ir.Node]:
    """The body's nodes that ``outputs`` are computed from (this graph's, not nested ones')."""
    found: dict[int, ir.Node] = {}
    pending = [v.producer() for v in outputs]
    while pending:
        node = pending.pop()
        if node is None or node.graph is not body or id(node) in found:
            continue
        found[id(node)] = node
        pending += [v.producer() for v in node.inputs if v is not None]
    return list(found.values())
