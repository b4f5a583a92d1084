"""ReverseSequence lowering: session load time with many nodes, and the computed index's fixed cost.

Run by hand (not a test):  .venv/bin/python benchmarks/reverse_sequence_load.py [--nodes 400]

Load time: a model of N ReverseSequence nodes, as bidirectional stacks have them (each layer
reverses its input and its output with the same lengths), once with lengths from a graph input
(the general GatherND form, one shared index) and once as tf2onnx writes full-length reversals
(one Slice each). onnxruntime sessions are created with default options, original and lowered
interleaved; the script prints medians and the median of per-round ratios lowered/original.

Fixed cost: the computed index alone (a model whose output is the GatherND coordinates) on a
tiny input, one thread, timed with IOBinding, minus an Identity model's time (the cost of a run
itself), so what remains is what the index adds to every run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))

import reverse_sequence as rs

import seqlower

IR_VERSION = 8


def stack(
    nodes: int, full_length: bool, shared: bool = True, bidirectional: bool = False
) -> onnx.ModelProto:
    """``nodes`` ReverseSequence nodes, time-major, each followed by an Add (a stand-in for the
    recurrent cell between the reversals). ``shared`` False puts a ``Slice`` to an end given as
    an input after each Add, which seqlower's dimension proofs cannot follow: every node then
    computes its own time-dependent index (the worst case, as after a Loop whose output sizes
    cannot be proven). (A ``Reshape`` to ``Shape(x)`` did so until the proofs learned to follow
    it.) ``bidirectional`` makes each layer what a bidirectional RNN layer is: its input read
    twice, forward as it is and backward reversed, reversed back and added to the forward half
    (two reversals a layer)."""
    if bidirectional:
        return _bidirectional(nodes)
    lines = []
    previous = "x"
    for i in range(nodes):
        if full_length:
            lines += [
                f"s{i} = Shape({previous})",
                f"t{i} = Gather(s{i}, zero)",
                f"b{i} = Gather(s{i}, one)",
                f"l{i} = Expand(t{i}, b{i})",
            ]
        lens = f"l{i}" if full_length else "lens"
        lines += [
            f"r{i} = ReverseSequence<batch_axis = 1, time_axis = 0>({previous}, {lens})",
            f"a{i} = Add(r{i}, x)",
            f"h{i} = Slice(a{i}, zero, ends, zero)" if not shared else f"h{i} = Identity(a{i})",
        ]
        previous = f"h{i}"
    lens_input = "" if full_length else ", int64[N] lens"
    if not shared:
        lens_input += ", int64[1] ends"
    body = "\n    ".join(lines)
    text = f"""<ir_version: {IR_VERSION}, opset_import: ["" : 17]>
g (float[T, N, 64] x{lens_input}) => (float[T, N, 64] y) {{
    zero = Constant<value = int64[1] {{0}}>()
    one = Constant<value = int64[1] {{1}}>()
    xshape = Shape(x)
    {body}
    y = Identity({previous})
}}"""
    return onnx.parser.parse_model(text)


def _bidirectional(nodes: int) -> onnx.ModelProto:
    lines = []
    previous = "x"
    for i in range(nodes // 2):
        lines += [
            f"r{i} = ReverseSequence<batch_axis = 1, time_axis = 0>({previous}, lens)",
            f"b{i} = Add(r{i}, x)",
            f"rb{i} = ReverseSequence<batch_axis = 1, time_axis = 0>(b{i}, lens)",
            f"f{i} = Add({previous}, rb{i})",
            f"h{i} = Slice(f{i}, zero, ends, zero)",
        ]
        previous = f"h{i}"
    body = "\n    ".join(lines)
    text = f"""<ir_version: {IR_VERSION}, opset_import: ["" : 17]>
