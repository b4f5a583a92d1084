"""Issue 33 item 3 on one thread: the floor of any portable ReverseSequence in onnxruntime.

Run by hand (not a test):  .venv/bin/python benchmarks/reverse_sequence_floor.py [--runs N]

A portable reversal must move each (time, batch) slice with some ONNX op other than
``ReverseSequence``. This script times, with onnxruntime's own profiler (kernel time only: no
session, binding or copy-out overhead on either side), 1 thread, the native kernel against the
ops that could move those slices, each given its index as a ready constant, so that what is
timed is the data movement alone and no index computation:

- ``gather_rows``: ``Gather`` of the [B*T, C] rows at the int32 row index (what the default
  pipeline writes for a static slice shape); ``gather_rows64`` the same with int64;
- ``gathernd_rows``: ``GatherND`` of the same rows ([B, T, 1] int64);
- ``gathernd_batch``: ``GatherND`` with ``batch_dims=1`` on the source steps alone;
- ``gather_elements``: ``GatherElements`` along time with the index expanded over C (int32);
- ``slice_reverse``: one ``Slice`` with step -1 (a full reversal: the kernel's cost for one
  length, not a per-entry reversal);
- ``gather_pairs``: ``Gather`` of [B*T/2, 2C] rows at an identity index: not a reversal (pairs
  would have to be swapped inside, another pass), only the cost of half as many rows;
- ``copy``: ``Identity``, the memory floor;
- ``index_table``: not a data move but the cheapest run-time row index known for lengths that
  are a graph input: a row of a ready [T+1, T] table of source steps gathered per batch entry,
  plus the entry's first row (two passes over [B, T] int32; the default pipeline's index takes
  five, and needs no table, whose size grows as T squared);
- ``seqlower_input``: the whole default-pipeline lowering with the lengths a graph input (T, B
  symbolic), summed over its nodes.

It prints each model's kernel time (summed over its nodes), per moved row, and its ratio to the
native kernel.
The per-row cost of ``Gather`` is about constant up to 16 floats a row (a division and a
``memcpy`` call per row), so at 8 floats a slice the data movement alone costs more than 1.5x
the kernel on one thread, before any run-time index: the bound the closing note of issue 33
refers to.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import seqlower

#: Issue 33's worst cells: batch-major, 8 floats a slice; and one 256-float shape for contrast.
SHAPES = [(2048, 128, 8), (2048, 256, 8), (64, 512, 256)]
#: Timed for their cost only: they do not compute the per-entry reversal.
NOT_REVERSALS = ("slice_reverse", "gather_pairs", "copy", "index_table")


def _model(
    nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], shape: tuple[int, ...]
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "floor",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def candidates(
    shape: tuple[int, int, int], lens: np.ndarray
) -> dict[str, tuple[onnx.ModelProto, tuple[int, ...], int]]:
    """name -> (model, input shape, rows moved). Batch-major [B, T, C]."""
    batch, steps, inner = shape
    t = np.arange(steps)[None, :]
    length = lens[:, None]
    src = np.where(t < length, length - 1 - t, t)  # [B, T]
    rows = (np.arange(batch)[:, None] * steps + src).astype(np.int64)
    node, const = helper.make_node, numpy_helper.from_array
    flat = node("Flatten", ["x"], ["r"], axis=2)
    out: dict[str, tuple[onnx.ModelProto, tuple[int, ...], int]] = {}
    n = batch * steps
    out["native"] = (
        _model(
            [node("ReverseSequence", ["x", "l"], ["y"], time_axis=1, batch_axis=0)],
            [const(lens, "l")],
            shape,
        ),
        shape,
        n,
    )
    for name, dtype in (("gather_rows", np.int32), ("gather_rows64", np.int64)):
        gather = node("Gather", ["r", "i"], ["y"], axis=0)
        out[name] = (_model([flat, gather], [const(rows.astype(dtype), "i")], shape), shape, n)
    out["gathernd_rows"] = (
        _model([flat, node("GatherND", ["r", "i"], ["y"])], [const(rows[..., None], "i")], shape),
        shape,
        n,
    )
    out["gathernd_batch"] = (
        _model(
            [node("GatherND", ["x", "i"], ["y"], batch_dims=1)],
            [const(src[..., None].astype(np.int64), "i")],
            shape,
        ),
        shape,
        n,
    )
    expanded = np.ascontiguousarray(np.broadcast_to(src[..., None], shape), dtype=np.int32)
    out["gather_elements"] = (
        _model([node("GatherElements", ["x", "i"], ["y"], axis=1)], [const(expanded, "i")], shape),
        shape,
        n,
    )
    bounds = [
        const(np.array([-1]), "s"),
        const(np.array([-(2**62)]), "e"),
        const(np.array([1]), "a"),
        const(np.array([-1]), "st"),
    ]
    out["slice_reverse"] = (
        _model([node("Slice", ["x", "s", "e", "a", "st"], ["y"])], bounds, shape),
        shape,
        n,
    )
    if steps % 2 == 0:
        pairs = (batch, steps // 2, 2 * inner)
        identity = np.arange(n // 2, dtype=np.int32).reshape(batch, steps // 2)
        gather = node("Gather", ["r", "i"], ["y"], axis=0)
        out["gather_pairs"] = (_model([flat, gather], [const(identity, "i")], pairs), pairs, n // 2)
    out["copy"] = (_model([node("Identity", ["x"], ["y"])], [], shape), shape, n)
    # The cheapest run-time row index known (the lengths an input): one row of a ready [T+1, T]
    # table of source steps per batch entry, plus the batch's first row. Its output is the index.
    table = np.where(t < np.arange(steps + 1)[:, None], np.arange(steps + 1)[:, None] - 1 - t, t)
    index = helper.make_graph(
        [node("Gather", ["m", "l"], ["s"], axis=0), node("Add", ["s", "o"], ["y"])],
        "index",
        [helper.make_tensor_value_info("l", TensorProto.INT64, [batch])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        [
            const(table.astype(np.int32), "m"),
            const((np.arange(batch)[:, None] * steps).astype(np.int32), "o"),
        ],
    )
    out["index_table"] = (
        helper.make_model(index, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
        shape,
        n,
    )
    # What the default pipeline writes for lengths known at run time (T and B symbolic).
    dims: list[int | str] = ["b", "t", inner]
    native = helper.make_graph(
        [node("ReverseSequence", ["x", "l"], ["y"], time_axis=1, batch_axis=0)],
        "native",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, dims),
            helper.make_tensor_value_info("l", TensorProto.INT64, ["b"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)],
    )
    out["seqlower_input"] = (
        seqlower.lower(
            helper.make_model(native, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        ),
        shape,
        n,
    )
    return out


def kernel_time(
    model: onnx.ModelProto, x: np.ndarray, lens: np.ndarray, runs: int
) -> tuple[float, np.ndarray]:
    """The model's kernel time (µs: the sum over its nodes of each node's median), from
    onnxruntime's profiler, and the model's output."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        options.profile_file_prefix = os.path.join(tmp, "floor")
        sess = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        feeds = {"x": x, "l": lens}
        names = [i.name for i in sess.get_inputs()]
        for _ in range(runs):
            output = sess.run(None, {name: feeds[name] for name in names})[0]
        with open(sess.end_profiling()) as f:
            events = json.load(f)
    times: dict[str, list[float]] = {}
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            times.setdefault(event["name"], []).append(float(event["dur"]))
    return sum(statistics.median(values) for values in times.values()), output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    args = parser.parse_args()
    print(f"onnxruntime {ort.__version__}, 1 thread, kernel time (profiler), median of {args.runs}")
    print(f"{'shape':>12} {'op':>16} {'µs':>9} {'ns/row':>8} {'/native':>8}")
    rng = np.random.default_rng(0)
    for shape in SHAPES:
        batch, steps, _ = shape
        lens = rng.integers(0, steps + 1, size=batch).astype(np.int64)
        x = rng.standard_normal(shape).astype(np.float32)
        models = candidates(shape, lens)
        model, _, _ = models.pop("native")
        native, expected = kernel_time(model, x, lens, args.runs)
        label = "x".join(map(str, shape))
        per_row = native * 1e3 / (batch * steps)
        print(f"{label:>12} {'native':>16} {native:9.1f} {per_row:8.2f} {1:8.2f}")
        for name, (model, in_shape, rows) in models.items():
            micros, output = kernel_time(model, x.reshape(in_shape), lens, args.runs)
            if name not in NOT_REVERSALS:
                assert np.array_equal(output.reshape(shape), expected), f"{name} is wrong"
            print(
                f"{label:>12} {name:>16} {micros:9.1f} {micros * 1e3 / rows:8.2f} "
                f"{micros / native:8.2f}"
            )


if __name__ == "__main__":
    main()
