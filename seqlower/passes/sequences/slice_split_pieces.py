"""The pieces of a split by run-time sizes read one per iteration of a ``Loop`` over them, as
``Slice``s of the split tensor (target ``openvino``, which runs ``Loop``).

onnxscript's map over pieces of run-time sizes, ``SequenceMap(SplitToSequence(x, lens))``,
cannot become a tensor op (the pieces differ in length), and OpenVINO 2026.4.1 converts no
sequence op. It runs ``Loop``s, so its row lowers such maps into a ``Loop`` over
``SequenceAt(chunks, i)`` (``lower-sequence-map``); this pass then reads piece ``i`` as
``Slice(x, ends[i] - lens[i], ends[i], axis)`` with ``ends = CumSum(lens)``, and
``stack-loop-sequences`` grows the results as tensors, so no sequence is left. Only a read at the
iteration number of a ``Loop`` whose trip count is ``SequenceLength`` of the same split is taken:
its position is then always in range (OpenVINO's ``Gather`` would return zeros for another), and
the sizes are checked to add up and be non-negative where that ``SequenceLength`` is lowered
(``stack-sequences``), so bad sizes fail at run time as the split does.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._ir import int_attr, is_onnx, model_nodes, rank_of, subgraphs_of
from seqlower.passes._types import TypeOracle

__all__ = ["SliceSplitPieces"]


@dataclasses.dataclass
class _Plan:
    tensor: ir.Value
    sizes: ir.Value
    axis: int


class SliceSplitPieces(NodeLoweringPass[_Plan]):
    """``SequenceAt(SplitToSequence(x, lens), i)`` in a Loop over the pieces, as a ``Slice``."""

    op_type = "SequenceAt"
    takes_all = False

    def __init__(self) -> None:
        super().__init__()
        self._owners: dict[int, ir.Node] = {}

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        # Which node holds each body (a graph does not know it).
        self._owners = {id(g): node for node in model_nodes(model) for g in subgraphs_of(node)}
        try:
            return super().call(model)
        finally:
            self._owners = {}

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        sequence, position = node.inputs[0], node.inputs[1] if len(node.inputs) > 1 else None
        split = None if sequence is None else sequence.producer()
        if not is_onnx(split, "SplitToSequence") or split is None or len(split.inputs) < 2:
            return None
        tensor, sizes = split.inputs[0], split.inputs[1]
        if tensor is None or sizes is None or rank_of(sizes) != 1 or site.opset < 11:
            return None
        if sequence is None or not self._iteration_of_loop_over(position, sequence):
            return None
        axis = int_attr(split, "axis", 0) or 0
        rank = rank_of(tensor)
        if axis < 0:
            if rank is None:
                return None
            axis += rank
        return _Plan(tensor, sizes, axis)

    def _iteration_of_loop_over(self, position: ir.Value | None, sequence: ir.Value) -> bool:
        """Whether ``position`` is the iteration number of a ``Loop`` whose trip count is
        ``SequenceLength(sequence)``: a position always in range."""
        graph = None if position is None else position.graph
        if position is None or graph is None or not graph.inputs or graph.inputs[0] is not position:
            return False
        loop = self._owners.get(id(graph))
        if not is_onnx(loop, "Loop") or loop is None or not loop.inputs:
            return False
        count = loop.inputs[0]
        producer = None if count is None else count.producer()
        return (
            is_onnx(producer, "SequenceLength")
            and producer is not None
            and producer.inputs[0] is sequence
        )

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        op = ctx.before()
        position = ctx.node.inputs[1]
        assert position is not None
        sizes = plan.sizes
        if sizes.dtype != ir.DataType.INT64:
            sizes = op.Cast(sizes, to=int(ir.DataType.INT64), _hint="sizes")
        ends = op.CumSum(sizes, op.int64s(0, hint="zero"), _hint="ends")
        at = op.unsqueeze(position, [0], hint="piece")
        end = op.Gather(ends, at, axis=0, _hint="piece_end")
        start = op.Sub(end, op.Gather(sizes, at, axis=0, _hint="piece_size"), _hint="piece_start")
        axes = op.int64s([plan.axis], hint="split_axis")
        ctx.replace([op.Slice(plan.tensor, start, end, axes, _hint="piece")])
