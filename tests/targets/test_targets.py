"""--target: the lowered model is also run on the user's runtime (OpenVINO, tract) and compared
with the reference's outputs; a runtime that is not installed is exit 2 with the pip command
and --no-check, which lowers for the target unproven."""

from __future__ import annotations

import ctypes
import gc
import importlib.metadata
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest
from click.testing import CliRunner

import seqlower
from seqlower.cli.commands import cli
from seqlower.job import LowerOptions, lower_file
from seqlower.targets import TARGETS as DEPLOY_TARGETS
from seqlower.verification import CheckOptions, VerifyReport, verify
from seqlower.verification.runtimes import TARGET_ORACLES, Oracle, Runner
from tests.helpers import REALWORLD, neg_loop, nested_row_maps
from tests.runtimes import BY_HAND, RuntimeFailure, assert_same, require, run

# A tf2onnx-style ReverseSequence: lowered to ops both OpenVINO and tract run.
REVERSE = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T, 2, 3] x, int32[2] lengths) => (float[T, 2, 3] y) {
        lens = Cast<to = 7>(lengths)
        y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
    }
    """
)

# A Loop: tract 0.23.9 has none.
LOOP = onnx.parser.parse_model(neg_loop(2, 3))


def _version(package: str) -> str:
    return importlib.metadata.version(package)


@pytest.mark.parametrize("target", list(TARGET_ORACLES))
def test_lower_proves_on_the_target(tmp_path: Path, target: str) -> None:
    require(target)
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(REVERSE, source)
    result = CliRunner().invoke(cli, [str(source), "-o", str(out), "--target", target])
    assert result.exit_code == 0, result.output
    package = target.split("-")[0]
    assert f"check: runs and matches on {package} {_version(package)}" in result.output
    assert out.exists()


def test_verify_on_several_targets_through_the_api() -> None:
    """Every runtime CI installs (the converters not CI's have their own tests)."""
    targets = tuple(name for name in TARGET_ORACLES if name not in BY_HAND)
    for target in targets:
        require(target)
    lowered = seqlower.lower(REVERSE)
    report = verify(REVERSE, lowered, CheckOptions(runtimes=targets))
    assert report.ok, report.reason
    assert sorted(report.targets) == sorted(
        [
            f"onnxruntime {_version('onnxruntime')}",
            f"openvino {_version('openvino')}",
            f"tract {_version('tract')}",
            f"tract {_version('tract')} (symbolic facts)",
            f"tinygrad {_version('tinygrad')}",
        ]
    )
    assert all(line.startswith("runs and matches on") for line in report.targets.values())
    assert all(len(runs) == 3 and all(r.ok for r in runs) for runs in report.target_runs.values())
    again = VerifyReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert (again.targets, again.target_runs) == (report.targets, report.target_runs)


def test_target_that_cannot_run_the_candidate_fails_the_check(tmp_path: Path) -> None:
    require("tract")
    paths = [str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx")]
    for path in paths:
        onnx.save(LOOP, path)
    result = CliRunner().invoke(cli, ["verify", *paths, "--target", "tract"])
    assert result.exit_code == 1, result.output
    assert f"MISMATCH: does not load on tract {_version('tract')}: " in result.stderr
    assert "Loop" in result.stderr
    # Nothing ran on the inputs: none are saved (tests/verification/test_culprit.py).
    assert "--inputs" not in result.stderr


def test_lower_file_targets_field(tmp_path: Path) -> None:
    require("openvino")
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(REVERSE, source)
    result = lower_file(source, out, LowerOptions(targets=("openvino",)))
    assert result.exit_code == 0 and result.verification is not None
    assert list(result.verification.targets.values()) == [
        f"runs and matches on openvino {_version('openvino')}"
    ]


def test_openvino_runs_in_float32() -> None:
    """The CPU plugin's bf16 default would give errors near 1e-3 on this sum of products."""
    require("openvino")
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[4, 64] a, float[64, 4] b) => (float[4, 4] y) { y = MatMul(a, b) }
        """
    )
    rng = np.random.default_rng(0)
    feeds = {
        "a": rng.standard_normal((4, 64)).astype(np.float32),
        "b": rng.standard_normal((64, 4)).astype(np.float32),
    }
    (y,) = TARGET_ORACLES["openvino"].load(model).run(feeds)
    np.testing.assert_allclose(y, feeds["a"] @ feeds["b"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("command", ["lower", "verify"])
def test_target_not_installed_is_exit_2_with_pip_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    real = importlib.metadata.version

    def version(name: str) -> str:
        if name == "tract":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(REVERSE, source)
    args = [str(source), "-o", str(out)] if command == "lower" else ["verify", *[str(source)] * 2]
    result = CliRunner().invoke(cli, [*args, "--target", "tract"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'seqlower[runtimes]'" in lines[0], lines
    assert ("--no-check" in lines[0]) == (command == "lower")
    assert not out.exists()


def test_unknown_target_is_exit_2(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(REVERSE, source)
    result = CliRunner().invoke(cli, [str(source), "--dry-run", "--target", "qnn"])
    assert result.exit_code == 2
    known = sorted({*DEPLOY_TARGETS, *TARGET_ORACLES})
    assert f"unknown target (known: {', '.join(known)})" in result.stderr


def test_target_chooses_the_pipeline_and_proves_it(tmp_path: Path) -> None:
    """--target tract lowers what tract lacks (here a Loop with a fixed trip count becomes a
    Scan) and proves the result on tract."""
    require("tract")
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(LOOP, source)
    result = CliRunner().invoke(cli, [str(source), "-o", str(out), "--target", "tract"])
    assert result.exit_code == 0, result.output
    ops = {node.op_type for node in onnx.load(out).graph.node}
    assert "Loop" not in ops and "Scan" in ops
    assert f"check: runs and matches on tract {_version('tract')}" in result.output
    # The default pipeline keeps the Loop, which tract refuses.
    default = CliRunner().invoke(cli, [str(source), "-o", str(out), "--target", "onnxruntime"])
    assert default.exit_code == 0 and "Loop" in {n.op_type for n in onnx.load(out).graph.node}


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--target", "openvino", "--target", "tract"], "need different lowerings"),
        (["--target", "tract", "--sequence-free"], "leave out --sequence-free"),
        (["--target", "tract", "--passes", "lower-sequence-map"], "leave out --passes/--skip"),
    ],
)
def test_target_conflicts_are_exit_2(tmp_path: Path, args: list[str], words: str) -> None:
    require("openvino")
    require("tract")
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(LOOP, source)
    result = CliRunner().invoke(cli, [str(source), "-o", str(out), *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], lines
    assert not out.exists()


def test_target_seqlower_cannot_run_is_refused_unless_unproven(tmp_path: Path) -> None:
    """tensorrt: nothing here runs it, so --target tensorrt is exit 2 naming --no-check; with
    --no-check its pipeline runs and the summary says the model is not proven there. verify
    cannot use it at all."""
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(REVERSE, source)
    refused = CliRunner().invoke(cli, [str(source), "-o", str(out), "--target", "tensorrt"])
    assert refused.exit_code == 2 and not out.exists()
    assert "seqlower cannot run tensorrt" in refused.stderr and "--no-check" in refused.stderr
    result = CliRunner().invoke(
        cli, [str(source), "-o", str(out), "--target", "tensorrt", "--no-check"]
    )
    assert result.exit_code == 0, result.output
    assert "not proven on tensorrt" in result.output and out.exists()
    verify_result = CliRunner().invoke(
        cli, ["verify", str(source), str(out), "--target", "tensorrt"]
    )
    assert verify_result.exit_code == 2 and "cannot verify on it" in verify_result.stderr


def test_unproven_target_gets_its_opset(tmp_path: Path) -> None:
    """onnx2torch without the check: the model is converted down to the newest opset its
    converters know, lowered for it, and said to be unproven."""
    model = onnx.parser.parse_model(
        """
        <ir_version: 10, opset_import: ["" : 21]>
        g (float[T, 2, 3] x, int64[2] lens) => (float[T, 2, 3] y) {
            y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
        }
        """
    )
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    result = CliRunner().invoke(
        cli, [str(source), "-o", str(out), "--target", "onnx2torch", "--no-check"]
    )
    assert result.exit_code == 0, result.output
    written = onnx.load(out)
    assert {o.version for o in written.opset_import if o.domain in ("", "ai.onnx")} == {17}
    assert "ReverseSequence" not in {n.op_type for n in written.graph.node}
    assert "not proven on onnx2torch" in result.output
    assert "converting to opset 17" in result.output


def test_target_not_installed_lowers_unproven_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A target whose runtime is missing: --no-check (check=False from Python) lowers for it
    unproven, and says so; without it the Python API raises before any work."""
    monkeypatch.setattr(TARGET_ORACLES["tract"], "package", "seqlower_no_such_runtime")
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(REVERSE, source)
    result = CliRunner().invoke(
        cli, [str(source), "-o", str(out), "--target", "tract", "--no-check"]
    )
    assert result.exit_code == 0, result.output
    assert "not proven on tract" in result.output and out.exists()
    with pytest.raises(seqlower.SeqlowerError, match=r"check=False") as error:
        seqlower.lower(REVERSE, target="tract")
    assert error.value.exit_code == 2
    lowered = seqlower.lower(REVERSE, target="tract", check=False)
    assert "ReverseSequence" not in {n.op_type for n in lowered.graph.node}


class _OffByOne(Oracle):
    """A target runtime that gets the lowered model (no ReverseSequence left) wrong by one, and
    the original right: the lowering is to blame."""

    name = "offbyone"
    package = "onnx"  # installed wherever the test runs

    def load(self, model: onnx.ModelProto) -> Runner:
        inner = TARGET_ORACLES["onnxruntime"].load(model)
        wrong = "ReverseSequence" not in {n.op_type for n in model.graph.node}
        return Runner(self.name, lambda feeds: [o + wrong for o in inner.run(feeds)])


def test_python_api_proves_on_the_target(monkeypatch: pytest.MonkeyPatch) -> None:
    """lower(target=...) runs the check on the target's runtime: a model that runs and
    matches there is returned; one that differs raises ProofFailedError (exit code 1), an
    onnx_ir model left as it was; check=False returns it unproven."""
    require("tract")
    assert "ReverseSequence" not in {
        n.op_type for n in seqlower.lower(REVERSE, target="tract").graph.node
    }
    monkeypatch.setitem(TARGET_ORACLES, "tract", _OffByOne())
    with pytest.raises(seqlower.ProofFailedError, match="differs on offbyone") as error:
        seqlower.lower(REVERSE, target="tract")
    assert error.value.exit_code == 1 and not error.value.report.ok
    model = ir.serde.deserialize_model(REVERSE)
    with pytest.raises(seqlower.ProofFailedError):
        seqlower.lower(model, target="tract")
    assert [n.op_type for n in model.graph] == ["Cast", "ReverseSequence"]
    seqlower.lower(REVERSE, target="tract", check=False)


def test_python_api_raises_on_a_runtime_culprit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A target runtime that gets the original wrong just as much: not the lowering's fault,
    but the model is wrong where it is to run, so lower() raises, the runtime the culprit."""

    class Wrong(Oracle):
        name = "wrongboth"
        package = "onnx"

        def load(self, model: onnx.ModelProto) -> Runner:
            inner = TARGET_ORACLES["onnxruntime"].load(model)
            return Runner(self.name, lambda feeds: [o + 1 for o in inner.run(feeds)])

    monkeypatch.setitem(TARGET_ORACLES, "tract", Wrong())
    with pytest.raises(seqlower.ProofFailedError, match=r"runtime's fault.*wrongboth") as error:
        seqlower.lower(REVERSE, target="tract")
    assert error.value.culprit == "runtime" and error.value.exit_code == 1
    assert error.value.report.culprit == "runtime"


def test_onnxruntime_target_proves_what_only_onnx_reference_ran(tmp_path: Path) -> None:
    """The original only onnx.reference runs (nested maps): both models run there, and
    --target onnxruntime proves the lowered one on onnxruntime too."""
    model = onnx.parser.parse_model(nested_row_maps("ReduceSum"))
    report = verify(model, seqlower.lower(model), CheckOptions(runtimes=("onnxruntime",)))
    assert report.ok, report.reason
    assert report.oracles["reference"] == report.oracles["candidate"] == "onnx.reference"
    label = f"onnxruntime {_version('onnxruntime')}"
    assert report.targets == {label: f"runs and matches on {label}"}


def test_candidate_openvino_refuses_fails_the_check() -> None:
    """tf2onnx's map_fn Loop (its body reads more than its carried values): onnxruntime runs
    it, OpenVINO's ONNX front end refuses it at load."""
    require("openvino")
    path = REALWORLD / "tf_map_fn_reverse_op13.onnx"
    model = onnx.load(path)
    report = verify(model, seqlower.lower(model), CheckOptions(runtimes=("openvino",)))
    assert report.status == "mismatch"
    assert report.reason.startswith(
        f"the lowered model does not load on openvino {_version('openvino')}: "
    )
    assert "While validating ONNX node '<Node(Loop): map/while_loop:0>'" in report.reason
    assert report.targets == {
        f"openvino {_version('openvino')}": report.reason.removeprefix("the lowered model ")
    }


def test_expected_needs_the_check(tmp_path: Path) -> None:
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(REVERSE, source)
    np.savez(tmp_path / "x.npz", x=np.zeros((2, 2, 3), np.float32), lengths=np.array([1, 2]))
    result = CliRunner().invoke(
        cli, [str(source), "-o", str(out), "--no-check", f"--expected={tmp_path / 'x.npz'}"]
    )
    assert result.exit_code == 2
    assert "needs the check" in result.stderr and not out.exists()


def test_inspect_says_what_a_target_would_do(tmp_path: Path) -> None:
    """inspect --target: the target's own pipeline, run in memory, with what blocks it."""
    source = tmp_path / "m.onnx"
    onnx.save(LOOP, source)
    result = CliRunner().invoke(cli, ["inspect", str(source), "--target", "tract"])
    assert result.exit_code == 0, result.output
    assert "tract (--target tract), a dry run of lower (no check)" in result.output
    assert "lowers 1 Loop" in result.output and "sequence-free" not in result.output
    data_stop = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[3] x) => (float[3] y) {
            t = Constant<value = bool {1}>()
            y = Loop(, t, x) <body = b (int64 i, bool ci, float[3] xi) => (bool co, float[3] xo) {
                xo = Neg(xi)
                s = ReduceSum<keepdims = 0>(xo)
                z = Constant<value = float {0}>()
                co = Greater(s, z)
            }>
        }
        """
    )
    onnx.save(data_stop, source)
    result = CliRunner().invoke(cli, ["inspect", str(source), "--target", "tract"])
    assert result.exit_code == 0, result.output
    assert "blocked by 1:" in result.output and "trip count is not fixed" in result.output
    # embedding_bag's Slices by its offsets: rewritten for tract (run-time-slices-as-gathers).
    bag = REALWORLD / "embedding_bag_mean.onnx"
    result = CliRunner().invoke(cli, ["inspect", str(bag), "--target", "tract"])
    assert result.exit_code == 0, result.output
    assert "blocked by" not in result.output and "lowers 3 Slice" in result.output
    # OpenVINO keeps the (stacked) Loop: repaired, not lowered, and said so.
    result = CliRunner().invoke(cli, ["inspect", str(bag), "--target", "openvino"])
    assert result.exit_code == 0, result.output
    assert "lowers 1 Loop" in result.output, result.output
    assert "repairs 1 Loop for the runtime, keeping it (strict-loop-bodies)" in result.output


def test_inspect_names_loops_when_nothing_is_lowered(tmp_path: Path) -> None:
    """A model whose only trouble is a Loop is not "runs anywhere": tract has no Loop."""
    source = tmp_path / "m.onnx"
    onnx.save(LOOP, source)
    result = CliRunner().invoke(cli, ["inspect", str(source)])
    assert result.exit_code == 0, result.output
    assert "runs anywhere" not in result.output
    assert "1 Loop, which tract lacks" in result.output


def test_each_target_gets_its_reverse_sequence_form(tmp_path: Path) -> None:
    """Lengths known only at run time: onnxruntime and OpenVINO keep their native kernels (for
    types onnxruntime has one for), tract gets the portable row Gather (static slices of 3);
    each is proven."""
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(REVERSE, source)
    expected = {
        "onnxruntime": "ReverseSequence",
        "tract": "Gather",
        "openvino": "ReverseSequence",
    }
    for target, op in expected.items():
        require(target)
        result = CliRunner().invoke(cli, [str(source), "-o", str(out), "--target", target])
        assert result.exit_code == 0, result.output
        ops = {node.op_type for node in onnx.load(out).graph.node}
        assert op in ops, (target, ops)
        assert ("Gather" in ops) == (target == "tract"), (target, ops)
        assert ("ReverseSequence" in ops) == (target != "tract"), (target, ops)


@pytest.mark.parametrize("dtype", ["bfloat16", "complex64", "complex128"])
def test_onnxruntime_target_lowers_only_the_types_it_lacks(dtype: str) -> None:
    """onnxruntime has no ReverseSequence kernel for these: its target lowers them (row form)
    and keeps the kernel for the float node beside them."""
    opset = 28 if dtype == "bfloat16" else 17  # ReverseSequence takes bfloat16 from opset 28
    model = onnx.parser.parse_model(
        f"""
        <ir_version: 8, opset_import: ["" : {opset}]>
        g ({dtype}[4, 2, 3] x, int64[2] lens) => ({dtype}[4, 2, 3] y, float[4, 2] z) {{
            y = ReverseSequence <batch_axis = 1, time_axis = 0> (x, lens)
            f = Constant <value = float[4, 2] {{1, 2, 3, 4, 5, 6, 7, 8}}> ()
            z = ReverseSequence <batch_axis = 1, time_axis = 0> (f, lens)
        }}
        """
    )
    lowered = seqlower.lower(model, target="onnxruntime", check=False)
    ops = [node.op_type for node in lowered.graph.node]
    assert ops.count("ReverseSequence") == 1  # the float one: onnxruntime's kernel
    assert "Gather" in ops


def test_lowering_a_proto_leaves_it_as_it_was() -> None:
    """onnx_ir's tensors wrap the proto's own: unrolling a Scan renames its body's initializers,
    which renamed the caller's (a later lowering of the same proto then failed)."""
    bag = onnx.load(REALWORLD / "embedding_bag_mean.onnx")
    before = bag.SerializeToString()
    with pytest.raises(seqlower.TargetError):  # its Scan: no onnx2torch converter
        seqlower.lower(bag, target="onnx2torch", check=False)
    assert bag.SerializeToString() == before
    seqlower.lower(bag, target="tvm", check=False)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_openvino_models_leave_the_signal_stack_usable() -> None:
    """OpenVINO 2026.4.1: each Core's CPU plugin gives the compiling thread a new alternate
    signal stack and puts back the one it found when the Core goes; two Cores gone in the order
    they came left this thread's stack freed, and the next SIGTERM crashed the process (the
    check loads the original beside the lowered model to blame a failure)."""
    require("openvino")
    oracle = TARGET_ORACLES["openvino"]
    first, second = oracle.load(REVERSE), oracle.load(REVERSE)
    del first
    gc.collect()
    del second
    gc.collect()

    class Stack(ctypes.Structure):
        _fields_ = [("sp", ctypes.c_void_p), ("flags", ctypes.c_int), ("size", ctypes.c_size_t)]

    stack = Stack()
    assert ctypes.CDLL(None).sigaltstack(None, ctypes.byref(stack)) == 0
    if stack.sp and not stack.flags & 2:  # SS_DISABLE
        mapped = [
            tuple(int(a, 16) for a in line.split()[0].split("-"))
            for line in Path("/proc/self/maps").read_text().splitlines()
        ]
        assert any(low <= stack.sp < high for low, high in mapped), hex(stack.sp)


