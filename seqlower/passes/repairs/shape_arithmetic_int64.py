"""Shape arithmetic kept in int64 (target ``tract``).

tf2onnx writes TensorFlow's int32 shape arithmetic as ``Cast(Shape(x), to=int32)``, then
``Slice``/``Concat``/``Add``..., then ``Cast(to=int64)`` for an ``Expand`` or a ``Reshape``
(the zero states of every Keras recurrent layer, the trip count of every ``while_loop``). tract
0.23.9 computes a shape's arithmetic symbolically in int64 only: its int32 ``Cast`` of a size
``T`` gives a value it no longer knows, so with the model's declared facts (``T`` symbolic) it
cannot type the ``Expand`` ('shape input is variable, of variable length') or size a ``Range``,
though it loads the model with concrete facts. The original fails there the same way.

So each int32 value computed from such a ``Cast`` of a value known at load time is computed in
int64 instead: the ``Cast`` casts to int64, the ops after it (arithmetic, ``Concat``, the data of
``Slice``/``Gather``/``Squeeze``/``Unsqueeze``/``Reshape``, ``Range``, ``Where``, comparisons)
take their other int32 operands as int64 (a constant rewritten, a computed one cast), and every
other reader (a ``Scan``, a graph output, a read from a body) gets the int32 value back by a
``Cast``. The values are equal: int32 shape arithmetic that overflowed would describe a tensor
of more than 2**31 elements along one axis.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower._graphs import all_graphs
from seqlower.passes._base import RepairPass, model_names
from seqlower.passes._emit import NameGenerator
from seqlower.passes._ir import constant_array, is_onnx, runtime_source
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["ShapeArithmeticInInt64"]

_ALL = range(1 << 30)
#: Ops computed in int64 as in int32: the inputs that take the int values (all of one type),
#: and whether their outputs are those values (False: a bool, or the data's type).
_OPS: dict[str, tuple[range | tuple[int, ...], bool]] = {
    **{op: (_ALL, True) for op in ("Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Concat")},
    **{op: ((0,), True) for op in ("Abs", "Neg", "Identity", "Squeeze", "Unsqueeze")},
    **{op: ((0,), True) for op in ("Slice", "Gather", "Reshape", "Expand", "Flatten")},
    **{op: ((0,), True) for op in ("ReduceSum", "ReduceProd", "ReduceMax", "ReduceMin")},
    "Range": ((0, 1, 2), True),
    "Where": ((1, 2), True),
    **{op: ((0, 1), False) for op in ("Equal", "Less", "LessOrEqual", "Greater")},
    "GreaterOrEqual": ((0, 1), False),
}
#: Readers that take an int64 value where they took the int32 one, nothing else changed.
_TAKES_EITHER = {"Cast": (0,), "Gather": (1,), "GatherElements": (1,), "Shape": (0,)}


class ShapeArithmeticInInt64(RepairPass):
    """int32 arithmetic on a load-time int64 value, computed in int64 (module docstring)."""

    def repair(self, model: ir.Model) -> None:
        self._names = model_names(model)
        types = TypeOracle(model)
        for graph in all_graphs(model):
            if isinstance(graph, ir.Graph):  # functions: inlined first in tract's row
                self._graph(graph, types)

    def _graph(self, graph: ir.Graph, types: TypeOracle) -> None:
        memo: dict[int, ir.Value | None] = {}
        seeds = [
            node
            for node in graph
            if is_onnx(node, "Cast")
            and node.inputs
            and node.inputs[0] is not None
            and _attr_int(node, "to") == ir.DataType.INT32
            and element_dtype(types.type_of(node.inputs[0])) == ir.DataType.INT64
            and runtime_source(node.inputs[0], memo) is None
            and not node.outputs[0].is_graph_output()
        ]
        if not seeds:
            return
        island: set[int] = set()  # values now int64
        joined: set[int] = set()  # nodes computing in int64
        queue: list[ir.Value] = []
        for cast in seeds:
            cast.attributes["to"] = ir.AttrInt64("to", ir.DataType.INT64)
            queue.append(self._widen(cast.outputs[0], island))
        while queue:  # every reader of a widened value joins, or reads it cast back
            for node, index in list(queue.pop().uses()):
                if id(node) in joined:
                    continue
                if node.graph is graph and self._joins(node, index, types):
                    joined.add(id(node))
                    self._operands(graph, node, island, types)
                    if _OPS[node.op_type][1]:
                        queue.extend(self._widen(v, island) for v in node.outputs)
        self._exits(graph, island, joined)

    def _joins(self, node: ir.Node, index: int, types: TypeOracle) -> bool:
        """Whether ``node`` reading an int value at ``index`` computes in int64 as well."""
        if not is_onnx(node) or node.op_type not in _OPS:
            return False
        operands, outputs_too = _OPS[node.op_type]
        if index not in operands:
            return False
        if outputs_too and any(v.is_graph_output() for v in node.outputs):
            return False  # an output keeps its type
        return all(
            element_dtype(types.type_of(v)) in (ir.DataType.INT32, ir.DataType.INT64)
            for k, v in enumerate(node.inputs)
            if k in operands and v is not None
        )

    def _operands(
        self, graph: ir.Graph, node: ir.Node, island: set[int], types: TypeOracle
    ) -> None:
        """``node``'s other int32 operands as int64: a constant rewritten, else cast."""
        operands, _ = _OPS[node.op_type]
        for k, value in enumerate(list(node.inputs)):
            if k not in operands or value is None or id(value) in island:
                continue
            if element_dtype(types.type_of(value)) != ir.DataType.INT32:
                continue
            array = constant_array(value)
            name = self._names.fresh(f"{value.name or 'int'}_int64")
            out = ir.Value(name=name, type=ir.TensorType(ir.DataType.INT64), shape=value.shape)
            if array is not None:
                wide = ir.node(
                    "Constant",
                    [],
                    {"value": ir.Tensor(array.astype("int64"), name=name)},
                    name=self._names.fresh(f"{name}_constant"),
                    outputs=[out],
                )
            else:
                wide = _cast(value, ir.DataType.INT64, out, self._names)
            graph.insert_before(node, wide)
            node.replace_input_with(k, out)
            self.rewritten += 1

    def _widen(self, value: ir.Value, island: set[int]) -> ir.Value:
        if id(value) not in island:
            island.add(id(value))
            value.type = ir.TensorType(ir.DataType.INT64)
            self.rewritten += 1
        return value

    def _exits(self, graph: ir.Graph, island: set[int], joined: set[int]) -> None:
        """Every other reader of a widened value (a body's too) reads it cast back to int32."""
        for node in list(graph):
            for value in node.outputs:
                if id(value) not in island:
                    continue
                readers = [
                    (reader, k)
                    for reader, k in value.uses()
                    if not (id(reader) in joined and k in _OPS[reader.op_type][0])
                    and not (
                        reader.graph is graph
                        and is_onnx(reader)
                        and k in _TAKES_EITHER.get(reader.op_type, ())
                    )
                ]
                if not readers:
                    continue
                name = self._names.fresh(f"{value.name or 'int'}_int32")
                out = ir.Value(name=name, type=ir.TensorType(ir.DataType.INT32), shape=value.shape)
                graph.insert_after(node, _cast(value, ir.DataType.INT32, out, self._names))
                for reader, k in readers:
                    reader.replace_input_with(k, out)
                self.rewritten += 1


def _cast(value: ir.Value, to: ir.DataType, out: ir.Value, names: NameGenerator) -> ir.Node:
    return ir.node("Cast", [value], {"to": to}, name=names.fresh(f"{out.name}_cast"), outputs=[out])


def _attr_int(node: ir.Node, name: str) -> int | None:
    attr = node.attributes.get(name)
    return None if attr is None or attr.is_ref() else attr.as_int()
