"""UnrollRecurrentOps (``unroll-recurrent-ops``, the onnx2torch, tinygrad and TVM targets):
LSTM, GRU and RNN of a static time length become the ONNX ops of their equations; the others
stay, their reason named by the converter check. Every lowered model is checked (full checker,
strict shape inference) and run against onnxruntime (layout 1, which onnxruntime lacks: against
the layout-0 node on transposed inputs) within the check's float tolerances."""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import seqlower
from seqlower.errors import TargetError
from seqlower.passes import UnrollRecurrentOps
from seqlower.verification.compare import default_tolerance
from tests.helpers import all_op_types, ort_run, parse
from tests.runtimes import run

_RNG = np.random.default_rng(32)
_RTOL, _ATOL = default_tolerance(np.dtype(np.float32))
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _unrolled(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    ir_model = ir.serde.deserialize_model(model)
    unroll = UnrollRecurrentOps()
    unroll(ir_model)
    lowered = ir.serde.serialize_model(ir_model)
    onnx.checker.check_model(lowered, full_check=True)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True)
    return lowered, unroll.rewritten


def _close(got: list[Any], want: list[Any], rtol: float = _RTOL, atol: float = _ATOL) -> None:
    assert len(got) == len(want)
    for k, (have, expected) in enumerate(zip(got, want, strict=True)):
        have, expected = np.asarray(have), np.asarray(expected)
        assert have.shape == expected.shape, (k, have.shape, expected.shape)
        np.testing.assert_allclose(have, expected, rtol=rtol, atol=atol, err_msg=f"output {k}")


BIDIRECTIONAL_LSTM = """
g (float[5, 2, 3] x, float[2, 16, 3] w, float[2, 16, 4] r, float[2, 32] b, float[2, 2, 4] h0,
   float[2, 2, 4] c0, float[2, 12] p) => (float[5, 2, 2, 4] y, float[2, 2, 4] y_h,
   float[2, 2, 4] y_c) {
    y, y_h, y_c = LSTM<direction = "bidirectional", hidden_size = 4>(x, w, r, b, , h0, c0, p)
}
"""


def _feeds(model: onnx.ModelProto, scale: float = 0.5) -> dict[str, np.ndarray]:
    feeds = {}
    for value in model.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = (scale * _RNG.standard_normal(shape)).astype(np.float32)
    return feeds


def test_a_bidirectional_lstm_with_every_input_unrolls() -> None:
    model = parse(BIDIRECTIONAL_LSTM)
    lowered, rewritten = _unrolled(model)
    assert rewritten == 1 and "LSTM" not in all_op_types(lowered)
    assert [o.name for o in lowered.graph.output] == ["y", "y_h", "y_c"]
    feeds = _feeds(model)
    _close(ort_run(lowered, feeds), ort_run(model, feeds))


def test_masked_steps_keep_their_states_and_give_zero_rows() -> None:
    """sequence_lens [3, 0, 1] of T = 3: entry 1 has no step (its Y_h is zero, as onnxruntime
    returns, although initial_h is given); entry 2 stops after one."""
    model = parse(
        """
        g (float[3, 3, 2] x, float[1, 9, 2] w, float[1, 9, 3] r, int32[3] lens,
           float[1, 3, 3] h0) => (float[3, 1, 3, 3] y, float[1, 3, 3] y_h) {
            y, y_h = GRU<hidden_size = 3, linear_before_reset = 1>(x, w, r, , lens, h0)
        }
        """
    )
    lowered, _ = _unrolled(model)
    feeds = _feeds(model)
    feeds["lens"] = np.array([3, 0, 1], dtype=np.int32)
    y, y_h = ort_run(lowered, feeds)
    _close([y, y_h], ort_run(model, feeds))
    assert not y[:, :, 1].any() and not y_h[:, 1].any() and not y[1:, :, 2].any()


@pytest.mark.parametrize("bad", [4, -1])
def test_lengths_out_of_range_fail_at_run_time(bad: int) -> None:
    model = parse(
        """
        g (float[3, 2, 2] x, float[1, 2, 2] w, float[1, 2, 2] r, int32[2] lens)
            => (float[3, 1, 2, 2] y) {
            y = RNN<hidden_size = 2>(x, w, r, , lens)
        }
        """
    )
    lowered, _ = _unrolled(model)
    feeds = _feeds(model)
    feeds["lens"] = np.array([2, bad], dtype=np.int32)
    for candidate in (model, lowered):
        with pytest.raises(Exception, match=r"(?i)sequence_lens|out of bounds|indices"):
            ort_run(candidate, feeds)


