"""ReverseSequence: native onnxruntime kernel vs seqlower's lowered form vs a plain copy.

Run by hand (not a test):  .venv/bin/python benchmarks/reverse_sequence.py [--repeat N]

For each shape, layout and thread count, all three models run in the same process, interleaved,
and the script prints medians and the ratios lowered/native and lowered/copy. The copy model
(Identity on a graph input, which onnxruntime must copy) is the memory-bandwidth floor.
Inputs are bound once with IOBinding so the timings are the kernels, not numpy conversions.
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

SHAPES = {
    3: [(128, 64, 128), (64, 128, 256), (256, 32, 512)],
    4: [(64, 32, 16, 32), (32, 64, 32, 32), (128, 32, 32, 32)],
}


def models(rank: int, time_axis: int, lens_input: bool) -> dict[str, onnx.ModelProto]:
    dims = [f"d{i}" for i in range(rank)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)
    lens = helper.make_tensor_value_info("lens", TensorProto.INT64, ["batch"])
    native = helper.make_model(
        helper.make_graph(
            [
                helper.make_node(
                    "ReverseSequence",
                    ["x", "lens"],
                    ["y"],
                    time_axis=time_axis,
                    batch_axis=1 - time_axis,
                )
            ],
            "rs",
            [x, lens],
            [y],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=8,
    )
    copy = helper.make_model(
        helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "copy", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=8,
    )
    return {"native": native, "lowered": seqlower.lower(native), "copy": copy}


def session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def bench(shape: tuple[int, ...], time_axis: int, threads: int, repeat: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    batch, steps = shape[1 - time_axis], shape[time_axis]
    lens = rng.integers(0, steps + 1, size=batch).astype(np.int64)
    runners = {}
    expected = None
    for name, model in models(len(shape), time_axis, True).items():
        sess = session(model, threads)
        binding = sess.io_binding()
        binding.bind_cpu_input("x", x)
        if name != "copy":
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
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=300)
    args = parser.parse_args()
    print(f"onnxruntime {ort.__version__}, median of {args.repeat} interleaved runs, float32")
    header = (
        f"{'shape':>18} {'layout':>11} {'thr':>3} {'native ms':>10} {'lowered ms':>11} "
        f"{'copy ms':>8} {'low/nat':>8} {'low/copy':>9}"
    )
    print(header)
    worst = 0.0
    for shapes in SHAPES.values():
        for shape in shapes:
            for time_axis in (0, 1):
                for threads in (1, 2):
                    t = bench(shape, time_axis, threads, args.repeat)
                    ratio = t["lowered"] / t["native"]
                    worst = max(worst, ratio)
                    layout = "time-major" if time_axis == 0 else "batch-major"
                    print(
                        f"{'x'.join(map(str, shape)):>18} {layout:>11} {threads:>3} "
                        f"{t['native'] * 1e3:>10.3f} {t['lowered'] * 1e3:>11.3f} "
                        f"{t['copy'] * 1e3:>8.3f} {ratio:>8.3f} "
                        f"{t['lowered'] / t['copy']:>9.3f}"
                    )
    print(f"worst lowered/native ratio: {worst:.3f}")


if __name__ == "__main__":
    main()
