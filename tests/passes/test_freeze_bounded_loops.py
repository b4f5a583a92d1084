"""``freeze-bounded-loops`` (target ``tract``): a Loop that stops on data before a bound
(``i < max_iter and err > tol``, a Sinkhorn ``torch.while_loop``) runs to its bound with its
states frozen once the data says stop, then becomes a Scan; the same numbers as the Loop on
onnxruntime, for data that stops it early, late, at the bound and before the first
iteration; scan outputs read: left, with the reason named."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import pytest

import seqlower
from seqlower.errors import TargetError
from tests.helpers import all_op_types
from tests.runtimes import assert_same, run

# The counter's final value (the iterations run) is a graph output: read from a frozen copy.
SINKHORN = """
<ir_version: 10, opset_import: ["" : 20]>
sinkhorn (float[4,4] c, int64 max_iter, float tol) => (float[4,4] p, int64 steps) {
    zero = Constant <value = int64 {0}> ()
    rows = Constant <value = int64[1] {1}> ()
    one = Constant <value = float {1}> ()
    nc = Neg(c)
    e = Exp(nc)
    s0 = ReduceSum <keepdims = 0> (e, rows)
    d0 = Sub(s0, one)
    a0 = Abs(d0)
    err0 = ReduceMax <keepdims = 0> (a0)
    more = Less(zero, max_iter)
    far = Greater(err0, tol)
    go0 = And(more, far)
    steps, p = Loop ("", go0, zero, e) <body = step (int64 i, bool go_in, int64 k, float[4,4] m)
        => (bool go, int64 k1, float[4,4] m2) {
        step_one = Constant <value = int64 {1}> ()
        cols = Constant <value = int64[1] {0}> ()
        k1 = Add(k, step_one)
        rs = ReduceSum <keepdims = 1> (m, rows)
        m1 = Div(m, rs)
        cs = ReduceSum <keepdims = 1> (m1, cols)
        m2 = Div(m1, cs)
        s = ReduceSum <keepdims = 0> (m2, rows)
        d = Sub(s, one)
        a = Abs(d)
        err = ReduceMax <keepdims = 0> (a)
        bounded = Less(k1, max_iter)
        unsettled = Greater(err, tol)
        go = And(bounded, unsettled)
    }>
}
"""

C = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)


@pytest.mark.parametrize(
    ("max_iter", "tol"),
    [(50, 1e-4), (3, 1e-4), (50, 0.3), (0, 1e-4), (1, 1e-4), (50, 100.0)],
    ids=["data-stops", "bound-stops", "early", "no-iteration", "one", "never-starts"],
)
@pytest.mark.parametrize("runtime", ["onnxruntime", "tract"])
def test_sinkhorn_runs_as_a_scan(max_iter: int, tol: float, runtime: str) -> None:
    model = onnx.parser.parse_model(SINKHORN)
    lowered = seqlower.lower(model, target="tract", check=False)
    onnx.checker.check_model(lowered, full_check=True)
    assert "Loop" not in all_op_types(lowered) and "Scan" in all_op_types(lowered)
    feeds = {"c": C, "max_iter": np.array(max_iter), "tol": np.array(tol, np.float32)}
    expected = run("onnxruntime", model, feeds)
    assert_same(expected, run(runtime, lowered, feeds))


def test_proven_through_the_api() -> None:
    seqlower.lower(onnx.parser.parse_model(SINKHORN), target="tract")


def test_scan_outputs_read_are_named() -> None:
    """Each iteration's error as a scan output: a Scan to the bound would give it the bound's
    rows, not the iterations run."""
    text = SINKHORN.replace("=> (float[4,4] p, int64 steps)", "=> (float[4,4] p, float[] errs)")
    text = text.replace("steps, p = Loop", "steps, p, errs = Loop")
    text = text.replace(
        "=> (bool go, int64 k1, float[4,4] m2)", "=> (bool go, int64 k1, float[4,4] m2, float e1)"
    )
    text = text.replace(
        "go = And(bounded, unsettled)", "go = And(bounded, unsettled)\n e1 = Identity(err)"
    )
    model = onnx.parser.parse_model(text)
    with pytest.raises(
        TargetError, match=r"stops on data before its bound and its scan outputs \(errs\)"
    ):
        seqlower.lower(model, target="tract", check=False)


# A Sinkhorn torch.while_loop of a constant bound (as exported: while_sinkhorn, max_iter=50).
SINKHORN_BOUNDED = (
    SINKHORN.replace("(float[4,4] c, int64 max_iter, float tol)", "(float[4,4] c, float tol)")
    .replace(
        '<ir_version: 10, opset_import: ["" : 20]>', '<ir_version: 8, opset_import: ["" : 17]>'
    )
    .replace("zero = Constant", "max_iter = Constant <value = int64 {6}> ()\n    zero = Constant")
)


@pytest.mark.parametrize("target", ["onnx2torch", "tvm", "tinygrad"])
def test_a_bounded_loop_is_frozen_then_unrolled_for_the_converters(target: str) -> None:
    """The converters run no Loop: frozen to its constant bound, it becomes a Scan, unrolled."""
    model = onnx.parser.parse_model(SINKHORN_BOUNDED)
    lowered = seqlower.lower(model, target=target, check=False)
    assert {"Loop", "Scan"}.isdisjoint(all_op_types(lowered))
    for tol in (1e-4, 0.3, 100.0):  # stops on data late, early, never starts
        feeds = {"c": C, "tol": np.array(tol, np.float32)}
        expected = run("onnxruntime", model, feeds)
        assert_same(expected, run("onnxruntime", lowered, feeds))
        np.testing.assert_allclose(run(target, lowered, feeds)[0], expected[0], rtol=1e-5)


# A for-loop with a break (PyTorch's, Paddle's `for i in range(n): ... if done: break`): M bounds
# it, the data alone is its condition, of shape [1] through a Reshape as Paddle writes it.
FOR_BREAK = """
<ir_version: 10, opset_import: ["" : 20]>
for_break (float[3] x, int64 n, float limit) => (float[3] acc, int64 steps) {
    zero = Constant <value = int64 {0}> ()
    go0 = Constant <value = bool[1] {1}> ()
    start = Constant <value = float[3] {0, 0, 0}> ()
    steps, acc = Loop (n, go0, zero, start) <body = step (int64 i, bool[1] go_in, int64 k,
            float[3] a) => (bool[1] go, int64 k1, float[3] a2) {
        one = Constant <value = int64 {1}> ()
        row = Constant <value = int64[1] {1}> ()
        k1 = Add(k, one)
        a2 = Add(a, x)
        first = Constant <value = int64 {0}> ()
        total = Gather(a2, first)
        small = Less(total, limit)
        go = Reshape(small, row)
    }>
}
"""


@pytest.mark.parametrize(("n", "limit"), [(6, 2.5), (6, 100.0), (0, 2.5), (1, -5.0), (4, 0.5)])
@pytest.mark.parametrize("runtime", ["onnxruntime", "tract"])
def test_a_for_loop_with_a_break_runs_to_m_frozen(n: int, limit: float, runtime: str) -> None:
    model = onnx.parser.parse_model(FOR_BREAK)
    onnx.checker.check_model(model, full_check=True)
    feeds = {
        "x": np.array([0.5, 0.25, 0.25], np.float32),
        "n": np.array(n, np.int64),
        "limit": np.array(limit, np.float32),
    }
    lowered = seqlower.lower(model, target="tract", check=False)
    assert "Loop" not in all_op_types(lowered)
    assert_same(run("onnxruntime", model, feeds), run(runtime, lowered, feeds))
