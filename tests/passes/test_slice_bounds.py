"""tract 0.23.9 cannot load a Slice whose bounds are computed from tensor values (issue 29):
``--target tract`` names each such Slice before any check (exit 2), and leaves the Slices whose
bounds follow from shapes, which tract runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import pytest

import seqlower
from seqlower.errors import TargetError
from tests.helpers import REALWORLD, run_cli
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


def test_run_time_bounds_are_named_before_the_check(tmp_path: Path) -> None:
    with pytest.raises(TargetError) as caught:
        seqlower.lower(RUNTIME_BOUNDS, target="tract", check=False)
    (blocker,) = caught.value.blockers
    assert blocker.startswith("Slice node producing 'y' in graph 'g' remains: its starts 's'")
    assert "values of 's'" in blocker and "tract 0.23.9 cannot load" in blocker
    # Other targets' runtimes slice so: not asked there.
    seqlower.lower(RUNTIME_BOUNDS, target="openvino", check=False)
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(RUNTIME_BOUNDS, source)
    require("tract")  # --target names a missing runtime before the blockers
    result = run_cli(source, "-o", out, "--target", "tract")
    assert result.exit_code == 2 and "Slice node producing 'y'" in result.stderr
    assert not out.exists()


def test_shape_bounds_are_left_and_run_on_tract() -> None:
    lowered = seqlower.lower(SHAPE_BOUNDS, target="tract", check=False)
    feeds = {"x": FEEDS["x"]}
    assert_same(run("onnxruntime", SHAPE_BOUNDS, feeds), run("tract", lowered, feeds))


def test_embedding_bag_is_blocked_by_its_slices_and_inspect_says_so() -> None:
    """PyTorch's embedding_bag slices the weight rows by its offsets: exit 1 in the check
    before, while inspect named no blocker; now both name the Slices."""
    with pytest.raises(TargetError) as caught:
        seqlower.lower(onnx.load(BAG), target="tract", check=False)
    assert caught.value.blockers and all(
        "Slice node" in b and "tract 0.23.9 cannot load" in b for b in caught.value.blockers
    )
    view = seqlower.inspect_model(BAG, ["tract"]).pipelines[0]
    assert view.blockers == caught.value.blockers
