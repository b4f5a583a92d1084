"""The PyTorch pattern with the bodies onnxscript's converter really makes.

PyTorch's dynamo exporter takes the ``SequenceMap`` bodies of ``atleast_1d/2d/3d`` on tuples from
onnxscript's torch_lib (``onnxscript/function_libs/torch_lib/ops/core.py``, which needs torch to
import). The three functions below are copied from it (onnxscript 0.7.2, MIT licence) and turned
into graphs by the same converter, so the bodies are exactly the exporter's: untyped inputs and
outputs, constants compared through ``CastLike``, ``If`` branches returning untyped values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper
from onnxscript import FLOAT, graph, script
from onnxscript import opset18 as op


@script()
def atleast_1d_sequence(self: Sequence[FLOAT]) -> Sequence[FLOAT]:
    @graph()
    def reshape_to_1d(tensor):  # type: ignore[no-untyped-def]
        shape = op.Shape(tensor)
        rank = op.Size(shape)
        if rank == 0:
            tensor = op.Reshape(tensor, op.Constant(value_ints=[1]))
        return tensor

    return op.SequenceMap(self, body=reshape_to_1d)


@script()
def atleast_2d_sequence(self: Sequence[FLOAT]) -> Sequence[FLOAT]:
    @graph()
    def reshape_to_2d(tensor):  # type: ignore[no-untyped-def]
        shape = op.Shape(tensor)
        rank = op.Size(shape)
        if rank <= 1:
            tensor = op.Reshape(tensor, op.Constant(value_ints=[1, -1]))
        return tensor

    return op.SequenceMap(self, body=reshape_to_2d)


@script()
def atleast_3d_sequence(self: Sequence[FLOAT]) -> Sequence[FLOAT]:
    @graph()
    def reshape_to_3d(tensor):  # type: ignore[no-untyped-def]
        shape = op.Shape(tensor)
        rank = op.Size(shape)
        if rank <= 1:
            tensor = op.Reshape(tensor, op.Constant(value_ints=[1, -1, 1]))
        elif rank == 2:
            tensor = op.Unsqueeze(tensor, op.Constant(value_ints=[-1]))
        return tensor

    return op.SequenceMap(self, body=reshape_to_3d)


BODIES = {1: atleast_1d_sequence, 2: atleast_2d_sequence, 3: atleast_3d_sequence}


def body(rank: int) -> onnx.GraphProto:
    """The SequenceMap body of torch_lib's ``atleast_{rank}d.Sequence``."""
    function = BODIES[rank].to_function_proto()
    node = next(n for n in function.node if n.op_type == "SequenceMap")
    return node.attribute[0].g


def stack(rank: int, arrays: list[np.ndarray], axis: int) -> tuple[onnx.ModelProto, dict[str, Any]]:
    """``torch.{h,v,d}stack(arrays)`` as exported: construct, map, SequenceAt each, Concat."""
    names = [f"t{k}" for k in range(len(arrays))]
    nodes = [
        helper.make_node("SequenceConstruct", names, ["seq"]),
        helper.make_node("SequenceMap", ["seq"], ["mapped"], body=body(rank)),
    ]
    for k in range(len(arrays)):
        position = helper.make_tensor(f"i{k}", onnx.TensorProto.INT64, [], [k])
        nodes.append(helper.make_node("Constant", [], [f"i{k}"], value=position))
        nodes.append(helper.make_node("SequenceAt", ["mapped", f"i{k}"], [f"e{k}"]))
    nodes.append(
        helper.make_node("Concat", [f"e{k}" for k in range(len(arrays))], ["out"], axis=axis)
    )
    graph_proto = helper.make_graph(
        nodes,
        f"atleast_{rank}d_stack",
        [
            helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, list(a.shape))
            for name, a in zip(names, arrays, strict=True)
        ],
        [helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, ["d"] * rank)],
    )
    model = helper.make_model(
        graph_proto, opset_imports=[helper.make_opsetid("", 18)], ir_version=8
    )
    return model, dict(zip(names, arrays, strict=True))
