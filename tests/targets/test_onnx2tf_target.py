"""The ``onnx2tf`` target's passes: explicit Loop counts (``explicit-loop-counts``), Loops of a
constant count unrolled (``loop-to-scan-constant`` + ``unroll-constant-scans``), a bool
``ReverseSequence`` run as int32 (``reverse-sequence-casts``) and ``Constant`` values as tensors.
Each lowered model runs on onnxruntime against the original (bit-exact for integers); where
onnx2tf is installed (Python >= 3.12, never in CI), on TFLite too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import pytest
from click.testing import CliRunner

import seqlower
from seqlower.cli.commands import cli
from seqlower.errors import TargetError
from seqlower.targets import PIPELINES
from tests import loop_cases as cases
from tests.helpers import all_nodes, all_op_types
from tests.passes.test_unroll_constant_scans import FIXED_LENGTH_RNN
from tests.runtimes import RuntimeFailure, assert_close, assert_same, require, run

_RNG = np.random.default_rng(32)


def _valid(model: onnx.ModelProto) -> None:
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)


def _loops(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [node for node in all_nodes(model) if node.op_type == "Loop"]


def _row(model: onnx.ModelProto) -> onnx.ModelProto:
    """The onnx2tf row's passes without its final check: at dynamic shapes it names a Loop
    left with scan outputs (``require-onnx2tf-loops``), whose form these tests look at."""
    return seqlower.lower(model, passes=list(PIPELINES["onnx2tf"].passes))


@pytest.mark.parametrize("name", list(cases.CASES))
def test_every_loop_gets_its_count_and_condition(name: str) -> None:
    """What onnx2tf needs to write a Loop as TFLite ops: ``M`` and ``cond`` both given."""
    model, feeds = cases.CASES[name]()
    lowered = _row(model)
    _valid(lowered)
    for loop in _loops(lowered):
        assert len(loop.input) >= 2 and loop.input[0] and loop.input[1], loop.name
    assert_close(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds), atol=1e-6)


@pytest.mark.parametrize(
    "lengths",
    # the condition's bound below M, one iteration, none (a Loop runs zero; a Scan would not).
    [np.array([2, 1], dtype=np.int32), np.array([1, 0], dtype=np.int32)],
)
def test_a_derived_count_runs_as_often_as_the_condition(lengths: np.ndarray) -> None:
    model, feeds = cases.dynamic_rnn()
    feeds = {**feeds, "lengths": lengths}
    lowered = _row(model)
    (loop,) = _loops(lowered)
    body = next(a.g for a in loop.attribute if a.name == "body")
    # The body passes its condition through: the count is M alone.
    assert [n.op_type for n in body.node if body.output[0].name in n.output] == ["Identity"]
    assert_close(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds), atol=1e-6)


def test_a_loop_that_stops_on_data_keeps_its_condition_with_a_bound() -> None:
    """No count before it runs and no M (PyTorch's ``while_loop``): M = 2**31 - 1, the largest
    TFLite keeps (it narrows int64 to int32); the body's condition still stops it."""
    model, feeds = cases.data_stop()
    lowered = seqlower.lower(model, target="onnx2tf", check=False)
    (loop,) = _loops(lowered)
    (m,) = [n for n in lowered.graph.node if loop.input[0] in n.output]
    assert onnx.numpy_helper.to_array(m.attribute[0].t) == 2**31 - 1
    body = next(a.g for a in loop.attribute if a.name == "body")
    assert [n.op_type for n in body.node if body.output[0].name in n.output] == ["Less"]
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


def _outer_limit(model: onnx.ModelProto) -> onnx.ModelProto:
    """``data_stop`` with its limit a constant of the main graph, as PyTorch writes them."""
    body = model.graph.node[-1].attribute[0].g
    (limit,) = [n for n in body.node if n.output[0] == "limit"]
    body.node.remove(limit)
    model.graph.node.insert(0, limit)
    return model


def test_small_outer_constants_are_copied_into_the_body() -> None:
    """onnx2tf 2.6.9 does not see an outer constant from inside a WHILE body (a Less against
    one compares with float32: 'Comparison op input dtypes must be compatible')."""
    model = _outer_limit(cases.data_stop()[0])
    feeds = cases.data_stop()[1]
    lowered = seqlower.lower(model, target="onnx2tf", check=False)
    _valid(lowered)
    (loop,) = _loops(lowered)
    body = next(a.g for a in loop.attribute if a.name == "body")
    inside = {o for n in body.node for o in n.output} | {i.name for i in body.input}
    assert all(name in inside for n in body.node for name in n.input if name)
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


def test_a_loop_of_a_constant_count_is_unrolled() -> None:
    """tf2onnx's loop over an input of a fixed length: neither Loop nor Scan left."""
    model = onnx.parser.parse_model(FIXED_LENGTH_RNN)
    lowered = seqlower.lower(model, target="onnx2tf", check=False)
    _valid(lowered)
    assert not {"Loop", "Scan"} & set(all_op_types(lowered))
    feeds = {"x": _RNG.standard_normal((7, 2, 3)).astype(np.float32)}
    assert_close(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds), atol=1e-6)


