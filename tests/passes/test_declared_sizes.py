"""Models whose declared intermediate sizes lie: a ``value_info`` (or a body input's declared
shape) says a static size the value does not have at run time, the graph inputs symbolic.
onnxruntime runs each as written, ONNX's full check and strict inference pass it; a lowering
that trusted the declaration computed a wrong result or failed where the original runs. One
model per kind of pass that read such sizes (``passes/_declared.py``, ARCHITECTURE.md "Where
passes get their facts")."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.parser
import onnx.shape_inference
import pytest

import seqlower
from seqlower.errors import TargetError
from tests import runtimes
from tests.helpers import all_nodes, ort_run

_RNG = np.random.default_rng(7)


def _floats(*shape: int) -> np.ndarray:
    return (_RNG.random(shape, dtype=np.float32) - 0.5).astype(np.float32)


_PLAIN = ("default", "tract", "openvino")
_UNROLLING = ("tinygrad", "onnx2torch", "tvm")

# name -> (model text, feeds, pipelines): each pipeline lowers it right or refuses it.
LYING: dict[str, tuple[str, dict[str, np.ndarray], tuple[str, ...]]] = {
    # ReverseSequence, lengths known at run time: the constant index of the declared T = 5
    # (default: the [5, 3, 8] result of a [7, 3, 8] input, exit 0 with --no-check).
    "reverse_run_time_lengths": (
        """
        g (float[T, 3, 8] x, int64[3] lens) => (float[T, 3, 8] y) <float[5, 3, 8] r> {
            r = Relu (x)
            y = ReverseSequence <time_axis = 0, batch_axis = 1> (r, lens)
        }
        """,
        {"x": _floats(7, 3, 8), "lens": np.array([5, 4, 2], np.int64)},
        _PLAIN,
    ),
    # Constant lengths: the constant index of the declared T (the default check passed it).
    "reverse_constant_lengths": (
        """
        g (float[T, 3, 8] x) => (float[T, 3, 8] y) <float[5, 3, 8] r> {
            lens = Constant <value = int64[3] {5, 4, 2}> ()
            r = Relu (x)
            y = ReverseSequence <time_axis = 0, batch_axis = 1> (r, lens)
        }
        """,
        {"x": _floats(7, 3, 8)},
        _PLAIN,
    ),
    # The batch declared 2, 3 at run time: the lengths' count checked against 2 (fails).
    "reverse_batch": (
        """
        g (float[4, B, 8] x, int64[B] lens) => (float[4, B, 8] y) <float[4, 2, 8] r> {
            r = Relu (x)
            y = ReverseSequence <time_axis = 0, batch_axis = 1> (r, lens)
        }
        """,
        {"x": _floats(4, 3, 8), "lens": np.array([4, 2, 1], np.int64)},
        _PLAIN,
    ),
    # Scan-8: one Scan per batch entry of the declared initial state's 2 (3 at run time).
    "scan8_batch": (
        """
        g (float[B, T, 4] x, float[B, 4] h) => (float[B, 4] s_final) <float[2, 4] h0> {
            h0 = Relu (h)
            s_final = Scan <num_scan_inputs = 1, body = step (float[4] s, float[4] xt)
                => (float[4] s2) {
                s2 = Add (s, xt)
            }> ("", h0, x)
        }
        """,
        {"x": _floats(3, 5, 4), "h": _floats(3, 4)},
        _PLAIN,
    ),
    # An RNN unrolled for the declared 5 steps of its input (7 at run time).
    "rnn_steps": (
        """
        g (float[T, 1, 2] x) => (float[1, 1, 3] h) <float[5, 1, 2] r> {
            r = Relu (x)
            w = Constant <value = float[1, 3, 2] {0.1, 0.2, -0.3, 0.4, 0.5, -0.1}> ()
            u = Constant <value = float[1, 3, 3] {0.1, 0, 0, 0, 0.1, 0, 0, 0, 0.1}> ()
            ys, h = RNN <hidden_size = 3> (r, w, u)
        }
        """,
        {"x": _floats(7, 1, 2)},
        _PLAIN + _UNROLLING,
    ),
    # A Loop state declared [2] in its body, [3] at run time (tract typed the Scan with it).
    "loop_state": (
        """
        g (float[N] x, int64 n) => (float[N] y, float[K, N] ys) {
            cond = Constant <value = bool {1}> ()
            y, ys = Loop (n, cond, x) <body = body (int64 i, bool c, float[2] s)
                => (bool c2, float[2] s2, float[2] row) {
                s2 = Relu (s)
                row = Identity (s2)
                c2 = Identity (c)
            }>
        }
        """,
        {"x": _floats(3), "n": np.array(2, np.int64)},
        _PLAIN,
    ),
    # A Loop state declared rank 2 in its body, rank 1 at run time (ONNX's inference checks no
    # state's rank): fold-static-ifs took the If on its rank by the declaration (OpenVINO).
    "loop_state_rank": (
        """
        g (float[N] x, int64 n) => (float[N] y) {
            cond = Constant <value = bool {1}> ()
            y = Loop (n, cond, x) <body = body (int64 i, bool c, float[A, B] s)
                => (bool c2, float[A, B] s2) {
                shape = Shape (s)
                rank = Size (shape)
                one = Constant <value = int64 {1}> ()
                is1 = Equal (rank, one)
                s2 = If (is1) <then_branch = t () => (float[A, B] a) { a = Neg (s) },
                               else_branch = e () => (float[A, B] b) { b = Relu (s) }>
                c2 = Identity (c)
            }>
        }
        """,
        {"x": _floats(3), "n": np.array(1, np.int64)},
        _PLAIN,
    ),
}


def _model(text: str, opset: int) -> onnx.ModelProto:
    ir_version = 4 if opset == 8 else 8
    header = f'<ir_version: {ir_version}, opset_import: ["" : {opset}]>'
    model = onnx.parser.parse_model(header + text)
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    return model


def _lying(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    text, feeds, _ = LYING[name]
    return _model(text, 8 if name.startswith("scan8") else 17), feeds


CASES = [(name, pipeline) for name, (_, _, pipelines) in LYING.items() for pipeline in pipelines]


@pytest.mark.parametrize(("name", "pipeline"), CASES)
def test_a_lying_declared_size_lowers_right_or_is_refused(name: str, pipeline: str) -> None:
    model, feeds = _lying(name)
    expected = ort_run(model, feeds)  # the original, onnxruntime's optimizations off
    # onnxruntime with its default optimizations runs the original right too
    runtimes.assert_same(expected, runtimes.run("onnxruntime", model, feeds))
    target = None if pipeline == "default" else pipeline
    try:
        lowered = seqlower.lower(model, target=target, check=False)
    except TargetError:  # refused (exit 2): the size it needs is not known; never a wrong model
        assert target is not None
        return
    # On onnxruntime as users run it (its optimizer folds Shape of a declared static value)...
    runtimes.assert_same(expected, runtimes.run("onnxruntime", lowered, feeds))
    if pipeline in ("tract", "openvino"):  # ... and on the runtime it was lowered for
        runtimes.assert_same(expected, runtimes.run(pipeline, lowered, feeds))


def _declared(model: onnx.ModelProto) -> dict[str, list[int | str | None]]:
    def dims(info: onnx.ValueInfoProto) -> list[int | str | None]:
        return [
            d.dim_value if d.HasField("dim_value") else d.dim_param or None
            for d in info.type.tensor_type.shape.dim
        ]

    graph = model.graph
    return {info.name: dims(info) for info in [*graph.value_info, *graph.output]}


def test_the_lowered_model_keeps_no_lie_but_keeps_the_interface() -> None:
    model, _ = _lying("reverse_run_time_lengths")
    lowered = seqlower.lower(model, check=False)
    declared = _declared(lowered)
    assert declared["r"] == [None, 3, 8]  # the 5 nothing proves is gone, the rest kept
    assert declared["y"] == ["T", 3, 8]  # the output's declaration, as the user wrote it


def _reversal(inputs: str, declared: str) -> onnx.ModelProto:
    value_info = f"<{declared} r>" if declared else ""
    return _model(
        f"""
        g ({inputs}, int64[3] lens) => (float[T, 3, 8] y) {value_info} {{
            r = Relu (x)
            y = ReverseSequence <time_axis = 0, batch_axis = 1> (r, lens)
        }}
        """,
        17,
    )


def test_a_size_the_inputs_prove_keeps_its_static_form() -> None:
    """Issue 33's gain where the sizes are known: a declaration ONNX's inference derives from a
    static input is kept, and the reversal takes the same form as with no declaration."""
    proven = seqlower.lower(_reversal("float[7, 3, 8] x", "float[7, 3, 8]"), check=False)
    undeclared = seqlower.lower(_reversal("float[7, 3, 8] x", ""), check=False)
    lying = seqlower.lower(_reversal("float[T, 3, 8] x", "float[7, 3, 8]"), check=False)
    assert _declared(proven)["r"] == [7, 3, 8]
    assert len(all_nodes(proven)) == len(all_nodes(undeclared)) < len(all_nodes(lying))
    feeds: dict[str, Any] = {"x": _floats(7, 3, 8), "lens": np.array([7, 1, 3], np.int64)}
    runtimes.assert_same(ort_run(lying, feeds), ort_run(proven, feeds))


def test_a_loop_state_keeps_the_size_induction_proves() -> None:
    # The state's declared [2] holds at the start (x is [2]) and after each step (Relu keeps
    # it): kept in the body and on the Loop's output; the lying one above is dropped.
    model = _model(
        """
        g (float[2] x, int64 n) => (float[2] y) {
            cond = Constant <value = bool {1}> ()
            y = Loop (n, cond, x) <body = body (int64 i, bool c, float[2] s)
                => (bool c2, float[2] s2) {
                s2 = Relu (s)
                c2 = Identity (c)
            }>
        }
        """,
        17,
    )
    import onnx_ir as ir

    from seqlower.passes._declared import forget_declared_sizes

    proven = ir.serde.deserialize_model(model)
    assert forget_declared_sizes(proven).changed == 0
    lying = ir.serde.deserialize_model(_lying("loop_state")[0])
    # s, s2 and row in the body; y and ys, whose N came through the state
    assert forget_declared_sizes(lying).changed == 5
    body = lying.graph.node(1).attributes["body"].as_graph()
    assert [list(v.shape or ()) for v in body.inputs[2:]] == [[None]]


def test_inference_past_the_budget_runs_nowhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the budget ONNX's whole-model inference (quadratic in the bodies) is skipped by the
    declared-sizes step; the type oracle must not then run it for a shape the step forgot: at
    2000 ``SequenceMap`` bodies that was 12 s of a 28-s run, for nothing it could derive. (An
    ``Einsum`` the static rules know nothing of declares a size: they leave it to inference.)"""
    from seqlower.passes import _types

    calls: list[int] = []
    real = onnx.shape_inference.infer_shapes

    def counting(*args: Any, **kwargs: Any) -> onnx.ModelProto:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", counting)
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[5, 3, 8] x, int64[3] lens) => (float[5, 3, 8] y) <float[5, 3, 8] r> {
            r = Einsum <equation = "ijk->ijk"> (x)
            seq = SequenceConstruct (r, r)
            mapped = SequenceMap <body = b (float[5, 3, 8] e) => (float[5, 3, 8] o) {
                o = Relu (e)
            }> (seq)
            one = Constant <value = int64 {0}> ()
            first = SequenceAt (mapped, one)
            y = ReverseSequence <time_axis = 0, batch_axis = 1> (first, lens)
        }
        """
    )
    seqlower.lower(model)
    assert calls, "under the budget, inference runs (the check's strict inference at least)"
    calls.clear()
    monkeypatch.setattr(_types, "_BUDGET", 1)
    lowered = seqlower.lower(model)
    assert not calls
    x, lens = _floats(5, 3, 8), np.array([5, 2, 0], dtype=np.int64)
    expected = ort_run(model, {"x": x, "lens": lens})
    np.testing.assert_array_equal(ort_run(lowered, {"x": x, "lens": lens})[0], expected[0])


def _behind_a_map(rows: int, declared: int) -> onnx.ModelProto:
    """Issue 33's block: a reversal of a value whose size only its declaration gives ONNX's
    inference (behind ``SequenceConstruct`` -> ``SequenceMap`` -> ``ConcatFromSequence``), the
    map's two elements [rows, 8] each, cut back to ``rows`` rows and declared [declared, 8]."""
    return _model(
        f"""
        g (float[{rows}, 8] x, float[8, 8] w) => (float[R, 8] y) <float[{declared}, 8] m> {{
            lens = Constant <value = int64[8] {{3, 3, 3, 3, 3, 3, 3, 3}}> ()
            rev = ReverseSequence <time_axis = 0, batch_axis = 1> (x, lens)
            seq = SequenceConstruct (rev, x)
            mapped = SequenceMap <body = b (float[{rows}, 8] e) => (float[{rows}, 8] o) {{
                r = Relu (e)
                o = Add (r, e)
            }}> (seq)
            cat = ConcatFromSequence <axis = 0> (mapped)
            starts = Constant <value = int64[1] {{0}}> ()
            ends = Constant <value = int64[1] {{{rows}}}> ()
            sl = Slice (cat, starts, ends)
            m = MatMul (sl, w)
            y = ReverseSequence <time_axis = 0, batch_axis = 1> (m, lens)
        }}
        """,
        17,
    )


