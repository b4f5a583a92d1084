"""The right culprit: when the lowered model fails on a target or against the framework's
outputs, the original runs the same way, and a failure it shares (the export's, a runtime's) is
a warning with exit 0, OUT written; whatever the lowered model does worse is exit 1."""

from __future__ import annotations

import json
import shlex
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.parser
import pytest

import seqlower
from seqlower.verification import CheckOptions, VerifyReport, runtimes, verify
from seqlower.verification.report import verdict_lines
from seqlower.verification.runtimes import Oracle, Runner
from tests.helpers import CliResult, neg_loop, run_cli
from tests.loop_cases import bidirectional_rnn
from tests.runtimes import require

# What the default pipeline lowers (ReverseSequence), one output.
REVERSE = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[4, 2] x, int64[2] lens) => (float[4, 2] y) {
        y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
    }
    """
)
X = np.arange(8, dtype=np.float32).reshape(4, 2)
LENS = np.array([4, 2], dtype=np.int64)


def _reversed() -> np.ndarray:
    y = X.copy()
    y[:4, 0] = X[:4, 0][::-1]
    y[:2, 1] = X[:2, 1][::-1]
    return y


def _export_case(tmp_path: Path, miss: float) -> tuple[Path, Path]:
    """The model and an .npz of its inputs and "framework outputs", which the model itself
    misses by ``miss`` on one element (an exporter's bug, as tf2onnx's masked RNNs)."""
    model, data = tmp_path / "m.onnx", tmp_path / "framework.npz"
    onnx.save(REVERSE, model)
    y = _reversed()
    y[1, 0] += np.float32(miss)
    np.savez(data, **{"input.x": X, "input.lens": LENS, "output.y": y})
    return model, data


def _repro_line(result: CliResult) -> list[str]:
    lines = result.stderr.splitlines()
    return shlex.split(lines[next(i for i, x in enumerate(lines) if "reproduce with:" in x) + 1])


# ---------------------------------------------------------------- the export


def test_an_export_that_misses_the_framework_is_not_the_lowerings_fault(tmp_path: Path) -> None:
    model, data = _export_case(tmp_path, 0.34)
    out, report = tmp_path / "out.onnx", tmp_path / "r.json"
    result = run_cli(model, "-o", out, "--expected", data, "--report", report)
    assert result.exit_code == 0, result.output
    assert out.exists()
    assert (
        "warning: the original export already differs from the framework's outputs: output 'y' "
        "max abs 0.34 (the lowered model: the same); not the lowering's fault"
    ) in result.stderr
    assert "does NOT match" not in result.output
    assert not (tmp_path / "out.onnx.failing-inputs").exists()
    check = VerifyReport.from_dict(json.loads(report.read_text())["verification"])
    assert check.ok and check.warnings
    [run] = check.expected_runs
    assert run.culprit == "export" and not run.ok
    assert [o.max_abs for o in run.original] == pytest.approx([0.34])


def test_verify_a_model_against_itself_blames_the_export(tmp_path: Path) -> None:
    model, data = _export_case(tmp_path, 0.34)
    result = run_cli("verify", model, model, "--expected", data)
    assert result.exit_code == 0, result.output
    assert "the lowered model does NOT match" not in result.output
    assert "the original export already differs from the framework's outputs" in result.stderr


def test_a_lowered_model_worse_than_the_export_is_the_lowerings_fault(tmp_path: Path) -> None:
    """B is A with its output edited: B misses the framework where A matches it (exit 1), and
    where A misses it too, B misses it by more (exit 1 still)."""
    model, data = _export_case(tmp_path, 0.0)
    edited = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[4, 2] x, int64[2] lens) => (float[4, 2] y) {
            r = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
            half = Constant<value = float {0.5}>()
            y = Add(r, half)
        }
        """
    )
    candidate = tmp_path / "b.onnx"
    onnx.save(edited, candidate)
    result = run_cli("verify", model, candidate, "--expected", data)
    assert result.exit_code == 1, result.output
    assert (
        "the lowered model does NOT match the framework's outputs: output 'y' max abs 0.5; "
        "the original matches them"
    ) in result.stderr
    model, data = _export_case(tmp_path, 0.34)
    result = run_cli("verify", model, candidate, "--expected", data)
    assert result.exit_code == 1, result.output
    assert "the original: max abs 0.34" in result.stderr


