"""``--optional-input NAME=present|absent`` (``FixOptionalInputs``, then ``FoldOptionals``): an
optional graph input's presence fixed by the caller, so the optional ops reading it fold away;
ONNX's own optional-input cases on each runtime against their expected outputs, and the
conformance set of sequence and optional cases all running on onnxruntime after
``--target onnxruntime`` (onnxruntime 1.32 has no kernel for the opset-28 optional ops)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.parser
import pytest
from onnx import numpy_helper

import seqlower
from seqlower.errors import BadOptionError
from tests.helpers import (
    all_op_types,
    assert_one_line_error,
    assert_same,
    every_graph,
    onnx_node_cases,
    run_cli,
)
from tests.runtimes import require, run


def _conformance_set(cases: list[Any]) -> dict[str, Any]:
    """ONNX's node cases with a sequence or optional op, or a sequence or optional input or
    output."""
    chosen = {}
    for case in cases:
        graph = case.model.graph
        kinds = {v.type.WhichOneof("value") for v in [*graph.input, *graph.output]}
        ops = {node.op_type for g in every_graph(graph) for node in g.node}
        if kinds - {"tensor_type"} or any(o.startswith(("Sequence", "Optional")) for o in ops):
            chosen[case.name] = case
    return chosen


CONFORMANCE = _conformance_set(onnx_node_cases())
WITH_OPTIONAL_INPUT = {
    name: case
    for name, case in CONFORMANCE.items()
    if any(i.type.HasField("optional_type") for i in case.model.graph.input)
}


def _presence(case: Any) -> dict[str, bool]:
    """The case's optional inputs: present where its data set gives a value."""
    inputs, _ = case.data_sets[0]
    return {
        info.name: value is not None
        for info, value in zip(case.model.graph.input, inputs, strict=False)
        if info.type.HasField("optional_type")
    }


def _feeds(case: Any) -> dict[str, Any]:
    inputs, _ = case.data_sets[0]
    return {
        info.name: value
        for info, value in zip(case.model.graph.input, inputs, strict=False)
        if value is not None
    }


def _matches(case: Any, got: list[Any]) -> None:
    _, expected = case.data_sets[0]
    assert len(got) == len(expected)
    for k, (have, want) in enumerate(zip(got, expected, strict=True)):
        if isinstance(want, list):
            have = list(have)
        assert_same(have, want, exact=False, where=f"{case.name} output {k}")


def test_the_cases_are_found() -> None:
    assert len(CONFORMANCE) >= 34
    assert len(WITH_OPTIONAL_INPUT) >= 4
    assert {True, False} <= {p for c in WITH_OPTIONAL_INPUT.values() for p in _presence(c).values()}


@pytest.mark.parametrize("name", sorted(CONFORMANCE))
def test_conformance_set_runs_on_onnxruntime(name: str) -> None:
    """Every case, lowered for onnxruntime (its optional inputs fixed as the case passes them),
    runs there and gives the case's expected outputs."""
    case = CONFORMANCE[name]
    lowered = seqlower.lower(case.model, target="onnxruntime", optional_inputs=_presence(case))
    onnx.checker.check_model(lowered, full_check=True)
    _matches(case, run("onnxruntime", lowered, _feeds(case)))


@pytest.mark.parametrize("target", ["onnxruntime", "openvino", "tract"])
@pytest.mark.parametrize("name", sorted(WITH_OPTIONAL_INPUT))
def test_optional_input_cases(name: str, target: str) -> None:
    case = WITH_OPTIONAL_INPUT[name]
    if target != "onnxruntime" and any(
        i.type.optional_type.elem_type.HasField("sequence_type") for i in case.model.graph.input
    ):
        pytest.skip("an optional sequence input: no sequence-free form")
    require(target)  # lower(target=) proves there
    lowered = seqlower.lower(case.model, target=target, optional_inputs=_presence(case))
    if name.startswith("test_optional_"):  # the others carry optionals through If/Loop
        assert not [op for op in all_op_types(lowered) if op.startswith("Optional")]
    _matches(case, run(target, lowered, _feeds(case)))


