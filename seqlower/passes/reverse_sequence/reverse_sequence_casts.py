"""Cast a ``ReverseSequence`` of a type TFLite's kernel lacks to one it has (target ``onnx2tf``).

onnx2tf keeps ``ReverseSequence`` as TFLite's ``REVERSE_SEQUENCE``, whose kernel takes float32,
uint8, int16, int32 and int64 only: a bool one (tf2onnx's Keras ``Masking`` before a
``Bidirectional`` RNN reverses the mask) fails when LiteRT prepares it (``Type 'BOOL' is not
supported by reverse_sequence``). Reversing moves elements without computing on them, so the
node runs on the data cast to a type the kernel has (int32 for bool and the small integers,
float32 for float16, both exact) and its result is cast back. The native kernel is kept (the
lowered forms need ``Where``, which TFLite's ``SELECT`` rejects there).
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["ReverseSequenceCasts"]

#: Element types TFLite's REVERSE_SEQUENCE lacks, and the exact wider type it runs them as.
CASTS = {
    ir.DataType.BOOL: ir.DataType.INT32,
    ir.DataType.INT8: ir.DataType.INT32,
    ir.DataType.UINT16: ir.DataType.INT32,
    ir.DataType.FLOAT16: ir.DataType.FLOAT,
}


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    opset: int
    dtype: ir.DataType
    wide: ir.DataType


class ReverseSequenceCasts(NodeLoweringPass[_Plan]):
    """Every ``ReverseSequence`` of bool, int8, uint16 or float16 data, run on a wider type."""

    op_type = "ReverseSequence"
    takes_all = False
    repairs = True

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        data = node.inputs[0] if node.inputs else None
        dtype = None if data is None else element_dtype(types.type_of(data))
        if dtype not in CASTS:
            return None
        assert dtype is not None
        return _Plan(node, site.opset, dtype, CASTS[dtype])

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, graph, names, base = ctx.node, ctx.graph, ctx.names, ctx.base
        data = node.inputs[0]
        assert data is not None
        wide = ctx.before(pool=None).Cast(data, to=plan.wide.value, _hint="wide")
        ctx.insert()
        node.replace_input_with(0, wide)
        # The node now writes the wide value; a Cast back takes over its output's readers,
        # name, type and shape (it may be a graph output).
        result = node.outputs[0]
        readers = list(result.uses())
        back = ctx.into(graph, pool=None)  # after the node, which stays
        restored = back.Cast(result, to=plan.dtype.value, _hint="narrow")
        restored.type, restored.shape = result.type, result.shape
        for user, index in readers:
            user.replace_input_with(index, restored)
        for k, value in enumerate(graph.outputs):
            if value is result:
                graph.outputs[k] = restored
        name = result.name
        result.name = names.fresh(f"{base}_wide_out")
        restored.name = name
        result.type = ir.TensorType(plan.wide)
        graph.insert_after(node, back.nodes)