def test_a_limit_folded_to_a_float_constant_is_a_count() -> None:
    """tf2onnx compares ``Cast<to=float>`` of its counter and limit; with the input shapes fixed
    the limit's Cast folds to a float constant (7.0), still an integer bound."""
    text = FIXED_LENGTH_RNN.replace(
        "f_stop = Cast<to = 1>(stop)", "f_stop = Constant<value = float {7.0}>()"
    )
    model = onnx.parser.parse_model(text)
    lowered = seqlower.lower(model, target="onnx2tf", check=False)
    assert not {"Loop", "Scan"} & set(all_op_types(lowered))
    feeds = {"x": _RNG.standard_normal((7, 2, 3)).astype(np.float32)}
    assert_close(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds), atol=1e-6)


def test_a_count_read_from_an_unrolled_loop_unrolls_too() -> None:
    """A stacked RNN's second layer counts the rows of the first one's output: constant only
    once the first loop is unrolled (ONNX's inference, then a constant M for the Scan)."""
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[7, 3] x) => (float[unk__1, 3] z) {
            go = Constant<value = bool {1}>()
            m1 = Constant<value = int64 {7}>()
            y = Loop(m1, go) <body = b1 (int64 i, bool c) => (bool c_out, float[3] r) {
                c_out = Identity(c)
                row = Gather<axis = 0>(x, i)
                r = Neg(row)
            }>
            s = Shape<start = 0, end = 1>(y)
            zero = Constant<value = int64[1] {0}>()
            m2 = Squeeze(s, zero)
            z = Loop(m2, go) <body = b2 (int64 j, bool c2) => (bool c2_out, float[3] r2) {
                c2_out = Identity(c2)
                row2 = Gather<axis = 0>(y, j)
                r2 = Abs(row2)
            }>
        }
        """
    )
    lowered = seqlower.lower(model, target="onnx2tf", check=False)
    assert not {"Loop", "Scan"} & set(all_op_types(lowered))
    feeds = {"x": _RNG.standard_normal((7, 3)).astype(np.float32)}
    assert_close(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds), atol=1e-6)


def test_a_loop_of_a_run_time_count_stays_a_loop() -> None:
    """onnx2tf runs a Loop of an explicit count as WHILE, but writes any Scan as ONNX_SCAN."""
    model, _ = cases.map_fn()
    lowered = _row(model)
    assert "Loop" in all_op_types(lowered) and "Scan" not in all_op_types(lowered)


# PyTorch's while_loop as its Sinkhorn iteration writes it: no M, a condition on what the body
# computes and on a counter, limits read from the main graph's constants (a WHILE on onnx2tf).
SINKHORN_LIKE = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[3] x) => (float[3] y) <int64 zero = {0}, int64 one = {1},
        int64 most = {20}, float half = {0.5}, float eps = {0.01}> {
        go = Constant<value = bool {1}>()
        steps, y = Loop(, go, zero, x) <body = b (int64 i, bool c, int64 k, float[3] s)
            => (bool c_out, int64 k_next, float[3] s_next) {
            k_next = Add(k, one)
            s_next = Mul(s, half)
            size = Abs(s_next)
            big = ReduceMax<keepdims = 0>(size)
            more = Greater(big, eps)
            room = Less(k_next, most)
            c_out = And(room, more)
        }>
    }
    """
)


