"""ReverseSequence lowering: bit-exact with onnxruntime's kernel for every type, layout, opset."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h

import seqlower
from seqlower.cli.commands import cli
from seqlower.errors import InvalidNodeError
from tests.helpers import (
    IR_VERSION,
    ORT_DTYPES,
    all_op_types,
    assert_same,
    make_model,
    onnx_node_cases,
    ort_run,
    parse,
    reference_run,
    seq_info,
    tensor_info,
)

NEWEST_OPSET = onnx.defs.onnx_opset_version()
ORT_MAX_OPSET = 26  # onnxruntime 1.31 loads opsets up to 26
LENS_MODES = ["input", "initializer", "constant_node", "computed"]


def reverse_model(
    dtype: int,
    shape: list[Any],
    time_axis: int,
    lens_mode: str,
    lens: np.ndarray,
    opset: int = 17,
    *,
    attrs: dict[str, int] | None = None,
) -> tuple[onnx.ModelProto, dict[str, Any]]:
    """A model y = ReverseSequence(x, lens), with lens fed in the given way."""
    attributes = {"time_axis": time_axis, "batch_axis": 1 - time_axis} if attrs is None else attrs
    nodes, inputs, inits = [], [tensor_info("x", dtype, shape)], []
    feeds: dict[str, Any] = {}
    if lens_mode == "input":
        inputs.append(tensor_info("lens", T.INT64, [len(lens)]))
        feeds["lens"] = lens
    elif lens_mode == "initializer":
        inits.append(onnx.numpy_helper.from_array(lens, "lens"))
    elif lens_mode == "constant_node":
        nodes.append(
            h.make_node(
                "Constant", [], ["lens"], value=onnx.numpy_helper.from_array(lens, "lens_value")
            )
        )
    elif lens_mode == "computed":
        inputs.append(tensor_info("raw_lens", T.INT64, [len(lens)]))
        nodes.append(h.make_node("Identity", ["raw_lens"], ["lens"]))
        feeds["raw_lens"] = lens
    nodes.append(h.make_node("ReverseSequence", ["x", "lens"], ["y"], **attributes))
    output = tensor_info("y", dtype, [None] * len(shape))
    model = make_model(nodes, inputs, [output], opset=opset, initializers=inits)
    return model, feeds


def random_data(rng: np.random.Generator, dtype: int, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == T.STRING:
        return np.array([f"s{i}" for i in range(int(np.prod(shape)))], dtype=object).reshape(shape)
    if dtype == T.BOOL:
        return rng.integers(0, 2, size=shape).astype(bool)
    np_dtype = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    if (
        dtype == T.BFLOAT16
        or np.issubdtype(np_dtype, np.floating)
        or np.issubdtype(np_dtype, np.complexfloating)
    ):
        return (rng.standard_normal(shape) * 100).astype(np_dtype)
    info = np.iinfo(np_dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=np_dtype, endpoint=True)


def numpy_reverse(x: np.ndarray, lens: np.ndarray, time_axis: int) -> np.ndarray:
    """ReverseSequence in plain numpy, for models no runtime can run as written."""
    moved = np.moveaxis(x, time_axis, 0).copy()  # [T, B, ...]
    for b, length in enumerate(lens):
        moved[:length, b] = moved[:length, b][::-1]
    return np.moveaxis(moved, 0, time_axis)


def lower_checked(model: onnx.ModelProto) -> onnx.ModelProto:
    lowered = seqlower.lower(model)
    onnx.checker.check_model(lowered, full_check=True)
    assert "ReverseSequence" not in all_op_types(lowered)
    assert [(o.domain, o.version) for o in lowered.opset_import] == [
        (o.domain, o.version) for o in model.opset_import
    ]
    return lowered


# ---------------------------------------------------------------- ONNX's own cases

ONNX_CASES = {c.name: c for c in onnx_node_cases() if c.name.startswith("test_reversesequence_")}


def restamped(model: onnx.ModelProto, opset: int, ir_version: int) -> onnx.ModelProto:
    copy = onnx.ModelProto.FromString(model.SerializeToString())
    copy.ir_version = ir_version
    del copy.opset_import[:]
    copy.opset_import.append(h.make_opsetid("", opset))
    return copy


@pytest.mark.parametrize("name", sorted(ONNX_CASES))
def test_onnx_conformance_case(name: str) -> None:
    case = ONNX_CASES[name]
    model = case.model
    lowered = lower_checked(model)  # at the case's own opset (28), which onnxruntime cannot load
    for inputs, expected in case.data_sets:
        feeds = {info.name: v for info, v in zip(model.graph.input, inputs, strict=False)}
        assert_same(reference_run(lowered, feeds)[0], expected[0])
        if "bfloat16" not in name:
            # The same node at an opset onnxruntime loads, lowered and run there.
            ort_lowered = lower_checked(restamped(model, 17, IR_VERSION))
            assert_same(ort_run(ort_lowered, feeds)[0], expected[0])


def test_conformance_cases_are_found() -> None:
    assert {"test_reversesequence_time", "test_reversesequence_batch"} <= set(ONNX_CASES)


# ---------------------------------------------------------------- exactness, property-based


@st.composite
def reverse_cases(draw: st.DrawFn) -> tuple[onnx.ModelProto, dict[str, Any]]:
    dtype = draw(st.sampled_from(ORT_DTYPES))
    rank = draw(st.integers(2, 4))
    time_axis = draw(st.integers(0, 1))
    dims = tuple(draw(st.integers(0 if i >= 2 else 1, 5)) for i in range(rank))
    if draw(st.booleans()):
        dims = (draw(st.integers(0, 5)), *dims[1:])  # a time or batch axis of 0 too
    steps, batch = dims[time_axis], dims[1 - time_axis]
    lens = np.array(
        draw(st.lists(st.integers(0, steps), min_size=batch, max_size=batch)), dtype=np.int64
    )
    shape_kind = draw(st.sampled_from(["static", "symbolic", "unknown"]))
    shape: list[Any] = (
        list(dims)
        if shape_kind == "static"
        else [f"d{i}" for i in range(rank)]
        if shape_kind == "symbolic"
        else [None] * rank
    )
    # Before opset 14, Reshape has no allowzero: an empty second axis, or an empty axis after
    # the third, is a documented limit there (a run-time error instead of an empty result),
    # tested separately.
    limited = dims[1] == 0 or 0 in dims[3:]
    opset = draw(st.integers(14 if limited else 10, ORT_MAX_OPSET))
    model, feeds = reverse_model(
        dtype, shape, time_axis, draw(st.sampled_from(LENS_MODES)), lens, opset
    )
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    feeds["x"] = random_data(rng, dtype, dims)
    return model, feeds


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reverse_cases())
def test_bit_exact_with_native_kernel(case: tuple[onnx.ModelProto, dict[str, Any]]) -> None:
    model, feeds = case
    lowered = lower_checked(model)
    expected = ort_run(model, feeds)[0]
    assert_same(ort_run(lowered, feeds)[0], expected, exact=True)
    # Keep the numpy oracle used elsewhere honest against the native kernel.
    node = next(n for n in model.graph.node if n.op_type == "ReverseSequence")
    lens = ort_run(_lens_model(model), {k: v for k, v in feeds.items() if k != "x"})[0]
    time_axis = next(a.i for a in node.attribute if a.name == "time_axis")
    assert_same(numpy_reverse(feeds["x"], lens, time_axis), expected, exact=True)


@pytest.mark.parametrize("time_axis", [0, 1])
@pytest.mark.parametrize("lens_mode", LENS_MODES)
def test_strings_with_multi_element_rows(time_axis: int, lens_mode: str) -> None:
    """onnxruntime's Gather drops all but the first string of each slice; we must not."""
    shape = (4, 3, 2, 3) if time_axis == 0 else (3, 4, 2, 3)
    lens = np.array([4, 1, 3], dtype=np.int64)
    model, feeds = reverse_model(T.STRING, list(shape), time_axis, lens_mode, lens)
    feeds["x"] = random_data(np.random.default_rng(0), T.STRING, shape)
    expected = ort_run(model, feeds)[0]
    got = ort_run(lower_checked(model), feeds)[0]
    assert got.tolist() == expected.tolist()
    assert len({s for s in got.ravel()}) == got.size  # every string kept, none blanked


