"""ReverseSequence: native onnxruntime kernel vs seqlower's lowered form vs a plain copy.

Run by hand (not a test):  .venv/bin/python benchmarks/reverse_sequence.py [--repeat N]
    --inner: the shapes of issue 20 instead, 1M+ elements with 1, 8 and 256 floats per (t, b)
             slice, where GatherND of small slices is slowest
    --form gathernd|gather: the general form to lower to (LowerReverseSequence(form=...))

For each shape, layout, kind of lengths (a graph input with symbolic dimensions, so the index is
computed at run time; a constant with static dimensions, so it is folded; or the full time
length as tf2onnx writes it, so one Slice) and thread count, all
three models run in the same process, interleaved, and the script prints medians and the ratios
lowered/native and lowered/copy (medians of per-round ratios). The copy model (Identity on a
graph input, which onnxruntime must copy) is the memory-bandwidth floor. Inputs are bound once
with IOBinding so the timings are the kernels, not numpy conversions.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

import seqlower
from seqlower.passes import LowerReverseSequence

SHAPES = {
    3: [(128, 64, 128), (64, 128, 256), (256, 32, 512)],
    4: [(64, 32, 16, 32), (32, 64, 32, 32), (128, 32, 32, 32)],
}
# Inner sizes 1, 8 and 256 at 1M-2M elements (--inner); one element per step twice, as [T, B]
# and as [T, B, 1] (both lowered to GatherElements).
INNER_SHAPES = [(2048, 512), (2048, 512, 1), (2048, 128, 8), (64, 64, 256)]


def models(
    shape: tuple[int, ...], time_axis: int, kind: str, lens: np.ndarray, form: str = "gathernd"
) -> dict[str, onnx.ModelProto]:
    """Native, lowered and copy models. ``kind``: ``input`` (lengths a graph input, time and
    batch symbolic, the trailing sizes static as exporters declare features: the index is
    computed at run time), ``constant`` (a constant with static dimensions: the index is
    folded), ``full`` (the full time length as tf2onnx writes it, ``Expand(Gather(Shape(x)))``,
    time and batch symbolic: one Slice)."""
    dims: list[Any] = list(shape) if kind == "constant" else ["d0", "d1", *shape[2:]]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)
    inputs, initializers, nodes = [x], [], []
    if kind == "input":
        inputs.append(helper.make_tensor_value_info("lens", TensorProto.INT64, ["batch"]))
    elif kind == "constant":
        initializers.append(onnx.numpy_helper.from_array(lens, "lens"))
    else:
        initializers += [
            onnx.numpy_helper.from_array(np.array([time_axis], np.int64), "time_axis"),
            onnx.numpy_helper.from_array(np.array([1 - time_axis], np.int64), "batch_axis"),
        ]
        nodes += [
            helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("Gather", ["shape", "time_axis"], ["time"]),
            helper.make_node("Gather", ["shape", "batch_axis"], ["batch"]),
            helper.make_node("Expand", ["time", "batch"], ["lens"]),
        ]
    nodes.append(
        helper.make_node(
            "ReverseSequence", ["x", "lens"], ["y"], time_axis=time_axis, batch_axis=1 - time_axis
        )
    )
    native = helper.make_model(
        helper.make_graph(nodes, "rs", inputs, [y], initializers),
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=8,
    )
    copy = helper.make_model(
        helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "copy", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=8,
    )
    lowered = seqlower.lower(native, [LowerReverseSequence(form=form)])
    return {"native": native, "lowered": lowered, "copy": copy}


def session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def bench(
    shape: tuple[int, ...],
    time_axis: int,
    threads: int,
    repeat: int,
    kind: str,
    form: str = "gathernd",
) -> dict[str, float]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    batch, steps = shape[1 - time_axis], shape[time_axis]
    lens = rng.integers(0, steps + 1, size=batch).astype(np.int64)
    runners = {}
    expected = None
    for name, model in models(shape, time_axis, kind, lens, form).items():
        sess = session(model, threads)
        binding = sess.io_binding()
        binding.bind_cpu_input("x", x)
        if name != "copy" and kind == "input":
            binding.bind_cpu_input("lens", lens)
        binding.bind_output("y")
        sess.run_with_iobinding(binding)
        out = binding.copy_outputs_to_cpu()[0]
        if name == "native":
            expected = out
        elif name == "lowered":
            assert expected is not None and np.array_equal(out, expected), "lowered != native"
        runners[name] = (sess, binding)
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(repeat):
        for name, (sess, binding) in runners.items():
            start = time.perf_counter()
            sess.run_with_iobinding(binding)
            times[name].append(time.perf_counter() - start)
    result = {name: statistics.median(values) for name, values in times.items()}
    # Ratios are taken within each round (the three runs back to back) and then the median, so
    # that a slow stretch of a noisy machine slows all three alike instead of skewing one.
    for other in ("native", "copy"):
        result[f"lowered/{other}"] = statistics.median(
            low / ref for low, ref in zip(times["lowered"], times[other], strict=True)
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument(
        "--kinds", nargs="+", default=["input", "constant", "full"], help="kinds of lengths"
    )
    parser.add_argument("--ranks", nargs="+", type=int, default=[3, 4])
    parser.add_argument("--inner", action="store_true", help="issue 20's inner sizes 1, 8, 256")
    parser.add_argument("--form", default="gathernd", choices=["gathernd", "gather"])
    args = parser.parse_args()
    print(
        f"onnxruntime {ort.__version__}, median of {args.repeat} interleaved runs, float32, "
        f"form {args.form}"
    )
    header = (
        f"{'shape':>14} {'layout':>11} {'lens':>8} {'thr':>3} {'native ms':>10} "
        f"{'lowered ms':>11} {'copy ms':>8} {'low/nat':>8} {'low/copy':>9}"
    )
    print(header)
    worst: dict[tuple[str, int], float] = {}
    shapes = INNER_SHAPES if args.inner else [s for rank in args.ranks for s in SHAPES[rank]]
    for shape in shapes:
        for time_axis in (0, 1):
            for lens in args.kinds:
                for threads in (1, 2):
                    t = bench(shape, time_axis, threads, args.repeat, lens, args.form)
                    ratio = t["lowered/native"]
                    key = (lens, threads)
                    worst[key] = max(worst.get(key, 0.0), ratio)
                    layout = "time-major" if time_axis == 0 else "batch-major"
                    print(
                        f"{'x'.join(map(str, shape)):>14} {layout:>11} {lens:>8} "
                        f"{threads:>3} {t['native'] * 1e3:>10.3f} "
                        f"{t['lowered'] * 1e3:>11.3f} {t['copy'] * 1e3:>8.3f} {ratio:>8.3f} "
                        f"{t['lowered/copy']:>9.3f}"
                    )
    for (lens, threads), ratio in sorted(worst.items()):
        print(f"worst lowered/native, lengths {lens}, {threads} thread(s): {ratio:.3f}")


if __name__ == "__main__":
    main()
