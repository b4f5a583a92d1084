"""ONNX's own node test cases: SequenceMap and the cases carrying sequences through Loop/If."""

from __future__ import annotations

import re

import onnx
import pytest

import seqlower
from seqlower.verification import verify
from tests.helpers import assert_lowered_ok, assert_same, onnx_node_cases, ort_run, run_any

_ALL = onnx_node_cases()

_PATTERN = re.compile(
    r"test_sequence_map_|test_if_seq|test_if_opt|test_loop13_seq|test_loop16_seq_none"
    r"|test_sequence_insert_|test_split_to_sequence_"
)
CASES = {case.name: case for case in _ALL if _PATTERN.match(case.name)}


def test_the_cases_are_found() -> None:
    names = set(CASES)
    assert {n for n in names if n.startswith("test_sequence_map_")} >= {
        "test_sequence_map_identity_1_sequence",
        "test_sequence_map_add_2_sequences",
        "test_sequence_map_extract_shapes",
        "test_sequence_map_identity_1_sequence_1_tensor",
    }
    assert len(names) >= 20


@pytest.mark.parametrize("name", sorted(CASES))
def test_conformance_case(name: str) -> None:
    case = CASES[name]
    model: onnx.ModelProto = case.model
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    for inputs, expected in case.data_sets:
        feeds = {info.name: value for info, value in zip(model.graph.input, inputs, strict=False)}
        got = ort_run(lowered, feeds)
        assert len(got) == len(expected)
        for i, (a, e) in enumerate(zip(got, expected, strict=True)):
            assert_same(a, e, exact=False, where=f"{name} output {i}")
        # And bit-exact against the original wherever a runtime runs it.
        original, oracle = run_any(model, feeds)
        for i, (a, e) in enumerate(zip(got, original, strict=True)):
            assert_same(a, e, exact=oracle == "onnxruntime", where=f"{name} vs original {i}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_conformance_case_verifies_with_no_options(name: str) -> None:
    # The check proves each case on its own generated inputs, every draw accepted first time.
    model: onnx.ModelProto = CASES[name].model
    report = verify(model, seqlower.lower(model))
    assert report.ok, report.reason
    assert report.input_problems == [] and report.skipped == []
