"""ReverseSequence: native onnxruntime kernel vs seqlower's lowered form vs a plain copy.

Run by hand (not a test):  .venv/bin/python benchmarks/reverse_sequence.py [--repeat N]
    --inner: the shapes of issue 20 instead, 1M+ elements with 1, 8 and 256 floats per (t, b)
             slice, where GatherND of small slices is slowest
    --form gathernd|gather: the general form to lower to (LowerReverseSequence(form=...))

Issue 33 item 3 (the portable forms at most 1.5x the native kernel, ``--target onnxruntime``
1.0x), in one table:

    .venv/bin/python benchmarks/reverse_sequence.py --portable            # ~10 min, 200 runs
    .venv/bin/python benchmarks/reverse_sequence.py --portable --quick    # ~2 min, 30 runs

Every shape of this script with at least 1M elements (the three sets above and issue 33's
2048x256x8 and 64x512x256), both layouts, each kind of lengths, 1 and 2 threads: the default
pipeline's lowering (``seqlower.lower(model)``, the portable one; its form named) and
``--target onnxruntime``'s, each against the native kernel, interleaved in one process, medians
of per-round ratios; then the worst cell per thread count. ``--cpu-time`` times 1-thread runs by
the calling thread's CPU time (onnxruntime runs a 1-thread session on it), steadier on a loaded
machine; 2-thread runs stay wall time.

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
from collections.abc import Callable
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


#: A session with its inputs and output bound (IOBinding), ready to run.
Runner = tuple[ort.InferenceSession, ort.IOBinding]


def bound(
    model: onnx.ModelProto, threads: int, feeds: dict[str, np.ndarray]
) -> tuple[Runner, np.ndarray]:
    """A session of ``model`` with ``feeds`` and its first output bound once (so the timings are
    the kernels, not numpy conversions), run once; with that run's output."""
    sess = session(model, threads)
    binding = sess.io_binding()
    for name, value in feeds.items():
        binding.bind_cpu_input(name, value)
    binding.bind_output(sess.get_outputs()[0].name)
    sess.run_with_iobinding(binding)
    return (sess, binding), binding.copy_outputs_to_cpu()[0]


def interleaved(
    runners: dict[str, Runner], rounds: int, clock: Callable[[], float] = time.perf_counter
) -> dict[str, list[float]]:
    """Each runner's time of every round, all runners back to back in each round."""
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, (sess, binding) in runners.items():
            start = clock()
            sess.run_with_iobinding(binding)
            times[name].append(clock() - start)
    return times


