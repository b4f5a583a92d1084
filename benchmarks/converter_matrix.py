"""Every family export x one converter at fixed input shapes: what ``--target T
--overwrite-input-shape`` (the shapes of the ``.npz`` inputs) does to each, counted as the CLI
would exit and then as the converter runs the written model (issue 32's matrix).

One command per converter venv (the converter and seqlower in one process: ``PYTHONPATH`` the
worktree), one converter at a time (the machine is shared)::

    PYTHONPATH=. /work/venvs/torch/bin/python benchmarks/converter_matrix.py onnx2torch \\
        --json /tmp/matrix-onnx2torch.json
    PYTHONPATH=. /work/venvs/tvm/bin/python benchmarks/converter_matrix.py tvm --json ...
    PYTHONPATH=. /work/venvs/tf312/bin/python benchmarks/converter_matrix.py onnx2tf --json ...
    PYTHONPATH=. .venv/bin/python benchmarks/converter_matrix.py tinygrad --json ...

The folders default to the family exports on this machine (:data:`FOLDERS`); identical files
are counted once (the first folder's name). Each model: ``lower_file`` with the check on the
converter and the framework's inputs (``CheckOptions(inputs=NPZ)``), then, when it exits 0, the
written model run on the converter (the check's own oracle) on those inputs and compared with
the framework's outputs (rtol 1e-4, atol 1e-5). A cell is ``ok``, ``exit 2: ...`` (refused,
named), ``exit 1: ...`` (the check failed), ``exit 3: ...``, ``exit 0, wrong: ...`` (written,
yet failing or differing on the converter: the worst bug, must be 0), ``timeout`` or
``crash``. Each model runs in a worker process, killed past ``--timeout`` seconds.

``--reuse OLD.json`` keeps OLD's cell for a model whose lowering (without the check) is the
same file, or fails with the same words, as when OLD was measured: after a change, only the
models it changed are run again.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: (label, folder): the family exports measured for issue 32 (``benchmarks/families`` builders).
FOLDERS = (
    ("reach/tf", "/tmp/reach/exports/tf"),
    ("reach/torch", "/tmp/reach/exports/torch"),
    ("reach/td", "/tmp/reach/exports/td"),
    ("shapes/tf", "/tmp/shapes-exports/tf"),
    ("o2t", "/tmp/o2t/all"),
    ("scan8/tf", "/tmp/scan8-exp/tf"),
    ("scan8/tffixed", "/tmp/scan8-exp/tffixed"),
    ("scan8/torch", "/tmp/scan8-exp/torch"),
)


def models(folders: list[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """label -> (path, sha256) of every ``.onnx`` with a ``.npz`` beside it, each file once."""
    seen: set[str] = set()
    found: dict[str, tuple[str, str]] = {}
    for tag, folder in folders:
        for path in sorted(Path(folder).rglob("*.onnx")):
            if not path.with_suffix(".npz").exists():
                continue
            sha = hashlib.sha256(path.read_bytes()).hexdigest()
            if sha in seen:
                continue
            seen.add(sha)
            found[f"{tag}/{path.relative_to(folder).with_suffix('')}"] = (str(path), sha)
    return found


# ---------------------------------------------------------------- the worker (one model a request)


def _lower(path: Path, out: Path, target: str, shapes: dict, check: bool) -> tuple[int, str]:
    from seqlower.errors import SeqlowerError
    from seqlower.job import LowerOptions, lower_file
    from seqlower.verification import CheckOptions

    out.unlink(missing_ok=True)
    options = LowerOptions(
        check=check,
        targets=(target,),
        check_options=CheckOptions(inputs=str(path.with_suffix(".npz"))),
        overwrite_input_shapes=shapes,
    )
    try:
        result = lower_file(path, out, options)
    except SeqlowerError as e:  # a refusal's blockers are on the lines after its first
        return int(e.exit_code), " | ".join(line.strip() for line in str(e).splitlines()[:4])
    why = "" if result.verification is None else result.verification.reason
    return int(result.exit_code), " | ".join(why.splitlines()[:3])


def measure(request: dict[str, Any]) -> dict[str, Any]:
    """One model: its lowering's key (for ``--reuse``), then (unless reused) the cell."""
    import onnx

    from benchmarks.target_samples import feeds_and_expected, fixed_shapes, on_oracle

    path, target = Path(request["path"]), request["target"]
    model = onnx.load(str(path))
    feeds, expected = feeds_and_expected(path.with_suffix(".npz"))
    shapes = fixed_shapes(model, feeds)
    with tempfile.TemporaryDirectory(prefix="matrix-") as folder:
        out = Path(folder) / path.name
        code, why = _lower(path, out, target, shapes, check=False)
        key = hashlib.sha256(out.read_bytes()).hexdigest() if out.exists() else f"{code}: {why}"
        answer: dict[str, Any] = {"key": key}
        if request.get("reuse_key") == key:
            return answer | {"reused": True}
        if request.get("original"):
            answer["original"] = on_oracle(target, model, feeds, expected, request["seconds"])
        code, why = _lower(path, out, target, shapes, check=True)
        if code != 0 or not out.exists():
            answer["cell"] = f"exit {code}: {why[:300]}"
            return answer
        verdict = on_oracle(target, onnx.load(str(out)), feeds, expected, request["seconds"])
        answer["cell"] = verdict if verdict == "ok" else f"exit 0, wrong: {verdict}"
        return answer


