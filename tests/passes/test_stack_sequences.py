"""Sequences of one element shape at run-time positions, as a stacked tensor (issue 30): the
sequence-free pipeline and the targets that run it give what the sequence ops give, for every
position, length and negative position, and fail where they fail (a position out of range)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import onnx
import onnx.helper as oh
import onnx.parser
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seqlower
from seqlower.errors import SequenceFreeError
from seqlower.verification._reference_ops import Evaluator
from tests.helpers import all_op_types
from tests.runtimes import RuntimeFailure, assert_same, require, run

SHAPE = [2, 3]
_SEQUENCE_OPS = {"SequenceConstruct", "SequenceAt", "SequenceInsert", "SequenceErase"}


def chain(count: int, steps: list[str], concat: bool, opset: int = 18) -> onnx.ModelProto:
    """``SequenceConstruct(e0 .. e{count-1})``, then each step (``erase``, ``erase_last``,
    ``insert``, ``append``) with its own position input, then ``SequenceAt(at)`` and
    ``SequenceLength``, and (``concat``) both ``ConcatFromSequence`` forms."""
    float_info = [
        oh.make_tensor_value_info(f"e{k}", onnx.TensorProto.FLOAT, SHAPE) for k in range(count)
    ]
    inputs = [*float_info, oh.make_tensor_value_info("t", onnx.TensorProto.FLOAT, SHAPE)]
    nodes = [oh.make_node("SequenceConstruct", [f"e{k}" for k in range(count)], ["s0"])]
    for k, step in enumerate(steps):
        args = {
            "erase": [f"s{k}", f"p{k}"],
            "erase_last": [f"s{k}"],
            "insert": [f"s{k}", "t", f"p{k}"],
            "append": [f"s{k}", "t"],
        }[step]
        if step in ("erase", "insert"):
            inputs.append(oh.make_tensor_value_info(f"p{k}", onnx.TensorProto.INT64, []))
        op = "SequenceErase" if step.startswith("erase") else "SequenceInsert"
        nodes.append(oh.make_node(op, args, [f"s{k + 1}"]))
    last = f"s{len(steps)}"
    inputs.append(oh.make_tensor_value_info("at", onnx.TensorProto.INT32, []))
    nodes += [
        oh.make_node("SequenceAt", [last, "at"], ["y"]),
        oh.make_node("SequenceLength", [last], ["n"]),
    ]
    outputs = [
        oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, SHAPE),
        oh.make_tensor_value_info("n", onnx.TensorProto.INT64, []),
    ]
    if concat:
        nodes += [
            oh.make_node("ConcatFromSequence", [last], ["joined"], axis=1),
            oh.make_node("ConcatFromSequence", [last], ["stacked"], axis=-1, new_axis=1),
        ]
        outputs += [
            oh.make_tensor_value_info("joined", onnx.TensorProto.FLOAT, [2, "J"]),
            oh.make_tensor_value_info("stacked", onnx.TensorProto.FLOAT, [*SHAPE, "K"]),
        ]
    graph = oh.make_graph(nodes, "chain", inputs, outputs)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def feeds_for(model: onnx.ModelProto, positions: list[int], at: int) -> dict[str, np.ndarray]:
    feeds: dict[str, np.ndarray] = {}
    drawn = iter(positions)
    for info in model.graph.input:
        if info.name.startswith("e") or info.name == "t":
            value = float(info.name[1:]) if info.name != "t" else 9.0
            feeds[info.name] = np.full(SHAPE, value, np.float32) + np.arange(3, dtype=np.float32)
        elif info.name.startswith("p"):
            feeds[info.name] = np.array(next(drawn), np.int64)
    feeds["at"] = np.array(at, np.int32)
    return feeds


def outcome(runner: Any) -> list[np.ndarray] | None:
    """The outputs, or None when the run fails."""
    try:
        return [np.asarray(v) for v in runner()]
    except (RuntimeFailure, Exception):
        return None


def lowered(model: onnx.ModelProto, target: str | None = None) -> onnx.ModelProto:
    result = (
        seqlower.lower(model, sequence_free=True, check=False)
        if target is None
        else seqlower.lower(model, target=target, check=False)
    )
    onnx.checker.check_model(result, full_check=True)
    onnx.shape_inference.infer_shapes(result, check_type=True, strict_mode=True)
    assert not _SEQUENCE_OPS & set(all_op_types(result))
    return result


@st.composite
def chains(draw: st.DrawFn) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    count = draw(st.integers(1, 4))
    steps = draw(st.lists(st.sampled_from(["erase", "erase_last", "insert", "append"]), max_size=3))
    length = count + sum(1 if s in ("insert", "append") else -1 for s in steps)
    model = chain(count, steps, concat=length >= 1)  # ConcatFromSequence of nothing: below
    positions = [draw(st.integers(-6, 6)) for s in steps if s in ("erase", "insert")]
    return model, feeds_for(model, positions, draw(st.integers(-6, 6)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains())
def test_stacked_sequences_match_the_sequence_ops(case: tuple[onnx.ModelProto, Any]) -> None:
    """Against onnx.reference (SequenceInsert corrected: onnx's takes positions modulo the
    length) and onnxruntime: the same outputs where they run, a failure where they fail."""
    model, feeds = case
    want = outcome(lambda: Evaluator(model).run(None, feeds))
    assert_equal_outcomes(want, outcome(lambda: run("onnxruntime", model, feeds)))
    result = lowered(model)
    assert_equal_outcomes(want, outcome(lambda: run("onnxruntime", result, feeds)))
    assert_equal_outcomes(want, outcome(lambda: Evaluator(result).run(None, feeds)))


def assert_equal_outcomes(want: list[np.ndarray] | None, got: list[np.ndarray] | None) -> None:
    if want is None or got is None:
        assert want is None and got is None, (want, got)
    else:
        assert_same(want, got)


def test_corrected_sequence_insert_is_onnxruntimes() -> None:
    model = chain(2, ["insert"], concat=True)
    for position in range(-4, 5):
        feeds = feeds_for(model, [position], 0)
        assert_equal_outcomes(
            outcome(lambda f=feeds: run("onnxruntime", model, f)),
            outcome(lambda f=feeds: Evaluator(model).run(None, f)),
        )


# Every position of a three-element sequence, with one erase and one insert, on each runtime.
GRID = [
    (p, q, a) for p in (-4, -3, -1, 0, 2, 3) for q in (-4, -3, 0, 2, 3) for a in (-4, -1, 0, 2, 3)
]


@pytest.mark.parametrize("target", ["openvino", "tract"])
def test_targets_give_the_sequence_ops_values(target: str) -> None:
    require(target)
    model = chain(3, ["erase", "insert"], concat=True)
    result = lowered(model, target)
    for p, q, a in GRID:
        feeds = feeds_for(model, [p, q], a)
        want = outcome(lambda f=feeds: run("onnxruntime", model, f))
        if want is None and target == "tract":
            continue  # tract aborts the process on a bad index: test_tract_aborts_on_a_bad_position
        assert_equal_outcomes(want, outcome(lambda f=feeds: run(target, result, f)))


@pytest.mark.parametrize("target", ["openvino", "tinygrad"])
def test_bad_positions_fail(target: str) -> None:
    """OpenVINO's Gather returns zeros for an out-of-range index: the Reshape check fails."""
    require(target)
    model = chain(3, ["erase", "insert"], concat=False)
    result = lowered(model, target)
    assert any("fails_if_position_out_of_range" in n.name for n in result.graph.node)
    assert_same(
        run("onnxruntime", model, feeds_for(model, [-1, 2], -1)),
        run(target, result, feeds_for(model, [-1, 2], -1)),
    )
    for positions, at in (([3, 0], 0), ([0, 4], 0), ([0, 0], 3), ([-4, 0], 0), ([0, 0], -4)):
        with pytest.raises(RuntimeFailure):
            run(target, result, feeds_for(model, positions, at))
    # SequenceAt of the constructed sequence itself (fold-sequence-ops leaves it to the stack)
    direct = chain(3, [], concat=False)
    lowered_direct = lowered(direct, target)
    assert_same(
        run("onnxruntime", direct, feeds_for(direct, [], -3)),
        run(target, lowered_direct, feeds_for(direct, [], -3)),
    )
    for at in (3, -4):
        with pytest.raises(RuntimeFailure):
            run(target, lowered_direct, feeds_for(direct, [], at))


