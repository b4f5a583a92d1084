"""The newest version of each op a runtime implements, measured: one small model per op and
ONNX version (the model's opset set to each ``since_version`` of the op, the op alone in it),
run on the runtime and compared with onnx.reference.

Run by hand (each run is a child process: tract aborts the process on some models):

    .venv/bin/python benchmarks/op_versions.py [--runtimes onnxruntime openvino tract]

Prints, per runtime and op, every version tried with ``ok`` or the runtime's first words, and
the newest version that runs and matches: what ``seqlower/targets.py`` records in a row's
``op_versions`` where it is older than onnx's newest (a model whose opset resolves the op to a
newer version is re-stamped, ``restamp-op-versions``, when ONNX's change log says only type
lists changed in between).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RUNTIMES = ("onnxruntime", "openvino", "tract")

#: op -> (graph text with ``{opset}`` left to fill, feeds)
_MODELS: dict[str, str] = {
    "Scan": """
        <ir_version: 10, opset_import: ["" : {opset}]>
        g (float[2] s0, float[3, 2] xs) => (float[2] s, float[3, 2] ys) {{
            s, ys = Scan <num_scan_inputs = 1, body = b (float[2] a, float[2] x) => (float[2] c,
                float[2] d) {{ c = Add(a, x) d = Mul(c, x) }}> (s0, xs)
        }}""",
    "Loop": """
        <ir_version: 10, opset_import: ["" : {opset}]>
        g (int64 m, float[2] s0) => (float[2] s) {{
            t = Constant <value = bool {{1}}> ()
            s = Loop (m, t, s0) <body = b (int64 i, bool c, float[2] a) => (bool d, float[2] e) {{
                d = Identity(c) f = Cast <to = 1> (i) e = Add(a, f) }}>
        }}""",
    "If": """
        <ir_version: 10, opset_import: ["" : {opset}]>
        g (bool c, float[2] x) => (float[2] y) {{
            y = If (c) <then_branch = t () => (float[2] a) {{ a = Neg(x) }},
                        else_branch = e () => (float[2] b) {{ b = Abs(x) }}>
        }}""",
    "OptionalHasElement": """
        <ir_version: 10, opset_import: ["" : {opset}]>
        g (float[2] x) => (bool y) {{ y = OptionalHasElement(x) }}""",
    "OptionalGetElement": """
        <ir_version: 10, opset_import: ["" : {opset}]>
        g (float[2] x) => (float[2] y) {{ y = OptionalGetElement(x) }}""",
    "Optional": """
        <ir_version: 10, opset_import: ["" : {opset}]>
        g (float[2] x) => (float[2] y) {{ o = Optional(x) y = OptionalGetElement(o) }}""",
    "ReverseSequence": """
        <ir_version: 10, opset_import: ["" : {opset}]>
        g (float[3, 2] x, int64[2] n) => (float[3, 2] y) {{
            y = ReverseSequence <batch_axis = 1, time_axis = 0> (x, n)
        }}""",
}
_FEEDS: dict[str, dict[str, Any]] = {
    "Scan": {"s0": [1.0, 2.0], "xs": [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]},
    "Loop": {"m": np.int64(3), "s0": [1.0, 2.0]},
    "If": {"c": np.bool_(False), "x": [-1.0, 2.0]},
    "OptionalHasElement": {"x": [1.0, 2.0]},
    "OptionalGetElement": {"x": [1.0, 2.0]},
    "Optional": {"x": [1.0, 2.0]},
    "ReverseSequence": {"x": [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], "n": [3, 2]},
}


def versions(op: str) -> list[int]:
    """The op's ``since_version``s (its own and every opset that changed it)."""
    import onnx

    return sorted(
        {
            s.since_version
            for s in onnx.defs.get_all_schemas_with_history()
            if s.name == op and s.domain in ("", "ai.onnx")
        }
    )


def model(op: str, opset: int) -> Any:
    import onnx
    import onnx.parser

    proto = onnx.parser.parse_model(_MODELS[op].format(opset=opset))
    proto.ir_version = 10 if opset >= 21 else 8
    onnx.checker.check_model(proto, full_check=True)
    return proto


def feeds(op: str) -> dict[str, np.ndarray]:
    out = {}
    for name, value in _FEEDS[op].items():
        array = np.asarray(value)
        out[name] = array.astype(np.float32) if array.dtype == np.float64 else array
    return out


def try_one(runtime: str, op: str, opset: int) -> str:
    """In the child: the op's model at ``opset`` on ``runtime`` against onnx.reference."""
    from onnx.reference import ReferenceEvaluator

    from seqlower.verification.runtimes import load_target

    proto = model(op, opset)
    # onnx.reference's opset-15 OptionalGetElement returns the optional as a list
    want = [
        w[0] if isinstance(w, list) else w for w in ReferenceEvaluator(proto).run(None, feeds(op))
    ]
    try:
        got = load_target(runtime).load(proto).run(feeds(op))
    except Exception as e:
        return (str(e).strip().splitlines() or [type(e).__name__])[0][:110]
    same = all(
        np.asarray(a).shape == np.asarray(b).shape and np.allclose(a, b)
        for a, b in zip(got, want, strict=True)
    )
    return "ok" if same else "DIFF"


def _child(runtime: str, op: str, opset: int) -> str:
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); from benchmarks.op_versions import "
        f"try_one; print('VERDICT', try_one({runtime!r}, {op!r}, {opset}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("VERDICT "):
            return line[len("VERDICT ") :]
    return (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:110]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtimes", nargs="+", default=list(RUNTIMES), choices=RUNTIMES)
    parser.add_argument("--ops", nargs="+", default=list(_MODELS), choices=list(_MODELS))
    args = parser.parse_args()
    import onnx

    for runtime in args.runtimes:
        for op in args.ops:
            found = versions(op)
            # each version at the opset that introduced it, the newest also at onnx's newest
            # opset (a runtime may refuse an opset it does not know)
            opsets = sorted({*(v for v in found if v >= 9), onnx.defs.onnx_opset_version()})
            cells = {o: _child(runtime, op, o) for o in opsets}
            runs = [max(v for v in found if v <= o) for o, cell in cells.items() if cell == "ok"]
            newest = max(runs) if runs else None
            lag = "" if newest == found[-1] else f"   <- lags onnx's {found[-1]}"
            print(f"{runtime:12} {op:20} newest version that runs: {newest}{lag}")
            for o, cell in cells.items():
                version = max(v for v in found if v <= o)
                print(f"{'':14}opset {o:2} ({op}-{version}): {cell}")


if __name__ == "__main__":
    main()
