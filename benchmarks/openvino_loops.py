"""Real exports with Loops lowered for OpenVINO: the Loops kept (strict) against the same loops as
Scans, timed on OpenVINO and on onnxruntime.

Run by hand, on a folder of ``NAME.onnx`` + ``NAME.npz`` (``benchmarks/families/tf_family.py``
writes one; ``../shared/realworld-samples/tf`` is one):

    .venv/bin/python benchmarks/openvino_loops.py /work/exports/tf --repeat 20

For every model holding a ``Loop``: ``seqlower.lower(model, target="openvino")`` (what the target
writes: its Loops made strict by ``strict-loop-bodies``) and the same pipeline with
``loop-to-scan`` in place of ``strict-loop-bodies`` (the Scan form that target wrote before, every
outer read carried as a state). Both run interleaved, on OpenVINO (CPU, f32) and on onnxruntime
(CPU provider), with the ``.npz`` inputs (``--tile K``: repeated K times along batch and time),
1 thread; the ratios are Scan/Loop, medians of
per-round ratios, and their geometric mean over the models closes the table.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from target_samples import feeds_and_expected

import seqlower
from seqlower.targets import TARGETS


def _has_loop(model: onnx.ModelProto) -> bool:
    return any(node.op_type == "Loop" for node in model.graph.node)


def _tiled(array: np.ndarray, k: int) -> np.ndarray:
    """``array`` repeated ``k`` times along its first two axes (batch and time, either order)."""
    if k == 1 or array.ndim == 0:
        return array
    return np.tile(array, (k,) * min(array.ndim, 2) + (1,) * max(array.ndim - 2, 0))


def _first(outputs: object) -> np.ndarray:
    """The first output of an OpenVINO result (a mapping) or an onnxruntime one (a list)."""
    values = list(outputs.values()) if hasattr(outputs, "values") else list(outputs)  # type: ignore[call-overload]
    return np.asarray(values[0])


def _ratio(first: Callable[[], object], second: Callable[[], object], repeat: int) -> float:
    """Median over rounds of time(second) / time(first), the two alternated."""
    ratios = []
    for _ in range(repeat):
        start = time.perf_counter()
        first()
        middle = time.perf_counter()
        second()
        ratios.append((time.perf_counter() - middle) / (middle - start))
    return statistics.median(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--tile",
        type=int,
        default=1,
        help="repeat each input K times along its first two axes (the first only, for 1-D "
        "inputs): the exports' own inputs are a few steps of a small batch",
    )
    args = parser.parse_args()
    import onnxruntime as ort
    import openvino

    scan_passes = [
        "loop-to-scan" if name == "strict-loop-bodies" else name
        for name in TARGETS["openvino"].passes
    ]
    core = openvino.Core()
    config = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1}
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    print(f"OpenVINO {openvino.__version__}, onnxruntime {ort.__version__}, 1 thread")
    print("| model | OpenVINO Scan/Loop | onnxruntime Scan/Loop |")
    print("|---|---|---|")
    ov_ratios, ort_ratios = [], []
    for path in sorted(args.folder.glob("*.onnx")):
        original = onnx.load(path)
        if not _has_loop(original):
            continue
        feeds, _ = feeds_and_expected(path.with_suffix(".npz"))
        feeds = {name: _tiled(array, args.tile) for name, array in feeds.items()}
        loop = seqlower.lower(original, target="openvino", check=False)
        scan = seqlower.lower(original, passes=scan_passes)
        runs = []
        for model in (loop, scan):
            compiled = core.compile_model(core.read_model(model.SerializeToString()), "CPU", config)
            request = compiled.create_infer_request()
            session = ort.InferenceSession(model.SerializeToString(), options)
            runs.append(
                (
                    lambda r=request, f=feeds: r.infer(f),
                    lambda s=session, f=feeds: s.run(None, f),
                )
            )
        # The two forms agree on each runtime before they are timed.
        for first, second in (
            (_first(runs[0][0]()), _first(runs[1][0]())),
            (_first(runs[0][1]()), _first(runs[1][1]())),
        ):
            np.testing.assert_allclose(second, first, rtol=1e-5, atol=1e-6)
        ov = _ratio(runs[0][0], runs[1][0], args.repeat)
        rt = _ratio(runs[0][1], runs[1][1], args.repeat)
        ov_ratios.append(ov)
        ort_ratios.append(rt)
        print(f"| {path.stem} | {ov:.2f} | {rt:.2f} |")

    def geomean(values: list[float]) -> float:
        return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")

    print(
        f"| geometric mean of {len(ov_ratios)} | {geomean(ov_ratios):.2f} "
        f"| {geomean(ort_ratios):.2f} |"
    )


if __name__ == "__main__":
    main()
