"""SequenceMap with an elementwise body over one sequence of a static element shape: lowered to
one run of the body on the stacked elements (no Loop), guarded against an empty sequence;
everything else keeps a Loop. Each case is checked against the original on onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import seqlower
from seqlower.passes import LowerSequenceMap
from tests.helpers import IR_VERSION, all_op_types, assert_equivalent, assert_lowered_ok

_RNG = np.random.default_rng(21)


def _model(element: str, body: str, outputs: str = "float[2, 3] r", extra: str = "") -> str:
    """One map over ``s`` (a sequence of ``element``) whose body computes ``outputs``."""
    result = outputs.rsplit(" ", 1)[0]
    return f"""
    <ir_version: {IR_VERSION}, opset_import: ["" : 17]>
    g (seq({element}) s{extra}) => (seq({result}) m) {{
        m = SequenceMap (s) <body = f ({element} x) => ({outputs}) {{
            {body}
        }}>
    }}
    """


def _forms(model: onnx.ModelProto) -> dict[str, int]:
    lowering = LowerSequenceMap()
    lowering(ir.serde.deserialize_model(model))
    return lowering.forms


def _feeds(count: int, shape: tuple[int, ...], dtype: type = np.float32) -> dict[str, object]:
    return {"s": [_RNG.standard_normal(shape).astype(dtype) for _ in range(count)]}


VECTOR = {
    "neg": ("r = Neg (x)", ""),
    "affine": (
        "w = Constant <value = float[3] {1, -2, 0.5}> ()\n"
        "two = Constant <value = float {2}> ()\n"
        "mw = Mul (x, w)\n r = Add (mw, two)",
        "",
    ),
    "square_relu": ("sq = Mul (x, x)\n r = Relu (sq)", ""),
    "clip": (
        "lo = Constant <value = float {-0.5}> ()\nhi = Constant <value = float {0.5}> ()\n"
        "r = Clip (x, lo, hi)",
        "",
    ),
    "where": (
        "zero = Constant <value = float {0}> ()\n pos = Greater (x, zero)\n"
        "r = Where (pos, x, zero)",
        "",
    ),
    # An outer value the body reads, of the element's rank: broadcast along the element's axes.
    "outer_read": ("r = Sub (x, bias)", ", float[2, 3] bias"),
    "identity": ("r = Identity (x)", ""),
}


@pytest.mark.parametrize("name", list(VECTOR))
@pytest.mark.parametrize("count", [0, 1, 5])
def test_an_elementwise_map_runs_once_on_the_stacked_elements(name: str, count: int) -> None:
    body, extra = VECTOR[name]
    model = onnx.parser.parse_model(_model("float[2, 3]", body, extra=extra))
    onnx.checker.check_model(model, full_check=True)
    assert _forms(model) == {"vector": 1}
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True)
    assert "Loop" not in all_op_types(lowered)
    feeds = _feeds(count, (2, 3))
    if extra:
        feeds["bias"] = _RNG.standard_normal((2, 3)).astype(np.float32)
    assert_equivalent(model, lowered, feeds)


def test_several_outputs_and_integers() -> None:
    model = onnx.parser.parse_model(
        f"""
        <ir_version: {IR_VERSION}, opset_import: ["" : 17]>
        g (seq(int64[4]) s) => (seq(int64) a, seq(bool) b) {{
            a, b = SequenceMap (s) <body = f (int64[4] x) => (int64[4] n, bool[4] p) {{
                n = Neg (x)
                zero = Constant <value = int64 {{0}}> ()
                p = Less (x, zero)
            }}>
        }}
        """
    )
    assert _forms(model) == {"vector": 1}
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    for count in (0, 3):
        feeds = {"s": [_RNG.integers(-9, 9, size=4).astype(np.int64) for _ in range(count)]}
        assert_equivalent(model, lowered, feeds)


LOOPED = {
    # A constant of higher rank than the element broadcasts it into a new leading axis: stacked,
    # that axis would meet the stack's.
    "higher_rank_constant": (
        "float[3]",
        "w = Constant <value = float[2, 3] {1, 2, 3, 4, 5, 6}> ()\n r = Mul (x, w)",
        "float[2, 3] r",
    ),
    # Softmax works along an axis: fine here, but not an elementwise op.
    "softmax": ("float[2, 3]", "r = Softmax (x)", "float[2, 3] r"),
    # The element's shape is not declared static: elements may differ, stacking would fail.
    "dynamic_element": ("float[N]", "r = Neg (x)", "float[N] r"),
    # An output that does not come from the element.
    "constant_output": (
        "float[3]",
        "r = Constant <value = float[3] {1, 2, 3}> ()",
        "float[3] r",
    ),
}


@pytest.mark.parametrize("name", list(LOOPED))
def test_other_maps_keep_their_loop(name: str) -> None:
    element, body, outputs = LOOPED[name]
    model = onnx.parser.parse_model(_model(element, body, outputs))
    onnx.checker.check_model(model, full_check=True)
    assert "vector" not in _forms(model)
    lowered = seqlower.lower(model)
    assert "Loop" in all_op_types(lowered)
    shape = (2, 3) if element == "float[2, 3]" else (3,)
    assert_equivalent(model, lowered, _feeds(3, shape))


def test_an_outer_value_of_unknown_rank_keeps_the_loop() -> None:
    model = onnx.parser.parse_model(
        _model("float[2, 3]", "r = Add (x, bias)", extra=", float bias")
    )
    # Declared a scalar: fine. Undeclared (its shape dropped), the rank is unknown.
    assert _forms(model) == {"vector": 1}
    model.graph.input[1].type.tensor_type.ClearField("shape")
    assert "vector" not in _forms(model)


@settings(max_examples=25, deadline=None)
@given(
    count=st.integers(0, 6),
    shape=st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple),
    op=st.sampled_from(["Neg", "Abs", "Relu", "Sigmoid", "Floor", "Exp"]),
)
def test_elementwise_maps_match_over_shapes_and_lengths(
    count: int, shape: tuple[int, ...], op: str
) -> None:
    element = f"float[{', '.join(map(str, shape))}]" if shape else "float"
    model = onnx.parser.parse_model(_model(element, f"r = {op} (x)", outputs=f"{element} r"))
    assert _forms(model) == {"vector": 1}
    lowered = seqlower.lower(model)
    assert_equivalent(model, lowered, _feeds(count, shape))


def _split_map(
    body: str,
    *,
    axis: int = 0,
    keepdims: int = 0,
    concat: str = "axis = 0, new_axis = 1",
    element: str = "float[2, 3]",
    outputs: str = "float[2, 3] r",
    returns: str = "float[N, 2, 3] y",
    takes: str = "float[N, 2, 3] v",
) -> onnx.ModelProto:
    """onnxscript's shape: a tensor split into a sequence, mapped, stacked back."""
    return onnx.parser.parse_model(
        f"""
        <ir_version: {IR_VERSION}, opset_import: ["" : 17]>
        g ({takes}) => ({returns}) {{
            s = SplitToSequence <axis = {axis}, keepdims = {keepdims}> (v)
            m = SequenceMap (s) <body = f ({element} x) => ({outputs}) {{
                {body}
            }}>
            y = ConcatFromSequence <{concat}> (m)
        }}
        """
    )


