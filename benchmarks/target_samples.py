"""Real exports lowered for each deploy target, run on that target's runtime and compared with the
framework's own outputs (the ``.npz`` beside each model).

Run by hand (each tract/OpenVINO run is in a child process: tract aborts the process on some
models):

    .venv/bin/python benchmarks/target_samples.py ../shared/realworld-samples

For every ``*.onnx`` under the folder with a ``.npz`` beside it, and for each of onnxruntime,
OpenVINO and tract: the original on the runtime, then ``seqlower.lower(model, target=NAME)`` on it.
A cell is ``ok`` (ran, matched within rtol 1e-5 / atol 1e-6, bit-exact for integers), ``DIFF``,
``refused`` (seqlower named a blocker, exit 2 in the CLI) or the runtime's first words.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RUNTIMES = ("onnxruntime", "openvino", "tract")
_TRACT_DTYPES = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64", "bool": "bool"}


def feeds_and_expected(npz: Path) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    data = np.load(npz, allow_pickle=True)
    if "__inputs__" in data:
        feeds = {str(n): data[str(n)] for n in data["__inputs__"]}
        return feeds, [data[str(n)] for n in data["__outputs__"]]
    feeds = {k[len("input.") :]: data[k] for k in data.files if k.startswith("input.")}
    return feeds, [data[k] for k in data.files if k.startswith("output.")]


def run(runtime: str, path: str, npz: str) -> list[np.ndarray]:
    """The model's outputs on ``runtime`` (in this process)."""
    feeds, _ = feeds_and_expected(Path(npz))
    if runtime == "onnxruntime":
        import onnxruntime as ort

        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        return session.run(None, feeds)
    if runtime == "openvino":
        import openvino as ov

        compiled = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        result = compiled(feeds)
        return [np.asarray(result[o]) for o in compiled.outputs]
    import tract

    model = tract.onnx().load(path)
    arrays = list(feeds.values())
    for k, array in enumerate(arrays):
        dtype = _TRACT_DTYPES[str(array.dtype)]
        shape = ",".join(str(d) for d in array.shape)
        model.set_input_fact(k, f"{shape},{dtype}" if shape else dtype)
    outputs = model.into_model().into_runnable().run(arrays)
    return [o.to_numpy() for o in outputs]


def verdict(runtime: str, path: Path, npz: Path) -> str:
    """Run in a child process (tract panics abort it) and compare with the framework."""
    code = (
        "import sys, numpy as np; sys.path.insert(0, %r); from benchmarks.target_samples "
        "import run; out = run(%r, %r, %r); np.savez(%r, *out)"
    )
    with tempfile.TemporaryDirectory() as folder:
        result_path = Path(folder) / "out.npz"
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                code % (str(ROOT), runtime, str(path), str(npz), str(result_path)),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode != 0:
            lines = [
                line for line in proc.stderr.splitlines() if "Error" in line or "panicked" in line
            ]
            return (lines[-1] if lines else f"exit {proc.returncode}")[:90]
        got = np.load(result_path)
        actual = [got[f"arr_{k}"] for k in range(len(got.files))]
    _, expected = feeds_and_expected(npz)
    for want, have in zip(expected, actual, strict=True):
        if want.shape != have.shape:
            return "DIFF (shape)"
        if want.dtype.kind in "fc":
            if not np.allclose(have, want, rtol=1e-5, atol=1e-6):
                return "DIFF"
        elif not np.array_equal(have, want):
            return "DIFF"
    return "ok"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--json", type=Path, help="also write the cells here")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import onnx

    import seqlower

    cells: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for path in sorted(args.folder.rglob("*.onnx")):
            npz = path.with_suffix(".npz")
            if not npz.exists():
                continue
            name = str(path.relative_to(args.folder).with_suffix(""))
            row = cells.setdefault(name, {})
            for runtime in RUNTIMES:
                row[f"{runtime} original"] = verdict(runtime, path, npz)
                try:
                    lowered = seqlower.lower(onnx.load(path), target=runtime, check=False)
                except seqlower.SeqlowerError as e:
                    row[f"{runtime} --target"] = f"refused: {str(e)[:70]}"
                    continue
                out = Path(folder) / f"{path.stem}.{runtime}.onnx"
                onnx.save(lowered, out)
                row[f"{runtime} --target"] = verdict(runtime, out, npz)
            print(name, json.dumps(row, indent=1), flush=True)
    for runtime in RUNTIMES:
        for kind in ("original", "--target"):
            ok = sum(row[f"{runtime} {kind}"] == "ok" for row in cells.values())
            print(f"{runtime:12} {kind:9} {ok}/{len(cells)} run and match")
    if args.json:
        args.json.write_text(json.dumps(cells, indent=1))


if __name__ == "__main__":
    main()