@pytest.mark.parametrize("budget", ["affordable", "past"])
def test_a_size_behind_a_sequence_map_is_proven_by_the_static_rules(
    monkeypatch: pytest.MonkeyPatch, budget: str
) -> None:
    """ONNX's inference knows no ``ConcatFromSequence`` length (and past the budget is not run):
    the static rules prove the declared [4, 8], so the second reversal keeps its constant index,
    as it had when declarations were trusted; a lie on the same path is not put back."""
    from seqlower.passes import _types

    if budget == "past":
        monkeypatch.setattr(_types, "_BUDGET", 1)
    proven = seqlower.lower(_behind_a_map(4, 4), check=False)
    assert _declared(proven)["m"] == [4, 8]
    ops = [node.op_type for node in all_nodes(proven)]
    assert "Range" not in ops and "Shape" not in ops  # both reversals: constant indices
    lying = seqlower.lower(_behind_a_map(6, 4), check=False)  # m is [6, 8]
    assert _declared(lying)["m"][0] is None  # the 4 nothing proves
    feeds = {"x": _floats(6, 8), "w": _floats(8, 8)}
    runtimes.assert_same(ort_run(_behind_a_map(6, 4), feeds), ort_run(lying, feeds))
    runtimes.assert_same(
        ort_run(_behind_a_map(6, 4), feeds), runtimes.run("onnxruntime", lying, feeds)
    )


