"""seqlower.verify: catches wrong candidates, verifies any model, and says what it could not do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper as h

import seqlower
import seqlower.io
from seqlower import passes as seqlower_passes
from seqlower.cli.commands import cli
from seqlower.verification import VerifyReport, compare_values, verify
from seqlower.verification.input_files import load_inputs, save_inputs
from seqlower.verification.inputs import generate_inputs
from tests.helpers import parse
from tests.sequence_map_cases import CASES


def opaque_model() -> onnx.ModelProto:
    """y = vendor.Opaque(x): no runtime here can run it."""
    return onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17, "vendor" : 1]>
        test (float[3] x) => (float[3] y) { y = vendor.Opaque (x) }
        """
    )


def copy(model: onnx.ModelProto) -> onnx.ModelProto:
    return onnx.ModelProto.FromString(model.SerializeToString())


def loop_body_nodes(model: onnx.ModelProto) -> Any:
    loop = next(n for n in model.graph.node if n.op_type == "Loop")
    return loop.attribute[0].g.node


# ---------------------------------------------------------------- wrong candidates are caught


def test_equivalent_lowering_verifies() -> None:
    model, _ = CASES["multi_io"]()
    report = verify(model, seqlower.lower(model))
    assert report.ok and report.status == "equivalent"
    assert report.oracles == {"reference": "onnxruntime", "candidate": "onnxruntime"}
    assert len(report.runs) == 4  # 3 generated runs and one with empty sequences
    assert report.runs[-1].inputs["s1"] == []


def test_wrong_op_is_caught() -> None:
    model, _ = CASES["multi_io"]()
    bad = seqlower.lower(model)
    next(n for n in loop_body_nodes(bad) if n.op_type == "Add").op_type = "Sub"
    report = verify(model, bad)
    assert not report.ok and report.status == "mismatch"
    first = report.runs[0]
    assert [o.ok for o in first.outputs] == [False, True, True]
    assert first.outputs[0].max_abs > 0 and first.outputs[0].mismatches > 0
    assert report.failing_inputs is not None


def test_wrong_order_of_sequence_elements_is_caught() -> None:
    model, _ = CASES["output_is_body_input"]()
    bad = seqlower.lower(model)
    for node in loop_body_nodes(bad):
        if node.op_type == "SequenceInsert":  # insert at the front: the order reverses
            node.input.append("front")
    front = h.make_node("Constant", [], ["front"], value=h.make_tensor("f", T.INT64, [], [0]))
    loop_body_nodes(bad).insert(0, front)
    report = verify(model, bad, seq_len=3)
    assert report.status == "mismatch"
    assert any("element" in o.message for run in report.runs for o in run.outputs if not o.ok)


def test_wrong_dtype_is_caught() -> None:
    model = parse(
        """
        test (seq(float[]) s) => (seq(float[]) out) {
            out = SequenceMap (s) <body: graph = body (float[] x) => (float[] y) {
                y = Neg (x)
            }>
        }
        """
    )
    bad = parse(
        """
        test (seq(float[]) s) => (seq(double[]) out) {
            out = SequenceMap (s) <body: graph = body (float[] x) => (double[] y) {
                n = Neg (x)
                y = Cast <to = 11> (n)
            }>
        }
        """
    )
    report = verify(model, bad)
    assert report.status == "mismatch"
    assert "dtype" in report.runs[0].outputs[0].message


def test_one_element_off_is_caught() -> None:
    weights = np.arange(12, dtype=np.int32).reshape(3, 4)
    model = parse(
        """
        test (int32[3,4] x) => (int32[3,4] y) <int32[3,4] w = {0,1,2,3,4,5,6,7,8,9,10,11}> {
            y = Add (x, w)
        }
        """
    )
    assert (onnx.numpy_helper.to_array(model.graph.initializer[0]) == weights).all()
    bad = copy(model)
    off = weights.copy()
    off[2, 1] += 1
    bad.graph.initializer[0].CopyFrom(onnx.numpy_helper.from_array(off, "w"))
    report = verify(model, bad, n=1)
    assert report.status == "mismatch"
    out = report.runs[0].outputs[0]
    assert (out.mismatches, out.elements, out.max_abs) == (1, 12, 1.0)