def test_the_reproduce_line_repeats_expected(tmp_path: Path) -> None:
    """Saved beside the failing inputs: the framework's outputs for them; the printed line
    reads both and fails the same way (before, it left --expected out and exited 0)."""
    model, data = _export_case(tmp_path, 0.0)
    edited = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[4, 2] x, int64[2] lens) => (float[4, 2] y) {
            r = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
            y = Mul(r, r)
        }
        """
    )
    candidate = tmp_path / "b.onnx"
    onnx.save(edited, candidate)
    folder = str(tmp_path / "failing")
    first = run_cli(
        "verify",
        model,
        candidate,
        "--expected",
        data,
        "--atol",
        "1e-3",
        "--save-failing-inputs",
        folder,
    )
    assert first.exit_code == 1, first.output
    repro = _repro_line(first)
    assert repro[repro.index("--inputs") + 1] == folder
    assert f"--expected={folder}" in repro and "--atol=0.001" in repro
    again = run_cli(*repro[1:])
    assert again.exit_code == 1, again.output
    verdict = next(line for line in first.stderr.splitlines() if "MISMATCH" in line)
    assert verdict in again.stderr


# ---------------------------------------------------------------- a runtime


def test_openvino_gets_zero_trip_loops_wrong_for_the_original_too(tmp_path: Path) -> None:
    """ONNX's test_loop11: the check's third run stops the Loop at once (cond false). OpenVINO
    2026.4.1 gives the scan output a stale shape ([1, 1] after a one-trip run; [0, 0] fresh;
    onnxruntime's is [0, 1]) whichever model it runs: the runtime's fault, named, and still exit 1
    (OUT is wrong on OpenVINO, whoever is to blame): OUT written only with --keep-on-failure."""
    require("openvino")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases

        case = next(c for c in collect_testcases(None) if c.name == "test_loop11")
    model, out, report = tmp_path / "loop11.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    onnx.save(case.model, model)
    result = run_cli(model, "-o", out, "--target", "openvino")
    assert result.exit_code == 1, result.output
    assert not out.exists()
    label = runtimes.TARGET_ORACLES["openvino"].label()
    assert (
        f"check: MISMATCH: {label} computes this model wrongly, the original too, in run 3: "
        "output 'res_scan' shape "
    ) in result.stderr
    assert "not the lowering's fault" in result.stderr
    result = run_cli(
        model, "-o", out, "--target", "openvino", "--report", report, "--keep-on-failure"
    )
    assert result.exit_code == 1, result.output
    assert out.exists()
    check = VerifyReport.from_dict(json.loads(report.read_text())["verification"])
    assert check.status == "mismatch" and check.culprit == "runtime"
    failed = [r for r in check.target_runs[label] if not r.ok]
    assert failed and all(r.culprit == "runtime" and r.original for r in failed)
    # Its own inputs (a real trip count) run and match there.
    data = tmp_path / "data" / "test_data_set_0"
    inputs, outputs = case.data_sets[0]
    data.mkdir(parents=True)
    for kind, values, infos in (
        ("input", inputs, case.model.graph.input),
        ("output", outputs, case.model.graph.output),
    ):
        for k, (value, info) in enumerate(zip(values, infos, strict=True)):
            tensor = onnx.numpy_helper.from_array(np.asarray(value), info.name)
            (data / f"{kind}_{k}.pb").write_bytes(tensor.SerializeToString())
    result = run_cli(model, "-o", out, "--target", "openvino", "--expected", data.parent)
    assert result.exit_code == 0, result.output
    assert f"runs and matches on {label}" in result.output
    assert "warning" not in result.stderr


def test_a_runtime_that_cannot_load_the_model_is_said_apart(tmp_path: Path) -> None:
    """tract 0.23.9 has no Loop: neither model loads (exit 1); the candidate is the reference
    itself, so tract, not a lowering, is named (issue 43); no inputs ran, so none are saved and
    no reproduce line is printed."""
    require("tract")
    loop = onnx.parser.parse_model(neg_loop(2, 3))
    paths = [tmp_path / "a.onnx", tmp_path / "b.onnx"]
    for path in paths:
        onnx.save(loop, path)
    result = run_cli("verify", *paths, "--target", "tract")
    assert result.exit_code == 1, result.output
    label = runtimes.TARGET_ORACLES["tract"].label()
    assert f"check: MISMATCH: does not load on {label}: " in result.stderr
    assert "Loop" in result.stderr
    assert f"the candidate is the reference itself: {label} cannot run this model" in (
        result.stderr
    )
    assert "did not reach the target" not in result.stderr
    assert result.stderr.count("MISMATCH") == 1
    assert "failing inputs" not in result.stderr and "reproduce" not in result.stderr
    assert not (tmp_path / "b.onnx.failing-inputs").exists()


# ---------------------------------------------------------------- a fake target


class _Skewed(Oracle):
    """A fake target: onnxruntime, refusing what ``refuses`` says (a load failure, saying
    ``refusal(model)``), adding ``skew(model)`` to float outputs, failing runs ``fails(model)``
    says."""

    name = "skewed"
    package = "numpy"  # installed: load_target accepts it

    def __init__(
        self,
        skew: Any = lambda model: 0.0,
        refuses: Any = lambda model: False,
        fails: Any = lambda model: False,
        refusal: Any = lambda model: "Unimplemented(SequenceMap)",
    ) -> None:
        self.skew, self.refuses, self.fails, self.refusal = skew, refuses, fails, refusal

    def load(self, model: onnx.ModelProto) -> Runner:
        if self.refuses(model):
            raise RuntimeError(self.refusal(model))
        inner = runtimes.OnnxRuntime().load(model)
        skew, fails = self.skew(model), self.fails(model)

        def run(feeds: Mapping[str, Any]) -> list[Any]:
            if fails:
                raise RuntimeError("kernel failed")
            outputs = inner.run(feeds)
            return [o + np.float32(skew) if o.dtype.kind == "f" else o for o in outputs]

        return Runner(self.name, run)


def _lowered(model: onnx.ModelProto) -> bool:
    return not any(n.op_type in ("ReverseSequence", "SequenceMap") for n in model.graph.node)


def _check(monkeypatch: pytest.MonkeyPatch, target: _Skewed) -> VerifyReport:
    monkeypatch.setitem(runtimes.TARGET_ORACLES, "skewed", target)
    report = verify(REVERSE, seqlower.lower(REVERSE), CheckOptions(runtimes=("skewed",)))
    again = VerifyReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert again.target_runs == report.target_runs and again.warnings == report.warnings
    return report


@pytest.mark.parametrize(
    ("target", "status", "culprit", "words"),
    [
        # Only the lowered model is off there: the lowering's.
        (
            _Skewed(skew=lambda m: 0.5 if _lowered(m) else 0.0),
            "mismatch",
            "lowering",
            "differs on {t} in run 1: output 'y' max abs 0.5; the original matches there",
        ),
        # Both are off by as much: the runtime's.
        (
            _Skewed(skew=lambda m: 0.5),
            "mismatch",
            "runtime",
            "{t} computes this model wrongly, the original too, in run 1: output 'y' max abs "
            "0.5 (the lowered model: the same); not the lowering's fault",
        ),
        # The lowered model is off by more: the lowering's.
        (
            _Skewed(skew=lambda m: 0.5 if _lowered(m) else 0.25),
            "mismatch",
            "lowering",
            "the original: max abs 0.25",
        ),
        # The original does not load there: the lowering did not reach the target.
        (
            _Skewed(skew=lambda m: 0.5, refuses=lambda m: not _lowered(m)),
            "mismatch",
            "lowering",
            "the original does not load there either: the lowering did not reach the target",
        ),
        # The original stops with an error where the lowered model runs wrong: worse.
        (
            _Skewed(skew=lambda m: 0.5, fails=lambda m: not _lowered(m)),
            "mismatch",
            "lowering",
            "the original fails there instead: kernel failed",
        ),
        # Both fail to run: the runtime's.
        (
            _Skewed(fails=lambda m: True),
            "mismatch",
            "runtime",
            "{t} fails on the original too in run 1: kernel failed (the lowered model: "
            "kernel failed); not the lowering's fault",
        ),
        # The lowered model fails to run where the original runs and matches.
        (
            _Skewed(fails=lambda m: _lowered(m)),
            "mismatch",
            "lowering",
            "fails on {t} in run 1: kernel failed; the original loads and runs there and matches",
        ),
    ],
)
def test_whose_fault_a_target_failure_is(
    monkeypatch: pytest.MonkeyPatch, target: _Skewed, status: str, culprit: str, words: str
) -> None:
    report = _check(monkeypatch, target)
    assert report.status == status, report.reason
    label = target.label()
    runs = report.target_runs[label]
    assert runs and all(r.culprit == culprit for r in runs)
    line = report.targets[label]
    assert words.format(t=label) in line, line
    # Never ok when the lowered model fails on the target, whoever is to blame: named.
    assert line in report.reason and not report.warnings
    assert report.culprit == culprit
    assert report.failing_inputs is not None


def test_a_lowered_model_the_target_refuses_is_the_lowerings_fault(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The original is refused too, but for another reason: the lowering did not reach it."""
    refusal = "Unimplemented(ReverseSequence)"
    target = _Skewed(
        refuses=lambda m: True,
        refusal=lambda m: "Unimplemented(SequenceMap)" if _lowered(m) else refusal,
    )
    report = _check(monkeypatch, target)
    assert report.status == "mismatch" and report.culprit == "lowering"
    assert report.reason == (
        f"the lowered model does not load on {_Skewed().label()}: "
        "Unimplemented(SequenceMap); the original does not load there either: the lowering did "
        "not reach the target"
    )
    assert report.failing_inputs is None


def test_a_target_refusing_both_models_the_same_way_is_the_runtimes_fault(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same refusal for both: the target refuses what the lowering left as it was (issue
    42: OpenVINO and onnxruntime's contrib op Inverse), still a failed --target check."""
    report = _check(monkeypatch, _Skewed(refuses=lambda m: True))
    assert report.status == "mismatch" and report.culprit == "runtime"
    label = _Skewed().label()
    assert report.reason == (
        f"the lowered model does not load on {label}: Unimplemented(SequenceMap); the original "
        f"does not load there either, with the same error: {label} cannot run what the "
        "lowering left as it was; not the lowering's fault"
    )


class _Stale(_Skewed):
    """A fake target whose every run but a loaded model's first is off by 0.5, whichever the
    model: its results depend on the runs before (OpenVINO 2026.4.1 gives a zero-trip Loop's
    scan output the previous run's rows)."""

    def load(self, model: onnx.ModelProto) -> Runner:
        inner = runtimes.OnnxRuntime().load(model)
        runs: list[Mapping[str, Any]] = []

        def run(feeds: Mapping[str, Any]) -> list[Any]:
            runs.append(feeds)
            skew = np.float32(0.5 if len(runs) > 1 else 0.0)
            return [o + skew if o.dtype.kind == "f" else o for o in inner.run(feeds)]

        return Runner(self.name, run)


def test_a_target_whose_results_depend_on_the_runs_before_is_the_runtimes_fault(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The original, loaded only when the lowered model fails (run 2), matched on its first
    run: the lowering was blamed. Loaded afresh, the lowered model matches too."""
    report = _check(monkeypatch, _Stale())
    assert report.status == "mismatch" and report.culprit == "runtime", report.reason
    label = _Stale().label()
    line = report.targets[label]
    assert line.startswith(f"differs on {label} in run 2: output 'y' max abs 0.5"), line
    assert (
        f"loaded afresh, the lowered model matches there on these inputs: {label}'s results "
        "depend on the runs before; not the lowering's fault"
    ) in line
    assert line in report.reason
    failed = [r for r in report.target_runs[label] if not r.ok]
    assert failed[0].afresh and all(r.culprit == "runtime" for r in failed)


class _Counted(_Skewed):
    """``_Skewed``, counting the loads of the lowered model."""

    loads = 0

    def load(self, model: onnx.ModelProto) -> Runner:
        if _lowered(model):
            type(self).loads += 1
        return super().load(model)


def test_a_lowered_model_wrong_afresh_too_is_loaded_afresh_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Wrong in every run, loaded afresh as well: the lowering's from its first run, so it is
    not loaded (for a converter, compiled) once more per run."""
    target = _Counted(skew=lambda m: 0.5 if _lowered(m) else 0.0)
    report = _check(monkeypatch, target)
    assert report.culprit == "lowering"
    failed = [r for r in report.target_runs[target.label()] if not r.ok]
    assert len(failed) >= 2 and not any(r.afresh for r in failed)
    assert _Counted.loads == 2  # the check's load, and one afresh


def test_openvino_s_stale_zero_trip_rows_are_not_the_lowerings_fault() -> None:
    """tf2onnx's bidirectional dynamic_rnn (its Loops kept for OpenVINO): the check's run 4
    stops the Loop at once, and OpenVINO 2026.4.1 gives its scan output run 3's row, the
    original too after the same runs; it was blamed on the lowering ('the original matches
    there': loaded for run 4 alone)."""
    require("openvino")
    model = bidirectional_rnn()[0]
    lowered = seqlower.lower(model, target="openvino", check=False)
    report = verify(model, lowered, runtimes=("openvino",), seed=1, n=6)
    assert report.status == "mismatch" and report.culprit == "runtime", report.reason
    line = report.reason
    assert "in run 4: output 'y' shape [1, 2, 6], expected [0, 2, 6]" in line, line
    assert "results depend on the runs before; not the lowering's fault" in line


def test_the_table_shows_the_failing_runtimes_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    report = _check(monkeypatch, _Skewed(skew=lambda m: 0.5 if _lowered(m) else 0.0))
    text = "\n".join(verdict_lines(report))  # what the command line prints without -v
    assert text.count("MISMATCH") == 1
    label = _Skewed().label()
    header = next(line for line in text.splitlines() if line.strip().startswith(f"on {label}"))
    assert "original max abs" in header
    row = text.splitlines()[text.splitlines().index(header) + 1].split()
    assert row[0] == "y" and float(row[1]) == pytest.approx(0.5) and float(row[-1]) == 0
    # The original against the lowered model on onnxruntime matched: no table of zeros.
    assert not any(line.strip().startswith("output ") for line in text.splitlines())


def test_the_reproduce_line_remakes_the_lowering_and_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure on a target: the printed line repeats the lowering flags (--unroll-input: the
    saved inputs fit only the unrolled interface), the target, the tolerances and the shapes,
    and fails the same way."""
    require("tract")
    # The tract row's pipeline, proven on a fake runtime that refuses SequenceMap and skews
    # whatever it runs: the lowering did not reach it.
    monkeypatch.setitem(
        runtimes.TARGET_ORACLES,
        "tract",
        _Skewed(skew=lambda m: 0.5, refuses=lambda m: not _lowered(m)),
    )
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 18]>
        g (seq(float[N, 2]) s) => (float[?] y) {
            sums = SequenceMap (s) <body: graph = b (float[N, 2] x) => (float d) {
                d = ReduceSum<keepdims = 0> (x)
            }>
            y = ConcatFromSequence <axis = 0, new_axis = 1> (sums)
        }
        """
    )
    source, out = tmp_path / "sums.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    args = [source, "-o", out, "--target", "tract", "--unroll-input", "s=2", "--rtol", "y:1e-3"]
    first = run_cli(*args, "--dim", "N=4")
    assert first.exit_code == 1, first.output
    repro = _repro_line(first)
    for flag in ("--unroll-input=s=2", "--target=tract", "--rtol=y:0.001", "--dim=N=4"):
        assert flag in repro, repro
    again = run_cli(*repro[1:])
    assert again.exit_code == 1, again.output
    verdict = next(line for line in first.stderr.splitlines() if "MISMATCH" in line)
    assert verdict in again.stderr


def test_the_reproduce_line_of_lower_repeats_expected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`seqlower MODEL -o OUT --expected X`: the framework's outputs for the failing inputs are
    saved beside them, the line reads both, and fails the same way."""
    require("tract")
    monkeypatch.setitem(
        runtimes.TARGET_ORACLES,
        "tract",
        _Skewed(skew=lambda m: 0.5, refuses=lambda m: not _lowered(m)),
    )
    model, data = _export_case(tmp_path, 0.0)
    out = tmp_path / "out.onnx"
    first = run_cli(model, "-o", out, "--target", "tract", "--expected", data)
    assert first.exit_code == 1, first.output
    repro = _repro_line(first)
    folder = tmp_path / "out.onnx.failing-inputs"
    assert f"--expected={folder}" in repro
    assert sorted(p.name for p in (folder / "test_data_set_0").iterdir()) == [
        "input_0.pb",
        "input_1.pb",
        "output_0.pb",
    ]
    again = run_cli(*repro[1:])
    assert again.exit_code == 1, again.output
    assert "check: matches the framework's outputs: max abs 0" in again.output
    verdict = next(line for line in first.stderr.splitlines() if "MISMATCH" in line)
    assert verdict in again.stderr


# A Loop over the rows of x whose body declares no size for its scan output (as tf2onnx writes
# bodies): after zero iterations onnxruntime makes that size 0, a Scan gives the rows' own.
ROWS_UNSIZED = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, D] x) => (float[M, K] ys) {
    t = Constant<value = bool {1}>()
    rows = Shape<start = 0, end = 1>(x)
    axis = Constant<value = int64[1] {0}>()
    n = Squeeze(rows, axis)
    ys = Loop(n, t) <body = b (int64 i, bool c) => (bool c_out, float[K1] y) {
        c_out = Identity(c)
        row = Gather(x, i)
        y = Neg(row)
    }>
}
"""


def test_a_zero_trip_loops_unsized_axes_are_not_compared() -> None:
    """ONNX leaves a zero-trip Loop's scan output sizes open past axis 0 where the body
    declares none: onnxruntime's [0, 0] and the Scan's [0, 3] are both right (before, the check
    blamed the lowering). A declared size, and every non-empty output, is still compared."""
    require("tract")
    model = onnx.parser.parse_model(ROWS_UNSIZED)
    lowered = seqlower.lower(model, target="tract", check=False)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    runs = [{"x": x[:k]} for k in (0, 2)]
    report = verify(model, lowered, CheckOptions(inputs=runs, runtimes=("tract",)))
    assert report.status == "equivalent", report.reason
    shapes = [r.outputs[0].reference_shape for r in report.runs]
    assert shapes == [[0, 0], [2, 3]] and report.runs[0].outputs[0].candidate_shape == [0, 3]
    declared = onnx.parser.parse_model(ROWS_UNSIZED.replace("float[K1] y", "float[3] y"))
    assert seqlower.verification.check.unspecified_empty_axes(declared) == {}
    assert seqlower.verification.check.unspecified_empty_axes(model) == {"ys": frozenset({1})}


def test_unspecified_axes_forgive_only_empty_shapes_there() -> None:
    from seqlower.verification.compare import compare_values

    empty = np.zeros((0, 0), np.float32)
    assert compare_values("y", empty, np.zeros((0, 3), np.float32), unspecified=frozenset({1})).ok
    assert not compare_values("y", empty, np.zeros((0, 3), np.float32)).ok
    assert not compare_values(
        "y", empty, np.zeros((0, 3, 1), np.float32), None, None, frozenset({1, 2})
    ).ok
    assert not compare_values(
        "y", np.zeros((1, 0)), np.zeros((0, 0)), None, None, frozenset({1})
    ).ok
    assert not compare_values(
        "y", np.zeros((2, 0), np.float32), np.zeros((2, 3), np.float32), None, None, frozenset({1})
    ).ok
    assert not compare_values(
        "y", empty, np.zeros((0, 3), np.float64), None, None, frozenset({1})
    ).ok


# What tract 0.23.9 loads with concrete input facts only (its int16 Cast of a size forgets it: an
# Expand to it has no rank with declared facts), and a ReduceMean over a maybe-empty axis that
# --target tract lowers (empty-means-as-zero): the lowered model is not the original.
CONCRETE_ONLY = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, T, 4] x) => (float[N] zeros, float m) {
        shape = Shape(x)
        narrow = Cast<to = 5>(shape)
        first = Constant<value = int64[1] {0}>()
        one = Constant<value = int64[1] {1}>()
        rows = Slice(narrow, first, one, first)
        five = Constant<value = int16[1] {5}>()
        packed = Concat<axis = 0>(rows, five)
        size = Cast<to = 7>(packed)
        zero = Constant<value = float {0}>()
        full = Expand(zero, size)
        zeros = ReduceMean<axes = [1], keepdims = 0>(full)
        means = ReduceMean<axes = [1], keepdims = 0>(x)
        m = ReduceSum<keepdims = 0>(means)
    }
    """
)


def test_tract_proves_both_ways_a_user_may_load_it(tmp_path: Path) -> None:
    """--target tract runs the lowered model with input facts set from the inputs and with its
    declared facts (issue 44): one that runs only the first way is never exit 0. Here the
    original fails with declared facts the very same way: tract's fault, named so, and the
    message says it runs with concrete facts, and the flags that help."""
    require("tract")
    model, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(CONCRETE_ONLY, model)
    result = run_cli(model, "-o", out, "--target", "tract")
    assert result.exit_code == 1, result.output
    symbolic = runtimes.TARGET_ORACLES["tract-symbolic"].label()
    concrete = runtimes.TARGET_ORACLES["tract"].label()
    assert f"does not load on {symbolic}: " in result.stderr
    assert "shape input is variable" in result.stderr
    assert f"the original does not load there either, with the same error: {symbolic}" in (
        result.stderr
    )
    assert f"it runs and matches on {concrete} with input facts set from the inputs" in (
        result.stderr
    )
    assert "--overwrite-input-shape" in result.stderr and "--keep-on-failure" in result.stderr
    assert not out.exists()
    kept = run_cli(model, "-o", out, "--target", "tract", "--keep-on-failure")
    assert kept.exit_code == 1 and out.exists()


# tf2onnx's tf.cond whose branches give x[:2] or x[1:] (rows of different counts, tf_cond_shapes
# of benchmarks/families/new_shapes.py), on a max that may be of no element.
ROWS_BRANCH = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T, 4] x) => (float[N, 4] y) {
        m = ReduceMax<keepdims = 0>(x)
        zero = Constant<value = float {0}>()
        c = Greater(m, zero)
        y = If(c) <then_branch = t () => (float[P, 4] a) {
            s = Constant<value = int64[1] {0}>()
            e = Constant<value = int64[1] {2}>()
            a = Slice(x, s, e)
        }, else_branch = f () => (float[Q, 4] b) {
            s1 = Constant<value = int64[1] {1}>()
            e1 = Constant<value = int64[1] {1000}>()
            b = Slice(x, s1, e1)
        }>
    }
    """
)


def test_tract_refusing_the_branch_the_lowering_left_is_not_its_fault() -> None:
    """tract 0.23.9 types no If whose branches give different row counts, in the original as in
    the lowered model, where the nodes the lowering adds before it (the empty max's -inf) move
    it to another index ('Failed analyse for node #13 "y" If', #3 in the original). The same
    refusal but for that index is tract's (before: 'the lowering did not reach the target')."""
    require("tract")
    feeds = {"x": np.arange(28, dtype=np.float32).reshape(7, 4)}
    with pytest.raises(seqlower.SeqlowerError) as raised:
        seqlower.lower(ROWS_BRANCH, target="tract", check=CheckOptions(inputs=[feeds]))
    text = str(raised.value)
    assert "not the lowering's fault" in text and "did not reach" not in text, text
