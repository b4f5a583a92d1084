"""grown-states-as-scan-outputs: a Loop state grown by a Concat each iteration (TensorFlow's
``tf.while_loop`` with ``shape_invariants``) as a scan output appended after the loop."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest

import seqlower
from seqlower.passes import GrownStatesAsScanOutputs
from tests.runtimes import assert_same, require, run

# Rows of x summed until n of them: acc grows by one [1, 4] row an iteration (axis 0), and
# tokens by a [B, 1] column and a [B, 2] pair (axis 1, two pieces), from a seed.
_GROWN = """
    <ir_version: 8, opset_import: ["" : 18]>
    g (float[T, 3, 4] x, int64 n, float[2, 1] seed) => (float[N, 4] acc, float[2, M] tokens) {
        start = Constant<value = float[0, 4] {}>()
        go = Constant<value = bool {1}>()
        acc, tokens = Loop(n, go, start, seed) <body = b (int64 i, bool c, float[K, 4] a,
                float[2, L] t) => (bool c2, float[K2, 4] a2, float[2, L2] t2) {
            r = Gather<axis = 0>(x, i)
            axes = Constant<value = int64[1] {0}>()
            s = ReduceSum<keepdims = 1>(r, axes)
            a2 = Concat<axis = 0>(a, s)
            cols = Constant<value = int64[1] {1}>()
            col = ReduceMax<keepdims = 1>(s, cols)
            two = Concat<axis = 0>(col, col)
            f = Cast<to = 1>(i)
            pair = Constant<value = float[2, 2] {1, 2, 3, 4}>()
            scaled = Mul(pair, f)
            t2 = Concat<axis = -1>(t, two, scaled)
            c2 = Identity(c)
        }>
    }
    """
MODEL = onnx.parser.parse_model(_GROWN)


@pytest.mark.parametrize("target", ["openvino", "tract"])
@pytest.mark.parametrize("n", [0, 1, 4])
def test_grown_states_run_on_the_target(target: str, n: int) -> None:
    """Exact on the target for any count, none included. Before: exit 2 for tract ('grows by
    a Concat each iteration'), and OpenVINO 2026.4.1 loads no such Loop ('Accessing
    out-of-range dimension', exit 1 with tf2onnx's ``tf_while_grow``)."""
    require(target)
    lowered = seqlower.lower(MODEL, target=target)  # proven on the target
    rng = np.random.default_rng(n)
    feeds = {
        "x": rng.standard_normal((5, 3, 4)).astype(np.float32),
        "n": np.array(n, np.int64),
        "seed": np.array([[0.5], [-1.0]], np.float32),
    }
    expected = run("onnxruntime", MODEL, feeds)
    assert expected[0].shape == (n, 4) and expected[1].shape == (2, 1 + 3 * n)
    runtimes = [target, "tract-symbolic"] if target == "tract" else [target]
    for runtime in runtimes:
        assert_same(expected, run(runtime, lowered, feeds))


def test_a_state_read_in_the_body_stays() -> None:
    """A state the body reads besides growing it (its length, say) is left a state."""
    text = _GROWN.replace("c2 = Identity(c)", "size = Size(a)\n            c2 = Identity(c)")
    model = ir.serde.deserialize_model(onnx.parser.parse_model(text))
    grown = GrownStatesAsScanOutputs()
    grown(model)
    loop = next(n for n in model.graph if n.op_type == "Loop")
    assert grown.rewritten == 1 and len(loop.inputs) == 3  # tokens only: acc is read