@pytest.mark.parametrize("axis", [0, -3])
@pytest.mark.parametrize("count", [1, 4])
def test_a_map_of_a_split_tensor_runs_on_the_tensor(axis: int, count: int) -> None:
    # No If, no sequence left: the body's nodes read v itself, their result takes y's name.
    model = _split_map("sq = Mul (x, x)\n r = Neg (sq)", axis=axis)
    onnx.checker.check_model(model, full_check=True)
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True)
    assert sorted(all_op_types(lowered)) == ["Mul", "Neg"]
    assert [o.name for o in lowered.graph.output] == ["y"]
    feeds = {"v": _RNG.standard_normal((count, 2, 3)).astype(np.float32)}
    assert_equivalent(model, lowered, feeds)


@pytest.mark.parametrize("runtime", ["openvino", "tract"])
def test_a_map_of_a_split_tensor_runs_where_sequences_do_not(runtime: str) -> None:
    from tests import runtimes

    runtimes.require(runtime)
    body = "w = Constant <value = float[3] {1, -2, 0.5}> ()\n mw = Mul (x, w)\n r = Relu (mw)"
    model = _split_map(body)
    lowered = seqlower.lower(model)
    feeds = {"v": _RNG.standard_normal((5, 2, 3)).astype(np.float32)}
    runtimes.assert_same(
        runtimes.run("onnxruntime", model, feeds), runtimes.run(runtime, lowered, feeds)
    )


