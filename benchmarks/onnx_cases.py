"""ONNX's own backend test cases with control flow, sequences or optionals, on each runtime, as
written and after ``seqlower --target``, against the cases' expected outputs.

Run by hand (each runtime run is a child process: tract aborts the process on some models):

    .venv/bin/python benchmarks/onnx_cases.py [--runtimes tract openvino] [-k loop] [--json F]

(``--runtimes tinygrad`` (or ``onnx2torch``, ``tvm``, from their venvs) measures a converter
target: ``-k lstm``, ``-k gru``, ``-k rnn`` its recurrent cases.)

The cases: ``onnx.backend.test.case.node`` and ``.model`` cases whose graphs (any scope, model
functions included) hold ``Loop``, ``Scan``, ``If``, ``ReverseSequence``, ``SplitToSequence``,
``ConcatFromSequence``, ``Sequence*``, ``Optional*``, ``LSTM``, ``GRU`` or ``RNN``, and whose
graph inputs and outputs are tensors or optional tensors. Each is written as an ONNX test folder
(``model.onnx``, ``test_data_set_0/input_K.pb``; an optional input as its tensor, an absent one
as no file) and, per runtime RT, run as written, then lowered with the CLI as a user would:

    seqlower CASE/model.onnx -o OUT --target RT --inputs CASE/test_data_set_0
             [--optional-input NAME=present|absent ...]

(``--inputs`` only when the case has inputs: the CLI refuses a folder without ``input_*.pb``),

and OUT run. A cell is ``ok`` (ran, matched within the case's rtol/atol, bit-exact for integers
and bools), ``DIFF``, ``seqlower exit N: <its message>``, or the runtime's error in one line.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RUNTIMES = ("onnxruntime", "openvino", "tract")
#: Converter targets, measured only when named (``--runtimes tinygrad``): their venvs differ.
CONVERTERS = ("tinygrad", "onnx2torch", "tvm", "iree")
_OPS = {"Loop", "Scan", "If", "ReverseSequence", "SplitToSequence", "ConcatFromSequence"}
#: Ops the converters lack and seqlower lowers (``unroll-recurrent-ops``), cases chosen too.
_RECURRENT = {"LSTM", "GRU", "RNN"}


def _ops(graph: Any) -> set[str]:
    found: set[str] = set()
    for node in graph.node:
        found.add(node.op_type)
        for attribute in node.attribute:
            for body in [attribute.g, *attribute.graphs]:
                found |= _ops(body)
    return found


def _plain(value_info: Any) -> bool:
    """A tensor or an optional tensor."""
    kind = value_info.type.WhichOneof("value")
    if kind == "optional_type":
        return value_info.type.optional_type.elem_type.WhichOneof("value") == "tensor_type"
    return kind == "tensor_type"


def cases() -> list[Any]:
    """The backend cases this script measures, node cases first, in onnx's order."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators warn about numpy overflow
        from onnx.backend.test.case import model as model_cases
        from onnx.backend.test.case import node as node_cases

        found = [*node_cases.collect_testcases(None), *model_cases.collect_testcases()]
    chosen = []
    for case in found:
        model = case.model
        if model is None or not case.data_sets:
            continue
        ops = _ops(model.graph).union(*(_ops(f) for f in model.functions))
        if not any(o in _OPS | _RECURRENT or o.startswith(("Sequence", "Optional")) for o in ops):
            continue
        if all(_plain(v) for v in [*model.graph.input, *model.graph.output]):
            chosen.append(case)
    return chosen


def write_case(case: Any, folder: Path) -> list[str]:
    """The case as an ONNX test folder; returns the ``--optional-input`` flags its inputs ask."""
    import onnx
    from onnx import numpy_helper

    folder.mkdir(parents=True)
    onnx.save(case.model, folder / "model.onnx")
    data = folder / "test_data_set_0"
    data.mkdir()
    inputs, outputs = case.data_sets[0]
    flags = []
    for k, (info, value) in enumerate(zip(case.model.graph.input, inputs, strict=False)):
        if info.type.HasField("optional_type"):
            flags += ["--optional-input", f"{info.name}={'absent' if value is None else 'present'}"]
        if value is not None:
            tensor = numpy_helper.from_array(np.asarray(value), info.name)
            (data / f"input_{k}.pb").write_bytes(tensor.SerializeToString())
    for k, value in enumerate(outputs):
        tensor = numpy_helper.from_array(np.asarray(value), case.model.graph.output[k].name)
        (data / f"output_{k}.pb").write_bytes(tensor.SerializeToString())
    return flags