g (float[T, N, 64] x, int64[N] lens, int64[1] ends) => (float[T, N, 64] y) {{
    zero = Constant<value = int64[1] {{0}}>()
    {body}
    y = Identity({previous})
}}"""
    return onnx.parser.parse_model(text)


def load_seconds(model: bytes, disabled: list[str] | None = None) -> float:
    start = time.perf_counter()
    ort.InferenceSession(model, providers=["CPUExecutionProvider"], disabled_optimizers=disabled)
    return time.perf_counter() - start


#: onnxruntime's common-subexpression pass hashes a node from its inputs' hashes, multiplying
#: by an odd number: a value reached by an even number of paths from the one before (a layer
#: whose input is read twice) gets an even factor, and after ~64 such layers every layer's
#: nodes hash alike; the pass then compares each node with all the earlier ones (quadratic).
#: Timed with it off too, to tell that apart from the cost of the nodes themselves.
CSE = "CommonSubexpressionElimination"


def load_times(
    nodes: int,
    full_length: bool,
    repeat: int,
    shared: bool,
    bidirectional: bool = False,
    disabled: list[str] | None = None,
) -> dict[str, float]:
    original = stack(nodes, full_length, shared, bidirectional)
    lowered = seqlower.lower(original)
    models = {
        "original": original.SerializeToString(),
        "lowered": lowered.SerializeToString(),
    }
    times: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(repeat):
        for name, data in models.items():
            times[name].append(load_seconds(data, disabled))
    result = {name: statistics.median(values) for name, values in times.items()}
    result["ratio"] = rs.round_ratio(times, "lowered", "original")
    return result


def index_model() -> onnx.ModelProto:
    """The lowered general form with its output moved to the GatherND's index input."""
    native = onnx.parser.parse_model(
        f"""<ir_version: {IR_VERSION}, opset_import: ["" : 17]>
g (float[T, N, C] x, int64[N] lens) => (float[T, N, C] y) {{
    y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
}}"""
    )
    lowered = seqlower.lower(native)
    (gather,) = [n for n in lowered.graph.node if n.op_type == "GatherND"]
    index = gather.input[1]
    lowered.graph.node.remove(gather)
    del lowered.graph.output[:]
    lowered.graph.output.append(
        onnx.helper.make_tensor_value_info(index, onnx.TensorProto.INT64, None)
    )
    return lowered


def identity_model() -> onnx.ModelProto:
    return onnx.parser.parse_model(
        f"""<ir_version: {IR_VERSION}, opset_import: ["" : 17]>
g (float[T, N, C] x, int64[N] lens) => (float[T, N, C] y) {{
    y = Identity(x)
}}"""
    )


def fixed_cost(repeat: int, shape: tuple[int, int, int]) -> dict[str, float]:
    x = np.zeros(shape, np.float32)
    lens = np.full(shape[1], shape[0], np.int64)
    runners = {
        "index": rs.bound(index_model(), 1, {"x": x, "lens": lens})[0],
        "identity": rs.bound(identity_model(), 1, {"x": x})[0],
    }
    times = rs.interleaved(runners, repeat)
    result = {name: statistics.median(values) for name, values in times.items()}
    result["net"] = statistics.median(
        a - b for a, b in zip(times["index"], times["identity"], strict=True)
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3000, help="runs for the fixed cost")
    args = parser.parse_args()
    print(f"onnxruntime {ort.__version__}, default session options")
    kinds = {
        "lengths input (GatherND, one shared index)": (False, True, False),
        "lengths input (GatherND, an index per node)": (False, False, False),
        "bidirectional layers, an index per node": (False, False, True),
        "full-length (Slice)": (True, True, False),
    }
    for kind, (full_length, shared, bidirectional) in kinds.items():
        t = load_times(args.nodes, full_length, args.repeat, shared, bidirectional)
        line = (
            f"load, {args.nodes} nodes, {kind}: original {t['original']:.3f} s, "
            f"lowered {t['lowered']:.3f} s, lowered/original {t['ratio']:.2f}"
        )
        if not shared:
            off = load_times(args.nodes, full_length, args.repeat, shared, bidirectional, [CSE])
            line += f" ({off['ratio']:.2f} with {CSE} off)"
        print(line)
    for shape in ((1, 1, 1), (16, 8, 1)):
        c = fixed_cost(args.runs, shape)
        print(
            f"computed index alone, input {'x'.join(map(str, shape))}, 1 thread: "
            f"{c['index'] * 1e6:.1f} us per run, Identity {c['identity'] * 1e6:.1f} us, "
            f"index's own cost {c['net'] * 1e6:.1f} us"
        )


if __name__ == "__main__":
    main()
