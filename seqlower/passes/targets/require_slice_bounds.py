"""Check that every ``Slice`` slices by bounds tract can type, naming each one it cannot.

tract 0.23.9 types a ``Slice`` whose starts, ends, axes or steps are known when the model is
loaded (constants) or follow from tensor shapes (``Shape``/``Size`` and arithmetic on them:
``split([1, N-1])``, the lowered ``ReverseSequence``); one whose bounds are computed from
tensor *values* (a graph input, a ``Scan`` body's row, ``Gather`` of data: PyTorch's
``embedding_bag`` slices its weight rows by its ``offsets``) fails to load, in the main graph
and in any body ('Symbol <Sym0> points to an invalid (dead ?) SymbolScope'; inside an ``If``
branch first 'Source node without a determined fact'; ``tests/passes/test_slice_bounds.py``
keeps the smallest models). The last check of the ``tract`` target: it raises
:class:`~seqlower.errors.TargetError` naming each such ``Slice`` and where its bound comes from,
before any check, and changes nothing.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower._graphs import all_graphs
from seqlower.errors import TargetError, describe_node
from seqlower.passes._ir import is_onnx, origin

__all__ = ["RequireShapeSliceBounds"]

#: Ops whose output is known at load time whatever their inputs hold.
_SHAPES = frozenset({"Shape", "Size", "Constant"})
#: Ops whose output is known at load time when every input is.
_FOLLOWS = frozenset(
    {
        "Abs", "Add", "And", "Cast", "CastLike", "Ceil", "Clip", "Concat", "ConstantOfShape",
        "Div", "Equal", "Expand", "Flatten", "Floor", "Gather", "Greater", "GreaterOrEqual",
        "Identity", "Less", "LessOrEqual", "Max", "Min", "Mod", "Mul", "Neg", "Not", "Or",
        "Range", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSum", "Reshape", "Slice",
        "Squeeze", "Sub", "Tile", "Unsqueeze", "Where",
    }
)  # fmt: skip


class RequireShapeSliceBounds(ir.passes.InPlacePass):
    """Raise TargetError naming every ``Slice`` whose bounds depend on tensor values."""

    target = "tract 0.23.9 (a Slice by run-time bounds)"

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        runtime: dict[int, ir.Value | None] = {}
        blockers = []
        for graph in all_graphs(model):
            for node in graph:
                if not is_onnx(node, "Slice"):
                    continue
                for position, role in ((1, "starts"), (2, "ends"), (3, "axes"), (4, "steps")):
                    bound = node.inputs[position] if len(node.inputs) > position else None
                    source = None if bound is None else _runtime_source(bound, runtime)
                    if source is not None:
                        blockers.append(
                            f"{describe_node(node)} remains: its {role} '{bound.name}' "  # type: ignore[union-attr]
                            f"depends on the values of '{source.name}' (from "
                            f"{origin(source)}); tract 0.23.9 cannot load a Slice by run-time "
                            "bounds"
                        )
                        break
        if blockers:
            raise TargetError(self.target, blockers)
        return ir.passes.PassResult(model, modified=False)


def _runtime_source(value: ir.Value, memo: dict[int, ir.Value | None]) -> ir.Value | None:
    """A value known only at run time that ``value`` is computed from, or None when it is
    known at load time (constants, shapes and arithmetic on them)."""
    stack = [value]
    while stack:
        top = stack[-1]
        if id(top) in memo:
            stack.pop()
            continue
        producer = top.producer()
        if top.const_value is not None or (producer is not None and producer.op_type in _SHAPES):
            memo[id(top)] = None
            stack.pop()
            continue
        if producer is None or producer.op_type not in _FOLLOWS:
            memo[id(top)] = top
            stack.pop()
            continue
        inputs = [i for i in producer.inputs if i is not None]
        pending = [i for i in inputs if id(i) not in memo]
        if pending:
            stack.extend(pending)
            continue
        memo[id(top)] = next((memo[id(i)] for i in inputs if memo[id(i)] is not None), None)
        stack.pop()
    return memo[id(value)]
