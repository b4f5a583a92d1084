"""onnxruntime's common-subexpression pass on chains of layers that read their input twice.

Run by hand (not a test):  .venv/bin/python benchmarks/ort_cse_paths.py [--layers 400,1600]

Not a seqlower measurement: it explains one. The pass (onnxruntime 1.32) hashes a node from its
inputs' hashes, each multiplied by an odd number. A value reached from the layer before by an
even number of paths (``Add(Neg(p), p)``: two) gets an even factor, so after about 64 such
layers every layer's nodes hash alike and the pass compares each node with all the earlier ones:
load time grows quadratically. Three paths a layer keep the factor odd. docs/measurements.md's
"ReverseSequence: speed and load time" uses these figures for the 2-node ReverseSequence forms (each
reads its input directly and through a ``GatherND``), which grow for this reason.
"""

from __future__ import annotations

import argparse
import statistics
import time

import onnx
import onnx.parser
import onnxruntime as ort

IR_VERSION = 8
LAYERS = {
    "one path": ["q{i} = Neg({p})", "a{i} = Add(q{i}, x)"],
    "two paths": ["q{i} = Neg({p})", "a{i} = Sum(q{i}, {p})"],
    "three paths": ["q{i} = Neg({p})", "w{i} = Abs({p})", "a{i} = Sum(q{i}, w{i}, {p})"],
}
CSE = "CommonSubexpressionElimination"


def chain(layers: int, kind: str) -> bytes:
    lines, previous = [], "x"
    for i in range(layers):
        lines += [line.format(i=i, p=previous) for line in LAYERS[kind]]
        lines.append(f"h{i} = Slice(a{i}, zero, ends, zero)")
        previous = f"h{i}"
    body = "\n    ".join(lines)
    return onnx.parser.parse_model(
        f"""<ir_version: {IR_VERSION}, opset_import: ["" : 17]>
g (float[T, N, 64] x, int64[1] ends) => (float[T, N, 64] y) {{
    zero = Constant<value = int64[1] {{0}}>()
    {body}
    y = Identity({previous})
}}"""
    ).SerializeToString()


def load_ms(data: bytes, disabled: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        ort.InferenceSession(data, providers=["CPUExecutionProvider"], disabled_optimizers=disabled)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="400,1600")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    ort.set_default_logger_severity(3)
    print(f"onnxruntime {ort.__version__}, load ms with the pass on / off (default options)")
    for layers in (int(v) for v in args.layers.split(",")):
        for kind in LAYERS:
            data = chain(layers, kind)
            on, off = load_ms(data, [], args.repeat), load_ms(data, [CSE], args.repeat)
            print(f"{layers:>6} layers, {kind:<12} {on:8.1f} / {off:8.1f}  ({on / off:.2f}x)")


if __name__ == "__main__":
    main()
