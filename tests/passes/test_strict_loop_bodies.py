"""StrictLoopBodies (``strict-loop-bodies``, the OpenVINO target's Loop repairs): each repair on
a model written as tf2onnx and PyTorch write their loops, checked valid, and run on onnxruntime
and OpenVINO against the original on onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import seqlower
from seqlower.passes import StrictLoopBodies
from tests import loop_cases as cases
from tests.helpers import all_nodes, every_graph
from tests.runtimes import assert_same, run

# tf2onnx passes every loop-invariant state through unchanged: here the limit `lim` is a body
# output that is the body input itself (no Identity).
PASSED_THROUGH = """
<ir_version: 8, opset_import: ["" : 17]>
cumulative (float[T, 3] x) => (float[T, 3] ys, int32 lim_final) {
    zero = Constant<value = int64[1] {0}>()
    shape = Shape(x)
    t64 = Gather<axis = 0>(shape, zero)
    t32 = Cast<to = 6>(t64)
    limit = Squeeze(t32, zero)
    m = Cast<to = 7>(limit)
    go = Constant<value = bool {1}>()
    start = Constant<value = int32 {0}>()
    acc0 = Constant<value = float[3] {0, 0, 0}>()
    count, acc, lim_final, ys = Loop(m, go, start, acc0, limit) <body = body (
        int64 i, bool cond_in, int32 counter, float[3] acc_in, int32 lim
    ) => (bool cond_out, int32 next, float[3] acc_out, int32 lim, float[3] y) {
        one = Constant<value = int32 {1}>()
        next = Add(counter, one)
        row = Gather<axis = 0>(x, counter)
        acc_out = Add(acc_in, row)
        y = Identity(acc_out)
        f_next = Cast<to = 1>(next)
        f_lim = Cast<to = 1>(lim)
        cond_out = Less(f_next, f_lim)
    }>
}
"""

# A for-loop whose condition passes through and whose body also reads the condition input (an
# inner Loop starts from it).
CONDITION_READ = """
<ir_version: 8, opset_import: ["" : 17]>
grid (float[3, 2] x) => (float[3, 2, 2] y) {
    three = Constant<value = int64 {3}>()
    go = Constant<value = bool {1}>()
    y = Loop(three, go) <body = outer (int64 i, bool c) => (bool c_out, float[2, 2] rows) {
        c_out = Identity(c)
        row = Gather<axis = 0>(x, i)
        two = Constant<value = int64 {2}>()
        rows = Loop(two, c) <body = inner (int64 j, bool d) => (bool d_out, float[2] r) {
            d_out = Identity(d)
            fj = Cast<to = 1>(j)
            r = Mul(row, fj)
        }>
    }>
}
"""

# A counter state that the exporter leaves untyped, as PyTorch's dynamo exporter leaves the
# inputs of `torch.while_loop` bodies (the text format cannot write a value without a type: the
# type is removed after parsing).
UNTYPED = """
<ir_version: 8, opset_import: ["" : 17]>
bags (float[N, 2] w, int64[K] offsets) => (float[B, 2] sums) {
    zero = Constant<value = int64 {0}>()
    nbags = Constant<value = int64 {2}>()
    go = Constant<value = bool {1}>()
    last, sums = Loop("", go, zero) <body = body (int64 i, bool c, int64 k) => (
        bool c_out, int64 k_next, float[2] s
    ) {
        one = Constant<value = int64 {1}>()
        minus_one = Constant<value = int64[1] {-1}>()
        index = Reshape(k, minus_one)
        after = Add(index, one)
        start = Slice(offsets, index, after)
        after2 = Add(after, one)
        end = Slice(offsets, after, after2)
        rows = Slice(w, start, end)
        axes = Constant<value = int64[1] {0}>()
        s = ReduceSum<keepdims = 0>(rows, axes)
        k_next = Add(k, one)
        c_out = Less(k_next, nbags)
    }>
}
"""


def _parse(text: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model(text)
    onnx.checker.check_model(model, full_check=True)
    return model


def _untyped() -> onnx.ModelProto:
    model = onnx.parser.parse_model(UNTYPED)
    (loop,) = [n for n in model.graph.node if n.op_type == "Loop"]
    loop.attribute[0].g.input[2].ClearField("type")
    onnx.checker.check_model(model, full_check=True)
    return model


def _valid(model: onnx.ModelProto) -> None:
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)


def _repaired(model: onnx.ModelProto) -> onnx.ModelProto:
    ir_model = ir.serde.deserialize_model(model)
    assert StrictLoopBodies()(ir_model).modified
    # Strict already: a second run changes nothing.
    assert not StrictLoopBodies()(ir_model).modified
    repaired = ir.serde.serialize_model(ir_model)
    _valid(repaired)
    return repaired


def _loop_bodies(model: onnx.ModelProto) -> list[onnx.GraphProto]:
    return [n.attribute[0].g for n in all_nodes(model) if n.op_type == "Loop"]


def _assert_strict(model: onnx.ModelProto) -> None:
    for body in _loop_bodies(model):
        inputs = {value.name for value in body.input}
        assert not inputs & {value.name for value in body.output}, body.name
        assert all(value.type.HasField("tensor_type") for value in body.input), body.name
        cond_in, cond_out = body.input[1].name, body.output[0].name
        readers = [
            node for graph in every_graph(body) for node in graph.node if cond_in in node.input
        ]
        assert all(r.op_type == "Identity" and r.output[0] == cond_out for r in readers), body.name


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_a_passed_through_state_becomes_a_copy(runtime: str) -> None:
    model = _parse(PASSED_THROUGH)
    repaired = _repaired(model)
    _assert_strict(repaired)
    (body,) = _loop_bodies(repaired)
    (copy,) = [n for n in body.node if n.output[0] == body.output[3].name]
    assert copy.op_type == "Identity" and list(copy.input) == ["lim"]
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(4, 3)}
    assert_same(run("onnxruntime", model, feeds), run(runtime, repaired, feeds))


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_reads_of_the_condition_take_true(runtime: str) -> None:
    model = _parse(CONDITION_READ)
    repaired = _repaired(model)
    _assert_strict(repaired)
    (outer, _inner) = _loop_bodies(repaired)
    inner_loop = next(n for n in outer.node if n.op_type == "Loop")
    (true,) = [n for n in outer.node if n.output[0] == inner_loop.input[1]]
    assert true.op_type == "Constant"
    assert onnx.numpy_helper.to_array(true.attribute[0].t).item() is True
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(3, 2)}
    assert_same(run("onnxruntime", model, feeds), run(runtime, repaired, feeds))


def test_reads_of_the_condition_are_exact_when_it_stops_the_loop() -> None:
    """The body runs only while its condition input is true, also when the condition is
    computed: the reads take true and the loop still stops where it did."""
    text = CONDITION_READ.replace(
        "c_out = Identity(c)", "lim = Constant<value = int64 {1}>()\n        c_out = Less(i, lim)"
    )
    model = _parse(text)
    repaired = _repaired(model)
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(3, 2)}
    expected = run("onnxruntime", model, feeds)
    assert expected[0].shape == (2, 2, 2)
    assert_same(expected, run("onnxruntime", repaired, feeds))
    assert_same(expected, run("openvino", repaired, feeds))


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_untyped_inputs_get_their_types_and_ranks(runtime: str) -> None:
    model = _untyped()
    repaired = _repaired(model)
    _assert_strict(repaired)
    (body,) = _loop_bodies(repaired)
    k = body.input[2].type.tensor_type
    assert k.elem_type == onnx.TensorProto.INT64
    assert len(k.shape.dim) == 0  # a scalar, as the value that starts it
    feeds = {
        "w": np.arange(10, dtype=np.float32).reshape(5, 2),
        "offsets": np.array([0, 2, 5], dtype=np.int64),
    }
    assert_same(run("onnxruntime", model, feeds), run(runtime, repaired, feeds))


def test_a_state_is_given_no_rank_its_output_contradicts() -> None:
    """A state that grows a dimension each iteration keeps no shape (only its type)."""
    model = _parse(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        grow (float[2] x) => (float[M] y) {
            n = Constant<value = int64 {3}>()
            go = Constant<value = bool {1}>()
            y = Loop(n, go, x) <body = body (int64 i, bool c, float[K] acc) => (
                bool c_out, float[1, L] acc_out) {
                c_out = Identity(c)
                axes = Constant<value = int64[1] {0}>()
                acc_out = Unsqueeze(acc, axes)
            }>
        }
        """
    )
    (loop,) = [n for n in model.graph.node if n.op_type == "Loop"]
    loop.attribute[0].g.input[2].ClearField("type")
    ir_model = ir.serde.deserialize_model(model)
    StrictLoopBodies()(ir_model)
    (body_input,) = (
        next(n for n in ir_model.graph if n.op_type == "Loop")
        .attributes["body"]
        .as_graph()
        .inputs[2:]
    )
    assert body_input.dtype == ir.DataType.FLOAT
    assert body_input.shape is None


