"""UnrollConstantScans (``unroll-constant-scans``, the onnx2torch target): Scans of a constant
trip count become copies of their body; everything else stays. Each lowered model runs on
onnxruntime against the original, bit-exact for integers."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest

import seqlower
from seqlower.passes import UnrollConstantScans
from tests import loop_cases as cases
from tests.helpers import all_op_types
from tests.runtimes import assert_same, run

_RNG = np.random.default_rng(33)

# tf2onnx's while-loop over an input of a fixed length (7): the same loop as for any length,
# its limit a constant (a Keras RNN with keras.Input((7, 4))).
FIXED_LENGTH_RNN = f"""
<ir_version: 8, opset_import: ["" : 17]>
rnn (float[7, 2, 3] x) => (float[7, 2, 3] ys, float[2, 3] last) {{
    limit = Constant<value = int32 {{7}}>()
    fzero = Constant<value = float {{0.0}}>()
    flimit = Cast<to = 1>(limit)
    cond0 = Less(fzero, flimit)
    start = Constant<value = int32 {{0}}>()
    h0 = Constant<value = float[2, 3] {{0, 0, 0, 0, 0, 0}}>()
    count, h, lim_final, ys = Loop(, cond0, start, h0, limit) {cases.STATIC_RNN_BODY}
    last = Identity(h)
}}
"""


def _scan(trips: str, extra: str = "") -> str:
    """A cumulative sum over the rows of ``x`` (a Scan), with ``trips`` rows."""
    return f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g ({trips} x) => (int64[3] total, int64[N, 3] sums) {{
        zero = Constant<value = int64[3] {{0, 0, 0}}>()
        total, sums = Scan(zero, x) <body = b (int64[3] acc, int64[3] row) => (
            int64[3] acc_out, int64[3] sum) {{
            acc_out = Add(acc, row)
            sum = Identity(acc_out)
        }}, num_scan_inputs = 1{extra}>
    }}
    """


def _unrolled(model: onnx.ModelProto) -> tuple[onnx.ModelProto, bool]:
    ir_model = ir.serde.deserialize_model(model)
    modified = UnrollConstantScans()(ir_model).modified
    lowered = ir.serde.serialize_model(ir_model)
    onnx.checker.check_model(lowered, full_check=True)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True)
    return lowered, modified


def test_a_fixed_length_while_loop_unrolls_for_onnx2torch() -> None:
    model = onnx.parser.parse_model(FIXED_LENGTH_RNN)
    lowered = seqlower.lower(model, target="onnx2torch", check=False)
    ops = set(all_op_types(lowered))
    assert not ops & {"Loop", "Scan"}, ops
    assert [o.name for o in lowered.graph.output] == ["ys", "last"]
    feeds = {"x": _RNG.standard_normal((7, 2, 3)).astype(np.float32)}
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


@pytest.mark.parametrize("rows", [1, 4])
def test_a_scan_of_a_static_length_unrolls(rows: int) -> None:
    model = onnx.parser.parse_model(_scan(f"int64[{rows}, 3]"))
    lowered, modified = _unrolled(model)
    assert modified and "Scan" not in all_op_types(lowered)
    assert [o.name for o in lowered.graph.output] == ["total", "sums"]
    feeds = {"x": _RNG.integers(-9, 9, size=(rows, 3)).astype(np.int64)}
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


@pytest.mark.parametrize(
    ("trips", "extra", "why"),
    [
        ("int64[N, 3]", "", "a length known only at run time"),
        ("int64[0, 3]", "", "zero iterations: the empty scan output's shape is no copy's"),
        ("int64[300, 3]", "", "more than 256 iterations"),
        ("int64[4, 3]", ", scan_input_directions = [1]", "a reverse scan"),
    ],
)
def test_other_scans_stay(trips: str, extra: str, why: str) -> None:
    model = onnx.parser.parse_model(_scan(trips, extra))
    lowered, modified = _unrolled(model)
    assert not modified, why
    assert "Scan" in all_op_types(lowered)