def test_float_tolerances_default_and_per_output() -> None:
    model = parse("test (float[4] x) => (float[4] y) <float k = {1.0}> { y = Mul (x, k) }")
    nudged = copy(model)
    nudged.graph.initializer[0].CopyFrom(onnx.numpy_helper.from_array(np.float32(1.0 + 1e-3), "k"))
    assert verify(model, nudged).status == "mismatch"
    assert verify(model, nudged, rtol=1e-2).ok
    assert verify(model, nudged, rtol={"y": 1e-2}).ok
    assert verify(model, nudged, rtol={"other": 1e-2}).status == "mismatch"


def test_compare_values_nan_inf_and_exact_types() -> None:
    nan, inf = np.float32("nan"), np.float32("inf")
    assert compare_values("y", np.array([nan, inf, 1]), np.array([nan, inf, 1])).ok
    assert not compare_values("y", np.array([nan, 1.0]), np.array([1.0, nan])).ok
    # A NaN against a number: max abs (over finite pairs) is 0, so the count says it.
    report = compare_values("y", np.array([0.0, 2.0, 3.0]), np.array([nan, 2.0, 3.5]))
    assert (report.mismatches, report.special, report.max_abs) == (2, 1, 0.5)
    assert not compare_values("y", np.array([inf]), np.array([-inf])).ok
    assert not compare_values("y", np.array([1], np.int64), np.array([2], np.int64)).ok
    assert not compare_values("y", np.array(["a"], object), np.array(["b"], object)).ok
    assert not compare_values("y", [np.zeros(2)], [np.zeros(2), np.zeros(2)]).ok
    assert compare_values("y", [], []).ok


# ---------------------------------------------------------------- any model verifies


@pytest.mark.parametrize(
    "name",
    [
        "multi_io",
        "sequence_additional_input_of_other_type",
        "empty_input_sequence",
        "in_function",
        "body_with_scan",
    ],
)
def test_sequence_models_verify(name: str) -> None:
    model, _ = CASES[name]()
    assert verify(model, seqlower.lower(model)).ok


def test_string_inputs_and_symbolic_dims() -> None:
    model = parse(
        """
        test (seq(string[h,w]) s, string[batch,2] t) => (seq(string[]) out, string[batch,2] t_out) {
            out = SequenceMap (s) <body: graph = body (string[] x) => (string[] y) {
                y = Identity (x)
            }>
            t_out = Identity (t)
        }
        """
    )
    report = verify(model, seqlower.lower(model), dims={"batch": 5}, seq_len=4)
    assert report.ok
    first = report.runs[0].inputs
    assert first["t"] == [5, 2] and len(first["s"]) == 4
    assert len({tuple(shape) for shape in first["s"]}) > 1  # elements differ in shape


def test_input_shape_override() -> None:
    model = parse("test (float[a,b] x) => (float[a,b] y) { y = Neg (x) }")
    report = verify(model, model, input_shapes={"x": (2, 7)}, n=1)
    assert report.ok and report.runs[0].inputs["x"] == [2, 7]


def test_index_inputs_are_drawn_in_range() -> None:
    model = parse(
        """
        test (float[t,b,2] x, int64[b] lens, int64[4] idx) => (float[t,b,2] y, float[4,b,2] g) {
            y = ReverseSequence (x, lens)
            g = Gather <axis = 0> (x, idx)
        }
        """
    )
    report = verify(model, seqlower.lower(model), n=10, dims={"t": 6, "b": 5})
    assert report.ok and report.input_problems == []


def test_reference_fallback_when_onnxruntime_cannot_run_it() -> None:
    model, _ = CASES["nested_sequence_map"]()
    report = verify(model, seqlower.lower(model))
    assert report.ok
    # Both run where the reference runs: another oracle only when the reference cannot load.
    assert report.oracles == {"reference": "onnx.reference", "candidate": "onnx.reference"}


def test_restamped_ir_version() -> None:
    model = parse("test (float[3] x) => (float[3] y) { y = Neg (x) }")
    model.ir_version = onnx.IR_VERSION  # onnx's newest; onnxruntime may read an older one only
    report = verify(model, model)
    assert report.ok
    try:
        import onnxruntime as ort

        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # this onnxruntime is older than onnx: only the re-stamped copy runs
        assert report.oracles["reference"].startswith("onnxruntime (re-stamped to IR version")
    else:
        assert report.oracles["reference"] == "onnxruntime"