def test_one_length_for_two_entries_fails_at_run_time() -> None:
    """onnxruntime refuses a sequence_lens whose count is not the batch size; a [1] must not
    broadcast over the batch in the unrolled form."""
    model = parse(
        """
        g (float[3, 2, 2] x, float[1, 2, 2] w, float[1, 2, 2] r, int32[N] lens)
            => (float[3, 1, 2, 2] y) {
            y = RNN<hidden_size = 2>(x, w, r, , lens)
        }
        """
    )
    lowered, _ = _unrolled(model)
    feeds = _feeds(model)
    feeds["lens"] = np.array([2, 1], dtype=np.int32)
    _close(ort_run(lowered, feeds), ort_run(model, feeds))
    feeds["lens"] = np.array([2], dtype=np.int32)
    for candidate in (model, lowered):
        with pytest.raises(Exception, match=r"(?i)sequence_lens|reshape|shape"):
            ort_run(candidate, feeds)


def test_constant_lengths_of_another_count_stay() -> None:
    model = parse(
        """
        g (float[3, 2, 2] x, float[1, 2, 2] w, float[1, 2, 2] r) => (float[3, 1, 2, 2] y) {
            lens = Constant<value = int32[1] {2}>()
            y = RNN<hidden_size = 2>(x, w, r, , lens)
        }
        """
    )
    lowered, rewritten = _unrolled(model)
    assert rewritten == 0 and "RNN" in all_op_types(lowered)


def _rnn(x_type: str, node: str = "RNN<hidden_size = 2>") -> onnx.ModelProto:
    directions = 2 if "bidirectional" in node else 1
    return parse(
        f"""
        g ({x_type} x, float[1, 2, 3] w, float[1, 2, 2] r) => (float[{directions}, 2, 2] y_h) {{
            y, y_h = {node}(x, w, r)
        }}
        """
    )


@pytest.mark.parametrize(
    ("x_type", "node", "why"),
    [
        ("float[T, 2, 3]", "RNN<hidden_size = 2>", "its time axis is not static"),
        ("float[300, 2, 3]", "RNN<hidden_size = 2>", "300 time steps, not in [1, 256]"),
        (
            "float[4, 2, 3]",
            'RNN<hidden_size = 2, activations = ["ThresholdedRelu"]>',
            "thresholdedrelu without activation_alpha/beta",
        ),
        ("float[4, 2, 3]", 'RNN<hidden_size = 2, direction = "sideways">', "direction"),
        # one direction's weights for two: picking direction 1 by index would not fail
        ("float[4, 2, 3]", 'RNN<hidden_size = 2, direction = "bidirectional">', "W's shape"),
    ],
)
def test_what_cannot_be_exact_stays(x_type: str, node: str, why: str) -> None:
    model = _rnn(x_type, node=node)
    lowered, rewritten = _unrolled(model)
    assert rewritten == 0 and "RNN" in all_op_types(lowered)
    ir_model = ir.serde.deserialize_model(model)
    UnrollRecurrentOps()(ir_model)
    [left] = [n for n in ir_model.graph if n.op_type == "RNN"]
    reasons = [str(v) for k, v in left.meta.items() if "blocked" in k]
    assert any(why in reason for reason in reasons), reasons


def test_the_converter_check_names_the_flag_that_unrolls_it() -> None:
    model = _rnn("float[T, 2, 3]")
    with pytest.raises(TargetError) as raised:
        seqlower.lower(model, target="onnx2torch", check=False)
    message = str(raised.value)
    assert "has no converter for RNN" in message and "time axis is not static" in message
    assert "--overwrite-input-shape x=" in message
    fixed = seqlower.lower(model, target="onnx2torch", check=False, input_shapes={"x": (4, 2, 3)})
    assert "RNN" not in all_op_types(fixed)


with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the case generators warn about numpy overflow
    from onnx.backend.test.case.node import collect_testcases

    _BACKEND = {
        case.name: case
        for case in collect_testcases(None)
        if re.match(r"test_(lstm|gru|simple_rnn|rnn_seq)_", case.name)
    }


def test_the_backend_cases_are_found() -> None:
    assert len(_BACKEND) == 18, sorted(_BACKEND)


