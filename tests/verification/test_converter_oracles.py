"""The converter targets' oracles: tinygrad (in CI), onnx2torch and TVM (by hand: their tests
skip when the converter is absent). Each runs a model as its users deploy it, refuses at load
what the converter cannot take, and proves ``--target NAME`` there."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import numpy as np
import onnx
import onnx.helper
import onnx.parser
import pytest
from click.testing import CliRunner

from seqlower.cli.commands import cli
from seqlower.verification import CheckOptions, verify
from seqlower.verification.runtimes import TARGET_ORACLES
from tests.helpers import neg_loop
from tests.runtimes import assert_same, require, run

# What tf2onnx writes for a backward RNN: the sequence-free passes leave nothing, the target
# lowers the ReverseSequence, which no converter here has.
REVERSE = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T, 2, 3] x, int32[2] lengths) => (float[T, 2, 3] y) {
        lens = Cast<to = 7>(lengths)
        y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
    }
    """
)

# A CumSum without its reverse attribute (0 by default): onnx2torch 1.5.15 sums from the end.
CUMSUM = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[4, 3] x) => (float[4, 3] y) {
        axis = Constant<value = int64 {0}>()
        y = CumSum(x, axis)
    }
    """
)

# Ops tinygrad has, an If included; sizes symbolic, so each run's runner sees its own. (Not
# Tanh: tinygrad's differs from onnxruntime's by up to 5e-5 relative near zero, within the
# check's float32 tolerance but not assert_same's.)
BRANCHES = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T, 3] x, bool c) => (float[T, 3] y, int64[2] s) {
        t = Abs(x)
        axis = Constant<value = int64 {0}>()
        summed = CumSum(t, axis)
        y = If(c) <then_branch = a () => (float[T, 3] o) { o = Neg(summed) },
                   else_branch = b () => (float[T, 3] o) { o = Identity(summed) }>
        s = Shape(y)
    }
    """
)


def _label(name: str) -> str:
    return TARGET_ORACLES[name].label()


def _lower(tmp_path: Path, model: onnx.ModelProto, *args: str) -> tuple[int, str, Path]:
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    result = CliRunner().invoke(cli, [str(source), "-o", str(out), *args])
    return result.exit_code, result.output, out


@pytest.mark.parametrize("length", [4, 1])
def test_tinygrad_runs_what_onnxruntime_runs(length: int) -> None:
    require("tinygrad")
    rng = np.random.default_rng(length)
    feeds = {"x": rng.standard_normal((length, 3)).astype(np.float32), "c": np.array(length > 1)}
    assert_same(run("onnxruntime", BRANCHES, feeds), run("tinygrad", BRANCHES, feeds))


def test_target_tinygrad_is_proven_on_tinygrad(tmp_path: Path) -> None:
    require("tinygrad")
    code, output, out = _lower(tmp_path, REVERSE, "--target", "tinygrad")
    assert code == 0, output
    assert f"runs and matches on tinygrad {importlib.metadata.version('tinygrad')}" in output
    assert "ReverseSequence" not in {n.op_type for n in onnx.load(out).graph.node}


def test_tinygrad_refuses_at_load_what_it_lacks() -> None:
    """A Loop (tinygrad 0.14 has none): refused when loaded, named, never run."""
    require("tinygrad")
    model = onnx.parser.parse_model(neg_loop(2, 3))
    report = verify(model, model, CheckOptions(runtimes=("tinygrad",)))
    assert report.status == "mismatch"
    assert f"does not load on {_label('tinygrad')}: tinygrad has no Loop" in report.reason


