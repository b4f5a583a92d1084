"""The scan outputs of a ``Loop`` that may run no iteration, cut to the rows it ran (target
``openvino``).

OpenVINO 2026.4.1 returns, for a compiled ``Loop`` that runs no iteration (its condition false
when it starts, or ``M`` 0), the scan outputs of the inference before: a greedy decode run with
``max_len = 3`` then ``0`` gives 3 tokens, not 0 (the first inference of the compiled model gives
0; its states are right). The Loop gets one more state, ``ran`` (0, plus one per iteration),
and each scan output read is ``Slice(rows, 0, ran)``: every row when it runs, none when it runs
none. A Loop whose ``M`` is a constant of at least 1 and whose condition starts as a constant
true runs once at least, and is left; so is one whose rows are not of a static shape: for a
Loop of no iteration onnxruntime gives its scan outputs the rows of the shape it knows of the
body's results (ONNX's ``test_loop11``: ``[0, 1]``), and once the declared sizes are forgotten
(``[?]``) the cut ones would be ``[0, 0]``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._ir import constant_array, loop_body
from seqlower.passes._types import TypeOracle

__all__ = ["ZeroTripLoopRows"]


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    read: list[int]  # the scan outputs read (by Loop output index)


class ZeroTripLoopRows(NodeLoweringPass[_Plan]):
    """A Loop that may run none: its scan outputs cut to the rows it ran (module docstring)."""

    op_type = "Loop"
    takes_all = False

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        body = loop_body(node)
        if body is None or site.opset < 11:
            return None
        carried = len(node.inputs) - 2
        read = [
            k
            for k in range(carried, len(node.outputs))
            if node.outputs[k].uses() or node.outputs[k].is_graph_output()
        ]
        if not read or _runs_once(node):
            return None
        for k in read:  # onnxruntime gives no iteration's rows the shape it knows of the body's
            shape = body.outputs[1 + k].shape if 1 + k < len(body.outputs) else None
            if shape is None or not all(isinstance(d, int) for d in shape):
                return None  # [0, 0] for [0, 1]: the check would fail the lowering
        return _Plan(node, body, read)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, body, names = ctx.node, plan.body, ctx.names
        carried = len(node.inputs) - 2
        int64 = ir.TensorType(ir.DataType.INT64)
        ran = ir.Value(name=names.fresh(f"{ctx.base}_ran"), type=int64, shape=ir.Shape([]))
        inside = ctx.into(body)
        more = inside.Add(ran, inside.int64s(1, hint="one"), _hint="ran_next")
        more.type, more.shape = int64, ir.Shape([])
        body.extend(inside.nodes)
        outputs = list(body.outputs)
        body.outputs.clear()
        body.outputs.extend([*outputs[: 1 + carried], more, *outputs[1 + carried :]])
        body.inputs.append(ran)
        outside = ctx.before()
        finals = [ir.Value(name=names.fresh(f"{v.name or ctx.base}_loop")) for v in node.outputs]
        for new, old in zip(finals, node.outputs, strict=True):
            new.type, new.shape = old.type, old.shape
        total = ir.Value(name=names.fresh(f"{ran.name}_final"), type=int64, shape=ir.Shape([]))
        del node.attributes["body"]
        outside.Loop(
            *node.inputs,
            outside.int64s(0, hint="ran_start"),
            body=body,
            _outputs=[*finals[:carried], total, *finals[carried:]],
            _name=node.name,
            _doc_string=node.doc_string,
        )
        after = ctx.after()
        ends = after.reshape(total, after.int64s([1], hint="one"), hint="ran")
        replaced: list[ir.Value | None] = list(finals)
        for k in plan.read:
            rows = after.slice(finals[k], 0, ends, 0, hint=f"{finals[k].name}_ran")
            rows.type, rows.shape = finals[k].type, node.outputs[k].shape
            replaced[k] = rows
        ctx.replace(replaced, rename=True)


def _runs_once(node: ir.Node) -> bool:
    """Whether the Loop runs at least one iteration: ``M`` a constant of at least 1 and its
    condition a constant true (or absent)."""
    m = constant_array(node.inputs[0]) if node.inputs and node.inputs[0] is not None else None
    if m is None or m.size != 1 or int(m.reshape(())) < 1:
        return False
    cond = node.inputs[1] if len(node.inputs) > 1 else None
    if cond is None:
        return True
    value = constant_array(cond)
    return value is not None and value.size == 1 and bool(np.asarray(value).reshape(()))
