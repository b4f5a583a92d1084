"""The sequence-free mode: which runtimes run each test model, and how fast in onnxruntime.

Run by hand (not a test):  .venv/bin/python benchmarks/sequence_free.py [--rounds R]

1. The matrix: every model of tests/sequence_free_cases.py, as exported (with sequences), as the
   default lowering leaves it (Loop + sequence ops) and with --sequence-free, run on onnxruntime,
   OpenVINO and tract; "ok" when the runtime loads and runs it and matches onnxruntime on the
   original, "MISMATCH" when it runs but returns something else, "fails" when it refuses.
   Prints a Markdown table and the runtime versions.
2. Speed of the PyTorch pattern (SequenceConstruct -> SequenceMap -> SequenceAt -> Concat) in
   onnxruntime, 1 thread: the original (onnxruntime's own SequenceMap), the default lowering and
   the sequence-free model, interleaved in one process, median per-run times.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import seqlower
from tests import sequence_free_cases as cases
from tests.runtimes import RUNTIMES, assert_same, run


def matrix() -> None:
    forms = ["exported", "default lowering", "--sequence-free"]
    print(f"| model | {' | '.join(forms)} |  (each: {' / '.join(RUNTIMES)})")
    print("|---" * (1 + len(forms)) + "|")
    for name, build in cases.CASES.items():
        model, feeds = build()
        expected = run("onnxruntime", model, feeds)
        models = [model, seqlower.lower(model), seqlower.lower(model, sequence_free=True)]
        cells = []
        for candidate in models:
            verdicts = []
            for runtime in RUNTIMES:
                try:
                    assert_same(expected, run(runtime, candidate, feeds))
                    verdicts.append("ok")
                except AssertionError:
                    verdicts.append("MISMATCH")
                except Exception:
                    verdicts.append("fails")
            cells.append(" / ".join(verdicts))
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    print(
        ", ".join(
            f"{package} {version(package)}" for package in ("onnxruntime", "openvino", "tract")
        )
    )


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def speed(rounds: int) -> None:
    print("| model | elements | original | default lowering | --sequence-free | speed-up |")
    print("|---|---|---|---|---|---|")
    names = ["hstack_atleast_1d", "vstack_atleast_2d", "dstack_atleast_3d"]
    for name in [*names, "torch_lib_hstack", "torch_lib_vstack", "torch_lib_dstack"]:
        model, feeds = cases.CASES[name]()
        forms = [model, seqlower.lower(model), seqlower.lower(model, sequence_free=True)]
        sessions = [session(form) for form in forms]
        times: list[list[float]] = [[] for _ in sessions]
        for _ in range(rounds):
            for index, current in enumerate(sessions):
                start = time.perf_counter()
                current.run(None, feeds)
                times[index].append(time.perf_counter() - start)
        medians = [statistics.median(t) * 1e6 for t in times]
        print(
            f"| {name} | {len(feeds)} | {medians[0]:.0f} µs | {medians[1]:.0f} µs | "
            f"{medians[2]:.0f} µs | {medians[0] / medians[2]:.1f}x |"
        )
    print(f"\nonnxruntime {ort.__version__}, 1 thread, medians of {rounds} interleaved runs")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    args: Any = parser.parse_args(argv)
    np.random.seed(0)
    matrix()
    print()
    speed(args.rounds)


if __name__ == "__main__":
    main()
