"""Issue 20, item 3: could another decomposition load fast when no two reversals share an index?

Run by hand (not a test):  .venv/bin/python benchmarks/reverse_sequence_alternatives.py

The worst case of ``reverse_sequence_load.py`` (each layer's time length cut by a ``Slice`` to an
end given as an input, so nothing proves two layers' sizes equal) with every reversal written in
one of these forms, all time-major, lengths ``lens`` a graph input, and timed as onnxruntime
sessions with default options (median of interleaved rounds, ratio to the original):

- ``original``: the ``ReverseSequence`` nodes.
- ``seqlower``: what ``seqlower.lower`` writes (the time-dependent part of the index per node,
  13 nodes each, and one lengths part shared by all).
- ``head+scatter``: a head index over max(lens) steps, computed once from the lengths (rows past
  the longest length stay where they are), and per node ``ScatterND(x, head_rows,
  GatherND(x, head_sources))``: 2 nodes.
- ``head+tail``: the same head, and per node the identity tail ``Range(max(lens), T)`` paired
  with the batch coordinates, concatenated onto it for one ``GatherND``: 8 nodes.
- ``shared``: one ``GatherND`` per node with an index computed once (what provable sizes
  give; wrong here when the sizes differ, timed as the floor).

Then one run-time comparison on a 1M-element input: the ``head+scatter`` form against seqlower's
``GatherND`` and the native kernel. These forms are measurements only; seqlower writes none of
them (the README says why).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnx
import onnxruntime as ort

import seqlower

IR_VERSION = 8

# The head, computed once from the lengths: sources [L, B, 2] and rows [L, B, 2] of the first
# L = max(lens) steps (max over lens and 0, so that no lengths give L = 0).
HEAD = """
    zero_s = Constant<value = int64 {0}>()
    one_s = Constant<value = int64 {1}>()
    one_1 = Constant<value = int64[1] {1}>()
    axes12 = Constant<value = int64[2] {1, 2}>()
    axes02 = Constant<value = int64[2] {0, 2}>()
    pair_t = Constant<value = int64[2] {1, 0}>()
    zero_111 = Constant<value = int64[1, 1, 1] {0}>()
    lens0 = Concat<axis = 0>(lens, zero_1)
    longest = ReduceMax<keepdims = 0>(lens0)
    steps = Range(zero_s, longest, one_s)
    steps_c = Unsqueeze(steps, axes12)
    count = Shape(lens)
    count_s = Squeeze(count)
    batches = Range(zero_s, count_s, one_s)
    batches_c = Unsqueeze(batches, axes02)
    lens_c = Unsqueeze(lens, axes02)
    inside = Less(steps_c, lens_c)
    last = Sub(lens_c, one_1)
    mirrored = Sub(last, steps_c)
    source_t = Where(inside, mirrored, steps_c)
    lead = Shape(source_t)
    batch_e = Expand(batches_c, lead)
    sources = Concat<axis = -1>(source_t, batch_e)
    steps_e = Expand(steps_c, lead)
    rows = Concat<axis = -1>(steps_e, batch_e)
    batch_shape = Shape(batches_c)
    zeros_b = Expand(zero_111, batch_shape)
    batch_pairs = Concat<axis = -1>(zeros_b, batches_c)
