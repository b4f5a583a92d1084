"""Issue 43's newcomer findings, each as the user met it: messages that name the right thing."""

from __future__ import annotations

from pathlib import Path

import onnx
import onnx.parser
import pytest
from onnx import TensorProto, helper

import seqlower
from tests.helpers import assert_one_line_error, run_cli
from tests.runtimes import require
from tests.targets.test_recurrence_lengths import padded_recurrence
from tests.targets.test_runtime_ops import string_model


def test_verify_a_model_against_itself_blames_no_lowering(tmp_path: Path) -> None:
    """``verify A A`` lowered nothing: the runtime that cannot load A is at fault (exit 1)."""
    require("openvino")
    path = tmp_path / "m.onnx"
    onnx.save(string_model(), path)
    result = run_cli("verify", path, path, "--target", "openvino")
    assert result.exit_code == 1, result.output
    assert "did not reach the target" not in result.output
    assert "lowered model" not in result.output
    assert "the candidate is the reference itself: openvino" in result.stderr


def test_a_bad_expected_file_is_named_as_expected(tmp_path: Path) -> None:
    """The --expected file also supplies the inputs; its errors still name --expected."""
    path, bad = tmp_path / "m.onnx", tmp_path / "bad.npz"
    onnx.save(padded_recurrence(), path)
    bad.write_text("not an archive")
    for command in ([path, "--dry-run"], ["verify", path, path]):
        result = run_cli(*command, "--expected", bad)
        line = assert_one_line_error(result, f"--expected {bad}: not a readable .npz file")
        assert "--inputs" not in line
    folder = tmp_path / "data" / "test_data_set_0"
    folder.mkdir(parents=True)
    (folder / "input_0.pb").write_bytes(b"\x08junk")
    result = run_cli(path, "--dry-run", "--expected", tmp_path / "data")
    assert_one_line_error(result, "--expected ", "not a readable TensorProto")


def test_untyped_outputs_are_named_with_what_to_do(tmp_path: Path) -> None:
    """onnxscript can leave graph outputs untyped: the checker's own words named no value."""
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [onnx.ValueInfoProto(name="y")],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    for command in ([path, "-o", tmp_path / "out.onnx"], ["verify", path, path]):
        line = assert_one_line_error(run_cli(*command), "graph output 'y' has no type")
        assert "infer_shapes" in line and "annotate" in line


# ---------------------------------------------------------------- batch mode (items 6, 7, 8)


def test_batch_tells_blockers_unchanged_models_and_reports_each(tmp_path: Path) -> None:
    """A blocked model's whole reason (every blocker, not the first line), a model with nothing
    to lower as ``unchanged``, and --report: one JSON with each model's exit code, status,
    culprit, blockers and timings."""
    require("tract")
    import json

    zoo = tmp_path / "zoo"
    zoo.mkdir()
    blocked = string_model()
    blocked.graph.node.append(helper.make_node("StringNormalizer", ["t"], ["u"], name="again"))
    blocked.graph.output[0].name = "u"
    onnx.save(blocked, zoo / "blocked.onnx")
    neg = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    onnx.save(helper.make_model(neg, opset_imports=[helper.make_opsetid("", 17)]), zoo / "neg.onnx")
    report = tmp_path / "batch.json"
    result = run_cli(zoo, "-o", f"{tmp_path / 'out'}/", "--target", "tract", "--report", report)
    assert result.exit_code == 2, result.output
    lines = result.stdout.splitlines()
    first = next(k for k, line in enumerate(lines) if line.startswith("error: "))
    assert "(2 blockers" in lines[first]
    assert "StringNormalizer node 'normalize'" in lines[first + 1]
    assert "StringNormalizer node 'again'" in lines[first + 2]
    assert any(line.startswith("unchanged: ") and "neg.onnx" in line for line in lines)
    assert lines[-1] == "0 of 2 models lowered; 1 unchanged (nothing to lower); 1 failed"
    data = json.loads(report.read_text())
    assert data["exit_code"] == 2
    by_name = {Path(m["model"]).name: m for m in data["models"]}
    assert (
        by_name["blocked.onnx"]["exit_code"] == 2 and by_name["blocked.onnx"]["status"] == "error"
    )
    assert len(by_name["blocked.onnx"]["blockers"]) == 2
    assert by_name["neg.onnx"]["status"] == "unchanged" and by_name["neg.onnx"]["seconds"] > 0
    assert by_name["neg.onnx"]["report"]["exit_code"] == 0


def test_batch_warnings_have_a_status_of_their_own() -> None:
    """A run that succeeded with warnings is ``warnings`` in the table, its warnings printed
    (they were dropped: the table said ``ok``, stderr was empty)."""
    from seqlower.cli.batch import BatchItem, _lines, _reason_and_warnings

    stderr = (
        "seqlower: warning: OUT has IR version 11, but onnxruntime 1.20 reads up to 10\n"
        "total time 1s\n"
    )
    reason, warnings = _reason_and_warnings(stderr)
    item = BatchItem(Path("m.onnx"), Path("out/m.onnx"), code=0, reason=reason, warnings=warnings)
    assert item.word == "warnings"
    lines = _lines(item)
    assert lines[0].startswith("warnings: m.onnx -> out/m.onnx")
    assert lines[1] == "  warning: OUT has IR version 11, but onnxruntime 1.20 reads up to 10"
    assert item.to_dict()["warnings"] == warnings


# ---------------------------------------------------------------- small things a newcomer hit