@pytest.mark.parametrize(
    ("split", "proven"),
    [("", True), (", two", True), (", three", False)],  # pieces of 1, of 2, of 3 (8 = 3+3+2)
)
def test_split_to_sequence_pieces_are_proven_when_of_one_size(
    monkeypatch: pytest.MonkeyPatch, split: str, proven: bool
) -> None:
    """The benchmark's default kind: ``SplitToSequence`` -> ``SequenceMap`` ->
    ``ConcatFromSequence``, the map's body declared. Pieces of one size are proven by the
    static rules (no inference needed, past the budget too); ragged ones are not."""
    import onnx_ir as ir

    from seqlower.passes import _declared, _types

    monkeypatch.setattr(_types, "_BUDGET", 1)
    keep = "1" if split else "0"
    rows = {"": 1, ", two": 2, ", three": 3}[split]
    element = f"float[{rows}, 4, 16]" if split else "float[4, 16]"
    model = _model(
        f"""
        g (float[8, 4, 16] x) => (float[8, 4, 16] y) {{
            two = Constant <value = int64 {{2}}> ()
            three = Constant <value = int64 {{3}}> ()
            seq = SplitToSequence <axis = 0, keepdims = {keep}> (x{split})
            mapped = SequenceMap <body = b ({element} e) => ({element} r) {{
                r = Neg (e)
            }}> (seq)
            y = ConcatFromSequence <axis = 0, new_axis = {int(keep == "0")}> (mapped)
        }}
        """,
        17,
    )
    forgotten = _declared.forget_declared_sizes(ir.serde.deserialize_model(model))
    assert (forgotten.changed == 0) is proven


