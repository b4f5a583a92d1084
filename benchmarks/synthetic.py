"""Synthetic models for the tool benchmarks: many ordinary ops with SequenceMap/ReverseSequence.

Each block reverses a [T, B, F] activation (ReverseSequence, lengths from an input), runs a
few elementwise ops, splits it into a sequence, maps a two-node body over it (SequenceMap) and
concatenates the result back; ``filler`` ordinary ops per block set the mix.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

T, B, F = 8, 4, 16


def synthetic_model(
    blocks: int,
    filler: int,
    weights_bytes: int = 0,
    matmul: bool = False,
    lengths: list[int] | None = None,
) -> onnx.ModelProto:
    """About blocks * (filler + 8) nodes; ``weights_bytes`` of float32 initializers in total.

    ``lengths``: the ``ReverseSequence`` lengths as a constant (B of them) instead of an input.

    ``matmul``: the filler alternates ``MatMul`` (by one shared [F, F] weight) and ``Add``, as
    in exported networks, and comes before the ``ReverseSequence``, whose input then has no
    type a trivial rule can trace (the hard case for typing).
    """
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = [
        helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
    ]
    if matmul:
        inits.append(onnx.numpy_helper.from_array(np.eye(F, dtype=np.float32), "w"))
    if lengths is not None:
        inits.append(onnx.numpy_helper.from_array(np.array(lengths, np.int64), "lens"))
    cycle = ("MatMul", "Add") if matmul else ("Add", "Mul", "Sub", "Relu")
    per_block = weights_bytes // max(blocks, 1) // 4
    current = "x"
    elem = helper.make_tensor_type_proto(TensorProto.FLOAT, [B, F])
    for i in range(blocks):
        p = f"b{i}_"
        reverse = helper.make_node(
            "ReverseSequence", [current, "lens"], [p + "rev"], time_axis=0, batch_axis=1
        )
        last = current
        if not matmul:
            nodes.append(reverse)
            last = p + "rev"
        for k in range(filler):
            op = cycle[k % len(cycle)]
            second = "w" if op == "MatMul" else "one"
            inputs = [last] if op == "Relu" else [last, second]
            nodes.append(helper.make_node(op, inputs, [f"{p}f{k}"]))
            last = f"{p}f{k}"
        if matmul:  # reverses the MatMul/Add output
            reverse.input[0] = last
            nodes.append(reverse)
            last = p + "rev"
        if per_block:
            weight = f"{p}w"
            inits.append(onnx.numpy_helper.from_array(np.full(per_block, 0.5, np.float32), weight))
            nodes.append(helper.make_node("ReduceSum", [weight], [p + "wsum"], keepdims=0))
            nodes.append(helper.make_node("Add", [last, p + "wsum"], [p + "wadd"]))
            last = p + "wadd"
        body = helper.make_graph(
            [helper.make_node("Mul", ["e", "e"], ["sq"]), helper.make_node("Neg", ["sq"], ["r"])],
            f"{p}body",
            [helper.make_value_info("e", elem)],
            [helper.make_value_info("r", elem)],
        )
        nodes += [
            helper.make_node("SplitToSequence", [last], [p + "seq"], axis=0, keepdims=0),
            helper.make_node("SequenceMap", [p + "seq"], [p + "mapped"], body=body),
            helper.make_node("ConcatFromSequence", [p + "mapped"], [p + "out"], axis=0, new_axis=1),
        ]
        current = p + "out"
    graph = helper.make_graph(
        nodes,
        "synthetic",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, B, F]),
            *(
                [helper.make_tensor_value_info("lens", TensorProto.INT64, [B])]
                if lengths is None
                else []
            ),
        ],
        [helper.make_tensor_value_info(current, TensorProto.FLOAT, [T, B, F])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def constant_lengths_model(
    blocks: int, matmuls: int = 10, *, declared: bool = True
) -> onnx.ModelProto:
    """Issue 33's model: ``blocks`` blocks of ``Constant`` lengths → ``ReverseSequence`` over a
    static ``[8, 8]`` tensor → ``SequenceConstruct`` → ``SequenceMap(Relu, Add)`` →
    ``ConcatFromSequence`` → ``Slice`` → ``matmuls`` alternating ``MatMul``/``Add``.

    Every length is the constant 3 and every shape static, so each reversal can be lowered with no
    run-time index; 16 + 2 (the map's body) nodes a block with the default ``matmuls``.
    ``declared=False``: no block's input declares its shape (issue 45's 200 blocks): only the
    graph input's [8, 8] is given, every later size is for the tool to prove.
    """
    side = 8
    lengths = onnx.numpy_helper.from_array(np.full(side, 3, np.int64))
    inits = [
        onnx.numpy_helper.from_array(np.eye(side, dtype=np.float32), "w"),
        onnx.numpy_helper.from_array(np.full(side, 0.5, np.float32), "bias"),
        onnx.numpy_helper.from_array(np.array([0], np.int64), "starts"),
        onnx.numpy_helper.from_array(np.array([side], np.int64), "ends"),
    ]
    elem = helper.make_tensor_type_proto(TensorProto.FLOAT, [side, side])
    nodes: list[onnx.NodeProto] = []
    infos: list[onnx.ValueInfoProto] = []
    current = "x"
    for i in range(blocks):
        p = f"b{i}_"
        body = helper.make_graph(
            [
                helper.make_node("Relu", ["e"], ["r"]),
                helper.make_node("Add", ["r", "e"], ["y"]),
            ],
            f"{p}body",
            [helper.make_value_info("e", elem)],
            [helper.make_value_info("y", elem)],
        )
        nodes += [
            helper.make_node("Constant", [], [p + "lens"], value=lengths),
            helper.make_node(
                "ReverseSequence", [current, p + "lens"], [p + "rev"], time_axis=0, batch_axis=1
            ),
            helper.make_node("SequenceConstruct", [p + "rev", current], [p + "seq"]),
            helper.make_node("SequenceMap", [p + "seq"], [p + "mapped"], body=body),
            helper.make_node("ConcatFromSequence", [p + "mapped"], [p + "cat"], axis=0),
            helper.make_node("Slice", [p + "cat", "starts", "ends"], [p + "sl"]),
        ]
        last = p + "sl"
        for k in range(matmuls):
            op, second = ("MatMul", "w") if k % 2 == 0 else ("Add", "bias")
            nodes.append(helper.make_node(op, [last, second], [f"{p}f{k}"]))
            last = f"{p}f{k}"
        current = last
        if declared and i + 1 < blocks:  # as exporters write them: the next reversal's input
            infos.append(helper.make_tensor_value_info(current, TensorProto.FLOAT, [side, side]))
    graph = helper.make_graph(
        nodes,
        "constant_lengths",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [side, side])],
        [helper.make_tensor_value_info(current, TensorProto.FLOAT, [side, side])],
        inits,
        value_info=infos,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
