"""Real exports through a converter seqlower cannot run in CI (onnx2torch, TVM), before and
after ``--target`` (run by hand: the converter needs torch, gigabytes, in a venv of its own).

Two steps. First every model of a family folder is lowered for the target, the proof on the
converter included (so in a venv that has it and seqlower, e.g. ``PYTHONPATH=.``; a refusal is
recorded with its first line); ``--static-shapes`` lowers with ``--overwrite-input-shape`` set
to the shapes of the ``.npz`` inputs::

    PYTHONPATH=. /work/venvs/torch/bin/python benchmarks/families/converters.py lower \\
        /work/exports/torch /tmp/lowered --target onnx2torch [--static-shapes]

then the converter's venv (``/work/venvs/torch`` of ``torch_family.py`` plus
``pip install onnx2torch``) converts each original and each lowered model, runs it on the
framework's inputs and compares with the framework's outputs (``.npz`` beside each model)::

    /work/venvs/torch/bin/python benchmarks/families/converters.py run /work/exports/torch \\
        /tmp/lowered

A cell is ``ok`` (ran and matched to 1e-4), ``DIFF``, ``refused`` (seqlower said why) or the
first words of the converter's error.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np


def lower(folder: Path, out: Path, target: str, static: bool = False) -> None:
    """What ``seqlower MODEL -o OUT --target T --inputs MODEL.npz`` does (the opset the target
    needs included), the check run with the framework's inputs (and at their shapes, fixed by
    ``--overwrite-input-shape``, when ``static``)."""
    import onnx

    from seqlower.errors import SeqlowerError
    from seqlower.job import LowerOptions, lower_file
    from seqlower.verification import CheckOptions

    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(folder.glob("*.onnx")):
        shapes = {}
        if static:
            inputs, _ = _io(path, onnx.load(str(path), load_external_data=False))
            shapes = {name: tuple(np.asarray(value).shape) for name, value in inputs.items()}
        options = LowerOptions(
            targets=(target,),
            check_options=CheckOptions(inputs=str(path.with_suffix(".npz"))),
            overwrite_input_shapes=shapes,
        )
        try:
            result = lower_file(path, out / path.name, options)
            if not (out / path.name).exists():
                (out / f"{path.stem}.refused.txt").write_text(f"exit {int(result.exit_code)}")
        except SeqlowerError as e:  # recorded, shown by `run`
            (out / f"{path.stem}.refused.txt").write_text(str(e).splitlines()[0])


def _io(path: Path, model: Any) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """Inputs by graph input name and outputs in graph order, from either .npz layout."""
    with np.load(path.with_suffix(".npz")) as data:
        arrays = {key: data[key] for key in data.files}
    if "__inputs__" in arrays:
        inputs = {str(name): arrays[str(name)] for name in arrays["__inputs__"]}
        outputs = [arrays[str(name)] for name in arrays["__outputs__"]]
    else:
        inputs = {k[len("input.") :]: v for k, v in arrays.items() if k.startswith("input.")}
        outputs = [v for k, v in arrays.items() if k.startswith("output.")]
    names = [value.name for value in model.graph.input]
    return {name: inputs[name] for name in names if name in inputs}, outputs


def _onnx2torch(model: Any, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    import torch
    from onnx2torch import convert

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        module = convert(model)
        with torch.no_grad():
            result = module(*(torch.from_numpy(np.asarray(v)) for v in inputs.values()))
    results = result if isinstance(result, list | tuple) else [result]
    return [r.numpy() for r in results]


def _on_oracle(target: str, model: Any, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    from seqlower.verification.runtimes import TARGET_ORACLES

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return [np.asarray(v) for v in TARGET_ORACLES[target].load(model).run(inputs)]


def _cell(
    model: Any, inputs: dict[str, np.ndarray], want: list[np.ndarray], target: str = "onnx2torch"
) -> str:
    try:
        if target == "onnx2torch":
            got = _onnx2torch(model, inputs)
        else:
            got = _on_oracle(target, model, inputs)
    except Exception as e:
        text = str(e).strip()
        op = re.search(r"operation_type='(\w+)', version=(\d+)", text)
        if op:  # onnx2torch names the op it lacks in a long repr
            return f"no converter: {op.group(1)}-{op.group(2)}"
        return (text.splitlines()[0] if text else type(e).__name__)[:60]
    if len(got) != len(want):
        return "DIFF"
    for g, w in zip(got, want, strict=True):
        if g.shape != w.shape or not np.allclose(g, w, rtol=1e-4, atol=1e-4):
            return "DIFF"
    return "ok"


def run(folder: Path, lowered: Path, target: str = "onnx2torch") -> None:
    import onnx

    ran = {"original": 0, "lowered": 0}
    paths = sorted(folder.glob("*.onnx"))
    print("| model | as exported | after --target |\n|---|---|---|")
    for path in paths:
        model = onnx.load(str(path))
        inputs, want = _io(path, model)
        before = _cell(model, inputs, want, target)
        refused = lowered / f"{path.stem}.refused.txt"
        if refused.exists():
            after = f"refused: {refused.read_text()[:60]}"
        else:
            after = _cell(onnx.load(str(lowered / path.name)), inputs, want, target)
        ran["original"] += before == "ok"
        ran["lowered"] += after == "ok"
        print(f"| {path.stem} | {before} | {after} |", flush=True)
    print(f"run and match: {ran['original']}/{len(paths)} -> {ran['lowered']}/{len(paths)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["lower", "run"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("lowered", type=Path)
    parser.add_argument("--target", default="onnx2torch")
    parser.add_argument("--static-shapes", action="store_true")
    args = parser.parse_args()
    if args.step == "lower":
        lower(args.folder, args.lowered, args.target, args.static_shapes)
    else:
        run(args.folder, args.lowered, args.target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