@pytest.mark.parametrize("positions, at", [([3, 0], 0), ([0, 4], 0), ([0, 0], 3)])
def test_tract_aborts_on_a_bad_position(positions: list[int], at: int) -> None:
    """tract 0.23.9's Gather panics on an out-of-range index (its process aborts: the check
    runs tract in a child process): a failure, never a value."""
    require("tract")
    model = chain(3, ["erase", "insert"], concat=False)
    result = lowered(model, "tract")
    with pytest.raises(RuntimeFailure, match=r"tract aborted the process .*out of range"):
        run("tract", result, feeds_for(model, positions, at))


# The smallest model that shows it: a length read from a shape, returned.
SHAPE_LENGTH = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 18]>
    g (float[N] x) => (int64 n) {
        shape = Shape(x)
        zero = Constant<value = int64 {0}>()
        n = Gather(shape, zero)
    }
    """
)


def test_tract_returns_no_length_read_from_a_shape() -> None:
    """tract 0.23.9's Python API (why tract's row counts returned lengths from data)."""
    with pytest.raises(RuntimeFailure, match="TDim"):
        run("tract", SHAPE_LENGTH, {"x": np.zeros(3, np.float32)})


def test_an_empty_sequence_takes_its_first_element_at_a_run_time_position() -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 18]>
        g (float[2, 3] t, int64 p, int64 a) => (float[2, 3] y, int64 n) {
            s = SequenceEmpty<dtype = 1>()
            s1 = SequenceInsert(s, t, p)
            s2 = SequenceInsert(s1, t, p)
            y = SequenceAt(s2, a)
            n = SequenceLength(s2)
        }
        """
    )
    result = lowered(model)
    t = np.arange(6, dtype=np.float32).reshape(2, 3)
    for p in (-1, 0, 1):
        for a in (-3, -1, 0, 1, 2):
            feeds = {"t": t, "p": np.array(p), "a": np.array(a)}
            want = outcome(lambda f=feeds: run("onnxruntime", model, f))
            assert_equal_outcomes(want, outcome(lambda f=feeds: run("onnxruntime", result, f)))


