"""A ``Loop`` that runs exactly ``M`` times, its scan outputs as states of ``M`` rows it writes
row by row (target ``iree``).

The Loops that run exactly ``M`` times
(a constant true initial condition the body passes through: what ``explicit-loop-counts``
writes where the count is known when the loop starts), whatever ``M``: each scan output becomes
a state of ``M`` zero rows (``Expand``, ``M`` read at run time) that iteration ``i`` writes row
``i`` of by ``ScatterND``, and is the scan output as it stands after the loop. torch-mlir converts
no Loop with scan outputs (llvm/torch-mlir#3988) but does one of states, so IREE then runs the
loop at dynamic shapes.

A row whose shape is known only at run time (tf2onnx's ``[batch, units]``: the body computes
it) cannot be allocated before the loop: its state starts with ``M`` rows of its static
dimensions and 0 for the others (what onnxruntime returns when such a loop runs no iteration),
and iteration 0 grows it to the row's shape by ``Pad``. A state's type must be the same before
and in the loop for IREE's importer ('unresolved materialization'), so every dimension of such a
state is left unknown to ONNX's shape inference: the sizes pass through ``Mul``/``Add`` by the
count's ``Where``, which ONNX's data propagation does not read.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._emit import Emitter
from seqlower.passes._induction import passes_through
from seqlower.passes._ir import constant_array, graph_attr, is_onnx
from seqlower.passes._shared import restate_loop_body
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["ScanOutputsAsRunTimeStates"]


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    opset: int
    #: Each scan output's row shape (None: a dimension known only at run time) and type.
    rows: list[tuple[tuple[int | None, ...], np.dtype]]


class ScanOutputsAsRunTimeStates(NodeLoweringPass[_Plan]):
    """Every ``Loop`` that runs exactly ``M`` times with scan outputs of a known rank, its scan
    outputs written by ``ScatterND`` into states of ``M`` rows preallocated at run time (grown
    to the rows' run-time shape by iteration 0)."""

    op_type = "Loop"
    takes_all = False
    repairs = True

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        body = graph_attr(node, "body")
        if body is None or len(node.inputs) < 2 or node.inputs[0] is None or site.opset < 11:
            return None  # no ScatterND before opset 11
        states = len(node.inputs) - 2
        scanned = body.outputs[1 + states :]
        if not scanned or len(body.outputs) != len(node.outputs) + 1:
            return None
        start = node.inputs[1]
        initial = None if start is None else constant_array(start)
        if start is not None and (initial is None or initial.size != 1 or not initial.all()):
            return None
        if not passes_through(body.outputs[0], body.inputs[1]):
            return None  # it may stop before M: its rows would be M
        rows = []
        for value in scanned:
            known = _state_read(node, body, value) or value
            shape = known.shape if known.shape is not None else types.shape_of(known)
            dtype = element_dtype(types.type_of(known))
            if dtype is None or shape is None:
                return None
            dims = tuple(d if isinstance(d, int) else None for d in shape)
            rows.append((dims, dtype.numpy()))
        return _Plan(node, body, site.opset, rows)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, body, names = ctx.node, plan.body, ctx.names
        states = len(node.inputs) - 2
        op, inside = ctx.before(), ctx.into(body, pool="own")
        # M as a count of rows, at least 0 (a Loop of a negative M runs none); by Where, not
        # Max, which takes no int64 before opset 12.
        m = op.Reshape(node.inputs[0], op.int64s([1], hint="one_d"), _hint="count")
        none = op.int64s([0], hint="none")
        count = op.Where(op.Less(m, none, _hint="negative"), none, m, _hint="count")
        where = inside.Reshape(body.inputs[0], inside.int64s([1, 1], hint="at"), _hint="at")
        buffers, ins, outs = [], [], []
        for (shape, dtype), row in zip(plan.rows, body.outputs[1 + states :], strict=True):
            buffers.append(_allocated(op, count, shape, dtype))
            held = ir.Value(name=names.fresh(f"{ctx.base}_rows"))
            ins.append(held)
            outs.append(_written(inside, held, row, where, body.inputs[0], (shape, dtype)))
        body.extend(inside.nodes)
        restate_loop_body(body, states, ins, outs)
        finals = [ir.Value(name=names.fresh(f"{v.name or ctx.base}_loop")) for v in node.outputs]
        for new, old in zip(finals, node.outputs, strict=True):
            new.type, new.shape = old.type, old.shape
        resized = _typed_results(finals[states:], ins, [shape for shape, _ in plan.rows])
        del node.attributes["body"]
        op.Loop(
            *node.inputs, *buffers, body=body, _outputs=list(finals),
            _name=node.name or names.fresh("Loop"), _doc_string=node.doc_string,
        )  # fmt: skip
        for k, sizes in resized.items():
            finals[states + k] = _resized(op, finals[states + k], sizes)
        ctx.replace(finals, rename=True)


def _written(
    inside: Emitter,
    held: ir.Value,
    row: ir.Value,
    where: ir.Value,
    i: ir.Value,
    spec: tuple[tuple[int | None, ...], np.dtype],
) -> ir.Value:
    """``held`` (typed here) with ``row`` written at ``where``, grown first when the rows'
    shape is known only at run time."""
    shape, dtype = spec
    # Typed from the plan: a body's untyped row (tf2onnx's) would leave the state untyped,
    # which IREE's importer cannot convert ('onnx.Loop not converted').
    held.type = ir.TensorType(ir.DataType.from_numpy(dtype))
    static = all(d is not None for d in shape)
    held.shape = ir.Shape([None, *shape] if static else [None] * (len(shape) + 1))
    target = held if static else _grown(inside, held, row, i, len(shape))
    written = inside.ScatterND(target, where, inside.unsqueeze(row, [0], hint="row"), _hint="rows")
    written.type, written.shape = held.type, held.shape
    return written


def _resized(op: Emitter, result: ir.Value, sizes: list[int]) -> ir.Value:
    """``result`` reshaped to the sizes known (0 copies a dimension), for IREE's importer: a
    result typed [?, ?, ?] where [?, ?, 4] is declared is an 'unresolved materialization'."""
    resized = op.Reshape(result, op.int64s(sizes, hint="sizes"), _hint="rows")
    resized.type, resized.shape = result.type, ir.Shape([d or None for d in sizes])
    return resized


def _allocated(
    op: Emitter, count: ir.Value, shape: tuple[int | None, ...], dtype: np.dtype
) -> ir.Value:
    """``count`` zero rows of ``shape``, 0 for a size known only at run time; then every size
    hidden from ONNX's shape inference (through ``count``'s ``Where``), so that the state is
    typed as the body types it."""
    sizes = op.int64s([d or 0 for d in shape], hint="row_shape")
    if not all(d is not None for d in shape):
        sizes = op.Add(op.Mul(count, op.int64s(0, hint="zero"), _hint="no"), sizes)
    dims = op.Concat(count, sizes, axis=0, _hint="rows")
    return op.Expand(op.constant(np.zeros((), dtype), hint="zero"), dims)


def _typed_results(
    results: list[ir.Value], held: list[ir.Value], rows: list[tuple[int | None, ...]]
) -> dict[int, list[int]]:
    """Each result typed as its state; for a state typed without sizes it has (rows of a
    run-time shape), the sizes known (the rows' static ones, or declared) by result index."""
    resized = {}
    for k, (new, state, shape) in enumerate(zip(results, held, rows, strict=True)):
        rank = None if state.shape is None else len(state.shape)
        declared = new.shape
        if new.type is None or new.shape is None or len(new.shape) != rank:
            new.type, new.shape, declared = state.type, state.shape, None
        if all(d is not None for d in shape):
            if declared is not None and any(
                isinstance(d, int) and not isinstance(n, int)
                for d, n in zip([None, *shape], declared, strict=True)
            ):
                new.shape = state.shape  # as its state: IREE's importer types them alike
            continue
        sizes = [0, *(d or 0 for d in shape)]  # 0: the dimension as it is
        if declared is not None:
            sizes = [d if isinstance(d, int) else n for n, d in zip(sizes, declared, strict=True)]
        if any(sizes):
            resized[k] = sizes
            new.shape = state.shape
    return resized


def _grown(inside: Emitter, held: ir.Value, row: ir.Value, i: ir.Value, rank: int) -> ir.Value:
    """``held`` padded at iteration 0 to rows of ``row``'s shape (by nothing later: a row of
    another shape then fails ``ScatterND``, as the original loop fails)."""
    first = inside.Cast(inside.Equal(i, inside.int64s(0, hint="zero")), to=ir.DataType.INT64)
    missing = inside.Sub(inside.Shape(row), inside.dims(held, 1, hint="row_dims"), _hint="missing")
    ends = inside.Mul(missing, first, _hint="pad_ends")
    pads = inside.Concat(inside.int64s([0] * (rank + 2), hint="pad_starts"), ends, axis=0)
    padded = inside.Pad(held, pads, _hint="rows")
    padded.type, padded.shape = held.type, held.shape
    return padded


def _state_read(node: ir.Node, body: ir.Graph, value: ir.Value) -> ir.Value | None:
    """The loop's initial value of the state ``value`` is (through ``Identity``s), when the
    body scans a state it received (ONNX's expanded ``Range``, untyped), else None: its type and
    shape are the rows'. A state whose shape changed between iterations would not fit its row
    of the buffer: ``ScatterND`` then fails at run time, which the check sees."""
    while is_onnx(value.producer(), "Identity"):
        value = value.producer().inputs[0]  # type: ignore[union-attr,assignment]
    if value.producer() is not None or value not in body.inputs[2:]:
        return None
    return node.inputs[2 + list(body.inputs[2:]).index(value)]