def test_a_map_of_a_split_tensor_keeps_the_sequence_it_returns() -> None:
    # The map's output is the graph's: a SplitToSequence of the result, empty for zero rows.
    model = onnx.parser.parse_model(
        f"""
        <ir_version: {IR_VERSION}, opset_import: ["" : 17]>
        g (float[N, 3] v, float[3] w) => (seq(float[3]) m, float[N, 3] y) {{
            s = SplitToSequence <axis = 0, keepdims = 0> (v)
            m = SequenceMap (s) <body = f (float[3] x) => (float[3] r) {{
                r = Sub (x, w)
            }}>
            y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
        }}
        """
    )
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    assert "If" not in all_op_types(lowered)
    assert [o.name for o in lowered.graph.output] == ["m", "y"]
    w = _RNG.standard_normal(3).astype(np.float32)
    assert_equivalent(
        model, lowered, {"v": _RNG.standard_normal((4, 3)).astype(np.float32), "w": w}
    )
    # Zero rows: the original's ConcatFromSequence refuses the empty sequence on onnxruntime;
    # the lowered model returns an empty sequence and an empty tensor.
    m, y = ort.InferenceSession(lowered.SerializeToString()).run(
        None, {"v": np.zeros((0, 3), np.float32), "w": w}
    )
    assert m == [] and y.shape == (0, 3)


def test_a_body_initializer_moves_with_the_body() -> None:
    model = _split_map("r = Add (x, bias)")
    bias = onnx.numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "bias")
    model.graph.node[1].attribute[0].g.initializer.append(bias)
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    assert "SequenceMap" not in all_op_types(lowered)
    assert_equivalent(model, lowered, {"v": _RNG.standard_normal((3, 2, 3)).astype(np.float32)})


SPLIT_KEEPS_IF = {
    # Not one row per element along axis 0: the elements are stacked by ConcatFromSequence, the
    # empty sequence guarded by the If.
    # (v's first axis static: the element's declared [3, 3] is then proven, not a hint.)
    "axis_1": dict(
        axis=1,
        element="float[3, 3]",
        outputs="float[3, 3] r",
        returns="float[2, 3, 3] y",
        takes="float[3, 2, 3] v",
    ),
    "keepdims": dict(keepdims=1, element="float[1, 2, 3]", outputs="float[1, 2, 3] r"),
}


@pytest.mark.parametrize("name", list(SPLIT_KEEPS_IF))
def test_other_splits_stack_their_elements(name: str) -> None:
    options = dict(SPLIT_KEEPS_IF[name])
    model = _split_map("r = Neg (x)", **options)  # type: ignore[arg-type]
    lowered = seqlower.lower(model)
    assert "Loop" not in all_op_types(lowered)
    assert_equivalent(model, lowered, {"v": _RNG.standard_normal((3, 2, 3)).astype(np.float32)})


@pytest.mark.parametrize(
    ("concat", "returns"),
    [
        ("axis = 1, new_axis = 1", "float[2, N, 3] y"),
        ("axis = 0", "float[M, 3] y"),
        ("axis = -1, new_axis = 1", "float[2, 3, N] y"),
    ],
)
def test_every_concat_of_the_mapped_rows_reads_the_result(concat: str, returns: str) -> None:
    # Along another axis a Transpose, without a new axis a Reshape: no sequence op is left.
    model = _split_map("r = Neg (x)", concat=concat, returns=returns)
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True)
    assert not {"ConcatFromSequence", "SplitToSequence", "If"} & set(all_op_types(lowered))
    assert [o.name for o in lowered.graph.output] == ["y"]
    assert_equivalent(model, lowered, {"v": _RNG.standard_normal((3, 2, 3)).astype(np.float32)})


def test_a_row_read_by_position_keeps_its_sequence() -> None:
    model = onnx.parser.parse_model(
        f"""
        <ir_version: {IR_VERSION}, opset_import: ["" : 17]>
        g (float[N, 3] v) => (float[3] first, float[N, 3] y) {{
            s = SplitToSequence <axis = 0, keepdims = 0> (v)
            m = SequenceMap (s) <body = f (float[3] x) => (float[3] r) {{
                r = Abs (x)
            }}>
            zero = Constant <value = int64 {{0}}> ()
            first = SequenceAt (m, zero)
            y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
        }}
        """
    )
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    assert sorted(set(all_op_types(lowered))) == [
        "Abs",
        "Constant",
        "SequenceAt",
        "SplitToSequence",
    ]
    assert_equivalent(model, lowered, {"v": _RNG.standard_normal((4, 3)).astype(np.float32)})


