"""``freeze-bounded-loops`` (target ``tract``): a Loop that stops on data before a bound
(``i < max_iter and err > tol``, a Sinkhorn ``torch.while_loop``) runs to its bound with its
states frozen once the data says stop, then becomes a Scan; the same numbers as the Loop on
onnxruntime, for data that stops it early, late, at the bound and before the first
iteration; scan outputs read: the rows of the iterations the original runs (a Slice of the
bound's rows by a count of the iterations that start alive), for every stop from 0 to the
bound; a Loop stopped by data alone under jax2onnx's "no M": left, named (not run 2**63
times)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seqlower
from seqlower.errors import TargetError
from tests.helpers import all_op_types
from tests.runtimes import assert_close, assert_same, run

# The counter's final value (the iterations run) is a graph output: start + step * iterations run.
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


# Sinkhorn with each iteration's error as a scan output.
SINKHORN_ERRORS = (
    SINKHORN.replace("=> (float[4,4] p, int64 steps)", "=> (float[4,4] p, float[N] errs)")
    .replace("steps, p = Loop", "steps, p, errs = Loop")
    .replace(
        "=> (bool go, int64 k1, float[4,4] m2)", "=> (bool go, int64 k1, float[4,4] m2, float e1)"
    )
    .replace("go = And(bounded, unsettled)", "go = And(bounded, unsettled)\n e1 = Identity(err)")
)


@pytest.mark.parametrize(
    ("max_iter", "tol"),
    [(50, 1e-4), (3, 1e-4), (50, 0.3), (0, 1e-4), (1, 1e-4), (50, 100.0)],
    ids=["data-stops", "bound-stops", "early", "no-iteration", "one", "never-starts"],
)
@pytest.mark.parametrize("runtime", ["onnxruntime", "tract"])
def test_scan_outputs_read_keep_the_rows_run(max_iter: int, tol: float, runtime: str) -> None:
    """Each iteration's error: the bound's rows, cut to the iterations the original runs."""
    model = onnx.parser.parse_model(SINKHORN_ERRORS)
    lowered = seqlower.lower(model, target="tract", check=False)
    onnx.checker.check_model(lowered, full_check=True)
    assert "Loop" not in all_op_types(lowered)
    feeds = {"c": C, "max_iter": np.array(max_iter), "tol": np.array(tol, np.float32)}
    expected = run("onnxruntime", model, feeds)
    assert_close(expected, run(runtime, lowered, feeds), atol=1e-6)  # tract's ReduceSum


# A greedy decode without M, bounded by a counter (`k1 < max_len`), stopped by the end token 0:
# each iteration writes its token and its state as scan outputs (a third, `unread`, nothing
# reads).
DECODE = """
<ir_version: 10, opset_import: ["" : 20]>
decode (float[4] h0, int64 max_len) => (float[4] h, int64[N] tokens, float[N,4] states) {
    zero = Constant <value = int64 {0}> ()
    go0 = Less(zero, max_len)
    w = Constant <value = float[4,4] {0.5, -0.3, 0.2, 0.1, 0.1, 0.4, -0.5, 0.3, -0.2, 0.1, 0.3,
        -0.4, 0.3, 0.2, 0.1, 0.5}> ()
    h, k, tokens, states, unread = Loop ("", go0, h0, zero) <body = step (int64 i, bool go_in,
            float[4] hh, int64 kk) => (bool go, float[4] h1, int64 k1, int64 tok, float[4] s,
            float[4] u) {
        one = Constant <value = int64 {1}> ()
        eos = Constant <value = int64 {0}> ()
        m = MatMul(hh, w)
        h1 = Tanh(m)
        tok = ArgMax <keepdims = 0> (h1)
        s = Identity(h1)
        u = Neg(h1)
        k1 = Add(kk, one)
        ended = Equal(tok, eos)
        more = Not(ended)
        bounded = Less(k1, max_len)
        go = And(bounded, more)
    }>
}
"""


@pytest.fixture(scope="module")
def decode() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    model = onnx.parser.parse_model(DECODE)
    onnx.checker.check_model(model, full_check=True)
    lowered = seqlower.lower(model, target="tract", check=False)
    onnx.checker.check_model(lowered, full_check=True)
    assert "Loop" not in all_op_types(lowered)
    return model, lowered


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 2**16), max_len=st.integers(0, 9))
def test_a_greedy_decode_writes_the_tokens_it_ran(
    decode: tuple[onnx.ModelProto, onnx.ModelProto], seed: int, max_len: int
) -> None:
    """Stops on the end token anywhere from the first iteration to past the bound, or at the
    bound, or before starting: the tokens and states of the iterations run, bit for bit."""
    model, lowered = decode
    h0 = np.random.default_rng(seed).standard_normal(4).astype(np.float32) * 2
    feeds = {"h0": h0, "max_len": np.array(max_len)}
    expected = run("onnxruntime", model, feeds)
    for runtime in ("onnxruntime", "tract"):
        assert_same(expected, run(runtime, lowered, feeds))


def test_a_greedy_decode_is_proven_on_tract() -> None:
    seqlower.lower(onnx.parser.parse_model(DECODE), target="tract")


# PyTorch's greedy decode into a buffer of max_len tokens (index_put: a ScatterND at the
# counter; torch's while_greedy_decode_memory_bound): the body fails on a buffer of no row, so
# a loop whose bound does not let it start must not run once, frozen (it did, on onnxruntime
# and tract: 'ScatterND index 0 out of bounds for data shape [0]').
DECODE_INTO = """
<ir_version: 10, opset_import: ["" : 20]>
decode (float[4] h0, float[N] slots) => (int64[N] tokens, int64 k) {
    zero = Constant <value = int64 {0}> ()
    shape = Shape(slots)
    max_len = Squeeze(shape)
    buffer = Expand(zero, shape)
    bounded0 = Less(zero, max_len)
    notyet = Constant <value = bool {1}> ()
    go0 = And(bounded0, notyet)
    w = Constant <value = float[4,4] {0.5, -0.3, 0.2, 0.1, 0.1, 0.4, -0.5, 0.3, -0.2, 0.1, 0.3,
        -0.4, 0.3, 0.2, 0.1, 0.5}> ()
    h, k, tokens = Loop ("", go0, h0, zero, buffer) <body = step (int64 i, bool go_in,
            float[4] hh, int64 kk, int64[N] buf) => (bool go, float[4] h1, int64 k1, int64[N] b1) {
        one = Constant <value = int64 {1}> ()
        eos = Constant <value = int64 {0}> ()
        pair = Constant <value = int64[2] {1, 1}> ()
        single = Constant <value = int64[1] {1}> ()
        m = MatMul(hh, w)
        h1 = Tanh(m)
        tok = ArgMax <keepdims = 0> (h1)
        at = Reshape(kk, pair)
        row = Reshape(tok, single)
        b1 = ScatterND(buf, at, row)
        k1 = Add(kk, one)
        ended = Equal(tok, eos)
        more = Not(ended)
        bounded = Less(k1, max_len)
        go = And(bounded, more)
    }>
}
"""


@pytest.mark.parametrize("max_len", [0, 1, 3])
def test_a_decode_the_bound_does_not_start_runs_no_iteration(max_len: int) -> None:
    model = onnx.parser.parse_model(DECODE_INTO)
    onnx.checker.check_model(model, full_check=True)
    lowered = seqlower.lower(model, target="tract", check=False)
    assert "Loop" not in all_op_types(lowered)
    for seed in range(3):
        h0 = np.random.default_rng(seed).standard_normal(4).astype(np.float32) * 2
        feeds = {"h0": h0, "slots": np.zeros(max_len, np.float32)}
        expected = run("onnxruntime", model, feeds)
        for runtime in ("onnxruntime", "tract"):
            assert_same(expected, run(runtime, lowered, feeds))


JAX_DECODE = (
    Path(__file__).resolve().parents[2] / "benchmarks/families/jax2onnx/jax_while_decode.onnx"
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), max_len=st.integers(0, 8))
def test_jax2onnxs_greedy_decode_into_a_buffer(seed: int, max_len: int) -> None:
    """jax2onnx 0.17.1's ``lax.while_loop`` (a counter below ``max_len`` and not the end
    token, no M, tokens written into a preallocated buffer, a bool ``done`` state frozen as
    ``And``/``Or``: onnxruntime has no bool ``Where``): exact on onnxruntime and tract."""
    model = onnx.load(JAX_DECODE)
    lowered = _lowered(JAX_DECODE)
    h = np.random.default_rng(seed).standard_normal(4).astype(np.float32)
    feeds = {"in_0": h, "in_1": np.array(max_len, np.int32)}
    expected = run("onnxruntime", model, feeds)
    for runtime in ("onnxruntime", "tract"):
        assert_close(expected, run(runtime, lowered, feeds), atol=1e-6)


@functools.cache
def _lowered(path: Path) -> onnx.ModelProto:
    lowered = seqlower.lower(onnx.load(path), target="tract")  # proven on tract
    assert "Loop" not in all_op_types(lowered)
    return lowered


PADDLE_DECODE = JAX_DECODE.parents[1] / "paddle2onnx/paddle_greedy_decode.onnx"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), max_len=st.integers(0, 9))
def test_paddle2onnxs_greedy_decode_up_to_a_max_length(seed: int, max_len: int) -> None:
    """paddle2onnx 2.0.1's ``while i < max_len and not done`` (no M, conditions of shape [1],
    a placeholder state, a scalar 0 the body returns as the ``[1, 4]`` embedding, read by
    nothing: not frozen, so the Scan drops it): exact on onnxruntime and tract."""
    model = onnx.load(PADDLE_DECODE)
    lowered = _lowered(PADDLE_DECODE)
    h = np.random.default_rng(seed).standard_normal((1, 4)).astype(np.float32)
    feeds = {"h": h, "max_len": np.array([max_len], np.int64)}
    expected = run("onnxruntime", model, feeds)
    for runtime in ("onnxruntime", "tract"):
        assert_close(expected, run(runtime, lowered, feeds), atol=1e-6)


# Paddle's layout: no M, conditions of shape [1], the counter through Paddle's `scale` (Cast to
# float, Mul by 1, Add 1, Reshape [1], Cast back) compared with a limit the loop carries through
# unchanged (a state); the data stops it where the counter meets `stop`. Each iteration writes
# a row of `x` scaled by its counter. `M` as given (absent, jax2onnx's "no M", a constant 5).
PADDLE_LIKE = """
<ir_version: 10, opset_import: ["" : 17]>
paddle_like (float[2] x, int64[1] n, int64[1] stop) => (float[2] acc, int64[1] i, float[N,2] rows) {
    zero = Constant <value = int64[1] {0}> ()
    start = Constant <value = float[2] {0, 0}> ()
    bounded0 = Less(zero, n)
    hit0 = Equal(zero, stop)
    more0 = Not(hit0)
    go0 = And(bounded0, more0)
    unused, acc, i, rows = Loop (M, go0, n, start, zero) <body = step (int64 it, bool[1] go_in,
            int64[1] limit, float[2] a, int64[1] k) => (bool[1] go, int64[1] limit_out, float[2] a2,
            int64[1] k1, float[2] row) {
        limit_out = Identity(limit)
        kf = Cast <to = 1> (k)
        one_f = Constant <value = float[1] {1}> ()
        scaled = Mul(kf, one_f)
        plus = Constant <value = float {1}> ()
        next = Add(scaled, plus)
        shape1 = Constant <value = int64[1] {1}> ()
        flat = Reshape(next, shape1)
        k1 = Cast <to = 7> (flat)
        weight = Cast <to = 1> (k1)
        row = Mul(x, weight)
        a2 = Add(a, row)
        bounded = Less(k1, limit)
        hit = Equal(k1, stop)
        more = Not(hit)
        go = And(bounded, more)
    }>
}
"""
_MS = {"absent": '""', "no-M": "big", "five": "five"}


def _paddle_like(m: str) -> onnx.ModelProto:
    text = PADDLE_LIKE.replace("Loop (M,", f"Loop ({_MS[m]},").replace(
        "    zero = Constant",
        "    big = Constant <value = int64 {9223372036854775807}> ()\n"
        "    five = Constant <value = int64 {5}> ()\n    zero = Constant",
    )
    model = onnx.parser.parse_model(text)
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.fixture(scope="module")
def paddle_like() -> dict[str, tuple[onnx.ModelProto, onnx.ModelProto]]:
    lowered = {}
    for m in _MS:
        model = _paddle_like(m)
        lowered[m] = (model, seqlower.lower(model, target="tract", check=False))
        assert "Loop" not in all_op_types(lowered[m][1])
    return lowered


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(m=st.sampled_from(sorted(_MS)), n=st.integers(0, 7), stop=st.integers(0, 8))
def test_stops_from_zero_to_the_bound_on_paddles_layout(
    paddle_like: dict[str, tuple[onnx.ModelProto, onnx.ModelProto]], m: str, n: int, stop: int
) -> None:
    """A bound from the induction analysis (a counter state below a limit state), not from M;
    every stop position, 0 (never starts) and the bound included."""
    model, lowered = paddle_like[m]
    feeds: dict[str, np.ndarray] = {
        "x": np.array([0.5, -1.25], np.float32),
        "n": np.array([n], np.int64),
        "stop": np.array([stop], np.int64),
    }
    expected = run("onnxruntime", model, feeds)
    for runtime in ("onnxruntime", "tract"):
        assert_same(expected, run(runtime, lowered, feeds))


def test_data_alone_under_no_m_is_named() -> None:
    """jax2onnx's "no M" (INT64_MAX) bounds nothing: frozen, the Loop would run 2**63 times."""
    text = FOR_BREAK.replace("Loop (n,", "Loop (big,").replace(
        "    zero = Constant",
        "    big = Constant <value = int64 {9223372036854775807}> ()\n    zero = Constant",
    )
    model = onnx.parser.parse_model(text)
    with pytest.raises(TargetError, match=r"its trip count is not fixed when it starts"):
        seqlower.lower(model, target="tract", check=False)


