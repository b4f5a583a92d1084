"""A reduction's axes, read once (``_ir.reduced_axes``) for every pass that acts on them.

Six target passes read them by hand, each a little differently; three read a model-local
function's attribute reference (``axes: @ax``) as "none given" (every axis), one read an
``axes`` input computed at run time as every axis (``slice-reductions-as-masks`` read the
reference so too, but acts on no function: it needs a static shape, which function values
here do not get). The models below are the smallest each
pass rewrote wrongly (exit 0 with ``--no-check``, onnxruntime's outputs differing), in the
pipeline that runs it: onnx2tf keeps functions (no ``inline-functions``), tract inlines them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest

import seqlower
from seqlower.errors import SequenceFreeError
from seqlower.passes._ir import reduced_axes, reduced_dims, reduction_axes
from tests.helpers import all_op_types, ort_run
from tests.runtimes import assert_same

X = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5


def _node(text: str) -> ir.Node:
    """The last node of the main graph of ``text``."""
    model = ir.serde.deserialize_model(onnx.parser.parse_model(text))
    return list(model.graph)[-1]


def _reduce(opset: int, op: str, call: str) -> str:
    return f"""
    <ir_version: 8, opset_import: ["" : {opset}]>
    g (float[2, 3, 4] x, int64[1] a) => (float[?] y) {{
        c = Constant<value = int64[2] {{-1, 0}}>()
        e = Constant<value = int64[0] {{}}>()
        y = {op}{call}
    }}
    """


@pytest.mark.parametrize(
    ("opset", "op", "call", "written", "reduced"),
    [
        # opset 11: every reduction's axes an attribute
        (11, "ReduceSum", "<axes = [-1, 0]>(x)", [-1, 0], [0, 2]),
        (11, "ReduceMax", "(x)", [], [0, 1, 2]),
        (11, "ReduceMean", "<axes = [1, 1]>(x)", [1, 1], [1]),
        (11, "ReduceMin", "<axes = [3]>(x)", [3], None),  # out of range
        (11, "ReduceProd", "<axes = [-4]>(x)", [-4], None),
        # opset 13: ReduceSum's an input, the others' still an attribute
        (13, "ReduceSum", "(x, c)", [-1, 0], [0, 2]),
        (13, "ReduceSum", "(x, a)", None, None),  # known at run time only
        (13, "ReduceSum", "(x, e)", [], [0, 1, 2]),  # empty: every axis
        (13, "ReduceSum", "<noop_with_empty_axes = 1>(x, e)", [], []),  # empty: none
        (13, "ReduceSum", "<noop_with_empty_axes = 1>(x)", [], []),
        (13, "ReduceMax", "<axes = [-2]>(x)", [-2], [1]),
        # opset 18: every reduction's axes an input
        (18, "ReduceMean", "(x, c)", [-1, 0], [0, 2]),
        (18, "ReduceMean", "(x, a)", None, None),
        (18, "ReduceMax", "(x)", [], [0, 1, 2]),
        (18, "ReduceMax", "<noop_with_empty_axes = 1>(x)", [], []),
        (18, "ReduceMin", "<noop_with_empty_axes = 0>(x, e)", [], [0, 1, 2]),
        (18, "ReduceL2", "<keepdims = 0>(x, c)", [-1, 0], [0, 2]),
    ],
)
def test_reduced_axes_of_each_form(
    opset: int, op: str, call: str, written: list[int] | None, reduced: list[int] | None
) -> None:
    node = _node(_reduce(opset, op, call))
    assert reduction_axes(node) == written
    assert reduced_axes(node, 3) == reduced


@pytest.mark.parametrize(
    ("call", "dims"),
    [
        ("<axes = [-1, 0]>(x)", [1, 3, 1]),
        ("<axes = [-1, 0], keepdims = 0>(x)", [3]),
        ("<keepdims = 0>(x)", []),
        ("<axes = [5]>(x)", None),
    ],
)
def test_reduced_dims(call: str, dims: list[int] | None) -> None:
    assert reduced_dims(_node(_reduce(11, "ReduceMax", call)), [2, 3, 4], 1) == dims


def test_a_scalar_reduced_over_every_axis_reduces_none() -> None:
    node = _node(_reduce(18, "ReduceSum", "(x)"))
    assert reduced_axes(node, 0) == []


FUNCTION_REFS = """
<ir_version: 10, opset_import: ["" : 13, "local" : 1]>
g (float[2, 3] x) => (float[?, ?] y) {
    y = local.F<ax = [1], nz = 1>(x)
}
<domain: "local", opset_import: ["" : 13]>
F<ax, nz>(x) => (y) {
    e = Constant<value = int64[0] {}>()
    a = ReduceMax<axes: ints = @ax>(x)
    y = ReduceSum<noop_with_empty_axes: int = @nz>(x, e)
}
"""


def test_a_function_attribute_reference_is_not_known() -> None:
    """``axes: @ax`` is the caller's: not "none given" (every axis), as three passes read it."""
    model = ir.serde.deserialize_model(onnx.parser.parse_model(FUNCTION_REFS))
    reference, noop = list(next(iter(model.functions.values())))[1:]
    assert reduction_axes(reference) is None and reduced_axes(reference, 2) is None
    assert reduction_axes(noop) == [] and reduced_axes(noop, 2) is None
    assert reduced_dims(reference, [2, 3], 1) is None


