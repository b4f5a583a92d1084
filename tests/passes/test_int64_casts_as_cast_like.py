"""int64-casts-as-cast-like: a Scan state computed from a Cast to int64, which tract 0.23.9 types
as a size ('Impossible to unify I64 with TDim'), lowered for tract as CastLike."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest

import seqlower
from seqlower.passes import Int64CastsAsCastLike
from tests.runtimes import assert_same, require, run

# PyTorch's scan counting positives (k + (x > 0).sum(): a bool cast), and a float's truncation.
_COUNTED = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T, 3] x) => (int64 k, float[T, 3] ys) {
        k0 = Constant<value = int64 {0}>()
        k, ys = Scan<num_scan_inputs = 1, body = b (int64 a, float[3] r) => (int64 a2, float[3] y) {
            zero = Constant<value = float {0}>()
            positive = Greater(r, zero)
            CAST
            total = ReduceSum<keepdims = 0>(c)
            a2 = Add(a, total)
            y = Relu(r)
        }>(k0, x)
    }
    """
_CASTS = {
    "bool": "c = Cast<to = 7>(positive)",
    "float": "c = Cast<to = 7>(r)",
}


@pytest.mark.parametrize("kind", sorted(_CASTS))
def test_a_state_from_a_cast_to_int64_runs_on_tract(kind: str) -> None:
    """The lowering is proven on tract with both kinds of facts (before: exit 1, the check
    naming 'Impossible to unify I64 with TDim'), and gives onnxruntime's count."""
    require("tract")
    model = onnx.parser.parse_model(_COUNTED.replace("CAST", _CASTS[kind]))
    lowered = seqlower.lower(model, target="tract")
    feeds = {"x": np.array([[1.5, -2.5, 3.0], [-1.0, 0.5, 2.5]], np.float32)}
    expected = run("onnxruntime", model, feeds)
    for runtime in ("tract", "tract-symbolic"):
        assert_same(expected, run(runtime, lowered, feeds))


def test_a_cast_no_state_is_computed_from_stays() -> None:
    """A Cast to int64 only a scan output reads is left a Cast."""
    text = _COUNTED.replace("CAST", "c = Cast<to = 7>(positive)").replace(
        "a2 = Add(a, total)", "a2 = Identity(a)"
    )
    text = text.replace("float[3] y) {", "float[3] y, int64 n) {").replace(
        "y = Relu(r)", "y = Relu(r)\n            n = Identity(total)"
    )
    text = text.replace("(int64 k, float[T, 3] ys)", "(int64 k, float[T, 3] ys, int64[T] ns)")
    text = text.replace("k, ys = Scan", "k, ys, ns = Scan")
    model = ir.serde.deserialize_model(onnx.parser.parse_model(text))
    repair = Int64CastsAsCastLike()
    repair(model)
    assert repair.rewritten == 0


def test_below_opset_15_the_cast_stays() -> None:
    """CastLike is in opset 15 on: an opset-13 model's Cast stays a Cast and the lowering is
    valid ONNX (before: a CastLike at opset 13, 'No Op registered for CastLike', tf2onnx's
    opset-13 ``tf.while_loop`` summing rows)."""
    text = _COUNTED.replace("CAST", _CASTS["float"]).replace('"" : 17', '"" : 13')
    model = onnx.parser.parse_model(text)
    lowered = seqlower.lower(model, target="tract", check=False)
    onnx.checker.check_model(lowered, full_check=True)
    scan = next(n for n in lowered.graph.node if n.op_type == "Scan")
    body = next(a.g for a in scan.attribute if a.name == "body")
    ops = {n.op_type for n in body.node}
    assert "Cast" in ops and "CastLike" not in ops


# PyTorch's ``while i > 0: i -= 1`` from a length (torch 2.13's while_loop): a counter that
# starts at the number of rows, read back down, and a loop that may run none.
_COUNT_DOWN = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T, 3] x) => (float[3] h, int64 left) {
        shape = Shape(x)
        zero = Constant<value = int64[1] {0}>()
        rows = Gather(shape, zero)
        n = Squeeze(rows, zero)
        nought = Constant<value = int64 {0}>()
        go = Greater(n, nought)
        h0 = Constant<value = float[3] {0, 0, 0}>()
        left, h = Loop(, go, n, h0) <body = b (int64 it, bool c, int64 i, float[3] s)
                => (bool c2, int64 i2, float[3] s2) {
            one = Constant<value = int64 {1}>()
            i2 = Sub(i, one)
            r = Gather<axis = 0>(x, i2)
            half = Constant<value = float {0.5}>()
            scaled = Mul(s, half)
            s2 = Add(scaled, r)
            stop = Constant<value = int64 {0}>()
            c2 = Greater(i2, stop)
        }>
    }
    """


@pytest.mark.parametrize("rows", [0, 1, 5])
def test_a_counter_from_a_length_runs_on_tract(rows: int) -> None:
    """A state that starts at a length (a size to tract) is read as a tensor by the Scan and
    by the If's branch for no iteration (``torch_while_count_down`` of
    ``benchmarks/families/new_shapes.py``). Before: exit 1, 'Impossible to unify I64 with
    TDim' on tract, either facts."""
    require("tract")
    model = onnx.parser.parse_model(_COUNT_DOWN)
    lowered = seqlower.lower(model, target="tract")  # proven on tract, either facts
    feeds = {"x": np.arange(rows * 3, dtype=np.float32).reshape(rows, 3) / 4}
    expected = run("onnxruntime", model, feeds)
    for runtime in ("tract", "tract-symbolic"):
        assert_same(expected, run(runtime, lowered, feeds))