@pytest.mark.parametrize("dtype", [T.BFLOAT16, T.COMPLEX64, T.COMPLEX128])
@pytest.mark.parametrize("time_axis", [0, 1])
def test_types_onnxruntime_lacks_match_reference(dtype: int, time_axis: int) -> None:
    shape = (3, 2, 2) if time_axis == 0 else (2, 3, 2)
    opset = 28 if dtype == T.BFLOAT16 else 17  # ReverseSequence takes bfloat16 from opset 28
    model, feeds = reverse_model(
        dtype, list(shape), time_axis, "input", np.array([3, 1], np.int64), opset
    )
    feeds["x"] = random_data(np.random.default_rng(1), dtype, shape)
    lowered = lower_checked(model)
    assert_same(reference_run(lowered, feeds)[0], reference_run(model, feeds)[0])


# ---------------------------------------------------------------- opsets


@pytest.mark.parametrize("opset", range(10, NEWEST_OPSET + 1))
@pytest.mark.parametrize("lens_mode", ["input", "initializer"])
@pytest.mark.parametrize("dtype", [T.FLOAT, T.STRING])
def test_every_opset(opset: int, lens_mode: str, dtype: int) -> None:
    """Only ops of the model's own opset: check_model(full_check) resolves each at that opset."""
    for time_axis in (0, 1):
        model, feeds = reverse_model(
            dtype, ["a", "b", 2], time_axis, lens_mode, np.array([2, 0, 3], np.int64), opset
        )
        lowered = lower_checked(model)
        shape = (3, 3, 2)
        feeds["x"] = random_data(np.random.default_rng(opset), dtype, shape)
        run = ort_run if opset <= ORT_MAX_OPSET else reference_run
        assert_same(run(lowered, feeds)[0], run(model, feeds)[0])
        if opset < 11:
            assert "Range" not in all_op_types(lowered)