# tf2onnx's Keras Masking before a Bidirectional RNN reverses the bool mask.
BOOL_REVERSE = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (bool[4, 3] mask, int64[3] lens) => (bool[4, 3] reversed) {
        reversed = ReverseSequence<batch_axis = 1, time_axis = 0>(mask, lens)
    }
    """
)


def test_a_bool_reverse_sequence_runs_as_int32() -> None:
    """TFLite's REVERSE_SEQUENCE has no bool kernel; the node stays, on int32 data."""
    lowered = seqlower.lower(BOOL_REVERSE, target="onnx2tf", check=False)
    _valid(lowered)
    (node,) = [n for n in lowered.graph.node if n.op_type == "ReverseSequence"]
    assert [o.name for o in lowered.graph.output] == ["reversed"]
    assert node.output[0] != "reversed"
    feeds = {"mask": _RNG.random((4, 3)) < 0.5, "lens": np.array([4, 2, 0], dtype=np.int64)}
    assert_same(run("onnxruntime", BOOL_REVERSE, feeds), run("onnxruntime", lowered, feeds))


def test_constants_of_plain_values_become_tensors() -> None:
    """onnx2tf 2.6.9: ``Constant node without value is not supported`` (value_int(s)/float(s))."""
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 3] x) => (float[3, 2] y, float[2, 3] z) {
            shape = Constant<value_ints = [3, 2]>()
            y = Reshape(x, shape)
            half = Constant<value_float = 0.5>()
            z = Mul(x, half)
        }
        """
    )
    lowered = seqlower.lower(model, target="onnx2tf", check=False)
    for node in lowered.graph.node:
        if node.op_type == "Constant":
            assert [a.name for a in node.attribute] == ["value"]
    feeds = {"x": _RNG.standard_normal((2, 3)).astype(np.float32)}
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


# onnx2tf 2.6.9 drops the Identity to an output whose value other nodes read: LiteRT then
# fails with "Input tensor 1 lacks data" (an RNN's last state is such an output).
IDENTITY_OUTPUT = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[4, 3] x) => (float[4, 3] z, float[4, 3] last) {
        h = Tanh(x)
        z = Neg(h)
        last = Identity(h)
    }
    """
)


def test_an_identity_output_is_written_by_its_producer() -> None:
    lowered = seqlower.lower(IDENTITY_OUTPUT, target="onnx2tf", check=False)
    _valid(lowered)
    assert [n.op_type for n in lowered.graph.node] == ["Tanh", "Neg"]
    assert [o.name for o in lowered.graph.output] == ["z", "last"]
    feeds = {"x": _RNG.standard_normal((4, 3)).astype(np.float32)}
    assert_same(run("onnxruntime", IDENTITY_OUTPUT, feeds), run("onnxruntime", lowered, feeds))


def test_onnx2tf_still_drops_an_identity_output() -> None:
    """The onnx2tf bug ``outputs-without-identity`` works around (fails when onnx2tf fixes it:
    then the pass can go)."""
    require("onnx2tf")
    feeds = {"x": _RNG.standard_normal((4, 3)).astype(np.float32)}
    with pytest.raises(RuntimeFailure, match="lacks data"):
        run("onnx2tf", IDENTITY_OUTPUT, feeds)


def _static(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its inputs' symbolic dimensions fixed (5): its loop counts constants."""
    for value in model.graph.input:
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param:
                dim.dim_value = 5
    return model


def _lower_cli(tmp_path: Path, model: onnx.ModelProto, *flags: str) -> tuple[int, str, Path]:
    source, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    result = CliRunner().invoke(cli, [str(source), "-o", str(out), *flags])
    return result.exit_code, result.output, out


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(lambda: onnx.parser.parse_model(FIXED_LENGTH_RNN), id="fixed-length-rnn"),
        pytest.param(lambda: _static(cases.torch_while_loop()[0]), id="torch-while-loop"),
        pytest.param(lambda: SINKHORN_LIKE, id="while-loop-stopping-on-data"),
        pytest.param(lambda: BOOL_REVERSE, id="bool-reverse-sequence"),
        pytest.param(lambda: IDENTITY_OUTPUT, id="identity-output"),
        pytest.param(lambda: OUTER_READ, id="while-body-reading-an-outer-tensor"),
    ],
)
def test_target_onnx2tf_runs_them_on_litert(tmp_path: Path, model: object) -> None:
    """Each refused by onnx2tf 2.6.9 or LiteRT as exported (ONNX_LOOP, no max trip count,
    no bool REVERSE_SEQUENCE kernel); proven on TFLite after ``--target onnx2tf``."""
    require("onnx2tf")
    code, output, out = _lower_cli(tmp_path, model(), "--target", "onnx2tf")  # type: ignore[operator]
    assert code == 0 and out.exists(), output
    assert "runs and matches on onnx2tf" in output


