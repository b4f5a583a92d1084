"""``Scan`` bodies in the form OpenVINO's and tract's importers take (targets ``openvino``,
``tract``).

ONNX's own function bodies (``LinearAttention``'s expansion, opset 27) write a ``Scan`` whose
body inputs are untyped and whose body reads values of the enclosing graph, both valid ONNX:

- **untyped body inputs**: OpenVINO 2026.4.1 fails on the first op that reads one
  (``Unsupported operation of type: Convert``), tract 0.23.9 cannot build the Scan
  (``Building node (Scan)``). A state takes the element type of the value that starts it, a
  scan input that of the scanned tensor, each with its rank and every dimension unknown (a
  state may change shape from one iteration to the next; ONNX's inference passes none either).
- **outer reads** (OpenVINO only): its importer counts each as one more body input and refuses
  the node (``node_inputs.size() - in_offset >= body_inputs.size()``). Small constants (up to
  64 elements) are copied into the body, every other read is carried as a state the body
  passes through unchanged (an ``Identity``), whose final value nothing reads. tract runs outer
  reads (and gives a nested Scan's pass-through state its first value on every outer
  iteration), so its variant, :class:`TypedScanBodies`, only types the inputs.

The opset-8 ``Scan`` (a batch axis and ``sequence_lens`` first) is left as it is.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._ir import constant_array, graph_attr, nodes_in
from seqlower.passes._shared import outer_reads, prepend, read_inside
from seqlower.passes._types import TypeOracle

__all__ = ["StrictScanBodies"]

_INLINED_CONSTANT_SIZE = 64  # outer constants up to this many elements are copied into a body


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    opset: int
    #: Untyped body inputs, the type each gets and its shape (None: unknown).
    types: list[tuple[ir.Value, ir.TypeProtocol, ir.Shape | None]]
    #: Values the body reads from outside, each with its type and shape when known.
    reads: list[tuple[ir.Value, ir.TypeProtocol | None, ir.Shape | None]]


class StrictScanBodies(NodeLoweringPass[_Plan]):
    """Every ``Scan`` body (opset 9 and later): every input typed, no read from outside."""

    op_type = "Scan"
    takes_all = False
    repairs = True

    def __init__(self, *, carry_reads: bool = True) -> None:
        """``carry_reads``: outer reads copied in (small constants) or carried as pass-through
        states (OpenVINO); else left as reads (tract runs them), only the inputs typed."""
        super().__init__()
        self.carry_reads = carry_reads

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        body = graph_attr(node, "body")  # None for a function's attribute reference
        if site.opset < 9 or body is None or "num_scan_inputs" not in node.attributes:
            return None  # opset 8's batch form
        if len(body.inputs) != len(node.inputs):
            return None  # malformed: the checker names it
        states = len(node.inputs) - node.attributes["num_scan_inputs"].as_int()
        typed: list[tuple[ir.Value, ir.TypeProtocol, ir.Shape | None]] = []
        for k, (value, outer) in enumerate(zip(body.inputs, node.inputs, strict=True)):
            if value.type is not None or outer is None:
                continue
            type_ = types.type_of(outer)
            if type_ is None:
                continue
            shape = outer.shape or types.shape_of(outer)
            rank = None if shape is None else shape.rank() - (0 if k < states else 1)
            typed.append((value, type_, None if rank is None else ir.Shape([None] * rank)))
        reads = []
        if self.carry_reads:
            for value in outer_reads(body, list(body.inputs)):
                reads.append((value, types.type_of(value), value.shape or types.shape_of(value)))
        if not (typed or reads):
            return None
        return _Plan(node, body, site.opset, typed, reads)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        body, names, base = plan.body, ctx.names, ctx.base
        for value, type_, shape in plan.types:
            value.type, value.shape = type_, shape
        if not plan.reads:
            return
        inside = ctx.into(body, pool="own")
        passes = ctx.into(body, pool=None)
        carried: list[ir.Value] = []  # outer values carried as states
        states_in: list[ir.Value] = []
        states_out: list[ir.Value] = []
        nodes = {id(n) for n in nodes_in(body)}
        for value, read_type, read_shape in plan.reads:
            array = constant_array(value)
            if array is not None and array.size <= _INLINED_CONSTANT_SIZE:
                target = inside.constant(array, hint=f"{value.name}_inside")
            else:
                target = ir.Value(
                    name=names.fresh(f"{base}_{value.name}"), type=read_type, shape=read_shape
                )
                out = passes.Identity(target, _hint=f"{value.name}_out")
                out.type, out.shape = read_type, read_shape
                carried.append(value)
                states_in.append(target)
                states_out.append(out)
            read_inside(body, value, target, nodes)
        prepend(body, list(inside.nodes))
        body.extend(passes.nodes)
        if carried:
            _with_states(ctx, plan, carried, states_in, states_out)


def _with_states(
    ctx: Rewrite,
    plan: _Plan,
    carried: list[ir.Value],
    states_in: list[ir.Value],
    states_out: list[ir.Value],
) -> None:
    """Replace ``node`` by a Scan carrying ``carried`` as extra states after its own."""
    node, body, names, base = ctx.node, plan.body, ctx.names, ctx.base
    states = len(node.inputs) - node.attributes["num_scan_inputs"].as_int()
    inputs = list(body.inputs)
    body.inputs.clear()
    body.inputs.extend([*inputs[:states], *states_in, *inputs[states:]])
    outputs = list(body.outputs)
    body.outputs.clear()
    body.outputs.extend([*outputs[:states], *states_out, *outputs[states:]])
    finals = [ir.Value(name=names.fresh(f"{base}_{v.name}_final")) for v in carried]
    new_outputs = [
        ir.Value(name=names.fresh(f"{old.name or base}_strict"), type=old.type, shape=old.shape)
        for old in node.outputs
    ]
    del node.attributes["body"]
    attributes = {name: attr.value for name, attr in node.attributes.items()}
    emit = ctx.before(pool=None)
    emit.Scan(
        *node.inputs[:states],
        *carried,
        *node.inputs[states:],
        body=body,
        **attributes,
        _outputs=[*new_outputs[:states], *finals, *new_outputs[states:]],
        _name=names.fresh(f"{base}_strict"),
        _doc_string=node.doc_string,
    )
    ctx.replace(new_outputs, rename=True)