@pytest.mark.parametrize("time_axis", [0, 1])
@pytest.mark.parametrize("lens_mode", ["initializer", "constant_node"])
def test_constant_lengths_and_static_dims_fold_in_onnxruntime(
    time_axis: int, lens_mode: str, tmp_path: Any
) -> None:
    """Constant lengths and static dimensions: nothing is computed at run time but the gather
    of the rows (a constant row index; the Reshape to rows copies nothing)."""
    import onnxruntime as ort

    shape = (5, 3, 2) if time_axis == 0 else (3, 5, 2)
    model, feeds = reverse_model(T.FLOAT, list(shape), time_axis, lens_mode, np.array([5, 0, 2]))
    lowered = lower_checked(model)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(lowered.SerializeToString(), options, providers=["CPUExecutionProvider"])
    optimized = onnx.load(tmp_path / "optimized.onnx")
    gather = "GatherND" if time_axis == 0 else "Gather"  # time-major small slices: GatherND
    assert [n.op_type for n in optimized.graph.node] == ["Reshape", gather]
    feeds["x"] = random_data(np.random.default_rng(2), T.FLOAT, shape)
    assert_same(ort_run(lowered, feeds)[0], ort_run(model, feeds)[0])


def _lens_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same model, returning the lengths its ReverseSequence receives."""
    copy = onnx.ModelProto.FromString(model.SerializeToString())
    del copy.graph.output[:]
    copy.graph.output.append(tensor_info("lens", T.INT64, None))
    copy.graph.node.pop()  # the ReverseSequence itself, last
    for name in ("x",):
        inputs = [i for i in copy.graph.input if i.name != name]
        del copy.graph.input[:]
        copy.graph.input.extend(inputs)
    return copy


# ---------------------------------------------------------------- out-of-range lengths


@pytest.mark.parametrize("time_axis", [0, 1])
@pytest.mark.parametrize("lens_mode", LENS_MODES)
@pytest.mark.parametrize("static", [True, False])
# Huge lengths overflow any arithmetic done with them (len*B wraps for B = 4); the check must
# not depend on it.
@pytest.mark.parametrize("bad", [-1, 5, 100, 2**62, 2**63 - 1, -(2**63)])
def test_out_of_range_lengths_fail_at_run_time(
    time_axis: int, lens_mode: str, static: bool, bad: int
) -> None:
    shape = (4, 4, 2)
    decl: list[Any] = list(shape) if static else ["a", "b", "c"]
    lens = np.array([2, bad, 1, 4], np.int64)
    model, feeds = reverse_model(T.FLOAT, decl, time_axis, lens_mode, lens)
    feeds["x"] = random_data(np.random.default_rng(3), T.FLOAT, shape)
    with pytest.raises(Exception):  # noqa: B017 - the native kernel's own failure
        ort_run(model, feeds)
    lowered = seqlower.lower(model)
    with pytest.raises(Exception):  # noqa: B017 - and the lowered model's
        ort_run(lowered, feeds)


@pytest.mark.parametrize("lens_mode", LENS_MODES)
@pytest.mark.parametrize("shape", [(1, 0, 0), (2, 1, 0), (2, 1, 3, 0)])
def test_length_above_time_fails_with_empty_rows(lens_mode: str, shape: tuple[int, ...]) -> None:
    """Batch-major, T below a length and rows of no elements: no element count can tell, the
    index must (found by hypothesis)."""
    lens = np.full(shape[0], shape[1] + 1, np.int64)
    model, feeds = reverse_model(T.FLOAT, ["a", "b", *["c"] * (len(shape) - 2)], 1, lens_mode, lens)
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "c2"
    feeds["x"] = np.zeros(shape, np.float32)
    with pytest.raises(Exception):  # noqa: B017
        ort_run(model, feeds)
    with pytest.raises(Exception):  # noqa: B017
        ort_run(lower_checked(model), feeds)


@pytest.mark.parametrize("time_axis", [0, 1])
@pytest.mark.parametrize("static", [True, False])
def test_large_constant_lengths_are_not_folded_into_a_huge_index(
    time_axis: int, static: bool
) -> None:
    """Past 2**20 index entries (8 MB) the index is computed instead of stored."""
    steps, batch = 1100, 1000
    shape = (steps, batch, 1) if time_axis == 0 else (batch, steps, 1)
    lens = np.random.default_rng(0).integers(0, steps + 1, batch).astype(np.int64)
    lens[0] = steps
    decl: list[Any] = list(shape) if static else ["a", "b", 1]
    model, feeds = reverse_model(T.FLOAT, decl, time_axis, "initializer", lens)
    feeds["x"] = random_data(np.random.default_rng(1), T.FLOAT, shape)
    lowered = lower_checked(model)
    assert lowered.ByteSize() < 100_000
    assert_same(ort_run(lowered, feeds)[0], ort_run(model, feeds)[0], exact=True)


_LENGTHS = st.one_of(
    st.integers(-3, 8),
    st.sampled_from([2**31, 2**62, 2**63 - 1, -(2**62), -(2**63)]),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    time_axis=st.integers(0, 1),
    dims=st.lists(st.integers(0, 4), min_size=2, max_size=4),
    lens_mode=st.sampled_from(LENS_MODES),
    static=st.booleans(),
    data=st.data(),
)
def test_fails_exactly_when_native_kernel_fails(
    time_axis: int, dims: list[int], lens_mode: str, static: bool, data: st.DataObject
) -> None:
    """Any lengths, in range or not (huge ones included): the lowered model fails at run time
    exactly when the native kernel does, and otherwise matches it."""
    shape = tuple(dims)
    batch = shape[1 - time_axis]
    lens = np.array(data.draw(st.lists(_LENGTHS, min_size=batch, max_size=batch)), np.int64)
    decl: list[Any] = list(shape) if static else [f"d{i}" for i in range(len(shape))]
    model, feeds = reverse_model(T.FLOAT, decl, time_axis, lens_mode, lens)
    feeds["x"] = random_data(np.random.default_rng(0), T.FLOAT, shape)
    try:
        expected = ort_run(model, feeds)[0]
    except Exception:
        expected = None
    lowered = lower_checked(model)
    if expected is None:
        with pytest.raises(Exception):  # noqa: B017 - any run-time failure, as natively
            ort_run(lowered, feeds)
    else:
        assert_same(ort_run(lowered, feeds)[0], expected, exact=True)


@pytest.mark.parametrize("shape", [(3, 0, 2), (0, 3, 2), (3, 2, 0), (2, 3, 0, 4), (2, 3, 4, 0)])
@pytest.mark.parametrize("time_axis", [0, 1])
@pytest.mark.parametrize("opset", [10, 13])
def test_empty_axes_before_opset_14_never_give_a_wrong_result(
    shape: tuple[int, ...], time_axis: int, opset: int
) -> None:
    """The documented limit: an empty second axis, or an empty axis after the third, may fail
    loudly, never mislead."""
    batch = shape[1 - time_axis]
    model, feeds = reverse_model(
        T.FLOAT,
        [f"d{i}" for i in range(len(shape))],
        time_axis,
        "input",
        np.zeros(batch, np.int64),
        opset=opset,
    )
    feeds["x"] = np.zeros(shape, np.float32)
    expected = ort_run(model, feeds)[0]
    try:
        got = ort_run(seqlower.lower(model), feeds)[0]
    except Exception:
        return
    assert_same(got, expected)


def test_wrong_number_of_lengths_fails_at_run_time() -> None:
    model, _ = reverse_model(T.FLOAT, ["a", "b", 2], 0, "input", np.array([1, 1], np.int64))
    model.graph.input[1].type.tensor_type.shape.dim[0].dim_param = "n"
    feeds = {"x": np.zeros((3, 4, 2), np.float32), "lens": np.array([1], np.int64)}
    with pytest.raises(Exception):  # noqa: B017
        ort_run(model, feeds)
    with pytest.raises(Exception):  # noqa: B017
        ort_run(seqlower.lower(model), feeds)


# ---------------------------------------------------------------- places and composition


def _nested_model() -> tuple[onnx.ModelProto, dict[str, Any]]:
    """ReverseSequence in a SequenceMap body inside an If branch, plus one in a function."""
    body = h.make_graph(
        [h.make_node("ReverseSequence", ["e", "lens"], ["r"], time_axis=1, batch_axis=0)],
        "map_body",
        [tensor_info("e", T.FLOAT, [2, None])],
        [tensor_info("r", T.FLOAT, None)],
    )
    then_g = h.make_graph(
        [h.make_node("SequenceMap", ["s"], ["mapped"], body=body)], "then", [], [seq_info("mapped")]
    )
    else_g = h.make_graph(
        [h.make_node("Identity", ["s"], ["same"])], "else", [], [seq_info("same")]
    )
    function = h.make_function(
        "lib",
        "Rev",
        ["a", "n"],
        ["b"],
        [h.make_node("ReverseSequence", ["a", "n"], ["b"])],
        [h.make_opsetid("", 17)],
    )
    model = make_model(
        [
            h.make_node("If", ["flag"], ["out"], then_branch=then_g, else_branch=else_g),
            h.make_node("Rev", ["x", "lens2"], ["fx"], domain="lib"),
        ],
        [
            seq_info("s"),
            tensor_info("lens", T.INT64, [2]),
            tensor_info("flag", T.BOOL, []),
            tensor_info("x", T.FLOAT, [3, 2]),
            tensor_info("lens2", T.INT64, [2]),
        ],
        [seq_info("out"), tensor_info("fx", T.FLOAT, [3, 2])],
        functions=[function],
        extra_opsets=[h.make_opsetid("lib", 1)],
    )
    rng = np.random.default_rng(4)
    feeds = {
        "s": [
            rng.standard_normal((2, 4)).astype(np.float32),
            rng.standard_normal((2, 3)).astype(np.float32),
        ],
        "lens": np.array([3, 1], np.int64),
        "flag": np.array(True),
        "x": rng.standard_normal((3, 2)).astype(np.float32),
        "lens2": np.array([2, 3], np.int64),
    }
    return model, feeds


@pytest.mark.parametrize(
    "passes",
    [
        None,
        ["lower-reverse-sequence", "lower-sequence-map"],
        ["lower-sequence-map", "lower-reverse-sequence"],
    ],
)
def test_every_place_and_either_pass_order(passes: list[str] | None) -> None:
    model, feeds = _nested_model()
    # Neither runtime runs this original (onnx.reference cannot resolve the outer-scope 'lens'
    # inside a SequenceMap body), so the expectation is computed in numpy.
    expected_map = [numpy_reverse(e, feeds["lens"], 1) for e in feeds["s"]]
    expected_fn = numpy_reverse(feeds["x"], feeds["lens2"], 0)
    lowered = seqlower.lower(model, passes=passes)
    onnx.checker.check_model(lowered, full_check=True)
    assert not {"ReverseSequence", "SequenceMap"} & set(all_op_types(lowered))
    got = ort_run(lowered, feeds)
    assert_same(got[0], expected_map)
    assert_same(got[1], expected_fn)


def test_loop_and_scan_bodies() -> None:
    rev = h.make_node("ReverseSequence", ["row", "lens"], ["rev"], time_axis=0, batch_axis=1)
    scan_body = h.make_graph(
        [rev],
        "scan_body",
        [tensor_info("row", T.FLOAT, [3, 2])],
        [tensor_info("rev", T.FLOAT, [3, 2])],
    )
    loop_body = h.make_graph(
        [
            h.make_node("ReverseSequence", ["acc", "lens"], ["acc_out"]),
            h.make_node("Identity", ["c"], ["c_out"]),
        ],
        "loop_body",
        [
            tensor_info("i", T.INT64, []),
            tensor_info("c", T.BOOL, []),
            tensor_info("acc", T.FLOAT, [3, 2]),
        ],
        [tensor_info("c_out", T.BOOL, []), tensor_info("acc_out", T.FLOAT, [3, 2])],
    )
    model = make_model(
        [
            h.make_node("Scan", ["xs"], ["ys"], body=scan_body, num_scan_inputs=1),
            h.make_node("Loop", ["n", "", "x"], ["looped"], body=loop_body),
        ],
        [
            tensor_info("xs", T.FLOAT, [4, 3, 2]),
            tensor_info("lens", T.INT64, [2]),
            tensor_info("n", T.INT64, []),
            tensor_info("x", T.FLOAT, [3, 2]),
        ],
        [tensor_info("ys", T.FLOAT, [4, 3, 2]), tensor_info("looped", T.FLOAT, [3, 2])],
    )
    rng = np.random.default_rng(5)
    feeds = {
        "xs": rng.standard_normal((4, 3, 2)).astype(np.float32),
        "lens": np.array([3, 2], np.int64),
        "n": np.array(3, np.int64),
        "x": rng.standard_normal((3, 2)).astype(np.float32),
    }
    lowered = lower_checked(model)
    for got, expected in zip(ort_run(lowered, feeds), ort_run(model, feeds), strict=True):
        assert_same(got, expected)


# ---------------------------------------------------------------- invalid nodes

INVALID = {
    "same_axes": (dict(attrs={"time_axis": 1, "batch_axis": 1}), "time_axis=1 and batch_axis=1"),
    "axis_outside": (dict(attrs={"time_axis": 2, "batch_axis": 0}), "time_axis=2"),
    "lens_rank_2": (dict(lens_shape=[2, 1]), "rank 2; it must be 1"),
    "input_rank_1": (dict(x_shape=[4]), "rank 1; it must be >= 2"),
}


def _invalid_model(
    attrs: dict[str, int] | None = None,
    lens_shape: list[int] | None = None,
    x_shape: list[int] | None = None,
) -> onnx.ModelProto:
    x_shape = x_shape or [3, 2]
    node = h.make_node("ReverseSequence", ["x", "lens"], ["y"], name="bad_rev", **(attrs or {}))
    return make_model(
        [node],
        [tensor_info("x", T.FLOAT, x_shape), tensor_info("lens", T.INT64, lens_shape or [2])],
        [tensor_info("y", T.FLOAT, [None] * len(x_shape))],
    )


@pytest.mark.parametrize("name", list(INVALID))
def test_invalid_node_api(name: str) -> None:
    kwargs, words = INVALID[name]
    with pytest.raises(InvalidNodeError) as info:
        seqlower.lower(_invalid_model(**kwargs))
    assert "bad_rev" in str(info.value) and words in str(info.value)


@pytest.mark.parametrize("name", list(INVALID))
def test_invalid_node_cli(name: str, tmp_path) -> None:
    kwargs, _ = INVALID[name]
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(_invalid_model(**kwargs), source)
    result = CliRunner().invoke(cli, [str(source), "-o", str(target)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad_rev" in lines[0], result.stderr
    assert not target.exists()


@pytest.mark.parametrize("time_axis", [0, 1])
def test_invalid_length_fails_even_with_no_time_steps(time_axis: int) -> None:
    shape = (0, 2, 3) if time_axis == 0 else (2, 0, 3)
    model, feeds = reverse_model(
        T.FLOAT, ["a", "b", "c"], time_axis, "input", np.array([0, 1], np.int64)
    )
    feeds["x"] = np.zeros(shape, np.float32)
    with pytest.raises(Exception):  # noqa: B017 - the native kernel's own failure
        ort_run(model, feeds)
    with pytest.raises(Exception):  # noqa: B017
        ort_run(seqlower.lower(model), feeds)
    feeds["lens"] = np.zeros(2, np.int64)  # valid: nothing to reverse, an empty result
    assert_same(ort_run(seqlower.lower(model), feeds)[0], ort_run(model, feeds)[0])


def test_output_declares_the_input_shape() -> None:
    """ReverseSequence keeps its input's shape; the lowered model says so where the original
    declared nothing (runtimes plan memory with it), static sizes only: tract would take a
    copied name for a symbol of its own and clash with the sizes set on the inputs."""
    model, _ = reverse_model(T.FLOAT, ["T", "B", 8], 0, "input", np.array([1, 2], np.int64))
    dims = lower_checked(model).graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == [0, 0, 8]


def _count_inference(monkeypatch: pytest.MonkeyPatch, *, allowed: bool) -> list[int]:
    """A list that gets a 1 per call of ONNX's shape inference, which then runs (or raises,
    not ``allowed``)."""
    calls: list[int] = []
    real = onnx.shape_inference.infer_shapes

    def counting(*args: Any, **kwargs: Any) -> onnx.ModelProto:
        calls.append(1)
        if not allowed:
            raise RuntimeError("not expected")
        return real(*args, **kwargs)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", counting)
    return calls


def test_untraceable_data_type_starts_no_shape_inference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the opset-10 row form needs the data's element type; asking for it anyway ran shape
    inference of the whole model (seconds on a large one) for an untyped, untraceable input."""
    import onnx_ir as ir

    from seqlower.passes import LowerReverseSequence

    calls = _count_inference(monkeypatch, allowed=False)
    nodes = [
        h.make_node("Opaque", ["x"], ["hidden"], domain="custom"),  # nothing to trace through
        h.make_node("ReverseSequence", ["hidden", "lens"], ["y"], time_axis=0, batch_axis=1),
    ]
    graph = h.make_graph(
        nodes,
        "g",
        [tensor_info("x", T.FLOAT, [3, 2, 4]), tensor_info("lens", T.INT64, [2])],
        [tensor_info("y", T.FLOAT, None)],
    )
    proto = h.make_model(
        graph,
        opset_imports=[h.make_opsetid("", 17), h.make_opsetid("custom", 1)],
        ir_version=IR_VERSION,
    )
    model = ir.serde.deserialize_model(proto)
    lowering = LowerReverseSequence()
    lowering(model)
    assert lowering.forms == {"computed": 1}
    assert calls == []