def test_tinygrad_without_its_compiler_is_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tinygrad's CPU device compiles with clang: without it, exit 2 before any work, naming
    the compiler and --no-check."""
    require("tinygrad")
    monkeypatch.setenv("CC", "seqlower-no-such-compiler")
    code, output, out = _lower(tmp_path, REVERSE, "--target", "tinygrad")
    assert code == 2 and not out.exists()
    assert "seqlower-no-such-compiler" in output and "--no-check" in output


def test_target_onnx2torch_is_proven_on_torch(tmp_path: Path) -> None:
    require("onnx2torch")
    torch = importlib.metadata.version("torch").split("+")[0]
    label = f"onnx2torch {importlib.metadata.version('onnx2torch')} (torch {torch})"
    assert _label("onnx2torch") == label
    code, output, _ = _lower(tmp_path, REVERSE, "--target", "onnx2torch")
    assert code == 0, output
    assert f"runs and matches on {label}" in output


def test_onnx2torch_cumsum_default_is_caught() -> None:
    """onnx2torch 1.5.15 reads a CumSum without ``reverse`` as reversed: against the same model
    with ``reverse=0`` written (which it gets right), the check's oracle sees the wrong numbers
    and blames the candidate; compared with itself, the runtime."""
    require("onnx2torch")
    explicit = onnx.ModelProto()
    explicit.CopyFrom(CUMSUM)
    explicit.graph.node[1].attribute.append(onnx.helper.make_attribute("reverse", 0))
    report = verify(explicit, CUMSUM, CheckOptions(runtimes=("onnx2torch",)))
    assert report.status == "mismatch"
    assert f"differs on {_label('onnx2torch')}" in report.reason
    shared = verify(CUMSUM, CUMSUM, CheckOptions(runtimes=("onnx2torch",)))
    assert shared.status == "equivalent" and _label("onnx2torch") in " ".join(shared.warnings)


def test_onnx2torch_refuses_at_load_what_it_cannot_convert() -> None:
    require("onnx2torch")
    model = onnx.parser.parse_model(neg_loop(2, 3))
    report = verify(model, model, CheckOptions(runtimes=("onnx2torch",)))
    assert report.status == "mismatch"
    assert f"does not load on {_label('onnx2torch')}: Converter is not implemented" in (
        report.reason
    )


def test_tvm_runs_what_onnxruntime_runs() -> None:
    require("tvm")
    rng = np.random.default_rng(0)
    for length in (4, 2):  # one build, symbolic sizes
        feeds = {"x": rng.standard_normal((length, 3)).astype(np.float32)}
        assert_same(run("onnxruntime", CUMSUM_T, feeds), run("tvm", CUMSUM_T, feeds))


CUMSUM_T = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T, 3] x) => (float[T, 3] y, float[T, 3] z) {
        axis = Constant<value = int64 {0}>()
        y = CumSum(x, axis)
        z = Tanh(y)
    }
    """
)


# A scalar input, as PyTorch's atleast_1d exports take: the oracle once fed it as shape [1]
# (np.ascontiguousarray makes a scalar 1-D) and TVM refused the run (``expect Tensor with ndim 0
# but get 1``).
SCALAR_INPUT = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float a, float[3] b) => (float[4] cat) {
        one = Constant<value = int64[1] {1}>()
        a1 = Reshape(a, one)
        cat = Concat<axis = 0>(a1, b)
    }
    """
)


def test_tvm_runs_a_scalar_input() -> None:
    require("tvm")
    feeds = {"a": np.array(2.5, dtype=np.float32), "b": np.arange(3, dtype=np.float32)}
    assert_same(run("onnxruntime", SCALAR_INPUT, feeds), run("tvm", SCALAR_INPUT, feeds))


# A scalar output computed from a shape: TVM's VM returns it as a Python number (the oracle once
# failed on it: 'float' object is not iterable).
SHAPE_SCALAR = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 3] x) => (float n, float[N, 3] y) {
        s = Shape(x)
        zero = Constant<value = int64 {0}>()
        rows = Gather(s, zero)
        n = Cast<to = 1>(rows)
        y = Neg(x)
    }
    """
)


def test_tvm_gives_a_scalar_it_computes_from_shapes_as_declared() -> None:
    feeds = {"x": np.ones((5, 3), dtype=np.float32)}
    got = run("tvm", SHAPE_SCALAR, feeds)
    assert got[0].dtype == np.float32 and got[0].shape == () and got[0] == 5
    assert_same(run("onnxruntime", SHAPE_SCALAR, feeds), got)


def test_target_tvm_is_proven_on_tvm(tmp_path: Path) -> None:
    require("tvm")
    code, output, _ = _lower(tmp_path, CUMSUM_T, "--target", "tvm")
    assert code == 0, output
    assert f"runs and matches on tvm {importlib.metadata.version('apache-tvm')}" in output