def test_cannot_verify_is_never_ok() -> None:
    model = opaque_model()
    report = verify(model, model)
    assert report.status == "cannot_verify" and not report.ok
    assert "no runtime can run the reference" in report.reason


def test_report_json_round_trips() -> None:
    model, _ = CASES["multi_io"]()
    bad = seqlower.lower(model)
    next(n for n in loop_body_nodes(bad) if n.op_type == "Add").op_type = "Sub"
    for report in (verify(model, seqlower.lower(model)), verify(model, bad)):
        data = json.loads(json.dumps(report.to_dict()))
        assert VerifyReport.from_dict(data).to_dict() == report.to_dict()
        assert data["ok"] == report.ok and data["seed"] == 0
        assert set(data["versions"]) >= {"seqlower", "onnx", "onnxruntime"}


def test_runs_are_reproducible_from_the_seed() -> None:
    model, _ = CASES["multi_io"]()
    a = generate_inputs(model, np.random.default_rng([7, 0, 0]))
    b = generate_inputs(model, np.random.default_rng([7, 0, 0]))
    assert all(x.tobytes() == y.tobytes() for x, y in zip(a["s1"], b["s1"], strict=True))
    assert (
        verify(model, model, seed=7).to_dict()["runs"]
        == verify(model, model, seed=7).to_dict()["runs"]
    )


# ---------------------------------------------------------------- user inputs


def test_npz_and_test_data_inputs(tmp_path: Path) -> None:
    model, feeds = CASES["multi_io"]()
    npz = tmp_path / "in.npz"
    np.savez(
        npz,
        t=feeds["t"],
        **{f"s1/{i}": v for i, v in enumerate(feeds["s1"])},
        **{f"s2/{i}": v for i, v in enumerate(feeds["s2"])},
    )
    [loaded] = load_inputs(npz, model)
    assert [x.tolist() for x in loaded["s1"]] == [x.tolist() for x in feeds["s1"]]
    folder = save_inputs(tmp_path / "data" / "test_data_set_0", feeds, model)
    [again] = load_inputs(folder.parent, model)
    assert [x.tolist() for x in again["s2"]] == [x.tolist() for x in feeds["s2"]]
    lowered = seqlower.lower(model)
    for source in (npz, folder.parent, folder):
        report = verify(model, lowered, inputs=source)
        assert report.ok and len(report.runs) == 1


# ---------------------------------------------------------------- command line


