"""``time-major-recurrences``: batch-major RNN/GRU/LSTM (``layout=1``) on onnxruntime and
OpenVINO, against ONNX's reference implementation."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx.reference import ReferenceEvaluator

import seqlower
from seqlower.passes import TimeMajorRecurrences
from tests.helpers import all_op_types
from tests.runtimes import RuntimeFailure, require, run

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
HIDDEN = 3


def recurrence(
    op: str, *, directions: int, states: bool, outputs: str, layout: int = 1
) -> onnx.ModelProto:
    """``op`` with ``layout=1`` over x[B, T, 2]; ``outputs`` picks which of Y, Y_h (, Y_c) the
    graph returns ("y", "h", "yh", "yhc"), the others left unnamed. ``layout=0`` swaps batch and
    time in x, only for the pass to leave it."""
    gates, direction = GATES[op] * HIDDEN, ("forward", "bidirectional")[directions - 1]
    inputs = [
        "float[B, T, 2] x",
        f"float[{directions}, {gates}, 2] w",
        f"float[{directions}, {gates}, {HIDDEN}] r",
    ]
    args = ["x", "w", "r", "", ""]
    if states:
        inputs.append(f"float[B, {directions}, {HIDDEN}] h0")
        args.append("h0")
        if op == "LSTM":
            inputs.append(f"float[B, {directions}, {HIDDEN}] c0")
            args.append("c0")
    declared = {
        "y": f"float[B, T, {directions}, {HIDDEN}] y",
        "h": f"float[B, {directions}, {HIDDEN}] yh",
        "c": f"float[B, {directions}, {HIDDEN}] yc",
    }
    names = {"y": "y", "h": "yh", "c": "yc"}
    results = [names[k] if k in outputs else "" for k in "yhc"[: 3 if op == "LSTM" else 2]]
    while results and not results[-1]:
        results.pop()
    text = f"""
        <ir_version: 8, opset_import: ["" : 14]>
        g ({", ".join(inputs)}) => ({", ".join(declared[k] for k in outputs)}) {{
            {", ".join(results)} = {op}<hidden_size = {HIDDEN}, layout = {layout},
                direction = "{direction}">({", ".join(args).rstrip(", ")})
        }}"""
    return onnx.parser.parse_model(text)


def feeds_for(model: onnx.ModelProto, batch: int, steps: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        dims = [
            d.dim_value or {"B": batch, "T": steps}[d.dim_param]
            for d in value.type.tensor_type.shape.dim
        ]
        feeds[value.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


@settings(max_examples=12, deadline=None)
@given(
    op=st.sampled_from(sorted(GATES)),
    directions=st.sampled_from([1, 2]),
    states=st.booleans(),
    outputs=st.sampled_from(["y", "h", "yh", "yhc"]),
    batch=st.integers(1, 3),
    steps=st.integers(1, 4),
)
def test_batch_major_recurrences_run_and_match_on_onnxruntime_and_openvino(
    op: str, directions: int, states: bool, outputs: str, batch: int, steps: int
) -> None:
    if "c" in outputs and op != "LSTM":
        outputs = "yh"
    model = recurrence(op, directions=directions, states=states, outputs=outputs)
    feeds = feeds_for(model, batch, steps, seed=batch * 10 + steps)
    expected = ReferenceEvaluator(model).run(None, feeds)
    for target in ("onnxruntime", "openvino"):
        require(target)
        lowered = seqlower.lower(model, target=target, check=False)
        onnx.checker.check_model(lowered, full_check=True)
        onnx.shape_inference.infer_shapes(
            lowered, check_type=True, strict_mode=True, data_prop=True
        )
        assert op in all_op_types(lowered)
        assert all(a.i == 0 for n in lowered.graph.node for a in n.attribute if a.name == "layout")
        assert [o.name for o in lowered.graph.output] == [o.name for o in model.graph.output]
        for want, got in zip(expected, run(target, lowered, feeds), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_time_major_recurrences_leave_time_major_ones() -> None:
    for layout in (0, 1):
        model = recurrence("GRU", directions=1, states=False, outputs="h", layout=layout)
        ir_model = seqlower.io.model_from_proto(model)
        assert TimeMajorRecurrences()(ir_model).modified == bool(layout)


def test_onnxruntime_refuses_batch_major_recurrences() -> None:
    """Why the onnxruntime row has the pass (onnxruntime 1.32: 'Batchwise recurrent operations
    (layout == 1) are not supported'); when it loads them, the row can drop it."""
    model = recurrence("RNN", directions=1, states=False, outputs="y")
    with pytest.raises(RuntimeFailure):
        run("onnxruntime", model, feeds_for(model, 2, 3, seed=0))


@pytest.mark.xfail(strict=True, reason="OpenVINO 2026.4.1 computes layout=1 recurrences wrong")
def test_openvino_runs_batch_major_recurrences_right() -> None:
    """The smallest model of the OpenVINO bug the openvino row works around (ONNX's
    test_*_batchwise cases); when this passes (XPASS fails the suite), the row can drop it."""
    require("openvino")
    model = recurrence("RNN", directions=1, states=False, outputs="y")
    feeds = feeds_for(model, 2, 3, seed=0)
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    (got,) = run("openvino", model, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


PEEPHOLES = """
<ir_version: 8, opset_import: ["" : 14]>
g (float[T, 2, 4] x, float[1, 12, 4] w, float[1, 12, 3] r, float[1, 9] p) => (float[T, 1, 2, 3] y) {
    y = LSTM<hidden_size = 3>(x, w, r, , , , , p)
}"""


@pytest.mark.xfail(strict=True, reason="OpenVINO 2026.4.1 computes LSTM peepholes wrong")
def test_openvino_runs_lstm_peepholes_right() -> None:
    """The smallest model of the OpenVINO bug ``unroll-peephole-lstms`` works around (ONNX's
    test_lstm_with_peepholes); when this passes (XPASS fails the suite), the row can drop it."""
    require("openvino")
    model = onnx.parser.parse_model(PEEPHOLES)
    feeds = feeds_for(model, 2, 3, seed=1)
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    (got,) = run("openvino", model, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("static", [True, False])
def test_lstm_peepholes_are_unrolled_for_openvino_at_a_static_length(static: bool) -> None:
    model = onnx.parser.parse_model(PEEPHOLES)
    feeds = feeds_for(model, 2, 3, seed=1)
    shapes = {"x": (3, 2, 4)} if static else None
    lowered = seqlower.lower(model, target="openvino", check=False, input_shapes=shapes)
    assert ("LSTM" in all_op_types(lowered)) != static
    if static:
        onnx.checker.check_model(lowered, full_check=True)
        (want,) = ReferenceEvaluator(model).run(None, feeds)
        (got,) = run("openvino", lowered, feeds)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