@pytest.mark.parametrize("float32_written", [True, False])
def test_a_conversion_that_crashes_is_a_refusal_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, float32_written: bool
) -> None:
    """onnx2tf 2.6.9 segfaults writing the float16 ``.tflite`` of some models: the conversion
    runs in a child process, so seqlower survives; the float32 file, written before the crash,
    is what a user deploys and what the check runs (runs without onnx2tf: a stand-in crashes)."""
    from seqlower.verification.runtimes import onnx2tf

    write = "open(sys.argv[2] + '/model_float32.tflite', 'wb').close()" if float32_written else ""
    monkeypatch.setattr(
        onnx2tf,
        "_ONNX2TF_CHILD",
        f"import os, signal, sys\nos.makedirs(sys.argv[2])\n{write}\n"
        "os.kill(os.getpid(), signal.SIGSEGV)\n",
    )
    folder = str(tmp_path / "tflite")
    if float32_written:
        onnx2tf._onnx2tf_convert(str(tmp_path / "m.onnx"), folder, ["x"])
    else:
        with pytest.raises(RuntimeError, match=r"onnx2tf crashed converting the model \(SIGSEGV\)"):
            onnx2tf._onnx2tf_convert(str(tmp_path / "m.onnx"), folder, ["x"])


# A WHILE (a count known only when it runs) whose body reads a tensor of the main graph:
# onnx2tf 2.6.9 gives the WHILE body no access to it ("Input tensor N lacks data ... (WHILE)
# failed to invoke").
OUTER_READ = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (int64 n, float[2] x) => (float[2] total) {
        go = Constant<value = bool {1}>()
        start = Constant<value = float[2] {0.0, 0.0}>()
        total = Loop(n, go, start) <body = b (int64 i, bool c, float[2] s)
            => (bool c_out, float[2] s_next) {
            c_out = Identity(c)
            s_next = Add(s, x)
        }>
    }
    """
)


@pytest.mark.parametrize("n", [3, 0])
def test_an_outer_tensor_a_body_reads_is_carried_as_a_state(n: int) -> None:
    lowered = seqlower.lower(OUTER_READ, target="onnx2tf", check=False)
    _valid(lowered)
    (loop,) = _loops(lowered)
    body = next(a.g for a in loop.attribute if a.name == "body")
    inside = {o for node in body.node for o in node.output} | {i.name for i in body.input}
    assert all(name in inside for node in body.node for name in node.input if name)
    assert loop.input[-1] == "x" and len(body.input) == 4
    feeds = {"n": np.array(n), "x": _RNG.standard_normal(2).astype(np.float32)}
    assert_same(run("onnxruntime", OUTER_READ, feeds), run("onnxruntime", lowered, feeds))


def test_onnx2tf_still_loses_outer_tensors_in_a_while_body() -> None:
    """The onnx2tf bug the carried states work around (fails when onnx2tf fixes it)."""
    require("onnx2tf")
    feeds = {"n": np.array(3), "x": _RNG.standard_normal(2).astype(np.float32)}
    with pytest.raises(RuntimeFailure, match="lacks data"):
        run("onnx2tf", OUTER_READ, feeds)


# PyTorch's embedding_bag, one bag once its Loop is unrolled: an empty bag's zeros, else the
# bag's rows reduced (the axes a constant of the main graph, as the unrolled copies read it).
# onnx2tf 2.6.9 lowers the branch's ReduceSum without that constant: ONNX_REDUCESUM.
EMPTY_BAG_IF = """
    <ir_version: 8, opset_import: ["" : 18]>
    g (int64[1] start, int64[1] end) => (float[1, 3] bag) <float[8, 3] rows = {
        1.0, -2.0, 3.0, 4.5, 5.0, -6.0, 7.0, 8.0, 9.0, 10.0, -11.0, 12.0,
        13.0, 14.0, 15.5, 16.0, -17.0, 18.0, 19.0, 20.0, 21.0, -22.0, 23.0, 24.0},
        int64[1] axis = {0}> {
        empty = Equal(start, end)
        bag = If(empty) <then_branch = t () => (float[1, 3] zeros) {
            zeros = Constant<value = float[1, 3] {0.0, 0.0, 0.0}>()
        }, else_branch = f () => (float[1, ?] reduced) {
            taken = Slice(rows, start, end)
            reduced = REDUCE(taken, axis)
        }>
    }
