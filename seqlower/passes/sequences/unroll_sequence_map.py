"""Unroll a ``SequenceMap`` whose input sequences are known when lowering into one body per element.

PyTorch's dynamo exporter writes ``torch.hstack``/``vstack``/``dstack``/``column_stack`` and
``atleast_*d`` on tuples as ``SequenceConstruct(t1..tk)`` → ``SequenceMap`` → ``SequenceAt`` →
``Concat``; the body is untyped and branches on the element's rank with nested ``If``\\ s. Runtimes
without sequences (OpenVINO, tract, TensorRT, ...) cannot run that, however it is lowered to a
``Loop``. When every sequence input is a ``SequenceConstruct`` (directly, or after
:class:`~seqlower.passes.sequences.fold_sequence_ops.FoldSequenceOps` turned
``SplitToSequence`` with a known count or ``SequenceInsert`` chains into one), the map is a
fixed list of calls::

    y_1..y_m = SequenceMap(SequenceConstruct(a_1..a_k), t)   # t: a tensor input
    ==>
    body copy i (i = 1..k): its input is a_i, t read directly; names made unique
    y_j = SequenceConstruct(r_j1..r_jk)                      # r_ji: output j of copy i

The ``SequenceConstruct`` results are then folded away by ``FoldSequenceOps`` (``SequenceAt`` of
a constant position becomes ``r_ji`` itself). Each copy reads one element of known type and shape,
so its rank tests are constants: onnxscript's constant folder, restricted to the copies
(:mod:`seqlower.passes._fold`), folds them and inlines the taken ``If`` branches. Outer-scope reads
stay reads of the same values (the copies sit in the graph that held the ``SequenceMap``, inside
every scope the body could see). A map it cannot unroll is left as it is, with the reason
recorded for the sequence-free check.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from seqlower.passes._base import NameGenerator, NodeLoweringPass, Rewrite, Site
from seqlower.passes._fold import detach, fold_region, mark_region
from seqlower.passes._ir import block, origin
from seqlower.passes._shared import body_of, inline_copy, is_sequence, known_elements
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["UnrollSequenceMap"]

_UNROLL_LIMIT = 1024  # elements; past this a Loop is the better form


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    elements: list[list[ir.Value] | None]  # per input: its elements, None for a tensor input
    length: int
    # Types/shapes found for untyped elements, set on them when rewriting.
    annotations: list[tuple[ir.Value, ir.TypeProtocol | None, ir.Shape | None]]
    opset: int


class UnrollSequenceMap(NodeLoweringPass[_Plan]):
    """Inline a ``SequenceMap``'s body once per element when its inputs are known sequences."""

    op_type = "SequenceMap"
    takes_all = False

    def __init__(self, fold: bool = True) -> None:
        """``fold``: fold the copies' constant conditions with onnxscript's folder."""
        super().__init__()
        self.fold = fold
        self._copies: list[ir.Node] = []

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        body = body_of(node)
        if len(body.inputs) != len(node.inputs) or len(body.outputs) != len(node.outputs):
            return None  # malformed: LowerSequenceMap's checks say how, if it runs
        if any(value is None for value in node.inputs) or not node.outputs:
            return None
        elements: list[list[ir.Value] | None] = []
        for k in range(len(node.inputs)):
            value = node.inputs[k]
            assert value is not None
            if not is_sequence(node, k, types):
                elements.append(None)
                continue
            known = known_elements(value)
            if not known:
                why = "is empty" if known == [] else f"comes from {origin(value)}"
                block(
                    node,
                    f"the length of its input '{value.name}' is not known when lowering (it "
                    f"{why}; an unrolled map needs a SequenceConstruct, a SplitToSequence of "
                    "known count or SequenceInserts from a SequenceEmpty)",
                )
                return None
            elements.append(known)
        lengths = {len(known) for known in elements if known is not None}
        if len(lengths) != 1:
            block(node, f"its input sequences have different lengths {sorted(lengths)}")
            return None
        length = lengths.pop()
        if length > _UNROLL_LIMIT:
            block(node, f"{length} elements are more than the {_UNROLL_LIMIT} it unrolls")
            return None
        annotations = []
        for known in elements:
            for value in known or []:
                if value.type is None or value.shape is None:
                    type_ = value.type or types.type_of(value)
                    annotations.append((value, type_, value.shape or types.shape_of(value)))
        return _Plan(node, body, elements, length, annotations, site.opset)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, names, base = ctx.node, ctx.names, ctx.base
        for value, type_, shape in plan.annotations:
            if value.type is None and type_ is not None:
                value.type = type_
            if value.shape is None and shape is not None:
                value.shape = shape
        results: list[list[ir.Value]] = [[] for _ in node.outputs]
        copies: list[ir.Node] = []
        for i in range(plan.length):
            arguments = []
            for k, known in enumerate(plan.elements):
                argument = node.inputs[k] if known is None else known[i]
                assert argument is not None
                arguments.append(argument)
            nodes, outputs = inline_copy(ctx, plan.body, arguments, f"{base}_{i}")
            copies += nodes
            for j, result in enumerate(outputs):
                results[j].append(result)

        emit = ctx.before(pool=None)
        sequences = []
        for j, old in enumerate(node.outputs):
            dtype = element_dtype(old.type) or _common_dtype(results[j])
            new = ir.Value(
                name=old.name or names.fresh(f"{base}_out_{j}"),
                type=ir.SequenceType(ir.TensorType(dtype)) if dtype is not None else old.type,
                doc_string=old.doc_string,
            )
            sequences.append(emit.SequenceConstruct(*results[j], _outputs=[new]))
        ctx.replace(sequences, nodes=copies)
        detach(plan.body)
        self._copies += copies

    def finish(self, model: ir.Model, names: NameGenerator) -> None:
        copies, self._copies = self._copies, []
        if self.fold and copies:
            mark_region(copies)
            fold_region(model, names)


def _common_dtype(values: list[ir.Value]) -> ir.DataType | None:
    dtypes = {element_dtype(value.type) for value in values}
    return dtypes.pop() if len(dtypes) == 1 else None
