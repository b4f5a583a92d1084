"""One lowering plan (issue 45, item 1): what a target means is worked out once, by
``seqlower.plan.make_plan``, and run by ``run_plan``; ``seqlower.lower``, the file job and
``inspect`` call these two; the declared-sizes step is a step of the plan with its own row."""

from __future__ import annotations

import ast
import dataclasses
import inspect as pyinspect
from pathlib import Path

import onnx_ir as ir
import pytest

import seqlower
import seqlower.inspect
import seqlower.job
import seqlower.plan
from seqlower.errors import BadArgumentError, BadOptionError
from seqlower.plan import DECLARED_SIZES, Plan, make_plan, run_plan
from tests.helpers import EXAMPLE, ROOT, parse, run_cli

OPSET_18 = """
<ir_version: 8, opset_import: ["" : 18]>
agraph (float[2] x) => (float[2] y) {
    y = Relu(x)
}
"""


def _calls(function: object) -> set[str]:
    tree = ast.parse(pyinspect.getsource(function))  # type: ignore[arg-type]
    return {
        ast.unparse(node.func).rsplit(".", 1)[-1]
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
    }


def test_the_three_entry_points_make_and_run_a_plan() -> None:
    api = _calls(seqlower.plan._api_plan) | _calls(seqlower.plan._lower)
    api |= _calls(seqlower.plan._run_and_prove)
    assert {"make_plan", "run_plan"} <= api
    job = _calls(seqlower.job.lower_file) | _calls(seqlower.job.make_lower_plan)
    job |= _calls(seqlower.job._lower)
    assert {"make_plan", "run_plan"} <= job
    dry = _calls(seqlower.inspect._dry_run)
    assert {"make_lower_plan", "run_plan"} <= dry
    for function in (seqlower.job.lower_file, seqlower.inspect._dry_run, seqlower.plan.lower):
        assert not {"deployment", "get_target", "build_pipeline"} & _calls(function)


#: What the target table offers that resolves or lists its rows.
_TABLE_LOOKUPS = {"TARGETS", "PIPELINES", "get_target", "get_pipeline", "deployment"}


def test_only_the_plan_looks_the_target_table_up() -> None:
    """The CLI's early name check, ``--list-targets``, ``inspect``, ``verify_files`` and the
    pipeline builder get rows from :mod:`seqlower.plan` (it resolved names 5 more times)."""
    lookups = {}
    for path in sorted((ROOT / "seqlower").rglob("*.py")):
        if path.name in ("plan.py", "targets.py") and path.parent.name == "seqlower":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "seqlower.targets"
            for alias in node.names
        }
        if names & _TABLE_LOOKUPS:
            lookups[str(path.relative_to(ROOT))] = sorted(names & _TABLE_LOOKUPS)
    assert not lookups


def test_the_target_table_imports_nothing_above_the_errors() -> None:
    tree = ast.parse((ROOT / "seqlower" / "targets.py").read_text(encoding="utf-8"))
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("seqlower")
    }
    assert imported == {"seqlower.errors"}


def test_a_plan_is_worked_out_once_and_frozen() -> None:
    plan = make_plan(("onnx2torch",), check=False)
    assert isinstance(plan, Plan) and plan.target is not None and plan.row.name == "onnx2torch"
    assert plan.runtimes == () and any("not proven on onnx2torch" in n for n in plan.notes)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.opset = 3  # type: ignore[misc]
    model = ir.serde.deserialize_model(parse(OPSET_18))
    opset, flag, note = plan.opset_for(model)
    assert opset == 17 and flag == "--target onnx2torch (converting to opset 17)"
    assert note is not None and "converting to opset 17" in note
    assert make_plan(("onnx2torch",), opset=16, check=False).opset_for(model)[:2] == (16, None)
    assert make_plan((), check=False).opset_for(model) == (None, None, None)


def test_a_target_with_passes_is_refused_by_the_plan() -> None:
    with pytest.raises(BadOptionError, match="--target tract chooses its own passes"):
        make_plan(("tract",), passes=("lower-sequence-map",), check=False)
    with pytest.raises(BadArgumentError, match="known targets"):
        make_plan(("coreml",), check=False, api=True)


def test_the_declared_sizes_step_is_a_row_of_its_own(tmp_path: Path) -> None:
    model = ir.serde.deserialize_model(parse(OPSET_18))
    rows = run_plan(make_plan((), check=False), model)
    assert rows[0].name == DECLARED_SIZES and rows[0].seconds >= 0 and rows[0].verbose_only
    result = run_cli(EXAMPLE, "-o", tmp_path / "out.onnx", "-v")
    assert result.exit_code == 0 and DECLARED_SIZES in result.stdout
    quiet = run_cli(EXAMPLE, "-o", tmp_path / "out2.onnx")
    assert quiet.exit_code == 0 and DECLARED_SIZES not in quiet.stdout
    report = seqlower.lower_with_report(parse(OPSET_18))
    assert report.passes[0].name == DECLARED_SIZES