@pytest.mark.parametrize("name", sorted(_BACKEND))
def test_onnx_backend_case(name: str) -> None:
    """ONNX's own node cases, against their expected outputs (and onnxruntime's, where it runs
    the original: it has no layout 1)."""
    case = _BACKEND[name]
    lowered, rewritten = _unrolled(case.model)
    assert rewritten == 1
    inputs, expected = case.data_sets[0]
    feeds = dict(zip([i.name for i in case.model.graph.input], inputs, strict=False))
    got = ort_run(lowered, feeds)
    _close(got, list(expected), rtol=max(case.rtol, _RTOL), atol=max(case.atol, _ATOL))
    if "batchwise" not in name:
        _close(got, ort_run(case.model, feeds))


def test_the_lowered_model_runs_on_tinygrad() -> None:
    """Small: tinygrad compiles a kernel per fused op (a minute for the bidirectional LSTM)."""
    model = parse(
        """
        g (float[2, 2, 3] x, float[1, 8, 3] w, float[1, 8, 2] r, float[1, 2, 2] h0,
           float[1, 2, 2] c0) => (float[2, 1, 2, 2] y, float[1, 2, 2] y_c) {
            y, y_h, y_c = LSTM<direction = "reverse", hidden_size = 2>(x, w, r, , , h0, c0)
        }
        """
    )
    lowered = seqlower.lower(model, target="tinygrad", check=False)
    assert "LSTM" not in all_op_types(lowered)
    feeds = _feeds(model)
    _close(run("tinygrad", lowered, feeds), ort_run(model, feeds))


# The property: any node the spec allows, unrolled, matches onnxruntime.
_ACTIVATION_NAMES = [
    "Relu",
    "Tanh",
    "Sigmoid",
    "Affine",
    "LeakyRelu",
    "ThresholdedRelu",
    "ScaledTanh",
    "HardSigmoid",
    "Elu",
    "Softsign",
    "Softplus",
]
_TAKES = {"Affine": 2, "LeakyRelu": 1, "ThresholdedRelu": 1, "ScaledTanh": 2, "HardSigmoid": 2}
_TAKES.update({"Elu": 1})


@st.composite
def _nodes(draw: st.DrawFn) -> dict[str, Any]:
    op = draw(st.sampled_from(["RNN", "GRU", "LSTM"]))
    direction = draw(st.sampled_from(["forward", "reverse", "bidirectional"]))
    directions = 2 if direction == "bidirectional" else 1
    spec: dict[str, Any] = {
        "op": op,
        "direction": direction,
        "directions": directions,
        "layout": draw(st.sampled_from([0, 1])),
        "steps": draw(st.integers(1, 6)),
        "batch": draw(st.integers(1, 3)),
        "inputs": draw(st.integers(1, 3)),
        "hidden": draw(st.integers(1, 4)),
        "bias": draw(st.booleans()),
        "lens": draw(st.booleans()),
        "h0": draw(st.booleans()),
        "c0": op == "LSTM" and draw(st.booleans()),
        "peepholes": op == "LSTM" and draw(st.booleans()),
        "outputs": draw(
            st.lists(st.booleans(), min_size=3, max_size=3).filter(lambda o: any(o[:2]))
        ),
    }
    attributes: dict[str, Any] = {"hidden_size": spec["hidden"], "direction": direction}
    if draw(st.booleans()):
        count = {"RNN": 1, "GRU": 2, "LSTM": 3}[op] * directions
        names = draw(st.lists(st.sampled_from(_ACTIVATION_NAMES), min_size=count, max_size=count))
        attributes["activations"] = names
        alphas = [draw(st.floats(0.05, 1.5)) for n in names if _TAKES.get(n, 0) >= 1]
        betas = [draw(st.floats(-0.5, 1.0)) for n in names if _TAKES.get(n, 0) == 2]
        if alphas:
            attributes["activation_alpha"] = alphas
        if betas:
            attributes["activation_beta"] = betas
    if draw(st.booleans()):
        attributes["clip"] = draw(st.floats(0.1, 3.0))
    if op == "LSTM" and draw(st.booleans()):
        attributes["input_forget"] = 1
    if op == "GRU":
        attributes["linear_before_reset"] = draw(st.sampled_from([0, 1]))
    spec["attributes"] = attributes
    spec["seed"] = draw(st.integers(0, 2**16))
    return spec


