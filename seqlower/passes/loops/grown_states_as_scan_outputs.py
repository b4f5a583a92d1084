"""``Loop`` states grown by a ``Concat`` each iteration as scan outputs (targets ``openvino``,
``tract``).

A state ``s`` whose body output is ``Concat(s, p1, ..., axis=a)`` and which the body reads
nowhere else holds, after ``n`` iterations, its initial value followed along ``a`` by every
iteration's new piece ``Concat(p1, ...)`` in order: a scan output of those pieces, stacked on a
new first axis, merged into ``a`` after the loop and appended to the initial value. Exact for
any number of iterations (the scan output has one row per iteration run, none for none) when
the pieces have the same size along ``a`` each iteration, known when lowering: their other axes
are the state's, which only grows along ``a``. TensorFlow's ``tf.while_loop`` with
``shape_invariants`` writes such states (``tf_while_grow`` of
``benchmarks/families/new_shapes.py``): OpenVINO 2026.4.1 loads no such ``Loop`` ('Accessing
out-of-range dimension'), and a Scan's states keep their shape (tract).
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import int_attr, is_onnx, loop_body
from seqlower.passes._shared import loop_finals, narrow_loop_body, narrowed_loop
from seqlower.passes._types import TypeOracle

__all__ = ["GrownStatesAsScanOutputs"]


@dataclasses.dataclass
class _Grown:
    state: int  # 0: the first state after the condition
    axis: int  # non-negative
    rank: int
    pieces: list[ir.Value]
    row: ir.Shape  # one iteration's piece (all pieces concatenated)


@dataclasses.dataclass
class _Plan:
    body: ir.Graph
    grown: list[_Grown]


class GrownStatesAsScanOutputs(NodeLoweringPass[_Plan]):
    """Every ``Loop`` with states grown by a ``Concat``, rebuilt with scan outputs instead."""

    op_type = "Loop"
    takes_all = False

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        body = loop_body(site.node)
        if body is None:
            return None
        carried = len(site.node.inputs) - 2
        grown = [g for k in range(carried) if (g := _grown(site.node, body, k, types))]
        return _Plan(body, grown) if grown else None

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, op = ctx.node, ctx.before()
        carried = len(node.inputs) - 2
        by_state = {g.state for g in plan.grown}
        kept = [k for k in range(carried) if k not in by_state]
        scans = list(range(carried, len(node.outputs)))
        _restate(ctx, plan, kept, scans)
        finals = loop_finals(ctx, [*kept, *scans])
        stacked = []
        for g in plan.grown:
            value = ir.Value(name=ctx.names.fresh(f"{node.outputs[g.state].name}_rows"))
            value.type, value.shape = node.outputs[g.state].type, ir.Shape([None, *g.row])
            stacked.append(value)
        replaced = narrowed_loop(ctx, op, plan.body, kept, scans, [*finals, *stacked])
        for g, rows in zip(plan.grown, stacked, strict=True):
            initial = node.inputs[2 + g.state]
            assert initial is not None
            whole = op.Concat(
                initial, _merged(op, rows, g.axis, g.rank), axis=g.axis, _hint="grown"
            )
            whole.type, whole.shape = node.outputs[g.state].type, node.outputs[g.state].shape
            replaced[g.state] = whole
        ctx.replace(replaced, rename=True)


def _restate(ctx: Rewrite, plan: _Plan, kept: list[int], scans: list[int]) -> None:
    """The body without the grown states, each iteration's new piece a scan output after its
    own ones."""
    node, body = ctx.node, plan.body
    inside = ctx.into(body, pool=None)
    rows = []
    for g in plan.grown:
        if len(g.pieces) == 1:
            row = inside.Identity(g.pieces[0], _hint="grown_row")
        else:
            row = inside.Concat(*g.pieces, axis=g.axis, _hint="grown_row")
        row.type = body.inputs[2 + g.state].type or node.inputs[2 + g.state].type  # type: ignore[union-attr]
        row.shape = g.row
        rows.append(row)
    body.extend(inside.nodes)
    narrow_loop_body(body, kept, scans, rows)


def _merged(op: Emitter, rows: ir.Value, axis: int, rank: int) -> ir.Value:
    """The stacked pieces ``[n, *piece]`` as one piece: ``n`` merged into ``axis`` in order
    (each iteration's piece after the one before)."""
    moved = rows
    if axis > 0:  # [p0 .. p(a-1), n, pa, ...]
        perm = [*range(1, axis + 1), 0, *range(axis + 1, rank + 1)]
        moved = op.Transpose(rows, perm=perm, _hint="grown_moved")
    shape = op.Shape(moved, _hint="grown_shape")
    count = op.Mul(
        op.Gather(shape, op.int64s([axis], hint="grown_axis"), _hint="grown_count"),
        op.Gather(shape, op.int64s([axis + 1], hint="grown_next"), _hint="grown_size"),
        _hint="grown_length",
    )
    parts = [count]
    if axis > 0:
        parts.insert(0, op.Gather(shape, op.int64s(list(range(axis)), hint="grown_before")))
    if axis + 1 < rank:
        after = op.int64s(list(range(axis + 2, rank + 1)), hint="grown_after")
        parts.append(op.Gather(shape, after, _hint="grown_rest"))
    target = parts[0] if len(parts) == 1 else op.Concat(*parts, axis=0, _hint="grown_target")
    return op.reshape(moved, target, hint="grown_rows")


def _grown(node: ir.Node, body: ir.Graph, k: int, types: TypeOracle) -> _Grown | None:
    """State ``k`` when it grows by a ``Concat`` of pieces of one known size along its axis
    and the body reads it nowhere else (module docstring), else None."""
    state, out = body.inputs[2 + k], body.outputs[1 + k]
    if out.uses() or list(body.outputs).count(out) != 1:
        return None  # the grown value read in the body, or returned twice
    while is_onnx(out.producer(), "Identity"):
        out = out.producer().inputs[0]  # type: ignore[union-attr,assignment]
        if out is None or len(out.uses()) != 1 or out.is_graph_output():
            return None  # read besides the Identity that returns it
    concat = out.producer()
    if concat is None or concat.graph is not body or not is_onnx(concat, "Concat"):
        return None
    if len(concat.inputs) < 2 or concat.inputs[0] is not state or len(state.uses()) != 1:
        return None
    initial = node.inputs[2 + k]
    shape = (None if initial is None else initial.shape) or state.shape or types.shape_of(out)
    axis = int_attr(concat, "axis", 0)
    if shape is None or axis is None or not -len(shape) <= axis < len(shape):
        return None
    rank = len(shape)
    axis = axis % rank
    pieces = [v for v in concat.inputs[1:] if v is not None]
    if any(v is state for v in pieces):
        return None
    size, row = 0, None
    for piece in pieces:
        piece_shape = types.shape_of(piece)
        if piece_shape is None or len(piece_shape) != rank:
            return None
        along = piece_shape[axis]
        if not isinstance(along, int):
            return None  # a size that may change between iterations
        size += along
        row = row or list(piece_shape)
    assert row is not None
    row[axis] = size
    for j, d in enumerate(shape):  # the state's own sizes on the other axes, where known
        if j != axis and isinstance(d, int):
            row[j] = d
    return _Grown(k, axis, rank, pieces, ir.Shape(row))