def test_split_rows_need_only_a_declared_rank() -> None:
    # Rows of one split tensor share a shape whatever it is: a symbolic element shape is enough.
    model = _split_map(
        "r = Relu (x)", element="float[A, B]", outputs="float[A, B] r", returns="float[N, 2, 3] y"
    )
    assert _forms(model) == {"vector": 1}
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    assert sorted(all_op_types(lowered)) == ["Relu"]
    assert_equivalent(model, lowered, {"v": _RNG.standard_normal((3, 2, 3)).astype(np.float32)})


_ROW_OPS = ["r = Neg (x)", "r = Abs (x)", "r = Relu (x)", "h = Mul (x, x)\n r = Sigmoid (h)"]


@settings(max_examples=30, deadline=None)
@given(
    element=st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple),
    rows=st.integers(1, 6),
    body=st.sampled_from(_ROW_OPS),
    concat=st.sampled_from(["axis = 0, new_axis = 1", "axis = -1, new_axis = 1", "axis = 0"]),
    opset=st.sampled_from([17, 18, 21]),
)
def test_maps_of_split_rows_match_over_shapes_and_opsets(
    element: tuple[int, ...], rows: int, body: str, concat: str, opset: int
) -> None:
    if concat == "axis = 0" and not element:
        concat = "axis = 0, new_axis = 1"  # scalars cannot be concatenated without a new axis
    tensor = f"float[{', '.join(map(str, element))}]" if element else "float"  # a scalar
    joined = {
        "axis = 0, new_axis = 1": [rows, *element],
        "axis = -1, new_axis = 1": [*element, rows],
        "axis = 0": [rows * element[0], *element[1:]] if element else [],
    }[concat]
    model = onnx.parser.parse_model(
        f"""
        <ir_version: {IR_VERSION}, opset_import: ["" : {opset}]>
        g (float[{", ".join(map(str, [rows, *element]))}] v)
            => (float[{", ".join(map(str, joined))}] y) {{
            s = SplitToSequence <axis = 0, keepdims = 0> (v)
            m = SequenceMap (s) <body = f ({tensor} x) => ({tensor} r) {{
                {body}
            }}>
            y = ConcatFromSequence <{concat}> (m)
        }}
        """
    )
    onnx.checker.check_model(model, full_check=True)
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    assert not {"SplitToSequence", "ConcatFromSequence", "SequenceMap", "If", "Loop"} & set(
        all_op_types(lowered)
    )
    v = _RNG.standard_normal((rows, *element)).astype(np.float32)
    assert_equivalent(model, lowered, {"v": v})


def test_a_map_of_rows_in_a_function_and_a_branch() -> None:
    # onnxscript writes these maps inside model-local functions; a map in an If branch too.
    model = onnx.parser.parse_model(
        f"""
        <ir_version: {IR_VERSION}, opset_import: ["" : 17, "local" : 1]>
        g (float[N, 3] v, bool c) => (float[N, 3] y, float[N, 3] z) {{
            y = local.rows (v)
            z = If (c) <
                then_branch = t () => (float[N, 3] a) {{
                    s = SplitToSequence <axis = 0, keepdims = 0> (v)
                    m = SequenceMap (s) <body = f (float[3] x) => (float[3] r) {{ r = Neg (x) }}>
                    a = ConcatFromSequence <axis = 0, new_axis = 1> (m)
                }},
                else_branch = e () => (float[N, 3] b) {{ b = Identity (v) }}
            >
        }}
        <domain: "local", opset_import: ["" : 17]>
        rows (t) => (out) {{
            s = SplitToSequence <axis = 0, keepdims = 0> (t)
            m = SequenceMap (s) <body = f (float[3] x) => (float[3] r) {{ r = Relu (x) }}>
            out = ConcatFromSequence <axis = 0, new_axis = 1> (m)
        }}
        """
    )
    onnx.checker.check_model(model, full_check=True)
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    assert not {"SequenceMap", "SplitToSequence", "ConcatFromSequence"} & set(all_op_types(lowered))
    v = _RNG.standard_normal((4, 3)).astype(np.float32)
    for c in (True, False):
        assert_equivalent(model, lowered, {"v": v, "c": np.array(c)})


