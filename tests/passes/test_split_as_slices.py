"""Split with a sizes input as Slices (onnx2torch has no opset-18 Split converter)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seqlower.passes import SplitAsSlices
from seqlower.targets import TARGETS
from tests.helpers import all_op_types
from tests.runtimes import assert_same, run

MODEL = """
<ir_version: 8, opset_import: ["" : 18]>
g (float[n,4] x) => (float[1,4] a, float[?,4] b, float[?,2] c, float[?,2] d) {
    one = Constant <value = int64[1] {1}> ()
    n = Shape <start = 0, end = 1> (x)
    rest = Sub (n, one)
    sizes = Concat <axis = 0> (one, rest)
    a, b = Split <axis = 0> (x, sizes)
    halves = Constant <value = int64[2] {2, 2}> ()
    c, d = Split <axis = -1> (b, halves)
}
"""


def _lowered(model: onnx.ModelProto) -> onnx.ModelProto:
    ir_model = ir.serde.deserialize_model(model)
    SplitAsSlices()(ir_model)
    lowered = ir.serde.serialize_model(ir_model)
    onnx.checker.check_model(lowered, full_check=True)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True)
    return lowered


@pytest.mark.parametrize("rows", [1, 2, 5])
def test_computed_and_constant_sizes_become_slices(rows: int) -> None:
    """PyTorch's split([1, N-1]) (sizes computed) and an even split (constant sizes); the
    pieces keep the outputs' names."""
    model = onnx.parser.parse_model(MODEL)
    lowered = _lowered(model)
    ops = all_op_types(lowered)
    assert "Split" not in ops and ops.count("Slice") == 4
    assert [o.name for o in lowered.graph.output] == ["a", "b", "c", "d"]
    feeds = {"x": np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)}
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


def _equal(rows: str, pieces: int) -> onnx.ModelProto:
    outputs = ", ".join(f"float[M, 4] p{k}" for k in range(pieces))
    names = ", ".join(f"p{k}" for k in range(pieces))
    return onnx.parser.parse_model(
        f"""
        <ir_version: 8, opset_import: ["" : 18]>
        g (float[{rows}, 4] x) => ({outputs}) {{
            {names} = Split <axis = 0, num_outputs = {pieces}> (x)
        }}
        """
    )


def test_equal_split_along_a_dynamic_axis_is_left() -> None:
    assert "Split" in all_op_types(_lowered(_equal("N", 2)))


@pytest.mark.parametrize(("rows", "pieces"), [(4, 2), (5, 2), (7, 3), (1, 1)])
def test_equal_split_along_a_static_axis_is_sliced(rows: int, pieces: int) -> None:
    """Pieces of ceil(rows / pieces), the last the rest (ONNX's num_outputs)."""
    model = _equal(str(rows), pieces)
    lowered = _lowered(model)
    assert "Split" not in all_op_types(lowered)
    feeds = {"x": np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)}
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


def test_onnx2torch_target_runs_it() -> None:
    assert "split-as-slices" in TARGETS["onnx2torch"].passes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(0, 3), min_size=1, max_size=4),
    axis=st.sampled_from([0, 1, -1]),
    computed=st.booleans(),
    other=st.integers(1, 3),
)
def test_slices_equal_split_property(
    sizes: list[int], axis: int, computed: bool, other: int
) -> None:
    """Any sizes (zeros included), on any axis, constant or computed: the Slices give exactly
    the Split's pieces."""
    total, count = sum(sizes), len(sizes)
    shape = [total, other] if axis == 0 else [other, total]
    outputs = ", ".join(f"float[?,?] p{k}" for k in range(count))
    pieces = ", ".join(f"p{k}" for k in range(count))
    literal = ", ".join(str(s) for s in sizes)
    sizes_line = (
        "sizes = Identity (given)"
        if computed
        else f"sizes = Constant <value = int64[{count}] {{{literal}}}> ()"
    )
    inputs = f"float[{shape[0]},{shape[1]}] x" + (f", int64[{count}] given" if computed else "")
    model = onnx.parser.parse_model(
        f"""
        <ir_version: 8, opset_import: ["" : 18]>
        g ({inputs}) => ({outputs}) {{
            {sizes_line}
            {pieces} = Split <axis = {axis}> (x, sizes)
        }}
        """
    )
    lowered = _lowered(model)
    assert "Split" not in all_op_types(lowered)
    feeds = {"x": np.arange(shape[0] * shape[1], dtype=np.float32).reshape(shape)}
    if computed:
        feeds["given"] = np.array(sizes, np.int64)
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


def test_tract_types_no_split_into_sizes_from_a_shape() -> None:
    """tract 0.23.9 with declared facts: 'Undetermined symbol in expression: n+-1' on the Split
    into [1, n - 1] (PyTorch's split(x, [1, n - 1])); with concrete facts it runs. When tract
    types it, this fails."""
    from tests.runtimes import RuntimeFailure, require

    require("tract")
    model = onnx.parser.parse_model(MODEL)
    feeds = {"x": np.arange(20, dtype=np.float32).reshape(5, 4)}
    assert_same(run("onnxruntime", model, feeds), run("tract", model, feeds))
    with pytest.raises(RuntimeFailure, match="Undetermined symbol"):
        run("tract-symbolic", model, feeds)


@pytest.mark.parametrize("rows", [1, 2, 5])
def test_tract_lowering_slices_splits_by_shapes_only(rows: int) -> None:
    """``split-by-shapes-as-slices``: the Split into [1, n - 1] as Slices whose bounds are added
    up (no CumSum: 'TDim is not a number'), proven on tract with both kinds of facts (before:
    exit 1); the Split into constant halves stays a Split."""
    import seqlower

    model = onnx.parser.parse_model(MODEL)
    lowered = seqlower.lower(model, target="tract")
    ops = [n.op_type for n in lowered.graph.node]
    assert ops.count("Split") == 1 and "CumSum" not in ops
    feeds = {"x": np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)}
    want = run("onnxruntime", model, feeds)
    for runtime in ("onnxruntime", "tract", "tract-symbolic"):
        assert_same(want, run(runtime, lowered, feeds))
