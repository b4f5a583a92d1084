"""A ``Cast`` to int64 that a ``Scan`` state is computed from written as ``CastLike`` (target
``tract``).

tract 0.23.9 types a ``Cast`` to int64 in a ``Scan`` body as a size (``TDim``), so a state
computed from one fails to load: 'Impossible to unify I64 with TDim', either facts (PyTorch's
``scan`` counting positives, ``k + (x > 0).sum()``, casts a bool). ``CastLike(x, like)`` of an
int64 ``like`` is the same cast, exact, and tract types it as a tensor
(``tests/targets/test_targets.py::test_tract_types_a_cast_to_int64_in_a_scan_state_as_a_size``).
Only the casts a state output is computed from change: a cast a shape is computed from stays
one tract can read as a size. Below opset 15, which has no ``CastLike``, nothing changes.

A state's initial value computed from a shape (a ``Shape``, ``Size``) is a size to tract too:
the Scan reads it through a ``CastLike`` (PyTorch's ``while i > 0: i -= 1`` from a length,
``benchmarks/families/new_shapes.py`` ``torch_while_count_down``), and so does an ``If``
branch that passes it on beside a Scan's result (``guard_by_if``'s branch for no iteration:
tract wants both branches' outputs of one type, 'I64 vs TDim').
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from seqlower._graphs import all_graphs
from seqlower.passes._base import NameGenerator, RepairPass, model_names
from seqlower.passes._ir import int_attr, is_onnx

__all__ = ["Int64CastsAsCastLike"]

#: The opset ``CastLike`` is in from (an opset-13 model's lowering was invalid ONNX, exit 70).
_CAST_LIKE = 15


class Int64CastsAsCastLike(RepairPass):
    """Every ``Cast`` to int64 a ``Scan`` body computes a state from, as a ``CastLike``; a
    Scan's initial state and a graph output computed from a shape read through one."""

    op_type = "Scan"

    def repair(self, model: ir.Model) -> None:
        opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
        if opset is None or opset < _CAST_LIKE:
            return  # no CastLike to write: the Cast stays, and the check names tract's failure
        scans = [n for g in all_graphs(model) for n in g if is_onnx(n, "Scan")]
        returned = [v for v in model.graph.outputs if _a_size(v)]
        names = model_names(model) if scans or returned else None
        for k, value in enumerate(model.graph.outputs):
            if value in returned:
                assert names is not None
                model.graph.outputs[k] = self._tensor(value, names, returned=True)
        for scan in scans:
            body = scan.attributes["body"].as_graph()
            scanned = int_attr(scan, "num_scan_inputs", 0) or 0
            states = len(scan.inputs) - scanned
            casts = [n for n in _feeding(body, body.outputs[:states]) if _to_int64(n)]
            sizes = [v for v in scan.inputs[:states] if v is not None and _a_size(v)]
            for size in dict.fromkeys(sizes):
                assert names is not None
                self._read_as_tensor(size, names)
            if not casts:
                continue
            assert names is not None
            like = _int64_zero(names)
            body.insert_before(body[0], like)
            for cast in casts:
                cast.op_type = "CastLike"
                del cast.attributes["to"]
                cast.resize_inputs(2)
                cast.replace_input_with(1, like.outputs[0])
                self.rewritten += 1

    def _read_as_tensor(self, size: ir.Value, names: NameGenerator) -> None:
        """``size`` read by its Scans, and by the Identities that give it as an If branch's
        output, through ``CastLike(size, int64 0)`` computed right after it."""
        readers = [
            (node, k)
            for node, k in size.uses()
            if is_onnx(node, "Scan") or (is_onnx(node, "Identity") and _a_branch_output(node))
        ]
        tensor = self._tensor(size, names)
        for node, k in readers:
            node.replace_input_with(k, tensor)

    def _tensor(self, size: ir.Value, names: NameGenerator, returned: bool = False) -> ir.Value:
        """``CastLike(size, int64 0)``, computed right after ``size``; when ``returned`` (a graph
        output: tract returns no size, 'Unsupported DatumType in the public API TDim') it takes
        ``size``'s name, and ``size`` a fresh one."""
        producer = size.producer()
        graph = None if producer is None else producer.graph
        assert producer is not None and isinstance(graph, ir.Graph)  # computed from a Shape
        like = _int64_zero(names)
        cast = ir.node("CastLike", [size, like.outputs[0]], name=names.fresh(f"{size.name}_tensor"))
        tensor = cast.outputs[0]
        tensor.type, tensor.shape = size.type or ir.TensorType(ir.DataType.INT64), size.shape
        if returned:
            name, size.name = size.name, names.fresh(f"{size.name}_size")
            tensor.name = name
        else:
            tensor.name = names.fresh(f"{size.name}_tensor")
        graph.insert_after(producer, [like, cast])
        self.rewritten += 1
        return tensor


def _a_branch_output(node: ir.Node) -> bool:
    """Whether ``node``'s output is an output of the If branch it is in."""
    graph = node.graph
    return isinstance(graph, ir.Graph) and any(o in graph.outputs for o in node.outputs)


def _a_size(value: ir.Value) -> bool:
    """Whether ``value`` is computed from a ``Shape`` or ``Size`` through ops that keep their
    input's element type (so int64; at most a few dozen nodes of its graph): what tract types
    as a size (TDim)."""
    producer = value.producer()
    if value.dtype not in (None, ir.DataType.INT64) or producer is None:
        return False
    if not isinstance(producer.graph, ir.Graph):
        return False  # a function's: left
    pending, seen = [value.producer()], 0
    while pending and seen < 40:
        node = pending.pop()
        seen += 1
        if node is None or not is_onnx(node):
            continue
        if node.op_type in ("Shape", "Size"):
            return True
        if node.op_type in _ELEMENTWISE:
            pending += [v.producer() for v in node.inputs if v is not None]
        elif node.op_type in _DATA_FIRST and node.inputs and node.inputs[0] is not None:
            pending.append(node.inputs[0].producer())
    return False


#: Ops whose result has their inputs' element type, and those that take their first's.
_ELEMENTWISE = frozenset({"Add", "Sub", "Mul", "Div", "Neg", "Abs", "Max", "Min", "Concat"})
_DATA_FIRST = frozenset(
    {"Gather", "Squeeze", "Unsqueeze", "Reshape", "Slice", "Identity", "Expand", "Flatten"}
)


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


def _int64_zero(names: NameGenerator) -> ir.Node:
    """A ``Constant`` int64 0, the type a ``CastLike`` casts to (not inserted)."""
    like = ir.node(
        "Constant",
        [],
        attributes={"value": ir.tensor(np.array(0, np.int64), name="int64")},
        name=names.fresh("int64_like"),
    )
    like.outputs[0].name = names.fresh("int64_like")
    like.outputs[0].dtype = ir.DataType.INT64
    like.outputs[0].shape = ir.Shape([])
    return like