def test_sizes_behind_maps_proven_block_after_block() -> None:
    """Issue 45's model: blocks of a reversal by constant lengths, a map, ConcatFromSequence,
    Slice and MatMul/Add, no block declaring its input's shape (only the graph input's [8, 8]).
    The static rules prove every block's sizes, so the lowered model computes none at run time:
    every block after the first lost them before (597 Shape nodes at 200 blocks)."""
    from benchmarks.synthetic import constant_lengths_model

    model = constant_lengths_model(4, declared=False)
    lowered = seqlower.lower(model)
    ops = [node.op_type for node in all_nodes(lowered)]
    assert "Shape" not in ops and "Range" not in ops, sorted(set(ops))
    assert ops.count("ReverseSequence") == 0
    x = _floats(8, 8)
    np.testing.assert_array_equal(ort_run(lowered, {"x": x})[0], ort_run(model, {"x": x})[0])


def _chunk_past_the_budget(branches: int) -> onnx.ModelProto:
    """PyTorch's ``chunk`` of a linear layer (issue 44): ``SplitToSequence`` by 32 of a
    ``MatMul`` by a [16, 64] weight, the batch and time symbolic, every value declared as
    dynamo writes them; ``branches`` ``If``s before it put whole-model inference past its
    budget (a large export), so only the declared-sizes step's own rules can prove the 64."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = []
    hints = [helper.make_tensor_value_info("mm", TensorProto.FLOAT, ["B", "T", 64])]
    previous = "x"
    for k in range(branches):
        then = helper.make_graph(
            [helper.make_node("Identity", [previous], [f"t{k}"])], f"then{k}", [],
            [helper.make_tensor_value_info(f"t{k}", TensorProto.FLOAT, None)],
        )  # fmt: skip
        orelse = helper.make_graph(
            [helper.make_node("Neg", [previous], [f"e{k}"])], f"else{k}", [],
            [helper.make_tensor_value_info(f"e{k}", TensorProto.FLOAT, None)],
        )  # fmt: skip
        nodes.append(helper.make_node("If", ["c"], [f"i{k}"], then_branch=then, else_branch=orelse))
        hints.append(helper.make_tensor_value_info(f"i{k}", TensorProto.FLOAT, ["B", "T", 16]))
        previous = f"i{k}"
    body = helper.make_graph(
        [helper.make_node("Relu", ["e"], ["r"])], "body",
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)],
    )  # fmt: skip
    nodes += [
        helper.make_node("MatMul", [previous, "w"], ["mm"]),
        helper.make_node("SplitToSequence", ["mm", "split"], ["seq"], axis=-1),
        helper.make_node("SequenceMap", ["seq"], ["mapped"], body=body),
        helper.make_node("ConcatFromSequence", ["mapped"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "chunk",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "T", 16]),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "T", 64])],
        [
            numpy_helper.from_array(_floats(16, 64), "w"),
            numpy_helper.from_array(np.array(32, np.int64), "split"),
        ],
        value_info=hints,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_chunk_of_a_matmul_past_inference_budget_is_split_in_two() -> None:
    """The last axis of 64 is proven from the weight whatever the symbolic batch and time (per
    dimension): before, the rules proved a shape all or nothing, the declared [B, T, 64] was
    forgotten whole, and ``--target openvino|tract`` refused a model OpenVINO ran as exported
    ("the number of pieces is known only at run time")."""
    model = _chunk_past_the_budget(1300)
    onnx.checker.check_model(model, full_check=True)
    feeds = {"x": _floats(2, 5, 16), "c": np.array(False)}
    want = ort_run(model, feeds)
    for target in ("openvino", "tract"):
        lowered = seqlower.lower(model, target=target, check=False)
        ops = {node.op_type for node in all_nodes(lowered)}
        assert not ops & {"SplitToSequence", "SequenceMap", "ConcatFromSequence"}, target
        np.testing.assert_allclose(ort_run(lowered, feeds)[0], want[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("declared", ["D", "?", 48])
def test_a_size_the_weights_prove_replaces_the_declared_one(declared: str | int) -> None:
    """PyTorch's ``chunk(2, -1)`` of a MatMul whose 64 columns its weight fixes, the product
    declared [B, T, D] (a name), [B, T, ?] or a stale [B, T, 48]: the 64 ONNX's inference derives
    from the weight replaces it, so the SplitToSequence into 32s has two pieces (before, the
    declaration was forgotten with nothing in its place, and ``--target tract|openvino``
    refused: "the number of pieces is known only at run time")."""
    from onnx import TensorProto, helper, numpy_helper

    size = None if declared == "?" else declared
    split = np.array(32, np.int64)  # a Constant node, as PyTorch writes it
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["mm"]),
            helper.make_node("Constant", [], ["split"], value=numpy_helper.from_array(split)),
            helper.make_node("SplitToSequence", ["mm", "split"], ["seq"], axis=-1),
            helper.make_node("SequenceAt", ["seq", "zero"], ["a"]),
            helper.make_node("SequenceAt", ["seq", "one"], ["b"]),
            helper.make_node("Sigmoid", ["b"], ["gate"]),
            helper.make_node("Mul", ["a", "gate"], ["y"]),
        ],
        "chunk",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "T", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "T", 32])],
        [
            numpy_helper.from_array(_floats(8, 64), "w"),
            numpy_helper.from_array(np.array(0, np.int64), "zero"),
            numpy_helper.from_array(np.array(1, np.int64), "one"),
        ],
        value_info=[helper.make_tensor_value_info("mm", TensorProto.FLOAT, ["B", "T", size])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    feeds = {"x": _floats(2, 5, 8)}
    want = ort_run(model, feeds)
    for target in ("tract", "openvino"):
        lowered = seqlower.lower(model, target=target, check=False)
        ops = {node.op_type for node in all_nodes(lowered)}
        assert not ops & {"SplitToSequence", "SequenceAt"}, target
        np.testing.assert_allclose(ort_run(lowered, feeds)[0], want[0], rtol=1e-5, atol=1e-6)