SPLIT = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 18]>
    g (float[4, M] x, float[4] t, int64 p) => (float[4, K] y, float[4, K] z) {
        s = SplitToSequence<axis = 1, keepdims = 0>(x)
        s1 = SequenceInsert(s, t, p)
        y = ConcatFromSequence<axis = 1, new_axis = 1>(s1)
        pieces = SplitToSequence<axis = 1>(x)
        s2 = SequenceErase(pieces, p)
        z = ConcatFromSequence<axis = 1>(s2)
    }
    """
)


@pytest.mark.parametrize("target", [None, "openvino", "tract"])
def test_run_time_splits_stack(target: str | None) -> None:
    """``SplitToSequence`` of a run-time count (with and without keepdims) is its tensor with
    the split axis moved first."""
    if target:
        require(target)
    result = lowered(SPLIT, target)
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    for p in (-5, -1, 0, 2, 4):
        feeds = {"x": x, "t": np.full(4, -1, np.float32), "p": np.array(p)}
        assert_same(run("onnxruntime", SPLIT, feeds), run(target or "onnxruntime", result, feeds))


def test_static_splits_of_equal_pieces_stack() -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 18]>
        g (float[6, 2] x, int64 p) => (float[2, 2] y, float[2, 2, 2] z) {
            two = Constant<value = int64 {2}>()
            s = SplitToSequence<axis = 0>(x, two)
            y = SequenceAt(s, p)
            s1 = SequenceErase(s, p)
            z = ConcatFromSequence<axis = 0, new_axis = 1>(s1)
        }
        """
    )
    result = lowered(model)
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    for p in (-3, 0, 2):
        feeds = {"x": x, "p": np.array(p)}
        assert_same(run("onnxruntime", model, feeds), run("onnxruntime", result, feeds))


def test_elements_of_unproven_shapes_stay_with_the_reason() -> None:
    """ONNX's test_sequence_model1: elements [2,3,4], [1,3,4], [3,3,4] at a run-time position."""
    model = _ONNX_CASES["test_sequence_model1"].model
    with pytest.raises(SequenceFreeError, match="not proven to have one shape"):
        seqlower.lower(model, sequence_free=True, check=False)


SIZED_SPLIT = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 12]>
    g (float[N] x, int64[3] sizes) => (int64 n) {
        s = SplitToSequence(x, sizes)
        n = SequenceLength(s)
    }
    """
)


@pytest.mark.parametrize("target", [None, "openvino", "tract"])
def test_the_length_of_a_sized_split_fails_as_the_split_does(target: str | None) -> None:
    """(tract aborts the process on sizes that do not add up: not run there.)"""
    if target:
        require(target)
    result = lowered(SIZED_SPLIT, target)
    x = np.zeros(5, np.float32)
    cases = (([1, 2, 2], False), ([0, 5, 0], False), ([1, 1, 1], True))
    for sizes, fails in cases[:2] if target == "tract" else cases:
        feeds = {"x": x, "sizes": np.array(sizes, np.int64)}
        assert (outcome(lambda f=feeds: run("onnxruntime", SIZED_SPLIT, f)) is None) == fails
        got = outcome(lambda f=feeds: run(target or "onnxruntime", result, f))
        assert (got is None) == fails
        if not fails:
            assert got is not None and int(got[0]) == 3


def _onnx_cases() -> dict[str, Any]:
    from onnx.backend.test.case.model import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {c.name: c for c in collect_testcases() if c.name.startswith("test_sequence_model")}


_ONNX_CASES = _onnx_cases()


@pytest.mark.parametrize("target", ["onnxruntime", "openvino", "tract"])
@pytest.mark.parametrize(
    "name", ["test_sequence_model2", "test_sequence_model3", "test_sequence_model7"]
)
def test_onnx_sequence_cases(name: str, target: str) -> None:
    """ONNX's own cases, positions as graph inputs (initializers a caller may override)."""
    case = _ONNX_CASES[name]
    inputs, expected = case.data_sets[0]
    names = [i.name for i in case.model.graph.input]
    feeds = dict(zip(names, inputs, strict=False))
    result = seqlower.lower(case.model, target=target, check=False)
    got = run(target, result, feeds)
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_allclose(have, want, rtol=1e-6)
