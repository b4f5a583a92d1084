"""The exit code of ``seqlower M -o OUT [--target T]`` (the check on) for every model of some
folders, and how two records differ: what a change to the passes' facts did to real exports.

Run by hand (not a test); each run is a fresh process of the seqlower on ``PYTHONPATH``:

    PYTHONPATH=OLD .venv/bin/python benchmarks/exit_codes.py FOLDER ... --save /tmp/before.json
    PYTHONPATH=NEW .venv/bin/python benchmarks/exit_codes.py FOLDER ... --compare /tmp/before.json

``--targets`` names the runs per model (``default``: no ``--target``, the check on
onnxruntime). A record maps ``MODEL|TARGET`` to the exit code and the first line of what the run
printed on standard error; ``--compare`` prints each model whose exit code changed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path


def run(model: Path, target: str, timeout: float) -> tuple[int | str, str]:
    """``seqlower model -o OUT [--target target]``'s exit code and first line of errors."""
    with tempfile.TemporaryDirectory() as folder:
        args = [sys.executable, "-m", "seqlower", str(model), "-o", f"{folder}/out.onnx", "-q"]
        if target != "default":
            args += ["--target", target]
        try:
            done = subprocess.run(
                args, capture_output=True, text=True, timeout=timeout, env=dict(os.environ)
            )
        except subprocess.TimeoutExpired:
            return "timeout", ""
    lines = done.stderr.strip().splitlines()
    return done.returncode, lines[0][:300] if lines else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="folders of *.onnx (recursive)")
    parser.add_argument("--targets", default="default,tract,openvino")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a run")
    parser.add_argument("--save", type=Path, help="write the record here")
    parser.add_argument("--compare", type=Path, help="a record to print the changes against")
    args = parser.parse_args()
    models = sorted(p for folder in args.folders for p in folder.rglob("*.onnx"))
    record: dict[str, list[int | str]] = {}
    for model in models:
        for target in args.targets.split(","):
            code, line = run(model, target, args.timeout)
            record[f"{model}|{target}"] = [code, line]
            print(f"{model} {target}: exit {code} {line[:120]}", flush=True)
    print(dict(Counter(f"exit {code}" for code, _ in record.values())))
    if args.save is not None:
        args.save.write_text(json.dumps(record, indent=1))
    if args.compare is not None:
        before = json.loads(args.compare.read_text())
        changed = [key for key in record if key in before and before[key][0] != record[key][0]]
        for key in changed:
            print(f"changed: {key}: exit {before[key][0]} -> {record[key][0]} {record[key][1]}")
        print(f"{len(changed)} of {sum(key in before for key in record)} runs changed exit code")


if __name__ == "__main__":
    main()
