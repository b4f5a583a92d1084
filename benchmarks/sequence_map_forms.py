"""The "reduce" SequenceMap (issue 45) in other lowered forms, against onnxruntime's own.

Run by hand (not a test):  .venv/bin/python benchmarks/sequence_map_forms.py [--repeat R]

The map of ``sequence_map.py --kinds reduce`` (8192 elements of [n, 64], n from 1 to 31; each
times a 64x64 weight, Relu, ReduceMax over its rows). Forms, all run interleaved in one process
on the same inputs, one thread, each checked bit for bit against onnxruntime's own first:

- ``loop``: what seqlower writes (a Loop of SequenceAt, scan outputs, SplitToSequence);
- ``rows``: a Loop that only reads each element's row count, one ConcatFromSequence of all
  rows, one MatMul and Relu over them, then the segmented max exactly as ReduceMax takes it: the
  rows gathered into [max n, S, 64], each element's last row repeated (a max selects one of its
  operands, so a repeat changes nothing, whatever the runtime does with NaN or signed zeros), one
  ReduceMax over axis 0, an empty element's -inf put back by a Where;
- ``unrolled``: seqlower's Loop reading 4 elements an iteration (fewer iterations, the same
  kernels);
- ``stack``: every element [16, 64] (the other forms too, on these inputs): ConcatFromSequence
  along a new axis 1, MatMul, Relu, ReduceMax over axis 0 (needs the elements' one shape
  declared, not this kind's [N, 64]);
- floors, not maps: ``counts`` (the row-count Loop alone) and ``batched`` (ConcatFromSequence,
  MatMul and Relu alone), the parts of ``rows`` nothing can avoid.

Prints medians (ms) and each form's time as a fraction of onnxruntime's own.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from sequence_map import reduce_model

import seqlower

_H = helper.make_node
_F, _I64 = TensorProto.FLOAT, TensorProto.INT64


def _ints(name: str, value: object) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(value, np.int64), name)


def _model(
    nodes: list[onnx.NodeProto],
    output: onnx.ValueInfoProto,
    weight: np.ndarray,
    declared: list[object],
    extra: list[onnx.TensorProto],
) -> onnx.ModelProto:
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(_F, declared))
    graph = helper.make_graph(
        nodes,
        "forms",
        [helper.make_value_info("s", seq)],
        [output],
        [numpy_helper.from_array(weight, "w"), *extra],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _counts() -> list[onnx.NodeProto]:
    """``L``: each element's row count, a Loop of SequenceAt and Shape."""
    body = helper.make_graph(
        [
            _H("SequenceAt", ["s", "i"], ["x"]),
            _H("Shape", ["x"], ["n_i"], end=1),
            _H("Identity", ["c"], ["c_out"]),
        ],
        "counts",
        [
            helper.make_tensor_value_info("i", _I64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("n_i", _I64, [1]),
        ],
    )
    return [
        _H("SequenceLength", ["s"], ["S"]),
        _H(
            "Constant", [], ["true"], value=helper.make_tensor("true", TensorProto.BOOL, [], [True])
        ),
        _H("Loop", ["S", "true"], ["L1"], body=body),
        _H("Reshape", ["L1", "minus_one"], ["L"]),
    ]


def _unrolled(k: int) -> list[onnx.NodeProto]:
    """``y`` [S, 64]: seqlower's Loop with ``k`` elements an iteration (``ceil(S / k)``
    iterations; past the last element the last is read again, and its rows sliced off)."""
    body: list[onnx.NodeProto] = [_H("Mul", ["i", "k"], ["base"])]
    for j in range(k):
        body += [
            _H("Add", ["base", f"j{j}"], [f"p{j}"]),
            _H("Min", [f"p{j}", "last"], [f"q{j}"]),
            _H("SequenceAt", ["s", f"q{j}"], [f"e{j}"]),
            _H("MatMul", [f"e{j}", "w"], [f"m{j}"]),
            _H("Relu", [f"m{j}"], [f"r{j}"]),
            _H("ReduceMax", [f"r{j}"], [f"y{j}"], axes=[0], keepdims=1),
        ]
    body += [
        _H("Concat", [f"y{j}" for j in range(k)], ["ys"], axis=0),
        _H("Identity", ["c"], ["c_out"]),
    ]
    graph = helper.make_graph(
        body,
        "unrolled",
        [
            helper.make_tensor_value_info("i", _I64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("ys", _F, [k, 64]),
        ],
        [_ints(f"j{j}", j) for j in range(k)],
    )
    return [
        _H("SequenceLength", ["s"], ["S"]),
        _H("Add", ["S", "k_minus_one"], ["S_up"]),
        _H("Div", ["S_up", "k"], ["M"]),
        _H("Sub", ["S", "one"], ["last"]),
        _H("Loop", ["M", ""], ["blocks"], body=graph),
        _H("Reshape", ["blocks", "rows_64"], ["all"]),
        _H("Unsqueeze", ["S", "zero_1d"], ["S_1d"]),
        _H("Slice", ["all", "zero_1d", "S_1d"], ["y"]),
    ]


def _batched() -> list[onnx.NodeProto]:
    return [
        _H("ConcatFromSequence", ["s"], ["rows"], axis=0),
        _H("MatMul", ["rows", "w"], ["m"]),
        _H("Relu", ["m"], ["r"]),
    ]


def _segmented_max() -> list[onnx.NodeProto]:
    """``y`` [S, 64]: each element's max over its rows of ``r``, in ReduceMax's own order."""
    return [
        _H("CumSum", ["L", "zero"], ["first"], exclusive=1),
        _H("ReduceMax", ["L"], ["longest"], keepdims=0),
        _H("Range", ["zero", "longest", "one"], ["steps"]),
        _H("Unsqueeze", ["steps", "one_1d"], ["steps_col"]),
        _H("Sub", ["L", "one"], ["last"]),
        _H("Max", ["last", "zero"], ["last0"]),
        _H("Min", ["steps_col", "last0"], ["row"]),
        _H("Add", ["row", "first"], ["at"]),
        _H("Gather", ["r", "at"], ["padded"], axis=0),
        _H("ReduceMax", ["padded"], ["most"], axes=[0], keepdims=0),
        _H("Greater", ["L", "zero"], ["filled"]),
        _H("Unsqueeze", ["filled", "one_1d"], ["filled_col"]),
        _H("Where", ["filled_col", "most", "minus_inf"], ["y"]),
    ]


def forms(weight: np.ndarray) -> dict[str, onnx.ModelProto]:
    native = reduce_model()
    out = helper.make_value_info(
        "out", helper.make_sequence_type_proto(helper.make_tensor_type_proto(_F, [64]))
    )
    consts = [
        _ints("zero", 0),
        _ints("one", 1),
        _ints("one_1d", [1]),
        _ints("minus_one", [-1]),
        numpy_helper.from_array(np.array(-np.inf, np.float32), "minus_inf"),
    ]
    split = _H("SplitToSequence", ["y"], ["out"], axis=0, keepdims=0)
    rows = [*_counts(), *_batched(), *_segmented_max(), split]
    unrolled = [
        *_unrolled(4),
        split,
    ]
    unrolled_consts = [
        *consts,
        _ints("k", 4),
        _ints("k_minus_one", 3),
        _ints("rows_64", [-1, 64]),
        _ints("zero_1d", [0]),
    ]
    stack = [
        _H("ConcatFromSequence", ["s"], ["stacked"], axis=1, new_axis=1),
        _H("MatMul", ["stacked", "w"], ["m"]),
        _H("Relu", ["m"], ["r"]),
        _H("ReduceMax", ["r"], ["y"], axes=[0], keepdims=0),
        split,
    ]
    tensor = helper.make_tensor_value_info
    return {
        "native": native,
        "loop": seqlower.lower(native),
        "rows": _model(rows, out, weight, [None, 64], consts),
        "unrolled": _model(unrolled, out, weight, [None, 64], unrolled_consts),
        "stack": _model(stack, out, weight, [16, 64], []),
        "counts": _model(_counts(), tensor("L", _I64, None), weight, [None, 64], consts),
        "batched": _model(_batched(), tensor("r", _F, None), weight, [None, 64], consts),
    }


def session(proto: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3  # the floors leave the weight unread
    return ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=8192, help="elements in the sequence")
    parser.add_argument("--repeat", type=int, default=9, help="interleaved runs of each form")
    args = parser.parse_args()
    weight = numpy_helper.to_array(reduce_model().graph.initializer[0])
    rng = np.random.default_rng(0)
    ragged = [
        rng.standard_normal((int(n), 64)).astype(np.float32)
        for n in rng.integers(1, 32, size=args.count)
    ]
    even = [rng.standard_normal((16, 64)).astype(np.float32) for _ in range(args.count)]
    runs = {name: session(proto) for name, proto in forms(weight).items()}
    feeds = {name: {"s": even if name == "stack" else ragged} for name in runs}
    for name in ("loop", "rows", "unrolled", "stack"):
        expected = runs["native"].run(None, feeds[name])[0]
        got = runs[name].run(None, feeds[name])[0]
        assert all(a.tobytes() == b.tobytes() for a, b in zip(expected, got, strict=True)), name
    times: dict[str, list[float]] = {name: [] for name in runs}
    even_native: list[float] = []
    for _ in range(args.repeat):
        for name, sess in runs.items():
            start = time.perf_counter()
            sess.run(None, feeds[name])
            times[name].append(time.perf_counter() - start)
        start = time.perf_counter()
        runs["native"].run(None, feeds["stack"])
        even_native.append(time.perf_counter() - start)
    print(
        f"onnxruntime {ort.__version__}, 1 thread, {args.count} elements, medians of {args.repeat}"
    )
    native = statistics.median(times["native"])
    for name, values in times.items():
        base = statistics.median(even_native) if name == "stack" else native
        median = statistics.median(values)
        print(f"{name:>8} {median * 1e3:9.2f} ms  {median / base:7.4f}x onnxruntime's own")
    print(f"(native on the [16, 64] elements: {statistics.median(even_native) * 1e3:.2f} ms)")


if __name__ == "__main__":
    main()