def test_nested_constant_loops_unroll_inside_out() -> None:
    """The `nested` test loop: a for-loop of 3 in an If branch, holding one of 2."""
    model, feeds = cases.nested()
    lowered = seqlower.lower(model, passes=["loop-to-scan-reads", "unroll-constant-scans"])
    assert not set(all_op_types(lowered)) & {"Loop", "Scan"}
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


def test_loops_of_run_time_trip_counts_stay_scans() -> None:
    """dynamic_rnn stops at min(T, max(lengths)): a Scan, not unrolled."""
    model, feeds = cases.dynamic_rnn()
    lowered = seqlower.lower(model, passes=["loop-to-scan-reads", "unroll-constant-scans"])
    assert "Scan" in all_op_types(lowered)
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


def test_a_state_passed_through_keeps_its_output_name() -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (int64[3, 2] x, int64[2] keep) => (int64[2] kept, int64[2] total) {
            zero = Constant<value = int64[2] {0, 0}>()
            kept, total = Scan(keep, zero, x) <body = b (int64[2] k, int64[2] acc, int64[2] row)
                => (int64[2] k, int64[2] acc_out) {
                acc_out = Add(acc, row)
            }, num_scan_inputs = 1>
        }
        """
    )
    lowered, modified = _unrolled(model)
    assert modified and [o.name for o in lowered.graph.output] == ["kept", "total"]
    feeds = {
        "x": np.arange(6, dtype=np.int64).reshape(3, 2),
        "keep": np.array([7, -7], dtype=np.int64),
    }
    # onnxruntime 1.32 returns zeros for a Scan state whose body output is its input (seen
    # while writing this test); onnx's reference evaluator is the oracle here.
    from onnx.reference import ReferenceEvaluator

    expected = [np.asarray(v) for v in ReferenceEvaluator(model).run(None, feeds)]
    assert_same(expected, run("onnxruntime", lowered, feeds))


def test_a_trip_count_read_from_a_static_shape_unrolls() -> None:
    """``Range(0, Shape(x)[0])`` over an ``x`` declared [4, 3]: four iterations."""
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (int64[4, 3] x) => (int64[3] total) {
            shape = Shape(x)
            zero = Constant<value = int64 {0}>()
            one = Constant<value = int64 {1}>()
            t = Gather<axis = 0>(shape, zero)
            steps = Range(zero, t, one)
            start = Constant<value = int64[3] {0, 0, 0}>()
            total, seen = Scan(start, steps) <body = b (int64[3] acc, int64 i) => (
                int64[3] acc_out, int64 i_out) {
                row = Gather<axis = 0>(x, i)
                acc_out = Add(acc, row)
                i_out = Identity(i)
            }, num_scan_inputs = 1>
        }
        """
    )
    lowered, modified = _unrolled(model)
    assert modified and "Scan" not in all_op_types(lowered)
    feeds = {"x": _RNG.integers(-9, 9, size=(4, 3)).astype(np.int64)}
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


def test_a_body_weight_is_shared_by_the_copies() -> None:
    """A weight kept in the body (as tf2onnx keeps constants there) is one Constant in the
    enclosing graph, not one per iteration."""
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[5, 3] x) => (float[3] total) {
            start = Constant<value = float[3] {0, 0, 0}>()
            total, seen = Scan(start, x) <body = b (float[3] acc, float[3] row) => (
                float[3] acc_out, float[3] scaled) <float[3] w = {0.5, 2, -1}> {
                scaled = Mul(row, w)
                acc_out = Add(acc, scaled)
            }, num_scan_inputs = 1>
        }
        """
    )
    lowered, modified = _unrolled(model)
    assert modified
    weights = [
        n
        for n in lowered.graph.node
        if n.op_type == "Constant"
        and list(onnx.numpy_helper.to_array(n.attribute[0].t).shape) == [3]
        and onnx.numpy_helper.to_array(n.attribute[0].t).tolist() == [0.5, 2.0, -1.0]
    ]
    assert len(weights) == 1
    feeds = {"x": _RNG.standard_normal((5, 3)).astype(np.float32)}
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))