def round_ratio(times: dict[str, list[float]], name: str, reference: str) -> float:
    """The median of ``name``'s time over ``reference``'s in the same round: a slow stretch of a
    noisy machine slows both alike instead of skewing one."""
    return statistics.median(
        mine / ref for mine, ref in zip(times[name], times[reference], strict=True)
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
        feeds: dict[str, np.ndarray] = {"x": x}
        if name != "copy" and kind == "input":
            feeds["lens"] = lens
        runners[name], out = bound(model, threads, feeds)
        if name == "native":
            expected = out
        elif name == "lowered":
            assert expected is not None and np.array_equal(out, expected), "lowered != native"
    times = interleaved(runners, repeat)
    result = {name: statistics.median(values) for name, values in times.items()}
    for other in ("native", "copy"):
        result[f"lowered/{other}"] = round_ratio(times, "lowered", other)
    return result


#: Issue 33's shapes besides the sets above (its worst cells: 8 floats a slice, and 256).
ISSUE_33_SHAPES = [(2048, 256, 8), (64, 512, 256)]


def portable_shapes() -> list[tuple[int, ...]]:
    """Every shape this script measures with at least 1M elements, each once."""
    every = [*SHAPES[3], *SHAPES[4], *INNER_SHAPES, *ISSUE_33_SHAPES]
    return [s for s in dict.fromkeys(every) if int(np.prod(s)) >= 1 << 20]


def _form_of(model: onnx.ModelProto) -> str:
    """The form the default pipeline chose, named by its data-moving op."""
    ops = [node.op_type for node in model.graph.node]
    for op in ("ReverseSequence", "GatherND", "GatherElements", "Slice"):
        if op in ops:
            return op
    return "Gather" if "Gather" in ops else "Identity"


def portable(
    shape: tuple[int, ...], time_axis: int, kind: str, threads: int, repeat: int, cpu: bool
) -> tuple[str, dict[str, float]]:
    """The default pipeline's and ``--target onnxruntime``'s lowering against the native kernel:
    its form and the medians (seconds, and per-round ratios)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    batch, steps = shape[1 - time_axis], shape[time_axis]
    lens = rng.integers(0, steps + 1, size=batch).astype(np.int64)
    native = models(shape, time_axis, kind, lens)["native"]
    built = {
        "native": native,
        "portable": seqlower.lower(native),
        "onnxruntime": seqlower.lower(native, target="onnxruntime", check=False),
    }
    feeds: dict[str, np.ndarray] = {"x": x, "lens": lens} if kind == "input" else {"x": x}
    runners = {}
    expected = None
    for name, model in built.items():
        runners[name], out = bound(model, threads, feeds)
        if expected is None:
            expected = out
        assert np.array_equal(out, expected), f"{name} != native"
    clock = time.thread_time if cpu and threads == 1 else time.perf_counter
    times = interleaved(runners, repeat, clock)
    result = {name: statistics.median(values) for name, values in times.items()}
    for name in ("portable", "onnxruntime"):
        result[f"{name}/native"] = round_ratio(times, name, "native")
    return _form_of(built["portable"]), result


def portable_table(args: argparse.Namespace) -> None:
    repeat = 30 if args.quick else args.repeat or 200
    print(
        f"onnxruntime {ort.__version__}, float32, median of {repeat} interleaved runs"
        f"{', 1-thread runs by CPU time' if args.cpu_time else ''}; lengths: input (a graph "
        "input, time and batch symbolic), constant (static dims), full (tf2onnx's full length)"
    )
    print(
        f"{'shape':>14} {'layout':>11} {'lens':>8} {'form':>14} {'thr':>3} {'native ms':>10} "
        f"{'portable ms':>12} {'port/nat':>9} {'ort-target/nat':>15}"
    )
    worst: dict[int, tuple[float, str]] = {}
    for shape in portable_shapes():
        for time_axis in (0, 1):
            layout = "time-major" if time_axis == 0 else "batch-major"
            for kind in args.kinds:
                for threads in (1, 2):
                    form, t = portable(shape, time_axis, kind, threads, repeat, args.cpu_time)
                    ratio = t["portable/native"]
                    label = f"{'x'.join(map(str, shape))} {layout} {kind}"
                    if ratio > worst.get(threads, (0.0, ""))[0]:
                        worst[threads] = (ratio, label)
                    print(
                        f"{'x'.join(map(str, shape)):>14} {layout:>11} {kind:>8} {form:>14} "
                        f"{threads:>3} {t['native'] * 1e3:>10.3f} {t['portable'] * 1e3:>12.3f} "
                        f"{ratio:>9.3f} {t['onnxruntime/native']:>15.3f}",
                        flush=True,
                    )
    for threads, (ratio, label) in sorted(worst.items()):
        print(f"worst portable/native, {threads} thread(s): {ratio:.3f} ({label})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, help="runs per cell (300; --portable 200)")
    parser.add_argument(
        "--kinds", nargs="+", default=["input", "constant", "full"], help="kinds of lengths"
    )
    parser.add_argument("--ranks", nargs="+", type=int, default=[3, 4])
    parser.add_argument("--inner", action="store_true", help="issue 20's inner sizes 1, 8, 256")
    parser.add_argument("--form", default="gathernd", choices=["gathernd", "gather"])
    parser.add_argument("--portable", action="store_true", help="issue 33 item 3's table")
    parser.add_argument("--quick", action="store_true", help="--portable with 30 runs a cell")
    parser.add_argument("--cpu-time", action="store_true", help="1-thread runs by CPU time")
    args = parser.parse_args()
    if args.portable:
        portable_table(args)
        return
    args.repeat = args.repeat or 300
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