MAYBE = """
<ir_version: 8, opset_import: ["" : 18]>
maybe (float[2] x, optional(float[2]) o) => (bool has, float[2] y, float[2] z) {
    has = OptionalHasElement(o)
    y = If(has) <then_branch = t () => (float[2] a) {
        e = OptionalGetElement(o)
        a = Add(x, e)
    }, else_branch = f () => (float[2] b) { b = Identity(x) }>
    z = Neg(x)
}
"""

X = np.array([1.0, -2.0], np.float32)


@pytest.mark.parametrize("present", [True, False])
def test_presence_folds_in_the_default_pipeline(present: bool) -> None:
    """Without a target too: the input fixed, the optional ops gone, the proof through the API
    against the original given the same input (the check compares one interface)."""
    model = onnx.parser.parse_model(MAYBE)
    lowered = seqlower.lower(model, optional_inputs={"o": present})
    left = [op for op in all_op_types(lowered) if op.startswith("Optional")]
    # absent: the OptionalGetElement in the branch not taken stays (no pass folds that If here)
    assert left == ([] if present else ["Optional", "OptionalGetElement"])
    names = [i.name for i in lowered.graph.input]
    assert names == (["x", "o"] if present else ["x"])
    feeds = {"x": X, **({"o": np.array([10.0, 20.0], np.float32)} if present else {})}
    has, y, _ = run("onnxruntime", lowered, feeds)
    assert bool(has) is present
    np.testing.assert_array_equal(y, X + feeds["o"] if present else X)
    require("tract")
    seqlower.lower(model, optional_inputs={"o": present}, target="tract")  # proven there


def test_an_unknown_or_plain_input_is_named() -> None:
    model = onnx.parser.parse_model(MAYBE)
    with pytest.raises(BadOptionError, match="--optional-input nope: no input of that name"):
        seqlower.lower(model, optional_inputs={"nope": True})
    with pytest.raises(BadOptionError, match=r"x: that input is not optional .*optional inputs: o"):
        seqlower.lower(model, optional_inputs={"x": True})


def test_cli(tmp_path: Path) -> None:
    source = tmp_path / "maybe.onnx"
    onnx.save(onnx.parser.parse_model(MAYBE), source)
    out = tmp_path / "out.onnx"
    require("openvino")
    result = run_cli(source, "-o", out, "--target", "openvino", "--optional-input", "o=absent")
    assert result.exit_code == 0, result.output
    lowered = onnx.load(out)
    assert [i.name for i in lowered.graph.input] == ["x"]
    assert not [op for op in all_op_types(lowered) if op.startswith("Optional")]
    bad = run_cli(source, "-o", tmp_path / "b.onnx", "--optional-input", "x=present")
    assert_one_line_error(bad, "--optional-input x", "not optional")
    assert not (tmp_path / "b.onnx").exists()
    typo = run_cli(source, "-o", tmp_path / "c.onnx", "--optional-input", "o=maybe")
    assert typo.exit_code == 2 and "o=maybe" in typo.output


def test_a_present_input_read_by_test_data(tmp_path: Path) -> None:
    """``--inputs`` with the optional's tensor under its name, as ONNX's test folders hold it."""
    case = WITH_OPTIONAL_INPUT["test_optional_get_element_optional_tensor"]
    source = tmp_path / "model.onnx"
    onnx.save(case.model, source)
    data = tmp_path / "test_data_set_0"
    data.mkdir()
    value = case.data_sets[0][0][0]
    name = case.model.graph.input[0].name
    (data / "input_0.pb").write_bytes(numpy_helper.from_array(value, name).SerializeToString())
    out = tmp_path / "out.onnx"
    flag = f"{name}=present"
    result = run_cli(source, "-o", out, "--optional-input", flag, "--inputs", data)
    assert result.exit_code == 0, result.output