def _model(spec: dict[str, Any], layout: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The node of ``spec`` at ``layout`` and inputs for it (the same numbers at either)."""
    rng = np.random.default_rng(spec["seed"])
    op, d, t, b = spec["op"], spec["directions"], spec["steps"], spec["batch"]
    i, h = spec["inputs"], spec["hidden"]
    g = _GATES[op] * h

    def draw(*shape: int) -> np.ndarray:
        return (0.7 * rng.standard_normal(shape)).astype(np.float32)

    x, state = draw(t, b, i), [draw(d, b, h), draw(d, b, h)]
    if layout:
        x, state = x.transpose(1, 0, 2), [s.transpose(1, 0, 2) for s in state]
    feeds = {"x": x, "w": draw(d, g, i), "r": draw(d, g, h)}
    names = ["x", "w", "r", "", "", "", "", ""]
    if spec["bias"]:
        feeds["b"], names[3] = draw(d, 2 * g), "b"
    if spec["lens"]:
        feeds["lens"], names[4] = rng.integers(0, t + 1, size=b).astype(np.int32), "lens"
    if spec["h0"]:
        feeds["h0"], names[5] = state[0], "h0"
    if spec["c0"]:
        feeds["c0"], names[6] = state[1], "c0"
    if spec["peepholes"]:
        feeds["p"], names[7] = draw(d, 3 * h), "p"
    while names[-1] == "":
        names.pop()
    outputs = [
        n if keep else "" for n, keep in zip(["y", "y_h", "y_c"], spec["outputs"], strict=True)
    ]
    outputs = outputs[: {"LSTM": 3}.get(op, 2)]
    while outputs[-1] == "":
        outputs.pop()
    attributes = dict(spec["attributes"], **({"layout": 1} if layout else {}))
    node = helper.make_node(op, names, outputs, **attributes)
    shapes = {
        "y": [b, t, d, h] if layout else [t, d, b, h],
        "y_h": [b, d, h] if layout else [d, b, h],
    }
    shapes["y_c"] = shapes["y_h"]
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(
                n, TensorProto.INT32 if n == "lens" else TensorProto.FLOAT, feeds[n].shape
            )
            for n in names
            if n
        ],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shapes[n]) for n in outputs if n],
    )
    opset = spec.get("opset", 14 if layout else 13)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model, feeds


def _moved(values: list[np.ndarray]) -> list[np.ndarray]:
    """Layout-0 outputs as layout 1 gives them."""
    return [v.transpose(2, 0, 1, 3) if v.ndim == 4 else v.transpose(1, 0, 2) for v in values]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(_nodes())
def test_any_node_unrolled_matches_onnxruntime(spec: dict[str, Any]) -> None:
    model, feeds = _model(spec, spec["layout"])
    lowered, rewritten = _unrolled(model)
    assert rewritten == 1 and spec["op"] not in all_op_types(lowered)
    got = ort_run(lowered, feeds)
    if spec["layout"]:
        reference, reference_feeds = _model(spec, 0)
        want = _moved(ort_run(reference, reference_feeds))
    else:
        want = ort_run(model, feeds)
    # Unbounded activations (Relu, Softplus, Affine) can make the recurrence explode: there
    # float32 rounding in any order differs past any tolerance (or overflows to NaN), which
    # says nothing about the lowering.
    assume(all(np.isfinite(w).all() and np.abs(w).max() < 100 for w in want))
    # Rounding in another order errs relative to the largest values the recurrence carries,
    # not to each small output (a 5e-4 next to a 53 differed by 3e-5, seed 7890).
    scale = max(1.0, *(float(np.abs(w).max(initial=0)) for w in want))
    _close(got, want, atol=_ATOL * scale)


@pytest.mark.parametrize("opset", [9, 10, 11, 12])
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_older_opsets_take_their_forms(op: str, opset: int) -> None:
    """Split's sizes and Clip's bounds as attributes before opsets 13 and 11."""
    spec = {
        "op": op,
        "direction": "bidirectional",
        "directions": 2,
        "layout": 0,
        "steps": 3,
        "batch": 2,
        "inputs": 3,
        "hidden": 2,
        "bias": True,
        "lens": True,
        "h0": True,
        "c0": op == "LSTM",
        "peepholes": op == "LSTM",
        "outputs": [True, True, True],
        "attributes": {"hidden_size": 2, "direction": "bidirectional", "clip": 0.8},
        "seed": opset,
        "opset": opset,
    }
    model, feeds = _model(spec, 0)
    lowered, rewritten = _unrolled(model)
    assert rewritten == 1 and lowered.opset_import[0].version == opset
    _close(ort_run(lowered, feeds), ort_run(model, feeds))