def test_a_mapped_split_is_typed_and_sized_without_shape_inference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """issue 33's synthetic block: a reversal of onnxscript's map over the slices of a tensor
    after a scalar reduction's Add. Its element type is the body's, its sizes the proofs':
    whole-model shape inference (a clone and a serialized copy of the model, which raised the
    peak memory) is not needed, and the two reversals share one index."""
    import onnx_ir as ir

    from seqlower.passes import LowerReverseSequence

    calls = _count_inference(monkeypatch, allowed=False)
    proto = parse("""
        g (float[4, 3, 2] x, int64[3] lens, float[5] w) => (float[?, ?, ?] y) {
            r = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
            total = ReduceSum<keepdims = 0>(w)
            a = Add(r, total)
            pieces = SplitToSequence<axis = 0, keepdims = 0>(a)
            mapped = SequenceMap(pieces) <body = square (float[3, 2] e) => (float[3, 2] s) {
                s = Mul(e, e)
            }>
            m = ConcatFromSequence<axis = 0, new_axis = 1>(mapped)
            y = ReverseSequence<batch_axis = 1, time_axis = 0>(m, lens)
        }""")
    model = ir.serde.deserialize_model(proto)
    lowering = LowerReverseSequence()
    lowering(model)
    assert lowering.forms == {"row_gather": 2} and calls == []
    names = [node.name for node in model.graph]
    assert sum("fails_if_sequence_lens_out_of_range" in name for name in names) == 1


