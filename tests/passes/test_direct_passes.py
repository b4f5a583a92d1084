"""Passes no other test named (issue 31): ``DimProver``, ``RequireSequenceFree``,
``RequireNoLoop``, ``UnrollInputs`` and ``VariableThenBranches``, each run alone on the smallest
model that shows what it promises, outputs compared on onnxruntime where it rewrites."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from seqlower.errors import BadOptionError, SequenceFreeError, TargetError
from seqlower.passes import RequireNoLoop, RequireSequenceFree, VariableThenBranches
from seqlower.passes._dims import DimProver
from seqlower.passes.inputs.unroll_inputs import UnrollInputs
from tests.helpers import all_op_types, assert_same, ort_run, parse


def _ir(text: str) -> ir.Model:
    return ir.serde.deserialize_model(parse(text))


def _value(model: ir.Model, name: str) -> ir.Value:
    for value in model.graph.inputs:
        if value.name == name:
            return value
    for node in model.graph:
        for value in node.outputs:
            if value.name == name:
                return value
    raise KeyError(name)


def _run(model: ir.Model, feeds: dict[str, object]) -> list[object]:
    return ort_run(ir.serde.serialize_model(model), feeds)


def test_dim_prover_walks_back_to_the_axis_a_dimension_is() -> None:
    """Through elementwise ops, a Transpose and a Concat's other axes to x's own axes; a static
    size is that size; what cannot be walked is its own (value, axis); answers are kept."""
    model = _ir("""
        g (float[T, N, 4] x, float[T, M, 4] w) => (float[N, T, 4] z, float[T, K, 4] c) {
            y = Neg(x)
            z = Transpose<perm = [1, 0, 2]>(y)
            c = Concat<axis = 1>(x, w)
        }
    """)
    x, z, c = _value(model, "x"), _value(model, "z"), _value(model, "c")
    prover = DimProver()
    assert prover.dim(z, 0) == (x, 1)
    assert prover.dim(z, 1) == (x, 0)
    assert prover.dim(z, 2) == 4
    assert prover.dim(c, 0) == (x, 0)  # not the concatenated axis: the inputs agree on it
    assert prover.dim(c, 1) == (c, 1)  # the concatenated one is c's own
    assert prover.rank(z) == 3
    assert prover.dim(z, 0) is prover.dim(z, 0)


def test_require_sequence_free_names_what_is_left() -> None:
    model = _ir("""
        g (float[3] a, float[3] b) => (float[6] y) {
            s = SequenceConstruct(a, b)
            y = ConcatFromSequence<axis = 0>(s)
        }
    """)
    with pytest.raises(SequenceFreeError) as raised:
        RequireSequenceFree()(model)
    text = str(raised.value)
    assert "SequenceConstruct" in text and "ConcatFromSequence" in text
    clean = _ir("g (float[3] a) => (float[3] y) { y = Neg(a) }")
    assert not RequireSequenceFree()(clean).modified


def test_require_no_loop_names_every_loop_and_changes_nothing() -> None:
    text = """
        g (float[2] x) => (float[2] y) {
            n = Constant<value = int64 {3}>()
            c = Constant<value = bool {1}>()
            y = Loop(n, c, x) <body = b (int64 i, bool ci, float[2] xi) => (bool co, float[2] xo) {
                co = Identity(ci)
                xo = Neg(xi)
            }>
        }
    """
    model = _ir(text)
    before = ir.serde.serialize_model(model).SerializeToString()
    with pytest.raises(TargetError) as raised:
        RequireNoLoop()(model)
    assert "Loop" in str(raised.value) and "no Scan form is known for it" in str(raised.value)
    assert ir.serde.serialize_model(model).SerializeToString() == before
    assert not RequireNoLoop()(_ir("g (float[2] x) => (float[2] y) { y = Neg(x) }")).modified


def test_unroll_inputs_turns_a_sequence_input_into_k_tensors() -> None:
    text = """
        g (seq(float[3]) s, float[3] w) => (float[6] y) {
            t = ConcatFromSequence<axis = 0>(s)
            u = Concat<axis = 0>(w, w)
            y = Add(t, u)
        }
    """
    model = _ir(text)
    assert UnrollInputs({"s": 2})(model).modified
    assert [v.name for v in model.graph.inputs] == ["s_0", "s_1", "w"]
    assert [v.shape for v in model.graph.inputs[:2]] == [ir.Shape([3]), ir.Shape([3])]
    a, b, w = (np.arange(3, dtype=np.float32) + k for k in (0, 10, 20))
    (expected,) = ort_run(parse(text), {"s": [a, b], "w": w})
    (actual,) = _run(model, {"s_0": a, "s_1": b, "w": w})
    assert_same(actual, expected)
    for counts, words in (({"w": 2}, "not a sequence"), ({"q": 2}, "no input of that name")):
        with pytest.raises(BadOptionError, match=words):
            UnrollInputs(counts)(_ir(text))


@pytest.mark.parametrize("both", [False, True])
def test_variable_then_branches_keeps_what_the_if_computes(both: bool) -> None:
    """A then branch returning a constant: the branches swap under Not (a Where when both
    branches are constants); the model gives the same for either condition."""
    other = "Constant<value = float[2] {5, 6}>()" if both else "Neg(x)"
    text = f"""
        g (bool c, float[2] x) => (float[2] y) {{
            y = If(c) <
                then_branch = t () => (float[2] a) {{ a = Constant<value = float[2] {{1, 2}}>() }},
                else_branch = e () => (float[2] b) {{ b = {other} }}>
        }}
    """
    model = _ir(text)
    assert VariableThenBranches()(model).modified
    lowered = ir.serde.serialize_model(model)
    onnx.checker.check_model(lowered, full_check=True)
    ops = all_op_types(lowered)
    assert ("Where" in ops) == both and ("Not" in ops) != both
    x = np.array([3, 4], dtype=np.float32)
    for cond in (True, False):
        feeds = {"c": np.array(cond), "x": x}
        assert_same(ort_run(lowered, feeds)[0], ort_run(parse(text), feeds)[0])