"""
# start == end, in order, out of order, negative, past the end
_BOUNDS = [(3, 3), (2, 5), (5, 2), (-3, 7), (6, 12), (12, 20), (0, 8)]


def _bag(reduce: str = "ReduceSum") -> onnx.ModelProto:
    return onnx.parser.parse_model(EMPTY_BAG_IF.replace("REDUCE", reduce))


def _bounds(start: int, end: int) -> dict[str, np.ndarray]:
    return {"start": np.array([start]), "end": np.array([end])}


@pytest.mark.parametrize("reduce", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"])
def test_an_if_that_cannot_fail_becomes_a_where(reduce: str) -> None:
    """Both branches inlined and a Where: exact where the untaken branch cannot fail and both
    give one static shape; the reduction's input padded with its identity (LiteRT reduces an
    empty axis to arbitrary numbers)."""
    model = _bag(reduce)
    lowered = seqlower.lower(model, target="onnx2tf", check=False)
    _valid(lowered)
    assert "If" not in all_op_types(lowered)
    assert {"Where", "Pad"} <= set(all_op_types(lowered))
    for start, end in _BOUNDS:
        feeds = _bounds(start, end)
        assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


def test_a_condition_of_rank_one_keeps_the_outputs_rank() -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 18]>
        g (float x, bool[1, 1] c) => (float y) {
            y = If(c) <then_branch = t () => (float a) { a = Neg(x) },
                       else_branch = f () => (float b) { b = Abs(x) }>
        }
        """
    )
    lowered = seqlower.lower(model, target="onnx2tf", check=False)
    _valid(lowered)
    assert "If" not in all_op_types(lowered)
    for flag in (True, False):
        feeds = {"x": np.array(-1.5, dtype=np.float32), "c": np.array([[flag]])}
        assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


@pytest.mark.parametrize(
    "else_branch",
    [
        # a Gather that fails when its index is out of range
        "taken = Gather(rows, start)  reduced = ReduceSum(taken, axis)",
        # an integer division by zero
        "n = Sub(end, start)  q = Div(start, n)  f = Cast<to = 1>(q)  reduced = Unsqueeze(f, axis)",
        # a shape that differs from the then branch's
        "reduced = ReduceSum<keepdims = 0>(rows, axis)",
    ],
)
def test_an_if_whose_untaken_branch_could_fail_is_left(else_branch: str) -> None:
    text = EMPTY_BAG_IF.replace(
        "taken = Slice(rows, start, end)\n            reduced = REDUCE(taken, axis)", else_branch
    )
    lowered = seqlower.lower(onnx.parser.parse_model(text), target="onnx2tf", check=False)
    assert "If" in all_op_types(lowered)


def test_onnx2tf_still_cannot_lower_such_an_if() -> None:
    """The onnx2tf bug ``if-as-where`` works around (fails when onnx2tf fixes it)."""
    require("onnx2tf")
    with pytest.raises(RuntimeFailure, match="ONNX_REDUCESUM"):
        run("onnx2tf", _bag(), _bounds(2, 5))