def test_rows_passed_through_keep_their_own_name() -> None:
    # The body returns its element: the stack is v itself, which must keep its name (a graph
    # output here), so y gets its own value.
    model = onnx.parser.parse_model(
        f"""
        <ir_version: {IR_VERSION}, opset_import: ["" : 17]>
        g (float[N, 3] a) => (float[N, 3] v, float[N, 3] y) {{
            v = Relu (a)
            s = SplitToSequence <axis = 0, keepdims = 0> (v)
            m = SequenceMap (s) <body = f (float[3] x) => (float[3] x) {{ }}>
            y = ConcatFromSequence <axis = 0, new_axis = 1> (m)
        }}
        """
    )
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    assert [o.name for o in lowered.graph.output] == ["v", "y"]
    assert_equivalent(model, lowered, {"a": _RNG.standard_normal((4, 3)).astype(np.float32)})


def _constructed_map(concat: str, returns: str = "float[M, 3] y") -> onnx.ModelProto:
    """A SequenceConstruct of three tensors declared [2, 3], mapped (Relu then Add, issue 33's
    body) and joined by ``concat``."""
    return onnx.parser.parse_model(
        f"""
        <ir_version: {IR_VERSION}, opset_import: ["" : 17]>
        g (float[2, 3] a, float[2, 3] b) => ({returns}) {{
            s = SequenceConstruct (a, b, a)
            m = SequenceMap (s) <body = f (float[2, 3] x) => (float[2, 3] r) {{
                p = Relu (x)
                r = Add (p, x)
            }}>
            y = {concat} (m)
        }}
        """
    )


@pytest.mark.parametrize(
    "concat, returns",
    [
        ("ConcatFromSequence <axis = 0>", "float[6, 3] y"),
        ("ConcatFromSequence <axis = 1>", "float[2, 9] y"),
        ("ConcatFromSequence <axis = -1, new_axis = 1>", "float[2, 3, 3] y"),
    ],
)
def test_a_map_of_a_constructed_sequence_needs_no_if(concat: str, returns: str) -> None:
    # Never empty: the body runs on the stacked elements in the graph itself, and the concat of
    # the static results is a Reshape to a constant shape (or a Transpose), no sequence left
    # but the stacking's own.
    model = _constructed_map(concat, returns)
    onnx.checker.check_model(model, full_check=True)
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True)
    ops = all_op_types(lowered)
    assert "If" not in ops and "Loop" not in ops and "SplitToSequence" not in ops
    assert "Shape" not in ops  # the joined shape is a constant
    feeds = {name: _RNG.standard_normal((2, 3)).astype(np.float32) for name in "ab"}
    assert_equivalent(model, lowered, feeds)


def test_a_constructed_sequence_read_elsewhere_is_split_back() -> None:
    model = onnx.parser.parse_model(
        f"""
        <ir_version: {IR_VERSION}, opset_import: ["" : 17]>
        g (float[2, 3] a, float[2, 3] b) => (seq(float[2, 3]) m, float[2, 3] e) {{
            s = SequenceConstruct (a, b)
            m = SequenceMap (s) <body = f (float[2, 3] x) => (float[2, 3] r) {{
                r = Sigmoid (x)
            }}>
            one = Constant <value = int64 {{1}}> ()
            e = SequenceAt (m, one)
        }}
        """
    )
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    assert "If" not in all_op_types(lowered)
    feeds = {name: _RNG.standard_normal((2, 3)).astype(np.float32) for name in "ab"}
    assert_equivalent(model, lowered, feeds)


def test_a_shape_the_values_do_not_have_is_no_constant() -> None:
    # An element declared [2, 3] by the body but given as [?, 3]: a hint nothing proves, so the
    # map keeps its Loop (stacking the elements would fail on the ragged sequence the original
    # runs, N = 3 below), and nothing is made a constant from the declaration.
    model = onnx.parser.parse_model(
        f"""
        <ir_version: {IR_VERSION}, opset_import: ["" : 17]>
        g (float[N, 3] a, float[2, 3] b) => (float[M, 3] y) {{
            s = SequenceConstruct (a, b)
            m = SequenceMap (s) <body = f (float[2, 3] x) => (float[2, 3] r) {{
                r = Relu (x)
            }}>
            y = ConcatFromSequence <axis = 0> (m)
        }}
        """
    )
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    assert "Loop" in all_op_types(lowered)
    for rows in (2, 3):
        feeds = {
            name: _RNG.standard_normal((n, 3)).astype(np.float32)
            for name, n in zip("ab", (rows, 2), strict=True)
        }
        assert_equivalent(model, lowered, feeds)
