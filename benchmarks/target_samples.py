"""Real exports lowered for each deploy target, run on that target's runtime and compared with the
framework's own outputs (the ``.npz`` beside each model).

Run by hand (each tract/OpenVINO run is in a child process: tract aborts the process on some
models):

    .venv/bin/python benchmarks/target_samples.py ../shared/realworld-samples

``--converters tinygrad,onnx2torch`` (or ``tvm``, from a venv with ``seqlower[tvm]``) measures
the converter targets instead, through the check's own oracles, in this process: the models of
the folder, plus with ``--corpus`` the test corpus (``tests/*_cases.py``, ``tests/data``) and
ONNX's own node cases with Loop, Scan, If, Sequence*, Optional* or ReverseSequence (expected
outputs: the case's own, else onnxruntime's on the original). ``--static-shapes`` lowers each
with ``--overwrite-input-shape`` fixing every tensor input to the shape of its given input.
For each: the original run there, then ``seqlower MODEL -o OUT --target T`` (``lower_file``,
the check included, generated inputs) and OUT run there on the model's inputs. It counts what
runs and matches before and after, and ``exit 0, wrong`` (written, yet failing or differing
there: must be 0); ``exit 0, as the export`` is a file that differs from the framework's outputs
as the original does on onnxruntime (the export's fault, as paddle2onnx's dropped LSTM lengths,
which seqlower warns of):

    .venv/bin/python benchmarks/target_samples.py ../shared/realworld-samples --corpus \
        --converters tinygrad,onnx2torch

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
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RUNTIMES = ("onnxruntime", "openvino", "tract")
_TRACT_DTYPES = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64", "bool": "bool"}


def feeds_and_expected(npz: Path) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """A sample's inputs by name and outputs in order, from either archive layout (``input.``/
    ``output.`` keys, or ``__inputs__``/``__outputs__`` name lists; tests read them too)."""
    data = np.load(npz, allow_pickle=False)
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


Feeds = dict[str, np.ndarray]
Case = tuple[Any, Feeds, "list[np.ndarray] | None"]  # model, inputs, expected (None: ORT's)


def corpus_cases() -> dict[str, Case]:
    """The test corpus and ONNX's node cases of the ops seqlower lowers."""
    import re

    from onnx.backend.test.case.node import collect_testcases

    from tests import loop_cases, sequence_free_cases, sequence_map_cases

    found: dict[str, Case] = {}
    for prefix, table in (
        ("loop", loop_cases.CASES),
        ("sequence_free", sequence_free_cases.CASES),
        ("sequence_map", sequence_map_cases.CASES),
    ):
        for name, make in table.items():
            model, feeds = make()
            found[f"{prefix}/{name}"] = (model, dict(feeds), None)
    pattern = re.compile(r"loop|scan|_if|sequence|optional|reversesequence")
    for case in collect_testcases():
        if not pattern.search(case.name) or "_expanded" in case.name or not case.data_sets:
            continue
        inputs, outputs = case.data_sets[0]
        names = [i.name for i in case.model.graph.input]
        found[f"onnx/{case.name}"] = (
            case.model,
            dict(zip(names, inputs, strict=False)),
            list(outputs),
        )
    return found


def folder_cases(folder: Path) -> dict[str, Case]:
    import onnx

    found: dict[str, Case] = {}
    for path in sorted(folder.rglob("*.onnx")):
        npz = path.with_suffix(".npz")
        if npz.exists():
            feeds, expected = feeds_and_expected(npz)
            name = str(path.relative_to(folder).with_suffix(""))
            found[name] = (onnx.load(path), feeds, expected)
    return found


def compare(expected: list[Any], actual: list[Any]) -> str:
    if len(expected) != len(actual):
        return f"DIFF ({len(actual)} outputs, expected {len(expected)})"
    for want, have in zip(expected, actual, strict=True):
        if isinstance(want, list) or isinstance(have, list):
            if not isinstance(want, list) or not isinstance(have, list):
                return "DIFF (sequence)"
            verdict = compare(want, have)
            if verdict != "ok":
                return verdict
            continue
        want, have = np.asarray(want), np.asarray(have)
        if want.shape != have.shape:
            return f"DIFF (shape {list(have.shape)}, expected {list(want.shape)})"
        if want.dtype.kind in "fc":
            if not np.allclose(have, want, rtol=1e-4, atol=1e-5, equal_nan=True):
                return f"DIFF (max abs {np.nanmax(np.abs(have - want)):.3g})"
        elif not np.array_equal(have, want):
            return "DIFF"
    return "ok"