# pad-empty-reductions (onnx2tf): the reference read as every axis padded axis 0 too, a row of
# -inf more (y [3, 1] for [2, 1]). Function values' declared ranks make the pass act.
PAD_REFERENCE = onnx.parser.parse_model(
    """
    <ir_version: 10, opset_import: ["" : 13, "local" : 1]>
    g (float[N, 3] x) => (float[M, 1] y) {
        y = local.F<ax = [1]>(x)
    }
    <domain: "local", opset_import: ["" : 13]>
    F<ax>(x) => (y) <float[N, 3] t> {
        t = Relu(x)
        y = ReduceMax<axes: ints = @ax, keepdims = 1>(t)
    }
    """
)

# if-as-where (onnx2tf): the referenced reduction's shape read as [1, 1] (every axis), the
# same as the else branch's: a Where of a [2, 1] and a [1, 1], [2, 1] when the If gives [1, 1].
IF_REFERENCE = onnx.parser.parse_model(
    """
    <ir_version: 10, opset_import: ["" : 13, "local" : 1]>
    g (float[2, 3] x, bool c) => (float[M, 1] y) {
        y = local.F<ax = [1]>(x, c)
    }
    <domain: "local", opset_import: ["" : 13]>
    F<ax>(x, c) => (y) <float[2, 3] t> {
        t = Relu(x)
        y = If(c) <then_branch = g1 () => (float[A, 1] r) {
            r = ReduceMax<axes: ints = @ax, keepdims = 1>(t)
        }, else_branch = g2 () => (float[1, 1] k) {
            k = Constant<value = float[1, 1] {7}>()
        }>
    }
    """
)


def test_pad_empty_reductions_leaves_a_referenced_reduction() -> None:
    lowered = seqlower.lower(PAD_REFERENCE, target="onnx2tf", check=False)
    assert "Pad" not in all_op_types(lowered)
    assert_same(ort_run(PAD_REFERENCE, {"x": X}), ort_run(lowered, {"x": X}))


@pytest.mark.parametrize("c", [True, False])
@pytest.mark.parametrize("how", [{"target": "onnx2tf"}, {"passes": ["if-as-where"]}])
def test_if_as_where_keeps_an_if_of_a_referenced_reduction(c: bool, how: dict[str, Any]) -> None:
    lowered = seqlower.lower(IF_REFERENCE, check=False, **how)
    assert "If" in all_op_types(lowered)
    feeds = {"x": X, "c": np.array(c)}
    assert_same(ort_run(IF_REFERENCE, feeds), ort_run(lowered, feeds))


# if-as-where (onnx2tf): ``keepdims: @kd`` read as 0: the then branch's [2, 1] taken for [2],
# the else branch's shape, and the Where of both [2, 2].
IF_KEEPDIMS = onnx.parser.parse_model(
    """
    <ir_version: 10, opset_import: ["" : 13, "local" : 1]>
    g (bool c) => (float[M, N] y) {
        y = local.F<kd = 1>(c)
    }
    <domain: "local", opset_import: ["" : 13]>
    F<kd>(c) => (y) {
        t = Constant<value = float[2, 3] {1, 2, 3, 4, 5, 6}>()
        y = If(c) <then_branch = g1 () => (float[A, B] r) {
            r = ReduceMax<axes = [1], keepdims: int = @kd>(t)
        }, else_branch = g2 () => (float[2] k) {
            k = Constant<value = float[2] {7, 8}>()
        }>
    }
    """
)


@pytest.mark.parametrize("c", [True, False])
def test_if_as_where_keeps_an_if_of_a_referenced_keepdims(c: bool) -> None:
    lowered = seqlower.lower(IF_KEEPDIMS, target="onnx2tf", check=False)
    assert "If" in all_op_types(lowered)
    feeds = {"c": np.array(c)}
    assert_same(ort_run(IF_KEEPDIMS, feeds), ort_run(lowered, feeds))


def test_ragged_maps_as_scans_refuses_a_mean_over_run_time_axes() -> None:
    """The axes input read as every axis: each mean divided by the piece's rows times 3, not 3
    (exit 0 with --no-check, the check's failure without). Now named, exit 2."""
    model = onnx.parser.parse_model(
        """
        <ir_version: 10, opset_import: ["" : 18]>
        g (float[N, 3] X, int64[K] lens, int64[1] ax) => (float[N, 3] Y) {
            s = SplitToSequence<axis = 0>(X, lens)
            m = SequenceMap(s) <body = b (float[?, 3] e) => (float[?, 3] o) {
                mu = ReduceMean<keepdims = 1>(e, ax)
                o = Sub(e, mu)
            }>
            Y = ConcatFromSequence<axis = 0>(m)
        }
        """
    )
    with pytest.raises(SequenceFreeError, match="'mu' in graph 'b' reduces axes not known"):
        seqlower.lower(model, target="tract", check=False)