def run_and_compare(
    runtime: str, model_path: str, case_folder: str, rtol: float, atol: float
) -> str:
    """In the child: the model on ``runtime`` with the case's inputs, compared with its outputs."""
    import onnx
    from onnx import numpy_helper

    from seqlower.verification.runtimes import load_target

    model = onnx.load(model_path)
    data = Path(case_folder) / "test_data_set_0"
    feeds: dict[str, Any] = {}
    for k, info in enumerate(model.graph.input):
        file = data / f"input_{k}.pb"
        if file.exists():
            feeds[info.name] = numpy_helper.to_array(onnx.load_tensor(str(file)))
        elif runtime == "onnxruntime":
            feeds[info.name] = None  # an absent optional
    expected = [
        numpy_helper.to_array(onnx.load_tensor(str(f)))
        for f in sorted(data.glob("output_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
    ]
    try:
        got = load_target(runtime).load(model).run(feeds)
    except Exception as e:  # the runtime's refusal, in one line (the oracles shorten theirs)
        return str(e).strip().splitlines()[0][:150] if str(e).strip() else type(e).__name__
    for want, have in zip(expected, got, strict=True):
        have = np.asarray(have)
        if want.shape != have.shape:
            return f"DIFF (shape {have.shape}, expected {want.shape})"
        if want.dtype.kind in "fcV" or str(want.dtype) == "bfloat16":
            same = np.allclose(
                have.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol
            )
        else:
            same = np.array_equal(have, want)
        if not same:
            return "DIFF"
    return "ok"


def _child(runtime: str, model: Path, folder: Path, case: Any) -> str:
    call = (runtime, str(model), str(folder), case.rtol, case.atol)
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); from benchmarks.onnx_cases import "
        f"run_and_compare; print('VERDICT', run_and_compare(*{call!r}))"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=600
        )
    except subprocess.TimeoutExpired:
        return "timeout (600 s)"
    for line in proc.stdout.splitlines():
        if line.startswith("VERDICT "):
            return line[len("VERDICT ") :]
    return _last_error(proc.stderr) or f"exit {proc.returncode}"


def _last_error(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"Error|panicked|error:", line)]
    return re.sub(r"^\S*(Error|Refusal): ", "", (errors or lines or [""])[-1])[:150]


def _lower(runtime: str, folder: Path, flags: list[str], out: Path) -> str | None:
    """The CLI run; None when it wrote OUT, else its exit code and message."""
    command = [sys.executable, "-m", "seqlower", str(folder / "model.onnx"), "-o", str(out)]
    command += ["--target", runtime, *flags]
    if any((folder / "test_data_set_0").glob("input_*.pb")):  # else the (no) inputs generated
        command += ["--inputs", str(folder / "test_data_set_0")]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT)
    if proc.returncode == 0 and out.exists():
        return None
    lines = [
        line
        for line in proc.stderr.splitlines()
        if line.strip() and not line.startswith(" ")
        if not re.search(r"not written|failing inputs saved|reproduce with", line)
    ]
    said = next((line for line in lines if line.startswith("check:")), lines[-1] if lines else "")
    return f"seqlower exit {proc.returncode}: {said.removeprefix('seqlower: ')[:150]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runtimes", nargs="+", default=list(RUNTIMES), choices=(*RUNTIMES, *CONVERTERS)
    )
    parser.add_argument("-k", default="", help="only cases whose name holds this")
    parser.add_argument("--json", type=Path, help="also write the cells here")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    help_text = subprocess.run(  # the lower command's options (older CLIs: the top level's)
        [sys.executable, "-m", "seqlower", "lower", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout
    optional_flag = "--optional-input" in help_text
    chosen = [case for case in cases() if args.k in case.name]
    cells: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as temp:
        for case in chosen:
            folder = Path(temp) / case.name
            flags = write_case(case, folder)
            if not optional_flag:
                flags = []
            row = cells.setdefault(case.name, {})
            for runtime in args.runtimes:
                before = _child(runtime, folder / "model.onnx", folder, case)
                out = Path(temp) / f"{case.name}.{runtime}.onnx"
                refused = _lower(runtime, folder, flags, out)
                after = refused or _child(runtime, out, folder, case)
                row[runtime] = f"{before} -> {after}"
                print(f"{case.name:58} {runtime:11} {before[:60]:60} -> {after}", flush=True)
    print(f"\n{len(cells)} cases")
    for runtime in args.runtimes:
        before = sum(row[runtime].startswith("ok ->") for row in cells.values())
        after = sum(row[runtime].endswith("-> ok") for row in cells.values())
        lost = [
            n
            for n, row in cells.items()
            if row[runtime].startswith("ok ->") and not row[runtime].endswith("-> ok")
        ]
        print(f"{runtime:12} {before} -> {after} run and match; lost: {', '.join(lost) or 'none'}")
    if args.json:
        args.json.write_text(json.dumps(cells, indent=1))


if __name__ == "__main__":
    main()
