"""Reversals whose lengths are constants on static shapes: nodes written and load time.

Run by hand (not a test):
    .venv/bin/python benchmarks/reverse_sequence_constant.py [--reversals 2000]

Issue 33's model: a chain of ``ReverseSequence`` over a static ``[8, 8]`` tensor, each with its
own ``Constant`` lengths (all 3), as exporters write one per layer, and a ``Relu`` after each.
Prints the nodes the lowering wrote (the lowered model's nodes but the ``Relu``s), the time
``seqlower.lower`` took, and onnxruntime's session creation time for the original and the
lowered model (graph optimizations on, as deployments load), side by side in one run. Run it at
an older commit (``git worktree add``) for the before figures.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

import seqlower


def chain(reversals: int, lengths: list[int], shape: tuple[int, int] = (8, 8)) -> onnx.ModelProto:
    nodes: list[onnx.NodeProto] = []
    current = "x"
    for i in range(reversals):
        value = onnx.numpy_helper.from_array(np.array(lengths, np.int64))
        nodes += [
            helper.make_node("Constant", [], [f"lens{i}"], value=value),
            helper.make_node(
                "ReverseSequence", [current, f"lens{i}"], [f"rev{i}"], time_axis=0, batch_axis=1
            ),
            helper.make_node("Relu", [f"rev{i}"], [f"y{i}"]),
        ]
        current = f"y{i}"
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info(current, TensorProto.FLOAT, list(shape))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def load_seconds(model: onnx.ModelProto, repeat: int) -> float:
    import onnxruntime as ort

    data = model.SerializeToString()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reversals", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for name, lengths in (("equal (3)", [3] * 8), ("mixed", [3, 8, 0, 5, 1, 2, 7, 4])):
        model = chain(args.reversals, lengths)
        start = time.perf_counter()
        lowered = seqlower.lower(model)
        lowering = time.perf_counter() - start
        written = len(lowered.graph.node) - args.reversals  # all but the Relus
        original, after = load_seconds(model, args.repeat), load_seconds(lowered, args.repeat)
        print(
            f"{name:10} {args.reversals} reversals: {written} nodes written, lowered in "
            f"{lowering:.2f} s; onnxruntime load {original:.2f} s original, {after:.2f} s "
            f"lowered ({after / original:.2f}x)"
        )


if __name__ == "__main__":
    main()