# A Sinkhorn torch.while_loop of a constant bound (as exported: while_sinkhorn, max_iter=50).
SINKHORN_BOUNDED = (
    SINKHORN.replace("(float[4,4] c, int64 max_iter, float tol)", "(float[4,4] c, float tol)")
    .replace(
        '<ir_version: 10, opset_import: ["" : 20]>', '<ir_version: 8, opset_import: ["" : 17]>'
    )
    .replace("zero = Constant", "max_iter = Constant <value = int64 {6}> ()\n    zero = Constant")
)


# ... with each iteration's error as a scan output.
SINKHORN_ERRORS_BOUNDED = (
    SINKHORN_ERRORS.replace(
        "(float[4,4] c, int64 max_iter, float tol)", "(float[4,4] c, float tol)"
    )
    .replace(
        '<ir_version: 10, opset_import: ["" : 20]>', '<ir_version: 8, opset_import: ["" : 17]>'
    )
    .replace("zero = Constant", "max_iter = Constant <value = int64 {6}> ()\n    zero = Constant")
)


@pytest.mark.parametrize("text", [SINKHORN_BOUNDED, SINKHORN_ERRORS_BOUNDED], ids=["", "rows"])
@pytest.mark.parametrize("target", ["onnx2torch", "tvm", "tinygrad"])
def test_a_bounded_loop_is_frozen_then_unrolled_for_the_converters(target: str, text: str) -> None:
    """The converters run no Loop: frozen to its constant bound, it becomes a Scan, unrolled
    (its rows cut to the iterations run)."""
    model = onnx.parser.parse_model(text)
    lowered = seqlower.lower(model, target=target, check=False)
    assert {"Loop", "Scan"}.isdisjoint(all_op_types(lowered))
    for tol in (1e-4, 0.3, 100.0):  # stops on data late, early, never starts
        feeds = {"c": C, "tol": np.array(tol, np.float32)}
        expected = run("onnxruntime", model, feeds)
        assert_close(expected, run("onnxruntime", lowered, feeds), atol=1e-6)
        assert_close(expected, run(target, lowered, feeds), atol=1e-5)


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
