"""ReverseSequence's lowered forms on tract, the runtime they are for (tract has no kernel).

Run by hand (not a test):  .venv/bin/python benchmarks/reverse_sequence_tract.py [--repeat N]

Lengths a graph input (the index computed at run time), time-major, through the ``tract``
oracle (``seqlower.verification.runtimes.TARGET_ORACLES``, concrete input facts), each model loaded
once and run ``--repeat`` times; medians. Compared, for each shape, with the form seqlower
writes:

- one element per (time, batch) entry: the ``GatherND`` form (seqlower's before the
  ``GatherElements`` form) against the ``GatherElements`` form;
- more: the ``GatherND`` form against a ``GatherElements`` on the index ``Expand``\\ ed to the
  input's shape (the alternative for small slices, not taken).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import helper

import seqlower
from seqlower.passes.reverse_sequence import _reverse_plan
from seqlower.verification.runtimes import TARGET_ORACLES

SHAPES = [(2048, 512), (2048, 512, 1), (512, 2048), (2048, 128, 8), (256, 256, 16), (64, 64, 256)]


def native(shape: tuple[int, ...]) -> onnx.ModelProto:
    dims = ", ".join(["T", "N", *map(str, shape[2:])])
    return onnx.parser.parse_model(
        f"""<ir_version: 8, opset_import: ["" : 17]>
g (float[{dims}] x, int64[N] lens) => (float[{dims}] y) {{
    y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
}}"""
    )


def gathernd_form(model: onnx.ModelProto) -> onnx.ModelProto:
    """seqlower's lowering with the GatherElements form turned off."""
    keep = _reverse_plan._one_per_step
    _reverse_plan._one_per_step = lambda *_: False  # type: ignore[assignment]
    try:
        return seqlower.lower(model)
    finally:
        _reverse_plan._one_per_step = keep


def expanded_form(lowered: onnx.ModelProto) -> onnx.ModelProto:
    """The GatherND form's source steps ([T, B, 1]) expanded to the input, for GatherElements."""
    model = onnx.ModelProto()
    model.CopyFrom(lowered)
    nodes = list(model.graph.node)
    (gather,) = [n for n in nodes if n.op_type == "GatherND"]
    (concat,) = [n for n in nodes if n.output[0] == gather.input[1]]
    data, result = gather.input[0], gather.output[0]
    nodes.remove(gather)
    nodes += [
        helper.make_node("Shape", [data], ["bench_shape"]),
        helper.make_node("Expand", [concat.input[0], "bench_shape"], ["bench_index"]),
        helper.make_node("GatherElements", [data, "bench_index"], [result], axis=0),
    ]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


def median_run(run: Callable[[dict[str, Any]], Any], feeds: dict[str, Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run(feeds)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"tract, time-major, lengths an input; medians of {args.repeat} runs, ms")
    for shape in SHAPES:
        one_per_step = all(d == 1 for d in shape[2:])
        base = native(shape)
        gathernd = gathernd_form(base)
        other = seqlower.lower(base) if one_per_step else expanded_form(gathernd)
        feeds = {
            "x": rng.standard_normal(shape).astype(np.float32),
            "lens": rng.integers(0, shape[0] + 1, shape[1]).astype(np.int64),
        }
        results = {}
        for name, model in (("GatherND", gathernd), ("other", other)):
            runnable = TARGET_ORACLES["tract"].load(model)
            out = next(iter(runnable.run(feeds)))
            results[name] = (median_run(runnable.run, feeds, args.repeat), out)
        assert np.array_equal(results["GatherND"][1], results["other"][1])
        label = "GatherElements (seqlower)" if one_per_step else "GatherElements on Expand"
        print(
            f"{'x'.join(map(str, shape)):>12}  GatherND {results['GatherND'][0] * 1e3:8.2f}  "
            f"{label} {results['other'][0] * 1e3:8.2f}"
        )


if __name__ == "__main__":
    main()