def worker() -> None:
    """Requests as JSON lines on stdin, answers on the original stdout; whatever the
    converters print goes to stderr (the parent's log)."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.path.insert(0, str(ROOT))
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = measure(request)
        except Exception as e:  # the harness's own failure, shown in the cell
            answer = {"key": None, "cell": f"harness: {type(e).__name__}: {str(e)[:120]}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


class Worker:
    """The worker process; restarted after a timeout or a crash."""

    def __init__(self, log: Any) -> None:
        self.log, self.process = log, None

    def ask(self, request: dict[str, Any], seconds: float) -> dict[str, Any]:
        if self.process is None:
            self.process = subprocess.Popen(
                [sys.executable, __file__, "--worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.log,
                text=True,
                start_new_session=True,
            )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], seconds)
        line = self.process.stdout.readline() if ready else ""
        if line:
            return dict(json.loads(line))
        cell = "timeout" if not ready else f"crash (exit {self.process.poll()})"
        self.stop()
        return {"key": None, "cell": cell}

    def stop(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, 9)
            self.process.wait()
            self.process = None


def kind(cell: str) -> str:
    if cell == "ok":
        return "ok"
    for word in ("exit 0, wrong", "exit 1", "exit 2", "exit 3", "timeout", "crash"):
        if cell.startswith(word):
            return word
    return "other"


def cause(cell: str) -> str:
    """A cell without its model-specific names and numbers."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", cell)
    text = re.sub(r"(?<![A-Za-z])\d+(\.\d+)*(e-?\d+)?", "N", text)
    return text[:150]


#: The ops issue 32 counts exports by.
OPS = ("Loop", "Scan", "ReverseSequence", "If", "SequenceMap", "LSTM", "GRU")


def _holding(paths: dict[str, str], ops: tuple[str, ...]) -> dict[str, list[str]]:
    """op -> the labels of the models with a node of it, in any graph or function."""
    import onnx

    found: dict[str, list[str]] = {op: [] for op in ops}
    for label, path in paths.items():
        model = onnx.load(path, load_external_data=False)
        graphs, seen = [model.graph, *model.functions], set()
        while graphs:
            graph = graphs.pop()
            for node in graph.node:
                seen.add(node.op_type)
                graphs += [a.g for a in node.attribute if a.HasField("g")]
        for op in ops:
            if op in seen:
                found[op].append(label)
    return found


def summary(cells: dict[str, dict[str, Any]], paths: dict[str, str] | None = None) -> None:
    kinds = ("ok", "exit 2", "exit 1", "exit 3", "exit 0, wrong", "timeout", "crash", "other")
    print("| folder | models | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * (len(kinds) + 1))
    folders: dict[str, list[str]] = {}
    for label, row in cells.items():
        folders.setdefault(label.rsplit("/", 1)[0].split("/samples")[0], []).append(row["cell"])
    folders["all"] = [row["cell"] for row in cells.values()]
    for folder, found in folders.items():
        counts = Counter(kind(c) for c in found)
        print(f"| {folder} | {len(found)} | " + " | ".join(str(counts[k]) for k in kinds) + " |")
    print()
    if paths:  # issue 32's bars are per op: the exports that hold each (any scope)
        for op, labels in _holding(paths, OPS).items():
            ok = sum(cells[label]["cell"] == "ok" for label in labels if label in cells)
            print(f"exports with {op}: {ok}/{len(labels)} run and match")
        print()
    for words, count in Counter(
        cause(row["cell"]) for row in cells.values() if row["cell"] != "ok"
    ).most_common():
        print(f"{count:4}  {words}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", nargs="?")
    parser.add_argument("folders", nargs="*", help="LABEL=FOLDER (default: FOLDERS)")
    parser.add_argument("--json", type=Path, help="the cells, written after each model")
    parser.add_argument("--reuse", type=Path, help="an earlier --json of the same target")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per model")
    parser.add_argument("--original", action="store_true", help="also run each export as is")
    parser.add_argument("--only", help="a regular expression the labels must match")
    parser.add_argument("--summary", action="store_true", help="only print --json's summary")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker()
        return
    folders = [tuple(f.split("=", 1)) for f in args.folders] or list(FOLDERS)
    found = models(folders)  # type: ignore[arg-type]
    paths = {label: path for label, (path, _) in found.items()}
    if args.summary:
        summary(json.loads(args.json.read_text()), paths)
        return
    if args.only:
        found = {k: v for k, v in found.items() if re.search(args.only, k)}
    old = json.loads(args.reuse.read_text()) if args.reuse else {}
    cells: dict[str, dict[str, Any]] = {}
    log = open(args.json.with_suffix(".log") if args.json else os.devnull, "w")  # noqa: SIM115
    runner = Worker(log)
    try:
        for label, (path, sha) in found.items():
            before = old.get(label, {})
            request = {
                "path": path,
                "target": args.target,
                "seconds": int(args.timeout),
                "original": args.original,
                "reuse_key": before.get("key") if before.get("sha") == sha else None,
            }
            start = time.perf_counter()
            answer = runner.ask(request, args.timeout)
            if answer.pop("reused", False):
                answer = before | {"key": answer["key"]}
            row = {"sha": sha} | answer | {"seconds": round(time.perf_counter() - start, 1)}
            cells[label] = row
            print(f"{label}: {row['cell']} ({row['seconds']} s)", flush=True)
            if args.json:
                args.json.write_text(json.dumps(cells, indent=1))
    finally:
        runner.stop()
    summary(cells, paths)


if __name__ == "__main__":
    main()