class Buggy(seqlower_passes.LowerSequenceMap):
    """A deliberately wrong lowering: every Add in a lowered body becomes Sub."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        result = super().call(model)
        for node in ir.traversal.RecursiveGraphIterator(model.graph):
            if node.op_type == "Add":
                node.op_type = "Sub"
        return result


def run_cli(*args: Any) -> Any:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_cli_mismatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(seqlower_passes.PASSES, "buggy", Buggy)
    model, _ = CASES["multi_io"]()
    source, target, report_path = tmp_path / "m.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    onnx.save(model, source)
    result = run_cli(source, "-o", target, "--passes", "buggy", "--report", report_path)
    assert result.exit_code == 1
    assert "MISMATCH" in result.stderr and "o1" in result.stderr and "max abs" in result.stderr
    assert not target.exists()
    saved = tmp_path / "out.onnx.failing-inputs"
    assert (saved / "test_data_set_0" / "input_0.pb").exists()
    repro = next(line for line in result.stderr.splitlines() if "--inputs" in line).split()
    assert repro[:4] == ["seqlower", str(source), "-o", str(target)]
    again = run_cli(*repro[1:], "--passes", "buggy")
    assert again.exit_code == 1
    data = json.loads(report_path.read_text())
    assert data["verification"]["status"] == "mismatch" and not data["written"]
    # the plan's declared-sizes step comes first, then the passes asked for
    names = [row["name"] for row in data["passes"]]
    assert names[:2] == ["forget-declared-sizes", "buggy"]
    assert data["passes"][1]["rewritten"] == 1
    kept = run_cli(source, "-o", target, "--passes", "buggy", "--keep-on-failure")
    assert kept.exit_code == 1 and target.exists()


def test_cli_check_is_on_by_default_and_reports(tmp_path: Path) -> None:
    model, _ = CASES["body_with_if"]()
    source, target, report_path = tmp_path / "m.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    onnx.save(model, source)
    result = run_cli(
        source,
        "-o",
        target,
        "--check-n",
        "2",
        "--seed",
        "5",
        "--seq-len",
        "2",
        "--report",
        report_path,
    )
    assert result.exit_code == 0, result.stderr
    assert "check: outputs match" in result.stdout
    data = json.loads(report_path.read_text())["verification"]
    assert data["ok"] and data["seed"] == 5 and len(data["runs"]) == 2
    assert all(len(run["inputs"]["s"]) == 2 for run in data["runs"])


def test_cli_verify_command(tmp_path: Path) -> None:
    model, _ = CASES["multi_io"]()
    good, bad = seqlower.lower(model), seqlower.lower(model)
    next(n for n in loop_body_nodes(bad) if n.op_type == "Add").op_type = "Sub"
    paths = {name: tmp_path / f"{name}.onnx" for name in ("ref", "good", "bad")}
    for name, proto in (("ref", model), ("good", good), ("bad", bad)):
        onnx.save(proto, paths[name])
    assert run_cli("verify", paths["ref"], paths["good"]).exit_code == 0
    result = run_cli("verify", paths["ref"], paths["bad"], "--rtol", "o1:1e-9")
    assert result.exit_code == 1 and "MISMATCH" in result.stderr
    opaque = opaque_model()
    onnx.save(opaque, tmp_path / "opaque.onnx")
    result = run_cli("verify", tmp_path / "opaque.onnx", tmp_path / "opaque.onnx")
    assert result.exit_code == 3 and "cannot verify" in result.stderr
    result = run_cli("verify", paths["ref"], paths["good"], "--dim", "oops")
    assert result.exit_code == 2


def test_public_api() -> None:
    assert seqlower.verify is verify
    assert seqlower.VerifyReport is VerifyReport


def test_cli_cannot_verify_writes_nothing(tmp_path: Path) -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17, "vendor" : 1]>
        test (seq(float[]) s) => (seq(float[]) out) {
            out = SequenceMap (s) <body: graph = body (float[] x) => (float[] y) {
                y = vendor.Opaque (x)
            }>
        }
        """
    )
    source, target = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    result = run_cli(source, "-o", target)
    assert result.exit_code == 3 and "cannot verify" in result.stderr
    assert not target.exists()
    assert run_cli(source, "-o", target, "--no-check").exit_code == 0 and target.exists()


def test_batch_dims_follow_static_length_counts() -> None:
    model = parse(
        "test (float[t,b,2] x, int64[4] lens) => (float[t,b,2] y) { y = ReverseSequence (x, lens) }"
    )
    report = verify(model, seqlower.lower(model))
    assert report.ok and report.input_problems == []
    assert report.runs[0].inputs["x"][1] == 4


def test_reference_failing_at_run_time_is_an_input_problem_not_a_mismatch() -> None:
    # The declared lengths count (2) contradicts a forced batch of 3: every run fails natively.
    model = parse(
        "test (float[t,b,2] x, int64[2] lens) => (float[t,b,2] y) { y = ReverseSequence (x, lens) }"
    )
    report = verify(model, seqlower.lower(model), input_shapes={"x": (3, 3, 2)})
    assert report.status == "cannot_verify" and report.input_problems
    # The node and the inputs reaching it are named; the shapes were given, so no --dim hint.
    assert "a ReverseSequence node rejected inputs 'lens', 'x'" in report.reason
    assert "--input-shape" not in report.reason and "--inputs" in report.reason


def test_paths_and_ir_models_with_external_weights(tmp_path: Path) -> None:
    model, _ = CASES["outer_scope_read"]()
    path = tmp_path / "ext.onnx"
    on_disk = onnx.ModelProto.FromString(model.SerializeToString())
    onnx.save(on_disk, path, save_as_external_data=True, location="ext.data", size_threshold=0)
    assert verify(path, seqlower.lower(model)).ok
    assert verify(seqlower.io.load_model(path), model).ok
    with pytest.raises(seqlower.SeqlowerError):
        verify(tmp_path / "absent.onnx", model)
