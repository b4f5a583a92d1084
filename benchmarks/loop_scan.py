"""The Scan form of a tf2onnx while-loop against the original Loop, on onnxruntime and OpenVINO.

Run by hand:

    .venv/bin/python benchmarks/loop_scan.py --repeat 50

A ``dynamic_rnn``-shaped loop (counter + 1 < limit through float Casts, ANDed with
iteration < max; a TensorArray read as ``Gather(x, counter)``, a tanh RNN cell with a MatMul, the
output written as a scan output) over T steps of a [B, H] state, as tf2onnx writes it, then the
same model after ``seqlower.lower(model, passes=[FORM])`` for each form: ``loop-to-scan`` (every
outer read carried as a state, what OpenVINO's Scan import needs), ``loop-to-scan-reads`` (outer
reads left as reads, what tract takes) and ``loop-to-scan-rows`` (the TensorArray read as a scan
input). All run interleaved in one process with the CPU provider; the ratio is Scan/Loop,
medians of per-round ratios. Then, on OpenVINO (CPU, f32), the Loop as the ``openvino`` target
leaves it (strict, ``strict-loop-bodies``) against the ``loop-to-scan`` Scan: why that target
keeps Loops.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
from onnx_ir.passes.common import TopologicalSortPass

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def model(hidden: int) -> onnx.ModelProto:
    text = f"""
    <ir_version: 8, opset_import: ["" : 17]>
    rnn (float[T, B, {hidden}] x, float[{hidden}, {hidden}] w) => (float[T, B, {hidden}] ys) {{
        shape = Shape(x)
        zero = Constant<value = int64[1] {{0}}>()
        t64 = Gather<axis = 0>(shape, zero)
        t32 = Cast<to = 6>(t64)
        t = Squeeze(t32, zero)
        m = Cast<to = 7>(t)
        fzero = Constant<value = float {{0.0}}>()
        f_t = Cast<to = 1>(t)
        cond0 = Less(fzero, f_t)
        time = Constant<value = int32 {{0}}>()
        b = Gather<axis = 0>(shape, one)
        one = Constant<value = int64[1] {{1}}>()
        h_shape = Concat<axis = 0>(b, width)
        width = Constant<value = int64[1] {{{hidden}}}>()
        h0 = ConstantOfShape<value = float[1] {{0.0}}>(h_shape)
        time_out, h, t_out, ys = Loop(m, cond0, time, h0, t) <body = body (
            int64 i, bool cond_in, int32 now, float[B, {hidden}] state, int32 stop
        ) => (bool cond_out, int32 later, float[B, {hidden}] new_state, int32 stop_out,
              float[B, {hidden}] out) {{
            inc = Constant<value = int32 {{1}}>()
            later = Add(now, inc)
            step = Gather<axis = 0>(x, now)
            mixed = MatMul(state, w)
            sum = Add(step, mixed)
            new_state = Tanh(sum)
            out = Identity(new_state)
            f_later = Cast<to = 1>(later)
            f_stop = Cast<to = 1>(stop)
            c1 = Less(f_later, f_stop)
            f_i = Cast<to = 1>(i)
            f_t_in = Cast<to = 1>(t)
            c2 = Less(f_i, f_t_in)
            cond_out = And(c2, c1)
            stop_out = Identity(stop)
        }}>
    }}
    """
    parsed = onnx.parser.parse_model(text)
    ir_model = ir.serde.deserialize_model(parsed)
    TopologicalSortPass()(ir_model)
    return ir.serde.serialize_model(ir_model)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--no-openvino", dest="openvino", action="store_false", help="onnxruntime only"
    )
    args = parser.parse_args()
    import onnxruntime as ort

    import seqlower

    print(f"onnxruntime {ort.__version__}, {args.threads} thread(s), medians of {args.repeat}")
    names = ("loop-to-scan", "loop-to-scan-reads", "loop-to-scan-rows")
    print("| T x B x H | Loop | " + " | ".join(f"Scan ({n}) | ratio" for n in names) + " |")
    print("|---|---|" + "---|---|" * len(names))
    openvino_rows: list[tuple[str, tuple[float, float, float]]] = []
    for steps, batch, hidden in [(64, 8, 32), (256, 16, 64), (1024, 4, 16), (128, 64, 256)]:
        original = model(hidden)
        forms = [seqlower.lower(original, passes=[p]) for p in names]
        options = ort.SessionOptions()
        options.intra_op_num_threads = args.threads
        options.log_severity_level = 3
        sessions = [
            ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
            for m in (original, *forms)
        ]
        rng = np.random.default_rng(0)
        feeds = {
            "x": rng.standard_normal((steps, batch, hidden)).astype(np.float32),
            "w": (rng.standard_normal((hidden, hidden)) / hidden).astype(np.float32),
        }
        results = [s.run(None, feeds)[0] for s in sessions]
        for result in results[1:]:
            np.testing.assert_allclose(result, results[0], rtol=1e-5, atol=1e-6)
        times: list[list[float]] = [[] for _ in sessions]
        for _ in range(args.repeat):
            for k, session in enumerate(sessions):
                start = time.perf_counter()
                session.run(None, feeds)
                times[k].append(time.perf_counter() - start)
        cells = [f"{statistics.median(times[0]) * 1e3:.2f} ms"]
        for form in times[1:]:
            ratio = statistics.median(s / loop for loop, s in zip(times[0], form, strict=True))
            cells += [f"{statistics.median(form) * 1e3:.2f} ms", f"{ratio:.2f}"]
        print(f"| {steps}x{batch}x{hidden} | " + " | ".join(cells) + " |")
        if args.openvino:
            strict = seqlower.lower(original, target="openvino", check=False)
            openvino_rows.append(
                (f"{steps}x{batch}x{hidden}", _openvino_times(strict, forms[0], feeds, args))
            )
    if args.openvino:
        import openvino

        print(f"\nOpenVINO {openvino.__version__}, {args.threads} thread(s), f32")
        print("| T x B x H | Loop (`--target openvino`) | Scan (`loop-to-scan`) | Scan/Loop |")
        print("|---|---|---|---|")
        for shape, (loop, scan, ratio) in openvino_rows:
            print(f"| {shape} | {loop * 1e3:.2f} ms | {scan * 1e3:.2f} ms | {ratio:.2f} |")


def _openvino_times(
    loop: onnx.ModelProto, scan: onnx.ModelProto, feeds: dict[str, np.ndarray], args: Any
) -> tuple[float, float, float]:
    """Median times of ``loop`` and ``scan`` on OpenVINO, interleaved, and the median ratio."""
    import openvino

    core = openvino.Core()
    config = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": args.threads}
    requests = []
    for model in (loop, scan):
        compiled = core.compile_model(core.read_model(model.SerializeToString()), "CPU", config)
        requests.append(compiled.create_infer_request())
    results = [np.asarray(r.infer(feeds)[0]) for r in requests]
    np.testing.assert_allclose(results[1], results[0], rtol=1e-5, atol=1e-6)
    times: list[list[float]] = [[], []]
    for _ in range(args.repeat):
        for k, request in enumerate(requests):
            start = time.perf_counter()
            request.infer(feeds)
            times[k].append(time.perf_counter() - start)
    ratio = statistics.median(s / lp for lp, s in zip(times[0], times[1], strict=True))
    return statistics.median(times[0]), statistics.median(times[1]), ratio


if __name__ == "__main__":
    main()
