"""A ``Scan`` inside another ``Scan``'s body on tract (a ``fori_loop`` inside jax2onnx's
``lax.scan``): tract 0.23.9 computes it wrong after the first outer iteration when the inner
initial states are computed from the outer row (from the outer state alone, it is right). The
tract row unrolls such inner Scans of a constant count (``unroll-nested-constant-scans``); the
check fails the others (exit 1, never a wrong file)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx.parser
import onnx_ir as ir
import pytest

import seqlower
from seqlower.errors import ProofFailedError
from seqlower.passes._ir import scans_in_scans
from tests.runtimes import assert_same, run


def _scan_in_scan() -> onnx.ModelProto:
    """The smallest model that shows it: the inner Scan's three steps start from the outer row
    plus the outer state (its scanned numbers and counter are the outer body's initializers)."""
    inner = oh.make_graph(
        [
            oh.make_node("Mul", ["v", "half"], ["h"]),
            oh.make_node("Add", ["h", "one"], ["w"]),
            oh.make_node("Max", ["last", "k"], ["m"]),
        ],
        "inner",
        [_info("v", F, [3]), _info("last", INT, []), _info("k", INT, [])],
        [_info("w", F, [3]), _info("m", INT, [])],
        [oh.make_tensor("half", F, [], [0.5]), oh.make_tensor("one", F, [], [1.0])],
    )
    outer = oh.make_graph(
        [
            oh.make_node("Add", ["state", "row"], ["start"]),
            oh.make_node(
                "Scan", ["start", "zero", "steps"], ["next", "_"], body=inner, num_scan_inputs=1
            ),
            oh.make_node("ReduceSum", ["next"], ["sum"], keepdims=0),
        ],
        "outer",
        [_info("state", F, [3]), _info("row", F, [3])],
        [_info("next", F, [3]), _info("sum", F, [])],
        [oh.make_tensor("steps", INT, [3], [0, 1, 2]), oh.make_tensor("zero", INT, [], [0])],
    )
    graph = oh.make_graph(
        [oh.make_node("Scan", ["c0", "x"], ["c", "y"], body=outer, num_scan_inputs=1)],
        "g",
        [_info("x", F, ["T", 3])],
        [_info("c", F, [3]), _info("y", F, ["T"])],
        [oh.make_tensor("c0", F, [3], [0, 0, 0])],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


F, INT, _info = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64, oh.make_tensor_value_info
SCAN_IN_SCAN = _scan_in_scan()
X = {"x": np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)}


def test_tract_runs_a_scan_in_a_scan_on_stale_states() -> None:
    """tract 0.23.9's bug, either facts: rows after the first are wrong. When a tract runs it
    right, this fails and the pass can go from the tract row."""
    want = run("onnxruntime", SCAN_IN_SCAN, X)
    for runtime in ("tract", "tract-symbolic"):
        got = run(runtime, SCAN_IN_SCAN, X)
        np.testing.assert_allclose(got[1][0], want[1][0], rtol=1e-6)
        assert not np.allclose(got[1][1:], want[1][1:], rtol=1e-3)


def _nested_loops(inner_count: str, extra_input: str = "") -> onnx.ModelProto:
    """A loop over x's rows whose body runs ``inner_count`` steps of ``v * 0.5 + 1`` from the
    state plus the row (jax2onnx's ``scan`` of a ``fori_loop``)."""
    return onnx.parser.parse_model(
        f"""
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[T, 3] x{extra_input}) => (float[3] c, float[T] y) {{
            shape = Shape(x)
            zero = Constant<value = int64[1] {{0}}>()
            first = Gather(shape, zero)
            t = Squeeze(first, zero)
            go = Constant<value = bool {{1}}>()
            c0 = Constant<value = float[3] {{0, 0, 0}}>()
            c, y = Loop(t, go, c0) <body = outer (int64 i, bool cond, float[3] state)
                                           => (bool cond_out, float[3] next, float sum) {{
                row = Gather<axis = 0>(x, i)
                start = Add(state, row)
                count = {inner_count}
                more = Constant<value = bool {{1}}>()
                next = Loop(count, more, start) <body = inner (int64 j, bool b, float[3] v)
                                                      => (bool b_out, float[3] w) {{
                    half = Constant<value = float {{0.5}}>()
                    one = Constant<value = float {{1}}>()
                    h = Mul(v, half)
                    w = Add(h, one)
                    b_out = Identity(b)
                }}>
                sum = ReduceSum<keepdims = 0>(next)
                cond_out = Identity(cond)
            }}>
        }}
        """
    )


def test_an_inner_loop_of_constant_count_is_unrolled_for_tract() -> None:
    model = _nested_loops("Constant<value = int64 {3}>()")
    lowered = seqlower.lower(model, target="tract")  # proven on tract, either facts
    assert not scans_in_scans(ir.serde.deserialize_model(lowered))
    want = run("onnxruntime", model, X)
    for runtime in ("tract", "tract-symbolic"):
        assert_same(want, run(runtime, lowered, X))


def test_an_inner_loop_of_run_time_count_fails_the_check_on_tract() -> None:
    """Not unrolled: never a file that computes wrong on tract."""
    model = _nested_loops("Identity(n)", ", int64 n")
    with pytest.raises(ProofFailedError, match="differs on tract"):
        seqlower.lower(model, target="tract")