def on_oracle(name: str, model: Any, feeds: Feeds, expected: list[Any], seconds: int) -> str:
    """Run ``model`` on the check's oracle ``name`` (in this process, under an alarm)."""
    import signal

    from seqlower.errors import first_line
    from seqlower.verification.runtimes import TARGET_ORACLES

    def alarm(*_: object) -> None:
        raise TimeoutError(f"over {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        runner = TARGET_ORACLES[name].load(model)
        actual = runner.run(feeds)
    except Exception as e:  # a refusal of any kind is the finding
        return f"fails: {type(e).__name__}: {first_line(e)[:110]}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return compare(expected, actual)


def fixed_shapes(model: Any, feeds: Feeds) -> dict[str, tuple[int, ...]]:
    """``--overwrite-input-shape`` for every tensor input: the shape of its given input."""
    tensors = {i.name for i in model.graph.input if i.type.HasField("tensor_type")}
    return {
        name: tuple(np.asarray(value).shape)
        for name, value in feeds.items()
        if name in tensors and isinstance(value, np.ndarray)
    }


def converters(
    cases: dict[str, Case], names: list[str], seconds: int, static: bool = False
) -> dict[str, dict]:
    import onnx

    from seqlower.errors import SeqlowerError, first_line
    from seqlower.job import LowerOptions, lower_file
    from seqlower.verification.runtimes import ORACLES, load_runner

    cells: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for label, (model, feeds, expected) in cases.items():
            if expected is None:
                runner, _ = load_runner(model, ORACLES)
                if runner is None:
                    continue
                try:
                    expected = runner.run(feeds)
                except Exception:
                    continue
            source = Path(folder) / "model.onnx"
            onnx.save(model, source)
            row = cells.setdefault(label, {})
            for name in names:
                row[f"{name} original"] = on_oracle(name, model, feeds, expected, seconds)
                out = Path(folder) / f"{name}.onnx"
                out.unlink(missing_ok=True)
                try:
                    options = LowerOptions(
                        targets=(name,),
                        overwrite_input_shapes=fixed_shapes(model, feeds) if static else {},
                    )
                    result = lower_file(source, out, options)
                    code = int(result.exit_code)
                    why = "" if result.verification is None else result.verification.reason
                except SeqlowerError as e:
                    code, why = int(e.exit_code), first_line(e)
                if code != 0 or not out.exists():
                    row[f"{name} --target"] = f"exit {code}: {why[:110]}"
                    continue
                verdict = on_oracle(name, onnx.load(out), feeds, expected, seconds)
                if verdict == "ok":
                    row[f"{name} --target"] = verdict
                elif on_oracle("onnxruntime", model, feeds, expected, seconds) != "ok":
                    # the check proved OUT computes what the original does on the target: the
                    # export itself differs from the framework (paddle2onnx's dropped lengths)
                    row[f"{name} --target"] = f"exit 0, as the export: {verdict}"
                else:
                    row[f"{name} --target"] = f"exit 0, wrong: {verdict}"
            print(label, json.dumps(row, indent=1), flush=True)
    return cells


def converter_totals(cells: dict[str, dict], names: list[str]) -> None:
    from collections import Counter

    for name in names:
        before = sum(row[f"{name} original"] == "ok" for row in cells.values())
        after = sum(row[f"{name} --target"] == "ok" for row in cells.values())
        wrong = sum(row[f"{name} --target"].startswith("exit 0, wrong") for row in cells.values())
        export = sum(
            row[f"{name} --target"].startswith("exit 0, as the export") for row in cells.values()
        )
        print(
            f"{name}: {before}/{len(cells)} as exported -> {after}/{len(cells)} after --target; "
            f"exit 0, wrong: {wrong}; exit 0 where the export itself differs from the framework "
            f"on onnxruntime: {export}"
        )
        for kind in ("original", "--target"):
            classes = Counter(
                _failure_class(row[f"{name} {kind}"])
                for row in cells.values()
                if row[f"{name} {kind}"] != "ok"
            )
            for words, count in classes.most_common():
                print(f"    {kind:9} {count:3}  {words}")


def _failure_class(cell: str) -> str:
    """A cell's failure without its model-specific details (names, numbers)."""
    import re

    text = re.sub(r"(?<![A-Za-z])\d+(\.\d+)*(e-?\d+)?(\+cpu)?", "N", cell)
    return text[:140]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--json", type=Path, help="also write the cells here")
    parser.add_argument("--converters", help="comma-separated oracle names (tinygrad, ...)")
    parser.add_argument("--corpus", action="store_true", help="also the test and ONNX cases")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per converter run")
    parser.add_argument(
        "--static-shapes",
        action="store_true",
        help="lower with --overwrite-input-shape set to each input's shape in the .npz",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.converters:
        names = args.converters.split(",")
        cases = folder_cases(args.folder)
        if args.corpus:
            cases.update(corpus_cases())
        cells = converters(cases, names, args.timeout, args.static_shapes)
        converter_totals(cells, names)
        if args.json:
            args.json.write_text(json.dumps(cells, indent=1))
        return
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
