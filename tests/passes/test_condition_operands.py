"""``condition-operands-in-branches`` (tract's row): what an ``If`` condition is computed from
elementwise, read in its branches, as its one element of a shape known at load; exact (an error
where the ``If`` raises one), and what lets tract 0.23.9 type PyTorch's ``embedding_bag``
(mean), which divides by ``n - offsets[i:i+1]`` in a branch of ``If(start == end)``."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest

import seqlower
from seqlower.passes import ConditionOperandsInBranches
from tests.runtimes import RuntimeFailure, assert_same, run

# The smallest model that shows it: a branch reading a value of run-time length.
BRANCH_READ = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (int64[4] offsets, int64 s, int64 e, int64 f) => (int64[N] y) {
        one = Constant<value = int64 {1}>()
        ra = Range(s, e, one)
        start = Gather(offsets, ra)
        rb = Range(e, f, one)
        end = Gather(offsets, rb)
        c = Equal(start, end)
        y = If(c) <then_branch = th () => (int64[N] a) { a = Sub(start, one) },
                   else_branch = el () => (int64[N] b) { b = Add(end, start) }>
    }
    """
)
OFFSETS = np.array([0, 3, 3, 8])


def feeds(s: int, e: int, f: int) -> dict[str, np.ndarray]:
    return {"offsets": OFFSETS, "s": np.array(s), "e": np.array(e), "f": np.array(f)}


def test_tract_types_no_branch_reading_a_value_of_run_time_length() -> None:
    """The runtime bug the pass stands for (tract 0.23.9); when a tract types it, it can go."""
    with pytest.raises(RuntimeFailure, match="Source node without a determined fact"):
        run("tract", BRANCH_READ, feeds(0, 1, 2))


@pytest.mark.parametrize("s", [0, 1, 2])
def test_operands_of_one_element_run_on_tract(s: int) -> None:
    lowered = seqlower.lower(BRANCH_READ, target="tract", check=False)
    want = run("onnxruntime", BRANCH_READ, feeds(s, s + 1, s + 2))
    assert_same(want, run("tract", lowered, feeds(s, s + 1, s + 2)))


@pytest.mark.parametrize(("s", "e", "f"), [(1, 1, 2), (0, 2, 3), (0, 1, 1)])
def test_other_lengths_fail_as_the_if_does(s: int, e: int, f: int) -> None:
    lowered = seqlower.lower(BRANCH_READ, passes=["condition-operands-in-branches"], check=False)
    with pytest.raises(RuntimeFailure):
        run("onnxruntime", BRANCH_READ, feeds(s, e, f))
    with pytest.raises(RuntimeFailure):
        run("onnxruntime", lowered, feeds(s, e, f))


def test_static_operands_and_other_values_are_left() -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (int64[1] a, int64[1] b, int64[N] v, bool c) => (int64[N] y, int64[1] z) {
            d = Equal(a, b)
            z = If(d) <then_branch = th () => (int64[1] p) { p = Neg(a) },
                       else_branch = el () => (int64[1] q) { q = Identity(b) }>
            y = If(c) <then_branch = th2 () => (int64[N] p2) { p2 = Neg(v) },
                       else_branch = el2 () => (int64[N] q2) { q2 = Identity(v) }>
        }
        """
    )
    step = ConditionOperandsInBranches()
    step(ir.serde.deserialize_model(model))
    assert step.rewritten == 0
