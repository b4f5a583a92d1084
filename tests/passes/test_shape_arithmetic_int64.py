"""ShapeArithmeticInInt64 (``shape-arithmetic-in-int64``, tract's row): tf2onnx's int32 shape
arithmetic (``Cast(Shape(x), to=int32)`` ... ``Cast(to=int64)``, the zero state of every Keras
recurrent layer) computed in int64, so tract 0.23.9 types it with the model's declared facts
('shape input is variable, of variable length' otherwise); other readers get int32 back."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest

import seqlower
from seqlower.passes import ShapeArithmeticInInt64
from tests.helpers import all_op_types
from tests.runtimes import RuntimeFailure, assert_same, require, run

# What tf2onnx writes for tf.zeros([batch, 5]) (k2_bilstm_sum_op17's "zeros_1"), plus the batch
# as an int32 output and an int32 value from outside (a Scan reads such a one as a state).
ZERO_STATE = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, T, 4] x, int32 k) => (float[N, 5] zeros, int32[1] batch, int32[2] shifted) {
        shape = Shape(x)
        shape32 = Cast<to = 6>(shape)
        first = Constant<value = int64[1] {0}>()
        one = Constant<value = int64[1] {1}>()
        rows = Slice(shape32, first, one, first)
        batch = Identity(rows)
        five = Constant<value = int32[1] {5}>()
        packed = Concat<axis = 0>(rows, five)
        plus = Add(packed, k)
        shifted = Identity(plus)
        size = Cast<to = 7>(packed)
        zero = Constant<value = float {0}>()
        zeros = Expand(zero, size)
    }
    """
)


def _feeds(n: int) -> dict[str, np.ndarray]:
    return {"x": np.ones((n, 3, 4), np.float32), "k": np.array(2, np.int32)}


def test_int32_shape_arithmetic_becomes_int64_and_exits_as_int32() -> None:
    model = ir.serde.deserialize_model(ZERO_STATE)
    assert ShapeArithmeticInInt64()(model).modified
    lowered = ir.serde.serialize_model(model)
    onnx.checker.check_model(lowered, full_check=True)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True)
    nodes = {n.output[0]: n for n in lowered.graph.node}
    assert onnx.helper.get_attribute_value(nodes["shape32"].attribute[0]) == onnx.TensorProto.INT64
    # the int32 graph outputs keep their type: read back through a Cast to int32
    assert all_op_types(lowered).count("Cast") == 5  # shape32, size, k in, batch and plus out
    for n in (0, 1, 3):
        assert_same(
            run("onnxruntime", ZERO_STATE, _feeds(n)), run("onnxruntime", lowered, _feeds(n))
        )


@pytest.mark.parametrize("runtime", ["tract", "tract-symbolic"])
def test_loads_on_tract_with_declared_facts(runtime: str) -> None:
    require("tract")
    lowered = seqlower.lower(ZERO_STATE, target="tract", check=False)
    for n in (1, 3):
        assert_same(run("onnxruntime", ZERO_STATE, _feeds(n)), run(runtime, lowered, _feeds(n)))


def test_tract_cannot_type_an_int32_cast_of_a_symbolic_size() -> None:
    """tract 0.23.9's own limit, which the pass works around: the original does not load with
    its declared facts. When a tract does, the pass can go."""
    require("tract")
    with pytest.raises(RuntimeFailure, match="shape input is variable"):
        run("tract-symbolic", ZERO_STATE, _feeds(2))


def test_values_not_from_shapes_are_left() -> None:
    """An int32 Cast of a value known only at run time (not a shape's arithmetic): unchanged."""
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (int64[N] v) => (int32[N] w) {
            narrow = Cast<to = 6>(v)
            w = Add(narrow, narrow)
        }
        """
    )
    assert not ShapeArithmeticInInt64()(ir.serde.deserialize_model(model)).modified