def test_types_traced_through_matmul_and_not_through_a_dropout_mask(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A value after a MatMul is typed from its input, without whole-model shape inference; a
    second output whose type differs from the first (Dropout's mask) is not traced as if it
    were the first."""
    import onnx_ir as ir

    from seqlower.passes._types import TypeOracle, element_dtype

    calls = _count_inference(monkeypatch, allowed=True)
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["m"]),
        h.make_node("Add", ["m", "x"], ["a"]),
        h.make_node("Dropout", ["a"], ["d", "mask"]),
    ]
    graph = h.make_graph(
        nodes,
        "g",
        [tensor_info("x", T.DOUBLE, [2, 2]), tensor_info("w", T.DOUBLE, [2, 2])],
        [tensor_info("d", T.DOUBLE, None), h.make_value_info("mask", onnx.TypeProto())],
    )
    proto = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=IR_VERSION)
    model = ir.serde.deserialize_model(proto)
    values = {v.name: v for node in model.graph for v in node.outputs}
    types = TypeOracle(model)
    assert element_dtype(types.type_of(values["a"])) == ir.DataType.DOUBLE
    assert calls == []
    assert element_dtype(types.type_of(values["mask"])) == ir.DataType.BOOL  # inferred


def test_shape_inference_runs_once_for_the_passes_of_a_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each pass asks its own TypeOracle; a later one reuses what an earlier one inferred for
    values that still exist, and infers again only for a value made since."""
    import onnx_ir as ir

    from seqlower.passes._types import TypeOracle, element_dtype

    calls = _count_inference(monkeypatch, allowed=True)
    graph = h.make_graph(
        [h.make_node("TopK", ["x", "k"], ["v", "i"])],  # i: int64, not traceable from x
        "g",
        [tensor_info("x", T.FLOAT, [4]), tensor_info("k", T.INT64, [1])],
        [h.make_value_info("v", onnx.TypeProto()), h.make_value_info("i", onnx.TypeProto())],
    )
    model = ir.serde.deserialize_model(
        h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=IR_VERSION)
    )
    (topk,) = list(model.graph)
    for _ in range(3):  # three passes
        types = TypeOracle(model)
        assert element_dtype(types.type_of(topk.outputs[1])) == ir.DataType.INT64
        assert element_dtype(types.type_of(topk.outputs[0])) == ir.DataType.FLOAT
    assert calls == [1]
    # A value made after the inference (here a new node's output) is inferred anew, once.
    extra = ir.node("Neg", [topk.outputs[1]])
    model.graph.append(extra)
    for _ in range(2):
        types = TypeOracle(model)
        assert element_dtype(types.type_of(extra.outputs[0])) == ir.DataType.INT64
        assert element_dtype(types.type_of(topk.outputs[1])) == ir.DataType.INT64
    assert calls == [1, 1]
