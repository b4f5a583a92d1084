"""Sibling Loop bodies may reuse value names (tf2onnx names every RNN layer's state
``while_placeholder_2:0``): the shapes ONNX's inference gives a body's values are read per graph
(``LoopShapes``). Read by name alone, one body's shape stood for all: a Loop that may run none
then got another Loop's row size for its empty scan output (``--target tract`` was exit 1: the
check's strict shape inference caught it)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnxruntime as ort
import pytest

import seqlower


def _body(width: int) -> str:
    """A body not proven safe on iteration 0 (an integer division by a state) whose scan output
    ``y`` has ``width`` elements; every body names its values alike."""
    ones = ", ".join(["1.0"] * width)
    return f"""
      body (int64 i, bool c, int64 s) => (bool co, int64 so, float y) {{
        six = Constant <value = int64 {{6}}> ()
        d = Div (six, s)
        df = Cast <to = 1> (d)
        ones = Constant <value = float[{width}] {{{ones}}}> ()
        y = Mul (df, ones)
        co = Identity (c)
        so = Identity (s)
      }}"""


def _siblings() -> onnx.ModelProto:
    model = onnx.parser.parse_model(f"""
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 3] x, int64 k) => (float[?, 3] ya, float[?, 5] yb) {{
            shp = Shape (x)
            zero = Constant <value = int64[1] {{0}}> ()
            n1 = Gather (shp, zero)
            n = Squeeze (n1)
            t = Constant <value = bool {{1}}> ()
            sa, ya = Loop (n, t, k) <body = {_body(3)}>
            sb, yb = Loop (n, t, k) <body = {_body(5)}>
        }}""")
    for node in model.graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:  # rows left to ONNX's inference
                attr.g.output[2].type.tensor_type.ClearField("shape")
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("rows", [0, 1, 3])
def test_each_loop_keeps_its_own_rows_when_it_runs_none(rows: int) -> None:
    model = _siblings()
    lowered = seqlower.lower(model, target="tract", check=False)
    feeds = {"x": np.zeros((rows, 3), np.float32), "k": np.array(2, np.int64)}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    have = ort.InferenceSession(lowered.SerializeToString()).run(None, feeds)
    assert [h.shape for h in have] == [w.shape for w in want] == [(rows, 3), (rows, 5)]
    for h, w in zip(have, want, strict=True):
        np.testing.assert_array_equal(h, w)
