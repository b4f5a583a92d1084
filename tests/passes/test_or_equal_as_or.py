"""GreaterOrEqual/LessOrEqual as Or(Greater/Less, Equal) where IREE lacks the version (issue 46)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.helper
import onnx_ir as ir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from seqlower.passes import OrEqualAsOr, create_pass
from tests.helpers import all_op_types
from tests.runtimes import run

#: Every element type GreaterOrEqual-12 and LessOrEqual-12 take.
DTYPES = [
    np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64,
    np.float16, np.float32, np.float64,
]  # fmt: skip


def _model(
    op: str, opset: int, dtype: type, a: tuple[int, ...], b: tuple[int, ...]
) -> onnx.ModelProto:
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    out = np.broadcast_shapes(a, b)
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node(op, ["a", "b"], ["c"], name="cmp")],
        "g",
        [
            onnx.helper.make_tensor_value_info("a", elem, list(a)),
            onnx.helper.make_tensor_value_info("b", elem, list(b)),
        ],
        [onnx.helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, list(out))],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _lowered(model: onnx.ModelProto, **kw: Any) -> onnx.ModelProto:
    ir_model = ir.serde.deserialize_model(model)
    OrEqualAsOr(**kw)(ir_model)
    lowered = ir.serde.serialize_model(ir_model)
    onnx.checker.check_model(lowered, full_check=True)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True)
    return lowered


@st.composite
def _cases(draw: st.DrawFn) -> tuple[str, int, type, np.ndarray, np.ndarray]:
    op = draw(st.sampled_from(["GreaterOrEqual", "LessOrEqual"]))
    opset = draw(st.integers(12, 15))
    dtype: Any = draw(st.sampled_from(DTYPES))
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
    a_shape, b_shape = shapes.input_shapes
    if np.issubdtype(dtype, np.floating):
        values = st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.5, 2.0])
    else:
        info = np.iinfo(dtype)
        values = st.sampled_from([int(info.min), int(info.max), 0, 1, 2])
    a = draw(hnp.arrays(dtype, a_shape, elements=values))
    # both from the same few values, so equal elements are common
    b = draw(hnp.arrays(dtype, b_shape, elements=values))
    return op, opset, dtype, a, b


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_or_equal_as_or_is_exact(case: tuple[str, int, type, np.ndarray, np.ndarray]) -> None:
    """Over every type, broadcast shapes, NaN, infinities and signed zeros, opsets 12 to 15:
    the rewrite's output equals the op's on onnxruntime, element for element, and the model
    passes the full check (Greater/Less and Equal take every type the op does)."""
    op, opset, dtype, a, b = case
    model = _model(op, opset, dtype, a.shape, b.shape)
    lowered = _lowered(model, lacks={op: (12,)})
    assert op not in all_op_types(lowered)
    assert {"Or", "Equal"} <= set(all_op_types(lowered))
    feeds = {"a": a, "b": b}
    (expected,) = run("onnxruntime", model, feeds)
    (actual,) = run("onnxruntime", lowered, feeds)
    assert actual.dtype == expected.dtype == np.bool_
    np.testing.assert_array_equal(actual, expected)
    np.testing.assert_array_equal(actual, a >= b if op == "GreaterOrEqual" else a <= b)


def test_only_the_versions_iree_lacks_are_rewritten() -> None:
    """The row's configuration reads IREE's table: GreaterOrEqual-12 (opsets 12 to 15) is
    rewritten, GreaterOrEqual-16 and LessOrEqual (which IREE converts) are kept."""
    made = create_pass("iree-or-equal-as-or", min_opset=13)
    for opset, op, kept in [
        (12, "GreaterOrEqual", False),
        (15, "GreaterOrEqual", False),
        (16, "GreaterOrEqual", True),
        (13, "LessOrEqual", True),
    ]:
        ir_model = ir.serde.deserialize_model(_model(op, opset, np.float32, (2,), (2,)))
        made(ir_model)
        ops = all_op_types(ir.serde.serialize_model(ir_model))
        assert (op in ops) == kept, (op, opset)