def test_litert_still_reduces_an_empty_axis_to_other_numbers() -> None:
    """The LiteRT bug ``pad-empty-reductions`` works around (fails when it is fixed)."""
    require("onnx2tf")
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 18]>
        g (int64[1] start, int64[1] end) => (float[1, 3] bag) <float[8, 3] rows = {
            1.0, -2.0, 3.0, 4.5, 5.0, -6.0, 7.0, 8.0, 9.0, 10.0, -11.0, 12.0,
            13.0, 14.0, 15.5, 16.0, -17.0, 18.0, 19.0, 20.0, 21.0, -22.0, 23.0, 24.0},
            int64[1] axis = {0}> {
            taken = Slice(rows, start, end)
            bag = ReduceSum(taken, axis)
        }
        """
    )
    expected = run("onnxruntime", model, _bounds(5, 2))
    assert not np.array_equal(run("onnx2tf", model, _bounds(5, 2))[0], expected[0])
    lowered = seqlower.lower(model, target="onnx2tf", check=False)
    assert_same(expected, run("onnx2tf", lowered, _bounds(5, 2)))


def test_target_onnx2tf_runs_an_empty_bag_if(tmp_path: Path) -> None:
    require("onnx2tf")
    code, output, out = _lower_cli(tmp_path, _bag("ReduceMax"), "--target", "onnx2tf")
    assert code == 0 and out.exists(), output
    assert "runs and matches on onnx2tf" in output


# Rank-0 outputs of a Gather, a Squeeze and a comparison: onnx2tf 2.6.9 gives them shape [1].
SCALARS = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[3] x, int64[3] k) => (float first, float total, bool positive, int64 second) {
        one = Constant<value = int64 {1}>()
        first = Gather(x, one)
        kept = ReduceSum<keepdims = 1>(x)
        total = Squeeze(kept)
        zero = Constant<value = float {0.0}>()
        positive = Greater(total, zero)
        second = Gather(k, one)
    }
    """
)


@pytest.mark.parametrize(
    "x", [[1.5, -2.0, 4.0], [np.nan, -0.0, 1.0], [0.0, -0.0, -0.0], [1.0, np.inf, -np.inf]]
)
def test_a_rank_0_output_is_reduced_from_one_element(x: list[float]) -> None:
    lowered = seqlower.lower(SCALARS, target="onnx2tf", check=False)
    _valid(lowered)
    assert [o.name for o in lowered.graph.output] == [o.name for o in SCALARS.graph.output]
    assert all(not o.type.tensor_type.shape.dim for o in lowered.graph.output)
    assert [n.op_type for n in lowered.graph.node].count("ReduceMax") == 4
    feeds = {"x": np.array(x, dtype=np.float32), "k": np.array([7, -(2**40), 3])}
    expected, actual = run("onnxruntime", SCALARS, feeds), run("onnxruntime", lowered, feeds)
    for want, got in zip(expected, actual, strict=True):  # bit for bit: NaN and -0.0 too
        assert want.shape == got.shape == () and want.dtype == got.dtype
        assert want.tobytes() == got.tobytes()


def test_onnx2tf_still_gives_rank_0_outputs_shape_1() -> None:
    """The onnx2tf bug ``scalar-outputs`` works around (fails when onnx2tf fixes it)."""
    require("onnx2tf")
    feeds = {"x": np.array([1.5, -2.0, 4.0], dtype=np.float32), "k": np.array([7, 8, 9])}
    assert [np.shape(v) for v in run("onnx2tf", SCALARS, feeds)] == [(1,)] * 4
    lowered = seqlower.lower(SCALARS, target="onnx2tf", check=False)
    assert_same(run("onnxruntime", SCALARS, feeds), run("onnx2tf", lowered, feeds))


# A Loop of a run-time count at most 5 with a scan output (tf2onnx's bidirectional_dynamic_rnn
# with sequence_length counts min(longest length, time axis)): onnx2tf 2.6.9 writes ONNX_LOOP.
BOUNDED_SCAN = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (int64 n, float[2] x) => (float[2] last, float[?, 2] rows) {
        go = Constant<value = bool {1}>()
        start = Constant<value = float[2] {0.0, 0.0}>()
        most = Constant<value = int64 {5}>()
        count = Min(n, most)
        last, rows = Loop(count, go, start) <body = b (int64 i, bool c, float[2] s)
            => (bool c_out, float[2] s_next, float[2] row) {
            c_out = Identity(c)
            s_next = Add(s, x)
            fi = Cast<to = 1>(i)
            row = Mul(s_next, fi)
        }>
    }