def test_strict_loops_are_left_as_they_are() -> None:
    model, _ = cases.dynamic_rnn()
    ir_model = ir.serde.deserialize_model(model)
    before = ir.serde.serialize_model(ir_model).SerializeToString()
    assert not StrictLoopBodies()(ir_model).modified
    assert ir.serde.serialize_model(ir_model).SerializeToString() == before


@pytest.mark.parametrize("name", list(cases.CASES))
@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_the_openvino_target_keeps_loops_and_they_run(name: str, runtime: str) -> None:
    """OpenVINO runs Loops faster than the same loops as Scans (1.2-4.7x, README): its target
    keeps them, strict, where the tract target writes Scans."""
    model, feeds = cases.CASES[name]()
    lowered = seqlower.lower(model, target="openvino", check=False)
    _valid(lowered)
    assert "Scan" not in {n.op_type for n in all_nodes(lowered)}
    _assert_strict(lowered)
    assert [(o.domain, o.version) for o in lowered.opset_import] == [
        (o.domain, o.version) for o in model.opset_import
    ]
    expected = run("onnxruntime", model, feeds)
    actual = run(runtime, lowered, feeds)
    for want, got in zip(expected, actual, strict=True):
        assert want.shape == got.shape and want.dtype == got.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("name", "feeds"),
    [
        ("map_fn", {"x": np.zeros((0, 3), dtype=np.float32)}),
        ("for_loop", {"n": np.array(0, dtype=np.int64)}),
        ("dynamic_rnn", {"lengths": np.array([0, 0], dtype=np.int32)}),
    ],
)
def test_loops_of_zero_iterations_run_on_openvino(name: str, feeds: dict[str, np.ndarray]) -> None:
    """What a Scan cannot do (no runtime runs one of zero iterations): the kept Loop can."""
    model, base = cases.CASES[name]()
    feeds = {**base, **feeds}
    lowered = seqlower.lower(model, target="openvino", check=False)
    expected = run("onnxruntime", model, feeds)
    assert 0 in expected[0].shape
    assert_same(expected, run("openvino", lowered, feeds))


