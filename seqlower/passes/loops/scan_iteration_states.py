"""A ``Scan`` over iteration numbers reads them through a counter state (target ``tract``).

tract 0.23.9 moves body ops that read only a scanned input out of the ``Scan``, applied to the
whole input at once; when that input is known at load (``LoopToScan``'s ``Range(0, N)`` with
``N`` a constant, or computed from input shapes, which tract's concrete facts fix) and two such
ops follow each other, it fails: 'Trying to substitute a 1,F64 by 3,F64' for ``Cast(Add(i,
1))`` (``tests/passes/test_scan_iteration_states.py``; PyTorch's ``embedding_bag`` reads
``offsets[i:i+1]``), 'Remove a non-1 axis' for ``Slice(x, Reshape(i), Add(Reshape(i), 1))``.
The body reads ``Max(i, c)`` instead, ``c`` a state starting at the ``Range``'s start and
stepping by its delta (the same number: exact), which tract cannot move out. Only forward
scans over an integer ``Range`` whose numbers a one-input op reads (what tract moves out:
``Reshape``, ``Unsqueeze``, ``Squeeze``, ``Flatten``, ``Cast``) are taken, and none whose numbers
a ``Mul``/``Div`` reads: tract 0.23.9 moves an integer ``Mul`` by a constant through the ``Max``
into the state and fails again ('inconsistent fact: body input 1 is ,I64 🬳 2'), where it runs
the Scan as written. The scanned input stays (tract drops a ``Scan`` whose scanned inputs
nothing reads: 'No scan input'). A ``Scan`` inside a loop body is left: tract 0.23.9 carries a
nested ``Scan``'s states across the outer iterations (wrong numbers, ``loop_cases``'s
``nested``). Before opset 12, whose ``Max`` takes no integers, ``Where(Less(i, c), c, i)``.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from seqlower._graphs import subgraphs_of
from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._ir import graph_attr, int_attr, ints_attr, is_onnx, model_nodes, nodes_in
from seqlower.passes._shared import prepend
from seqlower.passes._types import TypeOracle

__all__ = ["ScanIterationStates"]

#: Ops reading the numbers that tract moves out of the Scan (one input), and that it moves
#: through the Max into the counter (integer scaling).
_MOVED = frozenset({"Reshape", "Unsqueeze", "Squeeze", "Flatten", "Cast", "CastLike"})
_SCALED = frozenset({"Mul", "Div"})
_INTEGERS = frozenset({ir.DataType.INT64, ir.DataType.INT32, ir.DataType.INT16, ir.DataType.INT8})


@dataclasses.dataclass(frozen=True)
class _Plan:
    body: ir.Graph
    states: int  # the Scan's states
    scanned: int  # which scanned input is the Range
    start: ir.Value
    delta: ir.Value


class ScanIterationStates(NodeLoweringPass[_Plan]):
    """Each ``Scan`` over a ``Range`` reads the numbers as ``Max(i, counter)``, the counter a
    new state, so tract does not move the ops that read them out of the loop."""

    op_type = "Scan"
    takes_all = False
    repairs = True

    def __init__(self) -> None:
        super().__init__()
        self._in_loops: set[int] = set()  # graphs inside loop bodies (per run)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self._in_loops = _loop_graphs(model)
        return super().call(model)

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        if id(node.graph) in self._in_loops:
            return None
        body = graph_attr(node, "body")
        scans = int_attr(node, "num_scan_inputs")
        if site.opset < 9 or body is None or scans is None or len(body.inputs) != len(node.inputs):
            return None
        states = len(node.inputs) - scans
        directions = ints_attr(node, "scan_input_directions") or [0] * scans
        for k in range(scans):
            source = node.inputs[states + k]
            producer = None if source is None else source.producer()
            element = body.inputs[states + k]
            readers = _readers(element)
            if not is_onnx(producer, "Range") or directions[k] != 0 or readers & _SCALED:
                continue
            if not readers & _MOVED:
                continue
            start, _, delta = producer.inputs[:3]
            dtype = element.dtype or (source.dtype if source is not None else None)
            if start is not None and delta is not None and dtype in _INTEGERS:
                return _Plan(body, states, k, start, delta)
        return None

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, body, names = ctx.node, plan.body, ctx.names
        element = body.inputs[plan.states + plan.scanned]
        scalar = dict(type=element.type, shape=ir.Shape([]))
        counter = ir.Value(name=names.fresh(f"{ctx.base}_counter"), **scalar)  # type: ignore[arg-type]
        inside = ctx.into(body, pool=None)
        if ctx.opset >= 12:
            number = inside.Max(element, counter, _hint="iteration")
        else:
            before = inside.Less(element, counter, _hint="behind")
            number = inside.Where(before, counter, element, _hint="iteration")
        following = inside.Add(counter, plan.delta, _hint="counter_next")
        for value in (number, following):
            value.type, value.shape = element.type, ir.Shape([])
        for use in list(element.uses()):
            if use.node not in inside.nodes:
                use.node.replace_input_with(use.idx, number)
        outputs = [number if v is element else v for v in body.outputs]
        body.outputs.clear()
        body.outputs.extend([*outputs[: plan.states], following, *outputs[plan.states :]])
        inputs = list(body.inputs)
        body.inputs.clear()
        body.inputs.extend([*inputs[: plan.states], counter, *inputs[plan.states :]])
        prepend(body, list(inside.nodes))
        final = ir.Value(name=names.fresh(f"{ctx.base}_counter_final"))
        results = [
            ir.Value(
                name=names.fresh(f"{old.name or ctx.base}_counted"), type=old.type, shape=old.shape
            )
            for old in node.outputs
        ]
        del node.attributes["body"]
        attributes = {name: attr.value for name, attr in node.attributes.items()}
        ctx.before(pool=None).Scan(
            *node.inputs[: plan.states], plan.start, *node.inputs[plan.states :],
            body=body, **attributes,
            _outputs=[*results[: plan.states], final, *results[plan.states :]],
            _name=names.fresh(f"{ctx.base}_counted"), _doc_string=node.doc_string,
        )  # fmt: skip
        ctx.replace(results, rename=True)


def _readers(value: ir.Value) -> set[str]:
    """The op types reading ``value``, through ``Identity``s (tract removes those)."""
    found: set[str] = set()
    for use in value.uses():
        if is_onnx(use.node, "Identity"):
            found |= _readers(use.node.outputs[0])
        else:
            found.add(use.node.op_type)
    return found


def _loop_graphs(model: ir.Model) -> set[int]:
    """The ids of every graph inside a ``Loop`` or ``Scan`` body, at any depth."""
    found: set[int] = set()
    for node in model_nodes(model):
        if node.op_type in ("Loop", "Scan") and id(node.graph) not in found:
            for body in subgraphs_of(node):
                found.add(id(body))
                found.update(id(g) for inner in nodes_in(body) for g in subgraphs_of(inner))
    return found
