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
