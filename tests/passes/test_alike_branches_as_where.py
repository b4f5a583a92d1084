"""``alike-branches-as-where`` (tract's row): an ``If`` whose branches are the same nodes reading
different scalars from outside, as one copy reading ``Where(c, a, b)``: exact, and what lets
tract 0.23.9 type PyTorch's ``embedding_bag`` (max)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest

import seqlower
from seqlower.passes import AlikeBranchesAsWhere
from tests.helpers import all_op_types
from tests.runtimes import RuntimeFailure, assert_same, run

# The smallest model that shows it: the same Gather of a Range from different ends (tract gives
# each Range its own symbol and requires the branches' output facts equal).
RANGES = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[6] x, int64 s, int64 e, int64 f, bool c) => (float[N] y) {
        one = Constant<value = int64 {1}>()
        y = If(c) <then_branch = th () => (float[N] a) { ra = Range(s, e, one)  a = Gather(x, ra) },
                   else_branch = el () => (float[N] b) { rb = Range(s, f, one)  b = Gather(x, rb) }>
    }
    """
)


def feeds(c: bool) -> dict[str, np.ndarray]:
    x = np.arange(6, dtype=np.float32)
    return {"x": x, "s": np.array(1), "e": np.array(2), "f": np.array(5), "c": np.array(c)}


def test_tract_requires_branches_of_one_fact() -> None:
    """The runtime bug the pass stands for (tract 0.23.9); when a tract types it, it can go."""
    with pytest.raises(RuntimeFailure, match="output_fact"):
        run("tract", RANGES, feeds(True))


@pytest.mark.parametrize("c", [True, False])
def test_alike_branches_run_on_tract(c: bool) -> None:
    lowered = seqlower.lower(RANGES, target="tract")  # proven on tract
    assert "If" not in all_op_types(lowered)
    assert_same(run("onnxruntime", RANGES, feeds(c)), run("tract", lowered, feeds(c)))


# Reads differing at several places, one read alike, a branch output read from outside.
SEVERAL = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3] x, float[2, 3] z, float[3] u, float[3] v, float k, bool c)
        => (float[2, 3] y, float[3] w) {
        y, w = If(c) <then_branch = th () => (float[2, 3] a, float[3] a2) {
            p = Mul(x, u)
            a = Add(p, k)
            a2 = Identity(u)
        }, else_branch = el () => (float[2, 3] b, float[3] b2) {
            q = Mul(z, v)
            b = Add(q, k)
            b2 = Identity(v)
        }>
    }
    """
)


@pytest.mark.parametrize("c", [True, False])
def test_the_taken_branch_s_reads(c: bool) -> None:
    lowered = seqlower.lower(SEVERAL, passes=["alike-branches-as-where"], check=False)
    assert "If" not in all_op_types(lowered)
    rng = np.random.default_rng(0)
    values = {
        "x": rng.standard_normal((2, 3), np.float32),
        "z": rng.standard_normal((2, 3), np.float32),
        "u": rng.standard_normal(3, np.float32),
        "v": rng.standard_normal(3, np.float32),
        "k": np.array(0.5, np.float32),
        "c": np.array(c),
    }
    assert_same(run("onnxruntime", SEVERAL, values), run("onnxruntime", lowered, values))


@pytest.mark.parametrize(
    "text",
    [
        # other ops
        "th () => (float[2] a) { a = Neg(x) }, else_branch = el () => (float[2] b) { b = Abs(x) }",
        # other attributes
        "th () => (float[2] a) { a = Softmax<axis = 0>(x) }, "
        "else_branch = el () => (float[2] b) { b = Softmax<axis = -1>(x) }",
        # reads of shapes not declared static
        "th () => (float[2] a) { a = Add(x, d) }, "
        "else_branch = el () => (float[2] b) { b = Add(x, e) }",
    ],
    ids=["ops", "attributes", "shapes"],
)
def test_unlike_branches_are_left(text: str) -> None:
    model = onnx.parser.parse_model(
        f"""
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2] x, float[N] d, float[N] e, bool c) => (float[2] y) {{
            y = If(c) <then_branch = {text}>
        }}
        """
    )
    step = AlikeBranchesAsWhere()
    step(ir.serde.deserialize_model(model))
    assert step.rewritten == 0


def test_a_condition_not_declared_scalar_is_left() -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2] x, float[2] z, bool[1] c) => (float[2] y) {
            y = If(c) <then_branch = th () => (float[2] a) { a = Neg(x) },
                       else_branch = el () => (float[2] b) { b = Neg(z) }>
        }
        """
    )
    step = AlikeBranchesAsWhere()
    step(ir.serde.deserialize_model(model))
    assert step.rewritten == 0
