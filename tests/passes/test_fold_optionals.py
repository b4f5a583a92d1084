"""FoldOptionals (``fold-optionals``: sequence-free mode, the targets that use it, and the
onnxruntime target): optionals whose presence is known when lowering, in every scope, folded
away; those whose presence is known only at run time left as they were; and ONNX's own optional
cases through ``--target``, against their expected outputs."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnx.helper as oh
import onnx.parser
import onnx_ir as ir
import onnx_ir.passes.common
import pytest

import seqlower
from seqlower.passes import FoldOptionals
from tests.helpers import all_op_types
from tests.runtimes import assert_same, require, run

# Optional(x) read by OptionalHasElement/OptionalGetElement in the main graph and in an If
# branch; the If's output is a graph output.
WRAPPED = """
<ir_version: 8, opset_import: ["" : 18]>
wrapped (float[3] x, bool c) => (bool has, float[3] y, float[3] z) {
    opt = Optional(x)
    has = OptionalHasElement(opt)
    y = OptionalGetElement(opt)
    z = If(c) <then_branch = then () => (float[3] a) {
        inner = Optional(x)
        got = OptionalGetElement(inner)
        a = Neg(got)
    }, else_branch = other () => (float[3] b) {
        b = OptionalGetElement(x)
    }>
}
"""

FEEDS = {"x": np.array([1.0, -2.0, 3.5], dtype=np.float32), "c": np.array(True)}


def _folded(model: onnx.ModelProto) -> onnx.ModelProto:
    ir_model = ir.serde.deserialize_model(model)
    assert FoldOptionals()(ir_model).modified
    ir.passes.common.RemoveUnusedNodesPass()(ir_model)
    folded = ir.serde.serialize_model(ir_model)
    onnx.checker.check_model(folded, full_check=True)
    onnx.shape_inference.infer_shapes(folded, check_type=True, strict_mode=True)
    return folded


def _empty_optional(opset: int = 18) -> onnx.ModelProto:
    """``OptionalHasElement(Optional<type = tensor(float)>())`` and of an omitted input."""
    element = oh.make_tensor_type_proto(onnx.TensorProto.FLOAT, [2])
    nodes = [
        oh.make_node("Optional", [], ["none"], type=element),
        oh.make_node("OptionalHasElement", ["none"], ["has"]),
        oh.make_node("OptionalHasElement", [], ["has_omitted"]),
    ]
    graph = oh.make_graph(
        nodes,
        "empty",
        [],
        [
            oh.make_tensor_value_info("has", onnx.TensorProto.BOOL, []),
            oh.make_tensor_value_info("has_omitted", onnx.TensorProto.BOOL, []),
        ],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("c", [True, False])
def test_optionals_of_known_presence_fold_in_every_scope(c: bool) -> None:
    model = onnx.parser.parse_model(WRAPPED)
    onnx.checker.check_model(model, full_check=True)
    folded = _folded(model)
    assert not {op for op in all_op_types(folded) if op.startswith("Optional")}
    assert [o.name for o in folded.graph.output] == ["has", "y", "z"]
    feeds = {**FEEDS, "c": np.array(c)}
    expected = run("onnxruntime", model, feeds)
    assert expected[0].item() is True
    for runtime in ("onnxruntime", "openvino", "tract"):
        assert_same(expected, run(runtime, folded, feeds))


def test_empty_optionals_have_no_element() -> None:
    model = _empty_optional()
    folded = _folded(model)
    assert all_op_types(folded) == ["Constant", "Constant"]
    expected = run("onnxruntime", model, {})
    assert [e.item() for e in expected] == [False, False]
    for runtime in ("onnxruntime", "openvino", "tract"):
        assert_same(expected, run(runtime, folded, {}))


def test_an_optional_input_is_left() -> None:
    """Its presence is the caller's, known only at run time."""
    optional = oh.make_optional_type_proto(oh.make_tensor_type_proto(onnx.TensorProto.FLOAT, [2]))
    graph = oh.make_graph(
        [oh.make_node("OptionalHasElement", ["o"], ["has"])],
        "maybe",
        [oh.make_value_info("o", optional)],
        [oh.make_tensor_value_info("has", onnx.TensorProto.BOOL, [])],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    assert not FoldOptionals()(ir.serde.deserialize_model(model)).modified


@pytest.mark.parametrize("target", ["onnxruntime", "openvino", "tract"])
def test_targets_fold_them(target: str) -> None:
    model = onnx.parser.parse_model(WRAPPED)
    require(target)  # lower(target=) proves there
    lowered = seqlower.lower(model, target=target)
    assert not {op for op in all_op_types(lowered) if op.startswith("Optional")}
    assert_same(run("onnxruntime", model, FEEDS), run(target, lowered, FEEDS))


def _optional_cases() -> dict[str, object]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = collect_testcases(None)
    names = (
        "test_optional_get_element_tensor",
        "test_optional_get_element_sequence",
        "test_optional_has_element_empty_no_input_tensor_input",
        "test_optional_has_element_empty_no_input_name_optional_input",
    )
    return {c.name: c for c in found if c.name in names}


_CASES = _optional_cases()


@pytest.mark.parametrize("target", ["onnxruntime", "openvino", "tract"])
@pytest.mark.parametrize("name", sorted(_CASES))
def test_onnx_optional_cases(name: str, target: str) -> None:
    """ONNX's own cases (opset 28: onnxruntime 1.32 has no kernel for the opset-28 optional
    ops, OpenVINO and tract none at all), against their expected outputs."""
    case = _CASES[name]
    model = case.model  # type: ignore[attr-defined]
    inputs, expected = case.data_sets[0]  # type: ignore[attr-defined]
    if name == "test_optional_get_element_sequence" and target != "onnxruntime":
        pytest.skip("a sequence input: no sequence-free form")
    feeds = dict(zip((i.name for i in model.graph.input), inputs, strict=True))
    require(target)  # lower(target=) proves there
    lowered = seqlower.lower(model, target=target)
    got = run(target, lowered, feeds)
    for want, have in zip(expected, got, strict=True):
        if isinstance(want, list):
            assert len(want) == len(have)
            for w, h in zip(want, have, strict=True):
                np.testing.assert_array_equal(h, w)
        else:
            np.testing.assert_array_equal(have, want)
