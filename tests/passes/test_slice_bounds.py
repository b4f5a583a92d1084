"""tract 0.23.9 cannot load a Slice whose bounds are computed from tensor values (issue 29):
``--target tract`` rewrites those it can (``run-time-slices-as-gathers``,
``tests/passes/test_run_time_slices.py``), names each one left before any check (exit 2), and
leaves the Slices whose bounds follow from shapes, which tract runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import pytest

import seqlower
from seqlower.errors import TargetError
from tests.helpers import REALWORLD, all_op_types, run_cli
from tests.runtimes import RuntimeFailure, assert_same, require, run

# The smallest model that shows it: bounds from a graph input's values.
RUNTIME_BOUNDS = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[6, 2] x, int64[1] s) => (float[N, 2] y) {
        axes = Constant<value = int64[1] {0}>()
        e = Constant<value = int64[1] {5}>()
        y = Slice(x, s, e, axes)
    }
    """
)
FEEDS = {"x": np.arange(12, dtype=np.float32).reshape(6, 2), "s": np.array([1], np.int64)}

# What the rewrite leaves: steps known only at run time.
RUNTIME_STEPS = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[6, 2] x, int64[1] s, int64[1] k) => (float[N, 2] y) {
        axes = Constant<value = int64[1] {0}>()
        e = Constant<value = int64[1] {5}>()
        y = Slice(x, s, e, axes, k)
    }
    """
)

# Bounds from shapes: split([1, N-1]), the form tract runs.
SHAPE_BOUNDS = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 2] x) => (float[M, 2] y) {
        one = Constant<value = int64[1] {1}>()
        zero = Constant<value = int64[1] {0}>()
        n = Shape<start = 0, end = 1>(x)
        y = Slice(x, one, n, zero)
    }
    """
)

BAG = REALWORLD / "embedding_bag_mean.onnx"


def test_tract_cannot_load_a_slice_by_run_time_bounds() -> None:
    """The runtime bug the check stands for (tract 0.23.9); when a tract runs it, the check
    can go."""
    with pytest.raises(RuntimeFailure, match="SymbolScope"):
        run("tract", RUNTIME_BOUNDS, FEEDS)


def test_run_time_bounds_run_on_tract_once_rewritten() -> None:
    lowered = seqlower.lower(RUNTIME_BOUNDS, target="tract")  # proven on tract
    assert_same(run("onnxruntime", RUNTIME_BOUNDS, FEEDS), run("tract", lowered, FEEDS))


def test_run_time_bounds_left_are_named_before_the_check(tmp_path: Path) -> None:
    with pytest.raises(TargetError) as caught:
        seqlower.lower(RUNTIME_STEPS, target="tract", check=False)
    (blocker,) = caught.value.blockers
    assert blocker.startswith("Slice node producing 'y' in graph 'g' remains: its starts 's'")
    assert "values of 's'" in blocker and "tract 0.23.9 cannot load" in blocker
    # Other targets' runtimes slice so: not asked there.
    seqlower.lower(RUNTIME_STEPS, target="openvino", check=False)
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(RUNTIME_STEPS, source)
    require("tract")  # --target names a missing runtime before the blockers
    result = run_cli(source, "-o", out, "--target", "tract")
    assert result.exit_code == 2 and "Slice node producing 'y'" in result.stderr
    assert not out.exists()


def test_shape_bounds_are_left_and_run_on_tract() -> None:
    lowered = seqlower.lower(SHAPE_BOUNDS, target="tract", check=False)
    feeds = {"x": FEEDS["x"]}
    assert_same(run("onnxruntime", SHAPE_BOUNDS, feeds), run("tract", lowered, feeds))


def test_embedding_bag_runs_on_tract() -> None:
    """PyTorch's embedding_bag slices the weight rows by its offsets (``offsets[i:i+1]``, 0 or
    1 rows known only at run time): its Slices are rewritten, and what tract 0.23.9 then could
    not type (the If on a condition of run-time length, its branches reading such values) is
    repaired by the row's If passes: it runs there and matches PyTorch (an empty bag's mean
    too: ``empty-means-as-zero``)."""
    lowered = seqlower.lower(onnx.load(BAG), target="tract", check=False)
    assert "Slice" not in all_op_types(lowered)
    view = seqlower.inspect_model(BAG, ["tract"]).pipelines[0]
    assert not view.blockers
    require("tract")
    arrays = np.load(BAG.with_suffix(".npz"))
    feeds = {k.removeprefix("input."): arrays[k] for k in arrays.files if k.startswith("input.")}
    (expected,) = [arrays[k] for k in arrays.files if k.startswith("output.")]
    for runtime in ("tract", "onnxruntime"):
        (got,) = run(runtime, lowered, feeds)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
