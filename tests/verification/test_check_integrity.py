"""The check never passes what the runtime cannot run: both models run in the oracle that
loads the reference, and the candidate must pass ONNX's strict shape inference."""

from __future__ import annotations

from pathlib import Path

import onnx
from click.testing import CliRunner

from seqlower.cli.commands import cli
from seqlower.verification import CheckOptions, verify
from seqlower.verification.runtimes import ORACLES, OnnxRuntime, Runner

REFERENCE = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N] a, float[M] b) => (float[K] y) {
        y = Concat<axis = 0>(a, b)
    }
    """
)

# The same, behind a rank test whose untaken branch holds a Concat onnxruntime refuses at load
# (its axis is out of range for rank-1 inputs); onnx.reference runs it, never taking it.
DEAD_BRANCH = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N] a, float[M] b) => (float[K] y) {
        s = Shape(a)
        r = Size(s)
        one = Constant<value = int64 {1}>()
        c = Equal(r, one)
        y = If(c) <
            then_branch = g1 () => (float[K] t) { t = Concat<axis = 0>(a, b) },
            else_branch = g2 () => (float[K] e) { e = Concat<axis = 1>(a, b) }
        >
    }
    """
)


def _save(tmp_path: Path, **models: onnx.ModelProto) -> list[str]:
    paths = []
    for name, model in models.items():
        path = tmp_path / f"{name}.onnx"
        onnx.save(model, path)
        paths.append(str(path))
    return paths


def test_candidate_onnxruntime_refuses_fails_the_check(tmp_path: Path) -> None:
    reference, candidate = _save(tmp_path, ref=REFERENCE, cand=DEAD_BRANCH)
    result = CliRunner().invoke(cli, ["verify", reference, candidate])
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("check: MISMATCH: the lowered model does not load in onnxruntime ")
    assert "axis must be in [-rank, rank-1]" in lines[0]


def test_candidate_refused_is_not_run_elsewhere() -> None:
    report = verify(REFERENCE, DEAD_BRANCH)
    assert report.status == "mismatch" and report.runs == []
    import onnxruntime

    assert f"does not load in onnxruntime {onnxruntime.__version__}: " in report.reason


class _RefusesNeg(OnnxRuntime):
    """onnxruntime that refuses any model with a Neg (a runtime lacking one op)."""

    def load(self, model: onnx.ModelProto) -> Runner:
        if any(n.op_type == "Neg" for n in model.graph.node):
            raise RuntimeError("no kernel for Neg")
        return super().load(model)


def test_candidate_refused_by_a_later_oracle_when_the_first_cannot_load_the_reference() -> None:
    """Another oracle only when the reference cannot load; then both run there."""
    neg = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[3] x) => (float[3] y) { y = Neg(x) }
        """
    )
    same = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[3] x) => (float[3] y) {
            m = Constant<value = float {-1.0}>()
            y = Mul(x, m)
        }
        """
    )
    oracles = (_RefusesNeg(), *ORACLES[1:])
    # The reference (Neg) falls back to the next oracle; the candidate runs there too.
    report = verify(neg, same, CheckOptions(oracles=oracles))
    assert report.ok, report.reason
    assert report.oracles["reference"] == report.oracles["candidate"]
    # The reference loads in the first oracle, the candidate does not: a failed check.
    report = verify(same, neg, CheckOptions(oracles=oracles))
    assert report.status == "mismatch"
    assert report.reason == "the lowered model does not load in onnxruntime " + (
        f"{__import__('onnxruntime').__version__}: no kernel for Neg"
    )


def test_candidate_failing_strict_shape_inference_fails_the_check(tmp_path: Path) -> None:
    """onnxruntime merges a subgraph output's declared shape leniently (a warning); ONNX's
    strict inference through every subgraph refuses it, as a stricter runtime would."""
    reference = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 3] x) => (float[6] y) {
            s = Constant<value = int64[1] {6}>()
            y = Reshape(x, s)
        }
        """
    )
    candidate = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 3] x) => (float[6] y) {
            s = Constant<value = int64[1] {6}>()
            r = Reshape(x, s)
            c = Constant<value = bool {1}>()
            y = If(c) <
                then_branch = g1 () => (float[6] o) { o = Identity(r) },
                else_branch = g2 () => (float[5] o2) { o2 = Identity(r) }
            >
        }
        """
    )
    report = verify(reference, candidate)
    assert report.status == "mismatch" and report.runs == []
    assert report.reason.startswith("the lowered model fails ONNX's strict shape inference: ")
    assert "(op_type:Identity)" in report.reason and "differ" in report.reason
    paths = _save(tmp_path, ref=reference, cand=candidate)
    result = CliRunner().invoke(cli, ["verify", *paths, "-q"])
    assert result.exit_code == 1
    assert len(result.stderr.strip().splitlines()) == 1
    # Models that both fail it (the exporter's own) are still compared.
    assert verify(candidate, candidate).ok


class _ReadsUpToIr8(OnnxRuntime):
    """An onnxruntime that reads IR versions up to 8 only."""

    def load(self, model: onnx.ModelProto) -> Runner:
        if model.ir_version > 8:
            raise RuntimeError(f"Unsupported model IR version: {model.ir_version}, max supported 8")
        return super().load(model)


def test_a_newer_ir_stamp_alone_is_not_a_refusal() -> None:
    """--ir-version is the user's choice (warned about when onnxruntime cannot read it): the
    candidate then runs in the same oracle at the reference's IR version."""
    candidate = onnx.ModelProto.FromString(REFERENCE.SerializeToString())
    candidate.ir_version = 9
    report = verify(REFERENCE, candidate, CheckOptions(oracles=(_ReadsUpToIr8(),)))
    assert report.ok, report.reason
    assert report.oracles["candidate"] == "onnxruntime (re-stamped to IR version 8)"
    # A real refusal stays one, whatever the stamp.
    dead = onnx.ModelProto.FromString(DEAD_BRANCH.SerializeToString())
    dead.ir_version = 9
    report = verify(REFERENCE, dead, CheckOptions(oracles=(_ReadsUpToIr8(),)))
    assert report.status == "mismatch" and "does not load in onnxruntime" in report.reason
    assert "axis must be in [-rank, rank-1]" in report.reason