def test_tract_is_proven_both_ways() -> None:
    """--target tract: tract with concrete input facts and with the model's declared ones, as a
    user may load it either way (issue 44); tract-symbolic alone: the declared facts only."""
    from seqlower.targets import deployment

    assert deployment(["tract"]).proofs == ("tract", "tract-symbolic")
    assert deployment(["tract-symbolic"]).proofs == ("tract-symbolic",)
    assert deployment(["openvino"]).proofs == ("openvino",)


# Two declared symbols for one size (tf2onnx's bidirectional_dynamic_rnn with a lengths input,
# tests/data/realworld/v1_bidir_dynamic_rnn_lens_input_op17): a state of B rows masked by the
# L lengths.
TWO_SYMBOLS = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T, B, 5] x, int64[L] lengths) => (float[B, 5] h) {
        zero = Constant<value = float {0}>()
        zero_i = Constant<value = int64 {0}>()
        first = Gather<axis = 0>(x, zero_i)
        start = Mul(first, zero)
        h = Scan<num_scan_inputs = 1, body = b (float[B, 5] s, float[B, 5] r) => (float[B, 5] s2) {
            one = Constant<value = int64 {1}>()
            axes = Constant<value = int64[1] {1}>()
            lens = Unsqueeze(lengths, axes)
            keep = Greater(lens, one)
            added = Add(s, r)
            s2 = Where(keep, added, s)
        }>(start, x)
    }
    """
)


def test_tract_cannot_unify_two_declared_symbols_of_one_size() -> None:
    """tract 0.23.9 with the model's declared facts cannot unify a Scan state of B rows with the
    broadcast(B, L) its body returns ('Impossible to unify Sym(B) with Broadcast'): the lowered
    model runs with concrete facts only, so --target tract is exit 1 there (docs/targets/tract.md).
    When a tract unifies them, this fails."""
    require("tract")
    lowered = seqlower.lower(TWO_SYMBOLS, target="tract", check=False)
    feeds = {"x": np.ones((3, 2, 5), np.float32), "lengths": np.array([3, 1], np.int64)}
    assert_same(run("onnxruntime", TWO_SYMBOLS, feeds), run("tract", lowered, feeds))
    with pytest.raises(RuntimeFailure, match="Impossible to unify Sym"):
        run("tract-symbolic", lowered, feeds)


# An int64 Scan state whose body value comes from a Cast to int64 (of a float here; of an int32
# alike): tract 0.23.9 types that Cast's output as a size (TDim).
CAST_STATE_TEXT = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[3] x) => (int64 s) {
        s0 = Constant<value = int64 {0}>()
        s = Scan<num_scan_inputs = 1, body = b (int64 a, float r) => (int64 a2) {
            c = Cast<to = 7>(r)
            a2 = Add(a, c)
        }>(s0, x)
    }
    """


def test_tract_types_a_cast_to_int64_in_a_scan_state_as_a_size() -> None:
    """tract 0.23.9: 'Impossible to unify I64 with TDim', either facts, where onnxruntime runs
    it; the same Cast written as CastLike(r, a) loads and gives the same. When a tract runs
    it, this fails."""
    model = onnx.parser.parse_model(CAST_STATE_TEXT)
    onnx.checker.check_model(model, full_check=True)
    feeds = {"x": np.array([1.5, 2.5, -4.5], np.float32)}
    expected = run("onnxruntime", model, feeds)
    assert expected[0] == -1  # 1 + 2 - 4: truncated toward zero
    for runtime in ("tract", "tract-symbolic"):
        with pytest.raises(RuntimeFailure, match="Impossible to unify I64 with TDim"):
            run(runtime, model, feeds)
    like = onnx.parser.parse_model(CAST_STATE_TEXT.replace("Cast<to = 7>(r)", "CastLike(r, a)"))
    for runtime in ("tract", "tract-symbolic"):
        assert_same(expected, run(runtime, like, feeds))