_DTYPES = {
    "float": (onnx.TensorProto.FLOAT, np.float32),
    "int64": (onnx.TensorProto.INT64, np.int64),
}


def _random_loop(
    dtype: str, passed: int, trips: int, read_cond: bool, untyped: bool, opset: int
) -> onnx.ModelProto:
    """A for-loop over ``trips`` iterations accumulating ``x``, with ``passed`` states it passes
    through unchanged (each a body output that is its input), the condition read by a second
    node when asked, and the states' body inputs untyped when asked."""
    h = onnx.helper
    code, _ = _DTYPES[dtype]
    vector = h.make_tensor_type_proto(code, [3])
    body_inputs = [
        h.make_tensor_value_info("i", onnx.TensorProto.INT64, []),
        h.make_tensor_value_info("c", onnx.TensorProto.BOOL, []),
        h.make_value_info("acc", onnx.TypeProto() if untyped else vector),
        *(
            h.make_value_info(f"p{k}", onnx.TypeProto() if untyped else vector)
            for k in range(passed)
        ),
    ]
    nodes = [
        h.make_node("Identity", ["c"], ["c_out"]),
        h.make_node("Add", ["acc", "x"], ["acc_out"]),
    ]
    if read_cond:  # the condition also chooses between two values: it is always true inside
        nodes.append(h.make_node("Where", ["c", "acc_out", "x"], ["chosen"]))
    else:
        nodes.append(h.make_node("Identity", ["acc_out"], ["chosen"]))
    body = h.make_graph(
        nodes,
        "body",
        body_inputs,
        [
            h.make_tensor_value_info("c_out", onnx.TensorProto.BOOL, []),
            h.make_value_info("acc_out", vector),
            *(h.make_value_info(f"p{k}", vector) for k in range(passed)),
            h.make_value_info("chosen", vector),
        ],
    )
    loop = h.make_node(
        "Loop",
        ["n", "go", "x", *(["x"] * passed)],
        ["final", *(f"q{k}" for k in range(passed)), "rows"],
        body=body,
    )
    graph = h.make_graph(
        [
            h.make_node(
                "Constant", [], ["go"], value=h.make_tensor("t", onnx.TensorProto.BOOL, [], [True])
            ),
            loop,
        ],
        "g",
        [
            h.make_tensor_value_info("x", code, [3]),
            h.make_tensor_value_info("n", onnx.TensorProto.INT64, []),
        ],
        [
            h.make_tensor_value_info("final", code, [3]),
            *(h.make_tensor_value_info(f"q{k}", code, [3]) for k in range(passed)),
            h.make_tensor_value_info("rows", code, [None, 3]),
        ],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


@settings(max_examples=20, deadline=None)
@given(
    dtype=st.sampled_from(sorted(_DTYPES)),
    passed=st.integers(0, 3),
    trips=st.integers(0, 4),
    read_cond=st.booleans(),
    untyped=st.booleans(),
    opset=st.sampled_from([13, 16, 17]),
)
def test_repaired_loops_match_over_forms(
    dtype: str, passed: int, trips: int, read_cond: bool, untyped: bool, opset: int
) -> None:
    """Whatever mix of the three forms a loop has, the repaired loop gives the original's
    outputs, bit for bit, on onnxruntime and on OpenVINO."""
    model = _random_loop(dtype, passed, trips, read_cond, untyped, opset)
    ir_model = ir.serde.deserialize_model(model)
    StrictLoopBodies()(ir_model)
    repaired = ir.serde.serialize_model(ir_model)
    _valid(repaired)
    _assert_strict(repaired)
    _, numpy_type = _DTYPES[dtype]
    feeds = {"x": np.array([1, -2, 3], dtype=numpy_type), "n": np.array(trips, dtype=np.int64)}
    expected = run("onnxruntime", model, feeds)
    assert_same(expected, run("onnxruntime", repaired, feeds))
    assert_same(expected, run("openvino", repaired, feeds))


def _paddle_while() -> onnx.ModelProto:
    """``while i < n: s = s + x; i = i + 1`` as paddle2onnx 2.0.1 writes it: body inputs named
    as the outer values that start them, the iteration number and the conditions of shape [1],
    the counter stepped by Paddle's ``scale`` through float."""
    from onnx import TensorProto, helper

    def const(name: str, array: np.ndarray) -> onnx.NodeProto:
        return helper.make_node(
            "Constant", [], [name], value=onnx.numpy_helper.from_array(array, name)
        )

    body = helper.make_graph(
        [
            helper.make_node("Add", ["s0", "x"], ["s_next"]),
            helper.make_node("Cast", ["i0"], ["i_f"], to=TensorProto.FLOAT),
            const("scale", np.array([1.0], np.float32)),
            helper.make_node("Mul", ["i_f", "scale"], ["i_scaled"]),
            const("bias", np.array(1.0, np.float32)),
            helper.make_node("Add", ["i_scaled", "bias"], ["i_biased"]),
            const("one_shape", np.array([1], np.int64)),
            helper.make_node("Reshape", ["i_biased", "one_shape"], ["i_shaped"]),
            helper.make_node("Cast", ["i_shaped"], ["i_next"], to=TensorProto.INT64),
            helper.make_node("Less", ["i_next", "n"], ["go_next"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("iter", TensorProto.INT64, [1]),
            helper.make_tensor_value_info("go", TensorProto.BOOL, [1]),  # the outer cond's name
            helper.make_tensor_value_info("i0", TensorProto.INT64, [1]),  # the outer start's
            helper.make_tensor_value_info("s0", TensorProto.FLOAT, ["N", 3]),
        ],
        [
            helper.make_tensor_value_info("go_next", TensorProto.BOOL, [1]),
            helper.make_tensor_value_info("i_next", TensorProto.INT64, [1]),
            helper.make_tensor_value_info("s_next", TensorProto.FLOAT, ["N", 3]),
        ],
    )
    graph = helper.make_graph(
        [
            const("i0", np.array([0], np.int64)),
            helper.make_node("Mul", ["x", "x"], ["s0"]),
            helper.make_node("Less", ["i0", "n"], ["go"]),
            helper.make_node("Loop", ["", "go", "i0", "s0"], ["i_final", "s_final"], body=body),
        ],
        "paddle_while",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
            helper.make_tensor_value_info("n", TensorProto.INT64, [1]),
        ],
        [
            helper.make_tensor_value_info("s_final", TensorProto.FLOAT, ["N", 3]),
            helper.make_tensor_value_info("i_final", TensorProto.INT64, [1]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("n", [0, 1, 4])
def test_paddle_loops_run_on_openvino(n: int) -> None:
    """paddle2onnx's layout fails in OpenVINO's importer as written (``canonical inputs size``);
    strict: renamed inputs, scalar iteration number and condition, it runs and matches."""
    model = _paddle_while()
    feeds = {
        "x": np.arange(6, dtype=np.float32).reshape(2, 3),
        "n": np.array([n], np.int64),
    }
    expected = run("onnxruntime", model, feeds)
    with pytest.raises(Exception, match="canonical"):
        run("openvino", model, feeds)
    lowered = seqlower.lower(model, passes=["strict-loop-bodies"])
    onnx.checker.check_model(lowered, full_check=True)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True)
    assert_same(expected, run("onnxruntime", lowered, feeds))
    assert_same(expected, run("openvino", lowered, feeds))
    assert_same(expected, run("openvino", seqlower.lower(model, target="openvino"), feeds))


#: A body that reads its iteration number and its condition, both declared [1] as paddle2onnx
#: writes them, as one-element tensors (a Concat of their casts).
ONE_ELEMENT_READS = """
<ir_version: 8, opset_import: ["" : 17]>
g (int64 M, bool[1] c0, float[2] s0) => (float[2] s_n) {
    s_n = Loop (M, c0, s0) <body = body (int64[1] i, bool[1] c_in, float[2] s)
                                    => (bool[1] c_out, float[2] s2) {
        cf = Cast <to = 1> (c_in)
        i_f = Cast <to = 1> (i)
        row = Concat <axis = 0> (cf, i_f)
        s2 = Add (s, row)
        c_out = Identity (c_in)
    }>
}
"""


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
@pytest.mark.parametrize("trips", [0, 1, 3])
def test_one_element_reads_of_the_number_and_condition_keep_their_shape(
    runtime: str, trips: int
) -> None:
    """Declared scalars, the iteration number and the condition are read as the [1] they were
    declared, and the condition's reads that take a constant true take a [1] true: a scalar
    true made the Concat fail ONNX's inference ('axis must be in [-rank, rank-1]': exit 1)."""
    model = _parse(ONE_ELEMENT_READS)
    feeds = {
        "M": np.array(trips, np.int64),
        "c0": np.array([True]),
        "s0": np.zeros(2, np.float32),
    }
    lowered = seqlower.lower(model, passes=["strict-loop-bodies"])
    _valid(lowered)
    _assert_strict(lowered)
    assert_same(run("onnxruntime", model, feeds), run(runtime, lowered, feeds))