"""


@pytest.mark.parametrize("n", [0, 1, 3, 5, 9, -2])
def test_scan_outputs_of_a_bounded_count_become_written_states(n: int) -> None:
    model = onnx.parser.parse_model(BOUNDED_SCAN)
    lowered = seqlower.lower(model, target="onnx2tf", check=False)
    _valid(lowered)
    (loop,) = _loops(lowered)
    body = next(a.g for a in loop.attribute if a.name == "body")
    assert len(body.output) == len(body.input) - 1  # states only (i is no output): a WHILE
    feeds = {"n": np.array(n), "x": _RNG.standard_normal(2).astype(np.float32)}
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


@pytest.mark.parametrize(
    "change",
    [
        ("count = Min(n, most)", "count = Identity(n)"),  # no bound
        ("row = Mul(s_next, fi)", "sizes = Reshape(i, i1)  row = Expand(fi, sizes)"),  # ragged
    ],
)
def test_scan_outputs_without_a_bound_or_static_rows_are_left(change: tuple[str, str]) -> None:
    text = BOUNDED_SCAN.replace(*change).replace("float[2] row", "float[?] row")
    one = "i1 = Constant<value = int64[1] {1}>()"
    text = text.replace("c_out = Identity(c)", f"c_out = Identity(c)  {one}")
    lowered = _row(onnx.parser.parse_model(text))
    (loop,) = _loops(lowered)
    body = next(a.g for a in loop.attribute if a.name == "body")
    assert len(body.output) == len(body.input)  # the scan output stays


def test_loops_onnx2tf_would_write_as_custom_ops_are_named_with_the_flag() -> None:
    """At dynamic shapes tf2onnx's loop over the time axis has no bound: onnx2tf would write
    ``ONNX_LOOP``, which LiteRT cannot run; named before the check, with the flag that fixes
    it. At fixed shapes the same loop's scan outputs become states (a WHILE)."""
    model, feeds = cases.dynamic_rnn()
    with pytest.raises(TargetError, match=r"Loop node .*ONNX_LOOP") as caught:
        seqlower.lower(model, target="onnx2tf", check=False)
    assert "--overwrite-input-shape x=?,2,3" in str(caught.value)
    shapes = {name: tuple(value.shape) for name, value in feeds.items()}
    lowered = seqlower.lower(model, target="onnx2tf", check=False, input_shapes=shapes)
    for loop in _loops(lowered):
        body = next(a.g for a in loop.attribute if a.name == "body")
        assert len(body.output) == len(body.input) - 1  # states only


def test_a_scan_left_is_named() -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 3] x) => (float[3] total) {
            zero = Constant<value = float[3] {0, 0, 0}>()
            total = Scan(zero, x) <body = b (float[3] acc, float[3] row) => (float[3] out) {
                out = Add(acc, row)
            }, num_scan_inputs = 1>
        }
        """
    )
    with pytest.raises(TargetError, match=r"Scan node .*ONNX_SCAN"):
        seqlower.lower(model, target="onnx2tf", check=False)
    lowered = seqlower.lower(model, target="onnx2tf", check=False, input_shapes={"x": (4, 3)})
    assert "Scan" not in all_op_types(lowered)


def test_target_onnx2tf_runs_scan_outputs_of_a_bounded_count(tmp_path: Path) -> None:
    require("onnx2tf")
    model = onnx.parser.parse_model(BOUNDED_SCAN)
    feeds = {"n": np.array(3), "x": np.array([1.0, 2.0], dtype=np.float32)}
    with pytest.raises(RuntimeFailure, match="ONNX_LOOP"):
        run("onnx2tf", model, feeds)
    code, output, out = _lower_cli(tmp_path, model, "--target", "onnx2tf")
    assert code == 0 and out.exists(), output
    assert "runs and matches on onnx2tf" in output


def test_an_if_in_such_a_branch_goes_first_then_the_outer_one() -> None:
    """embedding_bag's mean: the bag's sum divided by its size when positive, an If inside the
    else branch (the second ``if-as-where`` takes the outer If once the first took it)."""
    text = EMPTY_BAG_IF.replace(
        "reduced = REDUCE(taken, axis)",
        """summed = ReduceSum(taken, axis)
            size = Sub(end, start)
            zero = Constant<value = int64 {0}>()
            some = Greater(size, zero)
            reduced = If(some) <then_branch = t2 () => (float[1, ?] mean) {
                fsize = Cast<to = 1>(size)
                mean = Div(summed, fsize)
            }, else_branch = f2 () => (float[1, ?] same) { same = Identity(summed) }>""",
    )
    model = onnx.parser.parse_model(text)
    lowered = seqlower.lower(model, target="onnx2tf", check=False)
    _valid(lowered)
    assert "If" not in all_op_types(lowered)
    for start, end in _BOUNDS:
        feeds = _bounds(start, end)
        assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))
