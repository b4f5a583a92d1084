"""ShapeValuesAsTensors (``shape-values-as-tensors``, the tvm target): shape values read by an op
TVM 0.27's frontend cannot give a ShapeExpr to get a ``Cast`` in between; ops that take shapes
read them as before. The ReverseSequence of computed lengths (its index built from shapes) runs
on TVM where it is installed (apache/tvm#20065: ``Sub cannot handle ShapeExpr inputs``)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir

import seqlower
from seqlower.passes import ShapeValuesAsTensors
from tests.runtimes import assert_same, run

_RNG = np.random.default_rng(20065)

SHAPE_ARITHMETIC = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 3] x, int64[M] n) => (float[N, 3] y, int64[1] gap) {
    s = Shape(x)
    zero = Constant<value = int64[1] {0}>()
    rows = Gather<axis = 0>(s, zero)
    count = Shape(n)
    gap = Sub(count, rows)
    y = Reshape(x, s)
}
"""

REVERSE_SEQUENCE = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[T, B, 3] x, int64[B] lens) => (float[T, B, 3] y) {
    y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
}
"""


def test_only_the_reads_tvm_cannot_take_get_a_cast() -> None:
    model = onnx.parser.parse_model(SHAPE_ARITHMETIC)
    ir_model = ir.serde.deserialize_model(model)
    assert ShapeValuesAsTensors()(ir_model).modified
    lowered = ir.serde.serialize_model(ir_model)
    onnx.checker.check_model(lowered, full_check=True)
    nodes = {n.op_type: n for n in lowered.graph.node}
    casts = [n for n in lowered.graph.node if n.op_type == "Cast"]
    assert len(casts) == 2  # Sub's two inputs, both shapes
    assert set(nodes["Sub"].input) == {c.output[0] for c in casts}
    assert nodes["Reshape"].input[1] == "s"  # Reshape takes the shape as it is
    feeds = {"x": _RNG.standard_normal((4, 3)).astype(np.float32), "n": np.arange(6)}
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


def test_computed_reverse_sequence_runs_on_tvm() -> None:
    model = onnx.parser.parse_model(REVERSE_SEQUENCE)
    lowered = seqlower.lower(model, target="tvm", check=False)
    feeds = {
        "x": _RNG.standard_normal((5, 3, 3)).astype(np.float32),
        "lens": np.array([5, 2, 0], dtype=np.int64),
    }
    assert_same(run("onnxruntime", model, feeds), run("tvm", lowered, feeds))