def test_example_keeps_an_existing_preprocess_onnx(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was silently replaced; only -o naming it replaces it."""
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "preprocess.onnx"
    mine.write_bytes(b"my own model")
    assert_one_line_error(run_cli("example"), "preprocess.onnx exists", "-o preprocess.onnx")
    assert mine.read_bytes() == b"my own model"
    assert run_cli("example", "-o", "preprocess.onnx").exit_code == 0
    onnx.load(mine)
    mine.unlink()
    assert run_cli("example").exit_code == 0 and mine.exists()


def test_list_passes_columns_survive_long_names() -> None:
    lines = [line for line in run_cli("--list-passes").stdout.splitlines() if line[:1].islower()]
    rows = [line for line in lines if not line.startswith("Every ")]
    # The second column starts at one place on every row, however long the pass name
    # (lower-reverse-sequence-rows ran into it at 24).
    width = max(len(line.split()[0]) for line in rows)
    assert width > 24
    for line in rows:
        name = line.split()[0]
        assert line[len(name) : width + 1].strip() == "" and line[width + 1] != " ", line


def test_inspect_help_says_only_what_inspect_does() -> None:
    text = run_cli("inspect", "--help").stdout
    assert "OUT" not in text and "check" not in text


def test_inspect_counts_repairs_in_the_plural(tmp_path: Path) -> None:
    from tests.helpers import neg_loop

    loop = onnx.parser.parse_model(neg_loop(2, 3))
    path = tmp_path / "m.onnx"
    onnx.save(loop, path)
    from seqlower.inspect import inspect_model

    view = inspect_model(path, ["openvino"])
    view.pipelines[0].repaired = {"Loop": (4, "strict-loop-bodies")}
    text = str(view)
    assert "repairs 4 Loops for the runtime, keeping them (strict-loop-bodies)" in text
    view.pipelines[0].repaired = {"Loop": (1, "strict-loop-bodies")}
    assert "repairs 1 Loop for the runtime, keeping it" in str(view)


def test_sequence_free_names_the_targets_that_lower_a_ragged_map(tmp_path: Path) -> None:
    from tests.helpers import ragged_map

    path = tmp_path / "m.onnx"
    onnx.save(ragged_map(), path)
    result = run_cli(path, "-o", tmp_path / "out.onnx", "--sequence-free")
    assert result.exit_code == 2
    assert "is split with sizes known at run time (--target openvino and --target tract" in (
        result.stderr
    )


def test_a_blocked_onnx2torch_run_imports_no_converter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model onnx2torch cannot convert is refused before the check, so before torch is
    imported (6 s); its packages are only found up front. The model as exported is not tried
    there either (docs/proof.md, Targets): its op table says onnx2torch converts no model with
    a StringNormalizer."""
    from seqlower.verification import runtimes

    imported: list[str] = []

    class Converter(runtimes.Onnx2Torch):
        package = "onnx"  # installed: found, not imported
        runs_on = "numpy"

        def importer(self) -> None:
            imported.append("onnx2torch")

    monkeypatch.setitem(runtimes.TARGET_ORACLES, "onnx2torch", Converter())
    path = tmp_path / "m.onnx"
    onnx.save(string_model(), path)  # StringNormalizer: no converter
    result = run_cli(path, "-o", tmp_path / "out.onnx", "--target", "onnx2torch")
    assert result.exit_code == 2, result.output
    assert "cannot lower the model for onnx2torch" in result.stderr
    assert imported == [] and not (tmp_path / "out.onnx").exists()
    with pytest.raises(seqlower.TargetError):
        seqlower.lower(onnx.load(path), target="onnx2torch")
    assert imported == []


@pytest.mark.parametrize(
    "name",
    ["test_optional_get_element_optional_tensor", "test_optional_has_element_optional_input"],
)
def test_the_default_pipeline_makes_opset_28_optionals_load_on_onnxruntime(
    tmp_path: Path, name: str
) -> None:
    """The README's command for onnxruntime is ``seqlower MODEL -o OUT``: it folds and re-stamps
    optionals as --target onnxruntime does (onnxruntime 1.32 has no opset-28 optional kernel)."""
    import warnings

    import numpy as np
    import onnxruntime as ort

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases

        case = next(c for c in collect_testcases(None) if c.name == name)
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(case.model, source)
    result = run_cli(source, "-o", out)
    assert result.exit_code == 0, result.output
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    inputs, outputs = case.data_sets[0]
    names = [i.name for i in session.get_inputs()]
    got = session.run(None, dict(zip(names, inputs, strict=True)))
    for want, have in zip(outputs, got, strict=True):
        np.testing.assert_array_equal(have, want)


_EARLY_CTRL_C = """
import os, signal, sys, time
sys.argv[0] = os.path.join("bin", "seqlower")  # as the console script runs
{ignore}
import seqlower  # the console script's first import, before main() can catch Ctrl-C
os.kill(os.getpid(), signal.SIGINT)
time.sleep(1)
print("still running")
"""


@pytest.mark.parametrize("ignored", [False, True])
def test_ctrl_c_while_the_package_loads_prints_no_traceback(ignored: bool) -> None:
    """Ctrl-C before main() takes over (3 tries in 4 at 0.05-0.2 s printed a traceback): one
    line and exit 130; a SIGINT the caller ignores (nohup, a background job) stays ignored."""
    import subprocess
    import sys

    from tests.helpers import ROOT

    ignore = "signal.signal(signal.SIGINT, signal.SIG_IGN)" if ignored else ""
    done = subprocess.run(
        [sys.executable, "-c", _EARLY_CTRL_C.format(ignore=ignore)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    if ignored:
        assert done.returncode == 0 and "still running" in done.stdout
        return
    assert done.returncode == 130, done.stderr
    assert done.stderr == "seqlower: interrupted; nothing was written\n"
