"""The per-op shape rules written once (``seqlower/_shape_rules.py``, issue 45): what each prover
makes of a shape is the rule over its own dimensions."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import seqlower
from seqlower._shape_rules import STATIC, infer, reshape
from tests.helpers import all_op_types, assert_same, ort_run

HUGE = 10_000_000_000  # its square is past int64


def test_a_reshape_of_huge_sizes_is_exact() -> None:
    """The rule multiplied sizes in int64 (numpy's ``prod``), which wraps past 2**63: a
    ``Reshape`` of [1e10, 1e10] to [-1, 2] was refused, [1e10, 1e10] to [-1, 1e10] given a
    wrong size. if-as-where's own rule had it right (Python's integers, issue 42)."""
    assert reshape((HUGE, HUGE), [-1, 2], False, STATIC) == (HUGE * HUGE // 2, 2)
    assert reshape((HUGE, HUGE), [HUGE * HUGE], False, STATIC) == (HUGE * HUGE,)
    assert reshape((HUGE, 3), [HUGE, 2], False, STATIC) is None


def test_a_reshape_of_an_empty_tensor_to_a_static_shape_is_proven() -> None:
    """[0, 3] to [3, 0] holds as many elements (none): the rule divided by the target's 0 and
    refused it (and so did the declared-sizes step and the first-iteration proof); if-as-where's
    own rule compared the counts."""
    assert reshape((0, 3), [3, 0], True, STATIC) == (3, 0)
    assert reshape((0, 3), [0, 3], False, STATIC) == (0, 3)
    assert reshape((0, 3), [3, 1], True, STATIC) is None
    assert reshape((4, 0), [-1, 0], True, STATIC) is None  # -1 among zeros: any size


# ---------------------------------------------------------------- the rules against ONNX's own

dims = st.integers(1, 4)
shapes = st.lists(dims, min_size=0, max_size=4).map(tuple)


@st.composite
def broadcast_cases(draw: st.DrawFn) -> tuple[str, list[tuple[int, ...]], dict[str, Any]]:
    out = draw(st.lists(dims, min_size=0, max_size=4))
    inputs = []
    for _ in range(draw(st.integers(2, 3))):
        rank = draw(st.integers(0, len(out)))
        tail = out[len(out) - rank :]
        inputs.append(tuple(d if draw(st.booleans()) else 1 for d in tail))
    op = "Where" if len(inputs) == 3 else draw(st.sampled_from(["Add", "Mul", "Max"]))
    return op, inputs, {}


@st.composite
def matmul_cases(draw: st.DrawFn) -> tuple[str, list[tuple[int, ...]], dict[str, Any]]:
    batch = draw(st.lists(dims, max_size=2))
    m, k, n = draw(dims), draw(dims), draw(dims)
    a = (*[d if draw(st.booleans()) else 1 for d in batch], m, k)
    b = (
        *[d if draw(st.booleans()) else 1 for d in batch][draw(st.integers(0, len(batch))) :],
        k,
        n,
    )
    if draw(st.booleans()):
        a = (k,)
    elif draw(st.booleans()):
        b = (k,)
    return "MatMul", [a, b], {}


@st.composite
def axis_cases(draw: st.DrawFn, op: str) -> tuple[str, list[tuple[int, ...]], dict[str, Any]]:
    shape = draw(st.lists(dims, min_size=1, max_size=4).map(tuple))
    rank = len(shape)
    if op == "Transpose":
        return op, [shape], {"perm": draw(st.permutations(range(rank)))}
    axis = draw(st.integers(-rank, rank - 1))
    if op == "Concat":
        others = [(*shape[: axis % rank], draw(dims), *shape[axis % rank + 1 :]) for _ in range(2)]
        return op, [shape, *others], {"axis": axis}
    if op == "Gather":
        return op, [shape, draw(shapes)], {"axis": axis}
    if op == "Shape":
        return op, [shape], {"start": draw(st.integers(-5, 5)), "end": draw(st.integers(-5, 5))}
    if op == "Slice":
        bounds = st.integers(-6, 6)
        step = draw(st.sampled_from([-2, -1, 1, 2]))
        return (
            op,
            [shape],
            {"starts": [draw(bounds)], "ends": [draw(bounds)], "axes": [axis], "steps": [step]},
        )
    if op == "ArgMax":
        return op, [shape], {"axis": axis, "keepdims": draw(st.integers(0, 1))}
    if op == "CumSum":
        return op, [shape], {"cumsum": axis}  # ONNX's inference checks no CumSum axis
    if op.startswith("Reduce"):
        axes = draw(st.sets(st.integers(-rank, rank - 1), max_size=2).map(sorted))
        keep = {"keepdims": draw(st.integers(0, 1))}
        return op, [shape], {**keep, **({"axes": axes} if axes else {})}
    if op == "Squeeze":
        ones = tuple(1 if k == axis % rank else d for k, d in enumerate(shape))
        return op, [ones], {"axes": [axis]}
    axes = draw(st.sets(st.integers(-rank - 2, rank + 1), min_size=1, max_size=2))
    return op, [shape], {"axes": sorted(axes)}


@st.composite
def reshape_cases(draw: st.DrawFn) -> tuple[str, list[tuple[int, ...]], dict[str, Any]]:
    shape = draw(shapes)
    target: list[int] = list(draw(st.permutations(shape)))
    if target and draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    elif target and draw(st.booleans()):
        k = draw(st.integers(0, min(len(target), len(shape)) - 1))
        target[k] = 0 if target[k] == shape[k] else target[k]
    return "Reshape", [shape], {"shape": target}


def _model(op: str, inputs: list[tuple[int, ...]], attrs: dict[str, Any]) -> onnx.ModelProto:
    """One node of ``op`` on inputs of ``inputs`` (float, but Where's condition and Gather's
    indices), its ``axes``, ``shape``, bounds or ``CumSum``'s axis given as constant inputs
    (opset 17)."""
    types = [onnx.TensorProto.FLOAT] * len(inputs)
    if op in ("Where", "Gather"):
        types[0 if op == "Where" else 1] = (
            onnx.TensorProto.BOOL if op == "Where" else onnx.TensorProto.INT64
        )
    names = [f"x{k}" for k in range(len(inputs))]
    constants = []
    for key in ("starts", "ends", "axes", "steps", "shape", "cumsum"):
        if key in attrs:
            values = attrs.pop(key)
            dims = [] if key == "cumsum" else [len(values)]  # CumSum's axis: a scalar
            values = [values] if key == "cumsum" else values
            constants.append(onnx.helper.make_tensor(key, onnx.TensorProto.INT64, dims, values))
            names.append(key)
    declared = zip(names, types, inputs, strict=False)  # the constants are no graph inputs
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node(op, names, ["y"], **attrs)],
        "g",
        [onnx.helper.make_tensor_value_info(n, t, s) for n, t, s in declared],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.UNDEFINED, None)],
        constants,
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])


AXIS_OPS = ["Transpose", "Concat", "Gather", "Unsqueeze", "Squeeze", "Shape", "Slice", "CumSum"]
EQUATIONS = ["ab,bc->ac", "a,ab->b", "abc->cba", "ab,ab->ab", "ab,cb->ca"]


@st.composite
def einsum_cases(draw: st.DrawFn) -> tuple[str, list[tuple[int, ...]], dict[str, Any]]:
    equation = draw(st.sampled_from(EQUATIONS))
    size = {letter: draw(dims) for letter in "abc"}
    terms = equation.split("->")[0].split(",")
    return "Einsum", [tuple(size[x] for x in term) for term in terms], {"equation": equation}


CASES = {
    "broadcast": broadcast_cases(),
    "MatMul": matmul_cases(),
    "Reshape": reshape_cases(),
    "Einsum": einsum_cases(),
    **{op: axis_cases(op) for op in [*AXIS_OPS, "ArgMax", "ReduceSum", "ReduceMax"]},
}


@pytest.mark.parametrize("kind", list(CASES))
@settings(max_examples=40, deadline=None, derandomize=True)
@given(data=st.data())
def test_the_static_rules_give_onnx_inference_shapes(kind: str, data: st.DataObject) -> None:
    """On static shapes, every rule gives the shape ONNX's own inference gives, and refuses
    what it refuses (an op that would fail) or what ONNX's reference evaluator cuts otherwise."""
    op, inputs, attrs = data.draw(CASES[kind])
    model = _model(op, inputs, dict(attrs))
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except onnx.shape_inference.InferenceError:
        expected = None
    else:
        out = inferred.graph.output[0].type.tensor_type.shape
        expected = tuple(d.dim_value for d in out.dim)
    if op == "Slice" and expected is not None:  # numpy's cut (the reference evaluator's)
        cut = [slice(None)] * len(inputs[0])
        cut[attrs["axes"][0]] = slice(attrs["starts"][0], attrs["ends"][0], attrs["steps"][0])
        if np.empty(inputs[0])[tuple(cut)].shape != expected:
            expected = None  # the runtimes disagree: not proven
    node = ir.serde.deserialize_model(model).graph.node(0)
    assert infer(node, [*inputs, *[()] * (len(node.inputs) - len(inputs))], STATIC) == expected


