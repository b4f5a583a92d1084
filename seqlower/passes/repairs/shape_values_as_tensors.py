"""Give TVM's ONNX frontend shape values as tensors wherever it cannot compute on them.

TVM 0.27's Relax frontend turns ``Shape`` into a ``ShapeExpr`` and keeps it one through
``Gather``, ``Slice``, ``Concat`` and ``Squeeze``; every op outside its short list of
shape-aware converters refuses such an input (``Node Sub cannot handle ShapeExpr inputs``,
apache/tvm#20065, open), which is how the lowered ``ReverseSequence`` index fails where the
lengths are computed (``Sub(Shape(lens), batch)``, ``Add(batch, checked)``) and any exporter's
shape arithmetic does. Its ``Cast`` converter turns a ``ShapeExpr`` into a tensor (a constant when
static), so each such read gets an ``int64`` ``Cast`` in between (a no-op in ONNX; one per value
and graph). Ops that take shapes (``Reshape``, ``Expand``, ``ConstantOfShape``, ...) keep
reading the value as it is: their converters need the ``ShapeExpr``.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower.passes._base import RepairPass, model_names
from seqlower.passes._ir import is_onnx

__all__ = ["ShapeValuesAsTensors"]

#: Ops TVM 0.27's frontend converts with a ShapeExpr input (``shape_compatible_ops``).
_TAKES_SHAPES = frozenset(
    {
        "Reshape",
        "Resize",
        "ConstantOfShape",
        "Gather",
        "Slice",
        "Shape",
        "Expand",
        "Concat",
        "Equal",
        "Where",
        "Cast",
        "CastLike",
        "Squeeze",
    }
)
#: Ops whose result stays a ShapeExpr when their data input is one.
_KEEP_SHAPES = frozenset({"Gather", "Slice", "Squeeze", "Concat"})


class ShapeValuesAsTensors(RepairPass):
    """Insert ``Cast(to=int64)`` between a shape value and an op TVM cannot give it to."""

    def repair(self, model: ir.Model) -> None:
        self._names = model_names(model)
        shapes: set[int] = set()
        self._graph(model.graph, shapes)
        for function in model.functions.values():
            self._graph(function, set())

    def _graph(self, graph: ir.Graph | ir.Function, shapes: set[int]) -> None:
        casts: dict[int, ir.Value] = {}
        for node in list(graph):
            onnx_op = is_onnx(node)
            if onnx_op and node.op_type not in _TAKES_SHAPES:
                for index, value in enumerate(node.inputs):
                    if value is not None and id(value) in shapes:
                        node.replace_input_with(index, self._cast(graph, node, value, casts))
            for attr in node.attributes.values():
                if attr.is_ref():
                    continue
                if attr.type == ir.AttributeType.GRAPH:
                    self._graph(attr.as_graph(), shapes)
                elif attr.type == ir.AttributeType.GRAPHS:
                    for subgraph in attr.as_graphs():
                        self._graph(subgraph, shapes)
            if onnx_op and _makes_shape(node, shapes):
                shapes.update(id(output) for output in node.outputs)

    def _cast(
        self,
        graph: ir.Graph | ir.Function,
        reader: ir.Node,
        value: ir.Value,
        casts: dict[int, ir.Value],
    ) -> ir.Value:
        known = casts.get(id(value))
        if known is not None:
            return known
        name = self._names.fresh(f"{value.name or 'shape'}_as_tensor")
        cast = ir.node(
            "Cast",
            [value],
            {"to": ir.DataType.INT64},
            name=self._names.fresh(f"{name}_cast"),
            outputs=[ir.Value(name=name, type=ir.TensorType(ir.DataType.INT64), shape=value.shape)],
        )
        graph.insert_before(reader, cast)
        casts[id(value)] = cast.outputs[0]
        self.rewritten += 1
        return cast.outputs[0]


def _makes_shape(node: ir.Node, shapes: set[int]) -> bool:
    """Whether TVM's frontend gives ``node``'s result as a ShapeExpr."""
    if node.op_type == "Shape":
        return True
    if node.op_type not in _KEEP_SHAPES or not node.inputs or node.inputs[0] is None:
        return False
    if node.op_type == "Concat":
        return all(v is not None and id(v) in shapes for v in node.inputs)
    return id(node.inputs[0]) in shapes
