"""A ``Loop``'s scan outputs as states it writes row by row (target ``onnx2tf``).

onnx2tf 2.6.9 writes a ``Loop`` of a run-time count as a TFLite ``WHILE`` only when it carries
states alone; with scan outputs it becomes an ``ONNX_LOOP`` custom op LiteRT cannot run
(tf2onnx's ``bidirectional_dynamic_rnn`` with ``sequence_length``: its count is the longest
length, at most the time axis). Where the trip count has a constant upper bound ``K`` (traced
back from ``M``: ``_bounds.upper_bound``)
and each scan output's row has a static shape, every scan output becomes a state preallocated
as ``K`` zero rows, which iteration ``i`` writes row ``i`` of (a ``Where`` on ``i`` equal to a
constant row index: TFLite keeps states of one static shape; a growing ``Concat`` fails in
XNNPACK, ``SCATTER_ND`` builds a new tensor), and a counter state counts the iterations run;
after the loop the first ``count`` rows are the scan output. Exact for every count from 0 to
``K``, which the bound proves is every count the loop runs. Other Loops are left.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._bounds import upper_bound
from seqlower.passes._emit import Emitter, fits_constant
from seqlower.passes._ir import graph_attr, is_static
from seqlower.passes._shared import restate_loop_body
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["ScanOutputsAsStates"]

#: The largest bound written as preallocated rows (K rows per scan output, K compares a step).
ROWS_LIMIT = 4096


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    opset: int
    bound: int  # no run of the loop makes more iterations
    rows: list[tuple[tuple[int, ...], np.dtype]]  # each scan output's row shape and type


class ScanOutputsAsStates(NodeLoweringPass[_Plan]):
    """Every ``Loop`` of a bounded count with scan outputs of static rows, its scan outputs
    written into preallocated states."""

    op_type = "Loop"
    takes_all = False
    repairs = True

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        body = graph_attr(node, "body")
        if body is None or len(node.inputs) < 2 or node.inputs[0] is None:
            return None
        states = len(node.inputs) - 2
        scanned = body.outputs[1 + states :]
        if not scanned or len(body.outputs) != len(node.outputs) + 1:
            return None
        bound = upper_bound(node.inputs[0])
        if bound is None or bound > ROWS_LIMIT:
            return None
        rows = []
        for value in scanned:
            shape = value.shape or types.shape_of(value)
            dtype = element_dtype(types.type_of(value))
            if dtype is None or not is_static(shape):
                return None
            rows.append((tuple(int(d) for d in shape), dtype.numpy()))  # type: ignore[arg-type]
        return _Plan(node, body, site.opset, max(bound, 0), rows)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, body, names = ctx.node, plan.body, ctx.names
        states = len(node.inputs) - 2
        op, inside, tail = ctx.before(), ctx.into(body, pool="own"), ctx.after()
        count_in = ir.Value(name=names.fresh(f"{ctx.base}_count"), type=_INT64, shape=ir.Shape([]))
        count_out = inside.Add(count_in, inside.int64s(1, hint="one"), _hint="count_next")
        buffers, ins, outs = _row_states(plan, ctx, op, inside, states)
        body.extend(inside.nodes)
        restate_loop_body(body, states, [count_in, *ins], [count_out, *outs])
        finals = [ir.Value(name=names.fresh(f"{v.name or ctx.base}_loop")) for v in node.outputs]
        for new, old in zip(finals, node.outputs, strict=True):
            new.type, new.shape = old.type, old.shape
        count = ir.Value(name=names.fresh(f"{ctx.base}_iterations"))
        filled = [ir.Value(name=names.fresh(f"{ctx.base}_filled")) for _ in plan.rows]
        del node.attributes["body"]
        zero = op.int64s(0, hint="zero")
        op.Loop(
            *node.inputs, zero, *buffers, body=body,
            _outputs=[*finals[:states], count, *filled],
            _name=node.name or names.fresh("Loop"), _doc_string=node.doc_string,
        )  # fmt: skip
        end = tail.Reshape(count, tail.int64s([1], hint="one_d"), _hint="end")
        start = tail.int64s([0], hint="start")
        scans = [tail.Slice(rows, start, end, start, _hint="scan") for rows in filled]
        for new, old in zip(scans, node.outputs[states:], strict=True):
            new.type, new.shape = old.type, old.shape
        ctx.replace([*finals[:states], *scans], rename=True)


def _row_states(
    plan: _Plan, ctx: Rewrite, op: Emitter, inside: Emitter, states: int
) -> tuple[list[ir.Value], list[ir.Value], list[ir.Value]]:
    """Per scan output: its buffer of ``bound`` zero rows (made before the Loop), and the body's
    state of it in and out (this iteration's row written by a ``Where`` on the row index)."""
    body, names = plan.body, ctx.names
    i = body.inputs[0]
    buffers: list[ir.Value] = []
    ins: list[ir.Value] = []
    outs: list[ir.Value] = []
    for (shape, dtype), row in zip(plan.rows, body.outputs[1 + states :], strict=True):
        if fits_constant(plan.bound, *shape):
            zeros = np.zeros((plan.bound, *shape), dtype=dtype)
            buffers.append(op.constant(zeros, hint="rows"))
        else:  # a row of a static [1e9]: the zeros made at run time
            filler = ir.Tensor(np.zeros(1, dtype=dtype))
            dims = op.int64s([plan.bound, *shape], hint="rows_shape")
            buffers.append(op.ConstantOfShape(dims, value=filler, _hint="rows"))
        index = np.arange(plan.bound, dtype=np.int64).reshape((-1,) + (1,) * len(shape))
        hit = inside.Equal(inside.constant(index, hint="row_index"), i, _hint="this_row")
        held = ir.Value(name=names.fresh(f"{ctx.base}_rows"), type=row.type)
        held.shape = ir.Shape([plan.bound, *shape])
        written = inside.Where(hit, inside.unsqueeze(row, [0], hint="row"), held, _hint="rows")
        written.type, written.shape = row.type, held.shape
        ins.append(held)
        outs.append(written)
    return buffers, ins, outs


_INT64 = ir.TensorType(ir.DataType.INT64)