def test_onnx2tf_runs_what_onnxruntime_runs() -> None:
    """Names onnx2tf rewrites (``x:0``), a 4-D input it would make NHWC and an int64 output
    TFLite narrows: fed and read by name, in the ONNX layout and types."""
    require("onnx2tf")
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[1, 3, 4, 5] "x:0", int64[N] k)
            => (float[1, 3] "m:0", int64[N] k2, float[1, 3, 4, 5] y) {
            "m:0" = ReduceMean<axes = [2, 3], keepdims = 0>("x:0")
            k2 = Add(k, k)
            y = Relu("x:0")
        }
        """
    )
    rng = np.random.default_rng(0)
    feeds = {"x:0": rng.standard_normal((1, 3, 4, 5)).astype(np.float32), "k": np.arange(3)}
    expected, actual = run("onnxruntime", model, feeds), run("onnx2tf", model, feeds)
    assert [a.dtype for a in actual] == [np.float32, np.int64, np.float32]
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-5, atol=1e-6)
    assert_same(expected[1:], actual[1:])


def test_onnx2tf_runs_an_output_other_nodes_read() -> None:
    """onnx2tf 2.6.9 drops an ``Identity`` to an output whose value other nodes read, and
    LiteRT then fails (``Input tensor 1 lacks data``): the oracle renames such an output where
    it is computed instead (an RNN's last state is one, an unrolled loop's too)."""
    require("onnx2tf")
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[4, 3] x) => (float[4, 3] y, float[4, 3] z) {
            y = Tanh(x)
            z = Neg(y)
        }
        """
    )
    feeds = {"x": np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)}
    expected, actual = run("onnxruntime", model, feeds), run("onnx2tf", model, feeds)
    for want, got in zip(expected, actual, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_target_onnx2tf_is_proven_on_litert(tmp_path: Path) -> None:
    require("onnx2tf")
    litert = importlib.metadata.version("ai-edge-litert")
    label = f"onnx2tf {importlib.metadata.version('onnx2tf')} (ai-edge-litert {litert})"
    assert _label("onnx2tf") == label
    code, output, out = _lower(tmp_path, REVERSE, "--target", "onnx2tf")
    assert code == 0, output
    assert f"runs and matches on {label}" in output
    # Its native ReverseSequence is kept (the target row): what was proven is onnx2tf's kernel.
    assert "ReverseSequence" in {n.op_type for n in onnx.load(out).graph.node}


# A Scan: onnx2tf 2.6.9 writes it as a TFLite custom op (ONNX_SCAN), which LiteRT cannot run.
SCAN = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[3, 2] x) => (float[2] s, float[3, 2] ys) {
        z = Constant<value = float[2] {0, 0}>()
        s, ys = Scan<num_scan_inputs = 1,
                     body = b (float[2] a, float[2] r) => (float[2] a2, float[2] o) {
            a2 = Add(a, r)
            o = Identity(a2)
        }>(z, x)
    }
    """
)


def test_onnx2tf_refuses_at_load_what_litert_cannot_run() -> None:
    """A custom op in the .tflite is a refusal at load, named, never a run's failure."""
    require("onnx2tf")
    report = verify(SCAN, SCAN, CheckOptions(runtimes=("onnx2tf",)))
    assert report.status == "mismatch"
    refused = f"does not load on {_label('onnx2tf')}: onnx2tf wrote custom ops LiteRT cannot run"
    assert f"{refused}: ONNX_SCAN" in report.reason


def test_target_onnx2tf_reports_what_it_cannot_convert(tmp_path: Path) -> None:
    """onnx2tf 2.6.9 converts no Mod with fmod=1: exit 1 naming it, nothing written."""
    require("onnx2tf")
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[4] x) => (float[4] y) {
            d = Constant<value = float[4] {2.0, 2.0, 2.0, 2.0}>()
            y = Mod<fmod = 1>(x, d)
        }
        """
    )
    code, output, out = _lower(tmp_path, model, "--target", "onnx2tf")
    assert code == 1 and not out.exists(), output
    assert f"does not load on {_label('onnx2tf')}" in output and "fmod=1" in output


def test_onnx2tf_on_an_older_python_is_exit_2_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """onnx2tf 2.x needs Python 3.12, where ``seqlower[onnx2tf]`` installs nothing: the error
    says so rather than naming the extra (runs on every Python: the floor is raised)."""
    monkeypatch.setattr(TARGET_ORACLES["onnx2tf"], "python", (99, 0))
    code, output, out = _lower(tmp_path, REVERSE, "--target", "onnx2tf")
    assert code == 2 and not out.exists(), output
    assert "onnx2tf needs Python >= 99.0" in output and "--no-check" in output
