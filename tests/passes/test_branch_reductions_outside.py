"""``branch-reductions-outside`` (tract's row): float reductions an ``If`` branch computes from
outer values of run-time size, computed before the ``If`` with their shape declared; exact,
and what lets tract 0.23.9 type PyTorch's ``embedding_bag`` (mean: ``ReduceSum`` and
``ReduceMean`` of the bag's rows in a nested ``If``'s branches)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest

import seqlower
from seqlower.passes import BranchReductionsOutside
from tests.helpers import all_op_types
from tests.runtimes import RuntimeFailure, assert_same, run

# The smallest model that shows it: rows of run-time count reduced in a branch (a reduction
# computed outside is not enough either: tract infers no shape for it, hence declared).
ROWS = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 18]>
    g (float[8, 3] w, int64 s, int64 e, bool c) => (float[1, 3] y, float[3] z) {
        one = Constant<value = int64 {1}>()
        ax = Constant<value = int64[1] {0}>()
        two = Constant<value = float {2}>()
        rows = Range(s, e, one)
        v = Gather(w, rows)
        y = If(c) <then_branch = th () => (float[1, 3] a) { r = ReduceSum(v, ax)  a = Div(r, two) },
                   else_branch = el () => (float[1, 3] b) { b = ReduceMean(v, ax) }>
        z = If(c) <then_branch = th2 () => (float[3] a2) { a2 = ReduceMax<keepdims = 0>(v, ax) },
                   else_branch = el2 () => (float[3] b2) { b2 = ReduceMin<keepdims = 0>(v, ax) }>
    }
    """
)
W = np.arange(24, dtype=np.float32).reshape(8, 3) - 7


def feeds(s: int, e: int, c: bool) -> dict[str, np.ndarray]:
    return {"w": W, "s": np.array(s), "e": np.array(e), "c": np.array(c)}


def test_tract_types_no_branch_reducing_rows_of_run_time_count() -> None:
    """The runtime bug the pass stands for (tract 0.23.9); when a tract types it, it can go."""
    with pytest.raises(RuntimeFailure, match="Source node without a determined fact"):
        run("tract", ROWS, feeds(1, 3, True))


@pytest.mark.parametrize(("s", "e"), [(1, 3), (0, 8), (5, 6)])
@pytest.mark.parametrize("c", [True, False])
def test_reductions_outside_run_on_tract(s: int, e: int, c: bool) -> None:
    lowered = seqlower.lower(ROWS, target="tract", check=False)
    assert_same(run("onnxruntime", ROWS, feeds(s, e, c)), run("tract", lowered, feeds(s, e, c)))


def test_the_untaken_reduction_of_no_rows_changes_nothing() -> None:
    lowered = seqlower.lower(ROWS, passes=["branch-reductions-outside"], check=False)
    assert all_op_types(lowered).count("ReduceSum") == 1
    for c in (True, False):
        assert_same(
            run("onnxruntime", ROWS, feeds(4, 4, c)), run("onnxruntime", lowered, feeds(4, 4, c))
        )


def test_reductions_of_static_or_branch_values_are_left() -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[8, 3] w, float[N, 3] v, bool c) => (float[1, 3] y) {
            ax = Constant<value = int64[1] {0}>()
            y = If(c) <then_branch = th () => (float[1, 3] a) { a = ReduceSum(w, ax) },
                       else_branch = el () => (float[1, 3] b) { n = Neg(v)  b = ReduceSum(n, ax) }>
        }
        """
    )
    step = BranchReductionsOutside()
    step(ir.serde.deserialize_model(model))
    assert step.rewritten == 0
