"""Which runtimes run the lowered ReverseSequence models, and match onnxruntime's native kernel.

Run by hand (not in CI: onnx2torch and onnx2tf need torch / TensorFlow, gigabytes):

    .venv/bin/python benchmarks/runtime_matrix.py            # the runtimes installed here
    .venv/bin/python benchmarks/runtime_matrix.py --markdown # the table of docs/measurements.md

Every model is the original (with ``ReverseSequence``) and its lowering; the expected outputs are
onnxruntime's on the original. A cell is ``ok`` (ran and matched: bit-exact here, since the op
only moves data), ``DIFF`` (ran, wrong numbers), or the first words of the runtime's refusal.
The last column sums the lowered models that ran and matched. onnxruntime, OpenVINO and tract
come with ``pip install -e '.[runtimes]'``; onnx2torch with ``pip install torch==2.13.0
onnx2torch``; onnx2tf with ``pip install tensorflow onnx2tf`` (each in a venv of its own).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import seqlower
from tests.passes.test_reverse_sequence_portable import (
    NOT_PROVEN,
    TF_BIDIRECTIONAL,
    TF_REVERSE,
    feeds_for,
    general_model,
    parse,
)
from tests.runtimes import RUNTIMES as CI_RUNTIMES

Feeds = dict[str, np.ndarray]
Runner = Callable[[onnx.ModelProto, Feeds], list[np.ndarray]]


def cases() -> dict[str, tuple[onnx.ModelProto, Feeds]]:
    """The models: what tf2onnx writes, the general forms, opsets, ONNX's own cases."""
    rng = np.random.default_rng(0)
    found: dict[str, tuple[onnx.ModelProto, Feeds]] = {}
    found["tf.reverse (Slice)"] = (
        parse(TF_REVERSE),
        {"x": rng.standard_normal((3, 5, 2)).astype(np.float32)},
    )
    found["Bidirectional backward (Slice)"] = (
        parse(TF_BIDIRECTIONAL),
        {"x": rng.standard_normal((5, 3, 2)).astype(np.float32)},
    )
    found["lengths not provably full"] = (
        parse(NOT_PROVEN["shorter"]),
        {"x": rng.standard_normal((4, 3, 2)).astype(np.float32)},
    )
    for time_axis in (0, 1):
        layout = "time-major" if time_axis == 0 else "batch-major"
        shape = (4, 3, 2) if time_axis == 0 else (3, 4, 2)
        for kind, static in (("input", False), ("int32", False), ("constant", True)):
            name = f"{layout}, lengths {kind}{', static' if static else ''}"
            found[name] = (
                parse(general_model("float", time_axis, kind, static=static)),
                feeds_for("float", time_axis, kind, [4, 0, 2], shape),
            )
        found[f"{layout}, lengths input, static slice"] = (
            parse(general_model("float", time_axis, "input", static_slice=True)),
            feeds_for("float", time_axis, "input", [4, 0, 2], shape),
        )
    for opset in (11, 13):
        found[f"opset {opset}, lengths input"] = (
            parse(general_model("float", 0, "input"), opset=opset),
            feeds_for("float", 0, "input", [1, 4, 3], (4, 3, 2)),
        )
    from onnx.backend.test.case.node import collect_testcases

    for case in collect_testcases():
        if case.name in ("test_reversesequence_time", "test_reversesequence_batch"):
            model = case.model
            model.ir_version = 8
            inputs, _ = case.data_sets[0]
            feeds = {i.name: np.asarray(v) for i, v in zip(model.graph.input, inputs, strict=True)}
            found[f"ONNX {case.name[5:]}"] = (model, feeds)
    return found


def _onnx2torch(model: onnx.ModelProto, feeds: Feeds) -> list[np.ndarray]:
    import torch
    from onnx2torch import convert

    module = convert(model)
    names = [i.name for i in model.graph.input]
    with torch.no_grad():
        out = module(*[torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in names])
    outs = out if isinstance(out, list | tuple) else [out]
    return [o.numpy() for o in outs]


def _onnx2tf(model: onnx.ModelProto, feeds: Feeds) -> list[np.ndarray]:
    import onnx2tf

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.onnx"
        onnx.save(model, path)
        with contextlib.redirect_stdout(io.StringIO()):
            keras_model = onnx2tf.convert(
                input_onnx_file_path=str(path),
                output_folder_path=str(Path(folder) / "tf"),
                non_verbose=True,
                keep_shape_absolutely_input_names=[i.name for i in model.graph.input],
                disable_strict_mode=False,
            )
        names = [i.name for i in model.graph.input]
        out = keras_model([feeds[n] for n in names])
        outs = out if isinstance(out, list | tuple) else [out]
        return [np.asarray(o) for o in outs]


def runners() -> dict[str, Runner]:
    found: dict[str, Runner] = {}
    for name, (module, runner) in CI_RUNTIMES.items():
        if importlib.util.find_spec(module) is not None:
            found[name] = runner
    if importlib.util.find_spec("onnx2torch") is not None:
        found["onnx2torch"] = _onnx2torch
    if importlib.util.find_spec("onnx2tf") is not None:
        found["onnx2tf"] = _onnx2tf
    return found


def cell(runner: Runner, model: onnx.ModelProto, feeds: Feeds, want: list[np.ndarray]) -> str:
    try:
        got = runner(model, feeds)
    except Exception as e:  # a refusal of any kind is the finding
        words = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if "Unimplemented(ReverseSequence)" in words:
            return "no ReverseSequence"
        return f"fails: {words[:48]}"
    same = len(got) == len(want) and all(
        np.asarray(g).shape == w.shape and np.array_equal(np.asarray(g), w, equal_nan=True)
        for g, w in zip(got, want, strict=False)
    )
    return "ok" if same else "DIFF"


def versions(names: list[str]) -> str:
    from importlib.metadata import version

    parts = [f"seqlower {seqlower.__version__}"]
    packages = {"tract-symbolic": "tract", "onnx2torch": "onnx2torch", "onnx2tf": "onnx2tf"}
    for name in names:
        package = packages.get(name, name)
        with contextlib.suppress(Exception):
            parts.append(f"{package} {version(package)}")
    for extra in ("torch", "tensorflow"):
        with contextlib.suppress(Exception):
            parts.append(f"{extra} {version(extra)}")
    return ", ".join(dict.fromkeys(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    run_on = runners()
    names = list(run_on)
    print(versions(names))
    reference = run_on["onnxruntime"]
    rows = []
    totals = dict.fromkeys(names, 0)
    models = cases()
    for label, (model, feeds) in models.items():
        want = reference(model, feeds)
        lowered = seqlower.lower(model)
        row = [label]
        for name in names:
            original = cell(run_on[name], model, feeds, want)
            low = cell(run_on[name], lowered, feeds, want)
            totals[name] += low == "ok"
            row.append(f"{original} / {low}" if original != low else low)
        rows.append(row)
    header = ["model (original / lowered)", *names]
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
        print("| lowered ok | " + " | ".join(f"{totals[n]}/{len(models)}" for n in names) + " |")
    else:
        for row in rows:
            print(row[0])
            for name, value in zip(names, row[1:], strict=True):
                print(f"    {name:>15}: {value}")
        print("lowered ok: " + ", ".join(f"{n} {totals[n]}/{len(models)}" for n in names))


if __name__ == "__main__":
    main()
