"""A counted Loop that may run zero times, whose body is not proven safe on iteration 0, runs on
tract inside an ``If`` on ``count > 0`` (``LoopToScan``'s tract form): exact against onnxruntime
on the original for counts 0..k, for bodies drawn at random from reads of the scanned rows,
state updates, matrix products and ops that fail on an empty input (what jax2onnx writes for
every ``lax.scan`` over a symbolic length)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import seqlower
from tests.helpers import all_op_types
from tests.runtimes import RuntimeFailure, assert_close, require, run

F = 3
_STEPS = {
    # name: (nodes reading "row" and "h", writing "h2"); every one reads row i of xs
    "add": [helper.make_node("Add", ["h", "row"], ["h2"])],
    "tanh_matmul": [
        helper.make_node("MatMul", ["row", "w"], ["rw"]),
        helper.make_node("Add", ["rw", "h"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["h2"]),
    ],
    "einsum": [  # jax2onnx's row @ w
        helper.make_node("Einsum", ["row", "w"], ["rw"], equation="a,ab->b"),
        helper.make_node("Add", ["rw", "h"], ["h2"]),
    ],
    "mul_max": [
        helper.make_node("Mul", ["h", "row"], ["hr"]),
        helper.make_node("Max", ["hr", "row"], ["h2"]),
    ],
    "softmax": [  # an op the proof does not know: run under an If
        helper.make_node("Softmax", ["row"], ["weights"], axis=0),
        helper.make_node("Add", ["h", "weights"], ["h2"]),
    ],
    "picked": [  # an index read from a row: index 0 on a zero row
        helper.make_node("ArgMax", ["row"], ["at_peak"], keepdims=0),
        helper.make_node("Gather", ["row", "at_peak"], ["peak"], axis=0),
        helper.make_node("Add", ["h", "peak"], ["h2"]),
    ],
    "reduce": [
        helper.make_node("ReduceMax", ["row"], ["peak"], keepdims=1),
        helper.make_node("Sub", ["row", "peak"], ["centred"]),
        helper.make_node("Add", ["h", "centred"], ["h2"]),
    ],
}
_OUTS = {
    "state": [helper.make_node("Identity", ["h2"], ["y"])],
    "double": [
        helper.make_node("Add", ["h2", "h2"], ["y"]),
    ],
    "row": [helper.make_node("Neg", ["row"], ["y"])],
}


def _scan_loop(step: str, out: str, counted: str) -> onnx.ModelProto:
    """jax2onnx's ``lax.scan``: ``Loop(T, true, h0, xs)`` over the rows of ``xs`` (``T`` from its
    shape), the body reading row ``i`` by ``Gather`` (or, ``counted``: a while-loop whose counter
    reads it and whose condition is ``counter < T``)."""
    body_nodes: list[onnx.NodeProto] = []
    inputs = [
        helper.make_tensor_value_info("i", TensorProto.INT64, []),
        helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        helper.make_tensor_value_info("h", TensorProto.FLOAT, [F]),
        helper.make_tensor_value_info("xs_in", TensorProto.FLOAT, ["T", F]),
    ]
    outputs = [
        helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
        helper.make_tensor_value_info("h2", TensorProto.FLOAT, [F]),
        helper.make_tensor_value_info("xs_out", TensorProto.FLOAT, ["T", F]),
    ]
    loop_inputs = ["t", "true", "h0", "xs"]
    if counted == "while":
        inputs.insert(2, helper.make_tensor_value_info("k", TensorProto.INT64, []))
        outputs.insert(1, helper.make_tensor_value_info("k2", TensorProto.INT64, []))
        body_nodes += [
            helper.make_node("Add", ["k", "one"], ["k2"]),
            helper.make_node("Less", ["k2", "t"], ["c_out"]),
            helper.make_node("Identity", ["k"], ["at"]),
        ]
        loop_inputs = ["", "runs", "zero", "h0", "xs"]
    else:
        body_nodes += [
            helper.make_node("Identity", ["c"], ["c_out"]),
            helper.make_node("Identity", ["i"], ["at"]),
        ]
    body_nodes.append(helper.make_node("Gather", ["xs_in", "at"], ["row"], axis=0))
    body_nodes += [*_STEPS[step], *_OUTS[out], helper.make_node("Identity", ["xs_in"], ["xs_out"])]
    outputs.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [F]))
    body = helper.make_graph(body_nodes, "body", inputs, outputs)
    rng = np.random.default_rng(3)
    const = [
        helper.make_node("Constant", [], ["true"], value=helper.make_tensor("v", 9, [], [1])),
        helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("z", 7, [], [0])),
        helper.make_node("Constant", [], ["one"], value=helper.make_tensor("o", 7, [], [1])),
        helper.make_node("Constant", [], ["first"], value=helper.make_tensor("f", 7, [1], [0])),
        helper.make_node(
            "Constant",
            [],
            ["w"],
            value=onnx.numpy_helper.from_array(rng.standard_normal((F, F)).astype(np.float32)),
        ),
        helper.make_node("Shape", ["xs"], ["shape"]),
        helper.make_node("Gather", ["shape", "first"], ["t1"], axis=0),
        helper.make_node("Squeeze", ["t1", "first"], ["t"]),
        helper.make_node("Less", ["zero", "t"], ["runs"]),
    ]
    finals = (
        ["k_final", "h_final", "xs_final", "ys"]
        if counted == "while"
        else [
            "h_final",
            "xs_final",
            "ys",
        ]
    )
    loop = helper.make_node("Loop", loop_inputs, finals, body=body)
    graph = helper.make_graph(
        [*const, loop],
        "scan",
        [
            helper.make_tensor_value_info("xs", TensorProto.FLOAT, ["T", F]),
            helper.make_tensor_value_info("h0", TensorProto.FLOAT, [F]),
        ],
        [
            helper.make_tensor_value_info("h_final", TensorProto.FLOAT, [F]),
            helper.make_tensor_value_info("ys", TensorProto.FLOAT, ["T", F]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


@settings(max_examples=48, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    step=st.sampled_from(sorted(_STEPS)),
    out=st.sampled_from(sorted(_OUTS)),
    counted=st.sampled_from(["for", "while"]),
)
def test_exact_for_every_count_from_zero(step: str, out: str, counted: str) -> None:
    require("tract")
    model = _scan_loop(step, out, counted)
    lowered = seqlower.lower(model, target="tract", check=False)
    assert "Loop" not in all_op_types(lowered)
    rng = np.random.default_rng(0)
    h0 = rng.standard_normal(F).astype(np.float32)
    for t in range(4):
        feeds = {"xs": rng.standard_normal((t, F)).astype(np.float32), "h0": h0}
        expected = run("onnxruntime", model, feeds)
        assert_close(expected, run("onnxruntime", lowered, feeds), atol=1e-6)
        assert_close(expected, run("tract", lowered, feeds), atol=1e-5)


def test_the_guard_is_what_makes_it_run() -> None:
    """Without it tract's form refuses the Loop: its body holds an op not proven safe on
    iteration 0."""
    model = _scan_loop("softmax", "state", "for")
    ops = all_op_types(seqlower.lower(model, target="tract", check=False))
    assert "If" in ops and "Scan" in ops


@pytest.mark.parametrize("step", ["tanh_matmul", "einsum", "picked"])
@pytest.mark.parametrize("counted", ["for", "while"])
def test_a_scanned_state_is_padded(counted: str, step: str) -> None:
    """The rows ``xs`` read from a state the body passes through unchanged (as jax2onnx
    carries every scanned input) are padded like rows read from outside, a computed index is
    0 on the zero row: a Scan of at least one iteration, its results masked, no If needed."""
    model = _scan_loop(step, "state", counted)
    ops = all_op_types(seqlower.lower(model, target="tract", check=False))
    assert "If" not in ops and "Scan" in ops


@pytest.mark.parametrize("t", [0, 2])
def test_the_check_proves_it_on_tract(t: int) -> None:
    require("tract")
    model = _scan_loop("add", "row", "while")
    lowered = seqlower.lower(model, target="tract")  # the check on tract included
    feeds = {
        "xs": np.ones((t, F), np.float32),
        "h0": np.arange(F, dtype=np.float32),
    }
    assert_close(run("onnxruntime", model, feeds), run("tract", lowered, feeds), atol=1e-6)


# A greedy decode's loop of a count read from a value (no If then: tract 0.23.9 types none whose
# branches' lengths come from values): the embedding of the token it carries, a Gather at an
# index the body computes, reads index 0 on the iteration a Loop of no iteration runs.
DECODE = """
<ir_version: 8, opset_import: ["" : 17]>
decode (float[3] h0, int64 tok0, int64 n) => (float[3] h, int64 tok, float[N,3] hs) {
    go = Constant <value = bool {1}> ()
    table = Constant <value = float[5,3] {0.1, -0.2, 0.3, 0.5, 0.4, -0.1, -0.3, 0.2, 0.6,
        0.9, -0.5, 0.1, -0.4, 0.7, 0.2}> ()
    h, tok, hs = Loop (n, go, h0, tok0) <body = step (int64 i, bool c, float[3] hh, int64 t)
            => (bool c_out, float[3] h2, int64 t2, float[3] row) {
        c_out = Identity(c)
        emb = Gather <axis = 0> (table, t)
        pre = Add(hh, emb)
        h2 = Tanh(pre)
        head = Constant <value = float[3,5] {0.3, -0.6, 0.2, 0.5, -0.1, 0.4, 0.1, -0.5, 0.2, 0.6,
            -0.2, 0.3, 0.7, -0.4, 0.1}> ()
        logits = MatMul(h2, head)
        t2 = ArgMax <axis = 0, keepdims = 0> (logits)
        row = Identity(h2)
    }>
}
"""


@pytest.fixture(scope="module")
def decode() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    model = onnx.parser.parse_model(DECODE)
    onnx.checker.check_model(model, full_check=True)
    lowered = seqlower.lower(model, target="tract")  # proven on tract
    assert "Loop" not in all_op_types(lowered) and "If" not in all_op_types(lowered)
    return model, lowered


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(n=st.integers(0, 5), tok0=st.integers(0, 4), seed=st.integers(0, 2**16))
def test_a_computed_index_is_guarded_for_every_count(
    decode: tuple[onnx.ModelProto, onnx.ModelProto], n: int, tok0: int, seed: int
) -> None:
    require("tract")
    model, lowered = decode
    h0 = np.random.default_rng(seed).standard_normal(F).astype(np.float32)
    feeds = {"h0": h0, "tok0": np.array(tok0), "n": np.array(n)}
    expected = run("onnxruntime", model, feeds)
    assert_close(expected, run("onnxruntime", lowered, feeds), atol=1e-6)
    assert_close(expected, run("tract", lowered, feeds), atol=1e-5)


def test_a_token_out_of_range_is_read_only_when_the_loop_runs(
    decode: tuple[onnx.ModelProto, onnx.ModelProto],
) -> None:
    """A start token the table has no row for: the original returns its initial states when
    it runs none, and fails when it runs; so does the lowered model."""
    model, lowered = decode
    feeds = {"h0": np.ones(F, np.float32), "tok0": np.array(9), "n": np.array(0)}
    assert_close(run("onnxruntime", model, feeds), run("tract", lowered, feeds), atol=1e-6)
    feeds["n"] = np.array(2)
    for runtime, candidate in (("onnxruntime", model), ("onnxruntime", lowered)):
        with pytest.raises(RuntimeFailure):
            run(runtime, candidate, feeds)
