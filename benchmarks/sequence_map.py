"""SequenceMap: onnxruntime's own implementation vs seqlower's lowered model.

Run by hand (not a test):  .venv/bin/python benchmarks/sequence_map.py [--max-seconds S]

The model maps Neg over a sequence of N float tensors. "static": every element is [256] and
the body declares it, so seqlower runs Neg once on the stacked elements; "dynamic": elements
have different lengths and no declared shape, so seqlower carries a sequence through
SequenceInsert (as onnxruntime's own expansion does); "split": onnxscript's form, an [N, 256]
tensor split into rows, mapped and stacked back (SplitToSequence -> SequenceMap ->
ConcatFromSequence), which seqlower lowers to Neg on the tensor; "reduce" (issue 45): elements
of [n, 64], n from 1 to 31, declared [N, 64], whose body is MatMul by a 64x64 weight, Relu and
ReduceMax over axis 0, returning a static [64] (a Loop of SequenceAt, scan outputs, one
SplitToSequence). Both models run in one process, interleaved, on the same inputs; the script
prints median times and native/lowered speed-ups.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

import seqlower

LENGTHS = [4, 64, 512, 2048, 8192]


def reduce_model() -> onnx.ModelProto:
    """The "reduce" kind: each [n, 64] element times a 64x64 weight, Relu, max over its rows."""
    elem = helper.make_tensor_type_proto(TensorProto.FLOAT, ["N", 64])
    weight = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    body = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("Relu", ["m"], ["r"]),
            helper.make_node("ReduceMax", ["r"], ["y"], axes=[0], keepdims=0),
        ],
        "body",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])],
    )
    out = helper.make_tensor_type_proto(TensorProto.FLOAT, [64])
    graph = helper.make_graph(
        [helper.make_node("SequenceMap", ["s"], ["out"], body=body)],
        "map",
        [helper.make_value_info("s", helper.make_sequence_type_proto(elem))],
        [helper.make_value_info("out", helper.make_sequence_type_proto(out))],
        [onnx.numpy_helper.from_array(weight, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def model(kind: str) -> onnx.ModelProto:
    if kind == "reduce":
        return reduce_model()
    shape = None if kind == "dynamic" else [256]
    elem = helper.make_tensor_type_proto(TensorProto.FLOAT, shape)
    seq = helper.make_sequence_type_proto(elem)
    body = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["y"])],
        "body",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    nodes = [helper.make_node("SequenceMap", ["s"], ["out"], body=body)]
    inputs = [helper.make_value_info("s", seq)]
    outputs = [helper.make_value_info("out", seq)]
    if kind == "split":
        nodes.insert(0, helper.make_node("SplitToSequence", ["t"], ["s"], axis=0, keepdims=0))
        nodes.append(helper.make_node("ConcatFromSequence", ["out"], ["y"], axis=0, new_axis=1))
        inputs = [helper.make_tensor_value_info("t", TensorProto.FLOAT, ["N", 256])]
        outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 256])]
    graph = helper.make_graph(nodes, "map", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def session(proto: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def bench(kind: str, length: int, max_seconds: float) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    sizes = rng.integers(128, 384, size=length) if kind == "dynamic" else [256] * length
    if kind == "reduce":
        sizes = rng.integers(1, 32, size=length)
    rows = [rng.standard_normal(int(n)).astype(np.float32) for n in sizes]
    if kind == "reduce":
        rows = [rng.standard_normal((int(n), 64)).astype(np.float32) for n in sizes]
    feeds: dict[str, object] = {"s": rows}
    if kind == "split":
        feeds = {"t": np.stack(rows)}
    native_model = model(kind)
    lowered_model = seqlower.lower(native_model)
    ops = {n.op_type for n in lowered_model.graph.node}
    # static: Neg once on the stacked elements (an If against an empty sequence); dynamic: a
    # Loop carrying a sequence; split: Neg on the tensor, no sequence op.
    expected_ops = {
        "static": {"If"} <= ops and "Loop" not in ops,
        "dynamic": "Loop" in ops,
        "split": ops == {"Neg"},
        "reduce": "Loop" in ops and "SplitToSequence" in ops,
    }
    assert expected_ops[kind], ops
    runs = {"native": session(native_model), "lowered": session(lowered_model)}
    expected = runs["native"].run(None, feeds)[0]
    got = runs["lowered"].run(None, feeds)[0]
    assert all(np.array_equal(a, b) for a, b in zip(expected, got, strict=True))
    times: dict[str, list[float]] = {name: [] for name in runs}
    deadline = time.perf_counter() + max_seconds
    while len(times["native"]) < 3 or (
        time.perf_counter() < deadline and len(times["native"]) < 50
    ):
        for name, sess in runs.items():
            start = time.perf_counter()
            sess.run(None, feeds)
            times[name].append(time.perf_counter() - start)
    return statistics.median(times["native"]), statistics.median(times["lowered"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-seconds", type=float, default=4.0, help="per case, at least 3 runs")
    parser.add_argument("--kinds", default="static,dynamic,split,reduce", help="which kinds")
    args = parser.parse_args()
    print(f"onnxruntime {ort.__version__}, 1 thread, a map over N float tensors, medians")
    print(f"{'shapes':>8} {'N':>6} {'native ms':>11} {'lowered ms':>11} {'speed-up':>9}")
    for kind in args.kinds.split(","):
        for length in LENGTHS:
            native, lowered = bench(kind, length, args.max_seconds)
            print(
                f"{kind:>8} {length:>6} {native * 1e3:>11.3f} {lowered * 1e3:>11.3f} "
                f"{native / lowered:>8.2f}x"
            )


if __name__ == "__main__":
    main()