"""


def layers(nodes: int, form: str, inner: int = 64) -> onnx.ModelProto:
    lines = []
    previous = "x"
    for i in range(nodes):
        p = previous
        if form in ("original", "seqlower"):
            lines.append(f"r{i} = ReverseSequence<batch_axis = 1, time_axis = 0>({p}, lens)")
        elif form == "head+scatter":
            lines += [f"u{i} = GatherND({p}, sources)", f"r{i} = ScatterND({p}, rows, u{i})"]
        elif form == "head+tail":
            lines += [
                f"t{i} = Shape<start = 0, end = 1>({p})",
                f"ts{i} = Squeeze(t{i})",
                f"tail{i} = Range(longest, ts{i}, one_s)",
                f"tc{i} = Unsqueeze(tail{i}, axes12)",
                f"tp{i} = Mul(tc{i}, pair_t)",
                f"tb{i} = Add(tp{i}, batch_pairs)",
                f"ix{i} = Concat<axis = 0>(sources, tb{i})",
                f"r{i} = GatherND({p}, ix{i})",
            ]
        else:  # shared
            lines.append(f"r{i} = GatherND({p}, sources)")
        lines += [f"a{i} = Add(r{i}, x)", f"h{i} = Slice(a{i}, zero_1, ends, zero_1)"]
        previous = f"h{i}"
    head = "" if form in ("original", "seqlower") else HEAD
    body = "\n    ".join(lines)
    text = f"""<ir_version: {IR_VERSION}, opset_import: ["" : 17]>
g (float[T, N, {inner}] x, int64[N] lens, int64[1] ends) => (float[T, N, {inner}] y) {{
    zero_1 = Constant<value = int64[1] {{0}}>()
    {head}
    {body}
    y = Identity({previous})
}}"""
    model = onnx.parser.parse_model(text)
    if form == "seqlower":
        model = seqlower.lower(model)
    onnx.checker.check_model(model)
    return model


def load_seconds(data: bytes) -> float:
    start = time.perf_counter()
    ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return time.perf_counter() - start


def check(models: dict[str, onnx.ModelProto]) -> None:
    """Every form but ``shared`` gives the original's numbers (``shared`` only when no layer is
    cut, as here with ends past T)."""
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal((6, 3, 64)).astype(np.float32),
        "lens": np.array([6, 0, 4], np.int64),
        "ends": np.array([6], np.int64),
    }
    want = ort.InferenceSession(models["original"].SerializeToString()).run(None, feeds)[0]
    for name, model in models.items():
        got = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
        assert np.array_equal(got, want), name


def run_time(repeat: int) -> dict[str, float]:
    one = {form: layers(1, form, inner=8) for form in ("original", "seqlower", "head+scatter")}
    rng = np.random.default_rng(1)
    feeds = {
        "x": rng.standard_normal((2048, 64, 8)).astype(np.float32),
        "lens": rng.integers(0, 2049, 64).astype(np.int64),
        "ends": np.array([2048], np.int64),
    }
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    sessions = {
        name: ort.InferenceSession(
            m.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        for name, m in one.items()
    }
    times: dict[str, list[float]] = {name: [] for name in sessions}
    for _ in range(repeat):
        for name, session in sessions.items():
            start = time.perf_counter()
            session.run(None, feeds)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="100,200,400,800")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    forms = ("original", "seqlower", "head+scatter", "head+tail", "shared")
    check({form: layers(3, form) for form in forms})
    print(f"onnxruntime {ort.__version__}, default session options, load time / original's")
    print(f"{'nodes':>6} {'original s':>11} " + " ".join(f"{f:>13}" for f in forms[1:]))
    for n in (int(v) for v in args.nodes.split(",")):
        data = {form: layers(n, form).SerializeToString() for form in forms}
        times: dict[str, list[float]] = {form: [] for form in forms}
        for _ in range(args.repeat):
            for form in forms:
                times[form].append(load_seconds(data[form]))
        base = statistics.median(times["original"])
        ratios = [statistics.median(times[f]) / base for f in forms[1:]]
        print(f"{n:>6} {base:>11.3f} " + " ".join(f"{r:>12.2f}x" for r in ratios))
    t = run_time(max(20, args.repeat * 10))
    print(
        "run time, 2048x64x8, random lengths, 1 thread: native "
        f"{t['original'] * 1e3:.2f} ms, seqlower GatherND {t['seqlower'] / t['original']:.2f}x, "
        f"head+scatter {t['head+scatter'] / t['original']:.2f}x"
    )


if __name__ == "__main__":
    main()
