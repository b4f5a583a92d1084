"""``scalar-if-conditions`` (tract's row): an ``If`` condition whose length is known only at
run time read as a scalar, exact: the one element, and an error wherever the ``If`` raises one
(no element, or several)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import pytest

import seqlower
from seqlower.passes import ScalarIfConditions
from tests.runtimes import RuntimeFailure, assert_same, run

# The smallest model that shows it: a condition of run-time length (PyTorch's embedding_bag
# tests Equal(offsets[i:i+1], offsets[i+1:i+2]), its slices become such Gathers for tract).
RUN_TIME_CONDITION = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (bool[4] flags, int64 s, int64 e, float[2] x) => (float[2] y) {
        one = Constant<value = int64 {1}>()
        rows = Range(s, e, one)
        c = Gather(flags, rows)
        y = If(c) <then_branch = th () => (float[2] a) {
            a = Neg(x)
        }, else_branch = el () => (float[2] b) {
            b = Identity(x)
        }>
    }
    """
)
X = np.array([1.5, -2.0], np.float32)


def feeds(s: int, e: int) -> dict[str, np.ndarray]:
    flags = np.array([True, False, False, True])
    return {"flags": flags, "s": np.array(s), "e": np.array(e), "x": X}


def test_tract_needs_a_condition_of_one_element_at_load() -> None:
    """The runtime bug the pass stands for (tract 0.23.9); when a tract types it, it can go."""
    with pytest.raises(RuntimeFailure, match=r"volume\(\) == 1"):
        run("tract", RUN_TIME_CONDITION, feeds(0, 1))


@pytest.mark.parametrize("s", [0, 1, 2, 3])
def test_one_element_conditions_run_on_tract(s: int) -> None:
    lowered = seqlower.lower(RUN_TIME_CONDITION, target="tract", check=False)
    assert_same(
        run("onnxruntime", RUN_TIME_CONDITION, feeds(s, s + 1)),
        run("tract", lowered, feeds(s, s + 1)),
    )


@pytest.mark.parametrize(("s", "e"), [(1, 1), (0, 2), (0, 4)])
def test_other_lengths_fail_as_the_if_does(s: int, e: int) -> None:
    lowered = seqlower.lower(RUN_TIME_CONDITION, passes=["scalar-if-conditions"], check=False)
    with pytest.raises(RuntimeFailure):
        run("onnxruntime", RUN_TIME_CONDITION, feeds(s, e))
    with pytest.raises(RuntimeFailure):
        run("onnxruntime", lowered, feeds(s, e))


def test_conditions_of_one_element_are_left() -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (bool c, bool[1] d, float[2] x) => (float[2] y, float[2] z) {
            y = If(c) <then_branch = th () => (float[2] a) { a = Neg(x) },
                       else_branch = el () => (float[2] b) { b = Identity(x) }>
            z = If(d) <then_branch = th2 () => (float[2] a2) { a2 = Neg(x) },
                       else_branch = el2 () => (float[2] b2) { b2 = Identity(x) }>
        }
        """
    )
    import onnx_ir as ir

    ir_model = ir.serde.deserialize_model(model)
    step = ScalarIfConditions()
    step(ir_model)
    assert step.rewritten == 0
