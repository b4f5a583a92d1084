"""``explicit-loop-counts`` (targets ``onnx2tf``, ``iree``) and ``start-conditions-in-counts``
(``iree``) on a Loop whose condition is of shape ``[1]``, as paddle2onnx writes it: the
Loop's ``cond`` becomes a scalar ``true``, and ONNX infers the body's condition input from it,
so the body must declare it a scalar too (onnxruntime refused to load the lowered model:
"Mismatch between number of inferred and declared dimensions"); a body that reads its
condition still reads it as ``[1]``; the same numbers as the original on onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import pytest

import seqlower
from tests.runtimes import assert_same, run

# paddle2onnx's `while i < n: i += 1; acc += x`: no M, conditions of shape [1]
WHILE = """
<ir_version: 8, opset_import: ["" : 17]>
g (int64[1] n, float[3] x) => (int64[1] i, float[3] acc) {
    i0 = Constant <value = int64[1] {0}> ()
    acc0 = Constant <value = float[3] {0, 0, 0}> ()
    c0 = Less(i0, n)
    i, acc = Loop ("", c0, i0, acc0) <body = b (int64 it, bool[1] c_in, int64[1] i_in,
        float[3] a_in) => (bool[1] c, int64[1] i1, float[3] a1) {
        one = Constant <value = int64[1] {1}> ()
        i1 = Add(i_in, one)
        a1 = Add(a_in, x)
        c = Less(i1, n)
    }>
}
"""

# the same, whose body also reads its condition (a [1] state that counts it)
READS = """
<ir_version: 8, opset_import: ["" : 17]>
g (int64[1] n, float[3] x) => (int64[1] i, float[3] acc, int64[1] seen) {
    i0 = Constant <value = int64[1] {0}> ()
    acc0 = Constant <value = float[3] {0, 0, 0}> ()
    c0 = Less(i0, n)
    i, acc, seen = Loop ("", c0, i0, acc0, i0) <body = b (int64 it, bool[1] c_in, int64[1] i_in,
        float[3] a_in, int64[1] s_in) => (bool[1] c, int64[1] i1, float[3] a1, int64[1] s1) {
        one = Constant <value = int64[1] {1}> ()
        i1 = Add(i_in, one)
        a1 = Add(a_in, x)
        c_int = Cast <to = 7> (c_in)
        s1 = Add(s_in, c_int)
        c = Less(i1, n)
    }>
}
"""

# a Loop of M steps whose body passes its run-time [1] condition through
PASSED = """
<ir_version: 8, opset_import: ["" : 17]>
g (int64 m, bool[1] go, float[3] x) => (float[3] acc) {
    acc0 = Constant <value = float[3] {0, 0, 0}> ()
    acc = Loop (m, go, acc0) <body = b (int64 it, bool[1] c_in, float[3] a_in)
        => (bool[1] c, float[3] a1) {
        a1 = Add(a_in, x)
        c = Identity(c_in)
    }>
}
"""

X = np.array([1.5, -2.0, 0.25], np.float32)


def _valid(model: onnx.ModelProto) -> None:
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)


@pytest.mark.parametrize("text", [WHILE, READS], ids=["while", "reads-its-condition"])
@pytest.mark.parametrize("target", ["onnx2tf", "iree"])
def test_a_condition_of_shape_1_gets_a_scalar_declaration(text: str, target: str) -> None:
    model = onnx.parser.parse_model(text)
    _valid(model)
    lowered = seqlower.lower(model, target=target, check=False)
    _valid(lowered)
    for n in range(4):
        feeds = {"n": np.array([n], np.int64), "x": X}
        assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


def test_a_run_time_condition_of_shape_1_folded_into_m() -> None:
    model = onnx.parser.parse_model(PASSED)
    _valid(model)
    lowered = seqlower.lower(model, target="iree", check=False)
    _valid(lowered)
    for m in range(3):
        for go in (False, True):
            feeds = {"m": np.array(m, np.int64), "go": np.array([go]), "x": X}
            assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


# paddle2onnx declares the iteration number int64[1] too, and names a state in the body as the
# outer value that starts it (i0); this body reads both
ITERATION = """
<ir_version: 8, opset_import: ["" : 17]>
g (int64[1] n, float[3] x) => (int64[1] i, float[3] acc) {
    i0 = Constant <value = int64[1] {0}> ()
    acc0 = Constant <value = float[3] {0, 0, 0}> ()
    c0 = Less(i0, n)
    i, acc = Loop ("", c0, i0, acc0) <body = b (int64[1] it, bool[1] c_in, int64[1] i0,
        float[3] a_in) => (bool[1] c, int64[1] i1, float[3] a1) {
        one = Constant <value = int64[1] {1}> ()
        i1 = Add(i0, one)
        f = Cast <to = 1> (it)
        scaled = Mul(x, f)
        a1 = Add(a_in, scaled)
        c = Less(i1, n)
    }>
}
"""


@pytest.mark.parametrize("target", ["onnx2tf", "iree"])
def test_paddles_iteration_number_and_state_names_as_iree_reads_them(target: str) -> None:
    model = onnx.parser.parse_model(ITERATION)
    lowered = seqlower.lower(model, target=target, check=False)
    _valid(lowered)
    (loop,) = [n for n in lowered.graph.node if n.op_type == "Loop"]
    body = loop.attribute[0].g
    # IREE 3.13.0's importer converts no Loop whose iteration number is declared [1], and reads
    # the outer i0 where the body reads its own (the count stays 1)
    assert body.input[0].type.tensor_type.shape.dim == []
    assert not {v.name for v in body.input} & {v for n in lowered.graph.node for v in n.output}
    runtimes = ["onnxruntime", "iree"] if target == "iree" else ["onnxruntime"]
    for n in range(4):
        feeds = {"n": np.array([n], np.int64), "x": X}
        expected = run("onnxruntime", model, feeds)
        for runtime in runtimes:
            assert_same(expected, run(runtime, lowered, feeds))