# A Slice with a negative step whose start is before the axis: ONNX clamps the start to the
# first element (onnxruntime and ONNX's inference: one element), numpy to before it (ONNX's
# reference evaluator: none).
REVERSED_FROM_BEFORE = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (bool c, float[1] x) => (float[?] y) {
        y = If(c) <then_branch = t () => (float[?] r) {
            s = Constant<value = int64[1] {-2}>()
            a = Constant<value = int64[1] {0}>()
            r = Slice(x, s, s, a, s)
        }, else_branch = e () => (float[?] k) {
            k = Constant<value = float[0] {}>()
        }>
    }
"""


def test_a_slice_the_runtimes_cut_differently_is_not_proven() -> None:
    """The rule sliced a range as Python does (none), which onnxruntime does not."""
    model = ir.serde.deserialize_model(onnx.parser.parse_model(REVERSED_FROM_BEFORE))
    node = ir.traversal.RecursiveGraphIterator(model.graph)
    sliced = next(n for n in node if n.op_type == "Slice")
    assert infer(sliced, [(1,), (1,), (1,), (1,), (1,)], STATIC) is None
    assert infer(sliced, [(3,), (1,), (1,), (1,), (1,)], STATIC) == (0,)  # -2 of 3: in range


@pytest.mark.parametrize("c", [True, False])
def test_if_as_where_keeps_an_if_whose_slice_the_runtimes_cut_differently(c: bool) -> None:
    """if-as-where took the branch's slice for empty, as the else branch is, and wrote a
    Where that gives none where onnxruntime's If gives one element."""
    model = onnx.parser.parse_model(REVERSED_FROM_BEFORE)
    lowered = seqlower.lower(model, passes=["if-as-where"], check=False)
    assert "If" in all_op_types(lowered)
    feeds = {"c": np.array(c), "x": np.ones(1, np.float32)}
    assert_same(ort_run(lowered, feeds), ort_run(model, feeds))
