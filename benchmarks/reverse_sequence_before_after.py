"""ReverseSequence: an older checkout's default lowering against this one's, beside the kernel.

Run by hand (not a test), in two steps, from the checkout under test:

    git archive OLD | tar -x -C /tmp/old                       # the code before
    PYTHONPATH=/tmp/old .venv/bin/python benchmarks/reverse_sequence_before_after.py save DIR
    .venv/bin/python benchmarks/reverse_sequence_before_after.py compare DIR [--threads 1 2]

``save`` writes the default pipeline's lowering of every cell of ``reverse_sequence.py
--portable`` (its shapes, both layouts, lengths a graph input or a constant; full-length
lengths are one ``Slice`` either way) with whatever seqlower is imported; ``compare`` runs, per
cell and thread count, the native model, that saved lowering and this checkout's, interleaved
in one process (the only ratios that mean anything on a shared machine), and prints the medians
of per-round ratios to the native kernel. One-thread runs are timed by the thread's CPU time,
two-thread runs by wall time. Every output is checked bit-exact against the kernel's first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import reverse_sequence as rs

import seqlower


def cells(only: str = "") -> Iterator[tuple[tuple[int, ...], int, str]]:
    for shape in rs.portable_shapes():
        for time_axis in (0, 1):
            for kind in ("input", "constant"):
                if only in _name(shape, time_axis, kind):
                    yield shape, time_axis, kind


def _name(shape: tuple[int, ...], time_axis: int, kind: str) -> str:
    return f"{'x'.join(map(str, shape))}_{time_axis}_{kind}"


def _setup(
    shape: tuple[int, ...], time_axis: int, kind: str
) -> tuple[np.ndarray, np.ndarray, onnx.ModelProto]:
    """The input, the lengths and the native model, as ``reverse_sequence.portable`` makes them."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    batch, steps = shape[1 - time_axis], shape[time_axis]
    lens = rng.integers(0, steps + 1, size=batch).astype(np.int64)
    return x, lens, rs.models(shape, time_axis, kind, lens)["native"]


def save(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for shape, time_axis, kind in cells():
        native = _setup(shape, time_axis, kind)[2]
        onnx.save(seqlower.lower(native), directory / f"{_name(shape, time_axis, kind)}.onnx")
    print(f"saved with {seqlower.__file__}")


def compare(directory: Path, rounds: int, threads: list[int], only: str) -> None:
    print(
        f"{'shape':>14} {'layout':>11} {'lens':>8} {'thr':>3} {'native ms':>9} {'before':>7} "
        f"{'after':>7}  form after"
    )
    for shape, time_axis, kind in cells(only):
        x, lens, native = _setup(shape, time_axis, kind)
        built = {
            "native": native,
            "before": onnx.load(directory / f"{_name(shape, time_axis, kind)}.onnx"),
            "after": seqlower.lower(native),
        }
        feeds: dict[str, np.ndarray] = {"x": x, "lens": lens} if kind == "input" else {"x": x}
        for count in threads:
            runners = {}
            expected = None
            for name, model in built.items():
                runners[name], out = rs.bound(model, count, feeds)
                expected = out if expected is None else expected
                assert np.array_equal(out, expected), f"{name} != native"
            clock = time.thread_time if count == 1 else time.perf_counter
            times = rs.interleaved(runners, rounds, clock)
            ratio = {name: rs.round_ratio(times, name, "native") for name in ("before", "after")}
            layout = "time-major" if time_axis == 0 else "batch-major"
            print(
                f"{'x'.join(map(str, shape)):>14} {layout:>11} {kind:>8} {count:>3} "
                f"{statistics.median(times['native']) * 1e3:>9.3f} {ratio['before']:>7.2f} "
                f"{ratio['after']:>7.2f}  {rs._form_of(built['after'])}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["save", "compare"])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--repeat", type=int, default=30, help="rounds a cell (30)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--only", default="", help="cells whose name holds this, e.g. x8_")
    args = parser.parse_args()
    if args.mode == "save":
        save(args.directory)
    else:
        compare(args.directory, args.repeat, args.threads, args.only)


if __name__ == "__main__":
    main()
