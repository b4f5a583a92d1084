"""``inspect`` tells what ``lower`` will do (issue 29): over the test corpus and the real-world
samples, each pipeline's claims (the op counts of the lowered model, blocked or not, the
blockers named, the error) are what ``seqlower.lower`` then gives."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
import onnx_ir as ir
import pytest
from click.testing import CliRunner

import seqlower
from seqlower.cli.commands import cli
from seqlower.errors import SeqlowerError, SequenceFreeError, TargetError, first_line
from seqlower.inspect import PipelineView, inspect_model
from seqlower.job import LowerOptions
from seqlower.pipeline import op_counts, restamp
from seqlower.targets import PIPELINES, TARGETS
from tests import loop_cases, sequence_free_cases, sequence_map_cases
from tests.helpers import REALWORLD, ROOT

DATA = REALWORLD
SHARED = ROOT.parent / "shared" / "realworld-samples"


def _corpus() -> dict[str, Callable[[], onnx.ModelProto]]:
    models: dict[str, Callable[[], onnx.ModelProto]] = {}
    for module in (loop_cases, sequence_free_cases, sequence_map_cases):
        for name, case in module.CASES.items():
            models[f"{module.__name__.rsplit('.', 1)[-1]}:{name}"] = lambda c=case: c()[0]
    for path in sorted(DATA.glob("*.onnx")):
        models[f"data:{path.stem}"] = lambda p=path: onnx.load(p)
    return models


CORPUS = _corpus()
SAMPLES = sorted(SHARED.glob("*/*.onnx"))

#: One pipeline per distinct lowering: rows that run the same passes and checks would only
#: repeat the same comparison.
_DISTINCT: dict[tuple[object, ...], str] = {}
for _row in PIPELINES.values():
    _key = (_row.passes, _row.requires, _row.expand_ops, _row.attribute_defaults)
    _DISTINCT.setdefault((*_key, getattr(_row, "max_opset", None), _row.name in TARGETS), _row.name)
NAMES = list(_DISTINCT.values())


def _lowered(
    model: onnx.ModelProto, name: str, planning: LowerOptions | None = None
) -> tuple[str, list[str], str, dict[str, int]]:
    """What ``lower`` does: ok/blocked/error, the blockers, the error's line, the op counts."""
    plan = planning or LowerOptions()
    ir_model = ir.serde.deserialize_model(model)
    flags: dict[str, Any] = {
        "unroll_inputs": plan.unroll_inputs,
        "optional_inputs": plan.optional_inputs,
        "input_shapes": plan.overwrite_input_shapes,
    }
    try:
        if name not in TARGETS:
            seqlower.lower(ir_model, sequence_free=name == "sequence-free", **flags)
        else:
            seqlower.lower(ir_model, target=name, check=False, **flags)
        newest = TARGETS[name].max_opset if name in TARGETS else None
        opset = plan.opset
        if opset is None and newest is not None and ir_model.opset_imports.get("", 1) > newest:
            opset = newest
        if opset is not None:
            restamp(ir_model, ir_version=None, opset=opset)  # as the command line does
    except (SequenceFreeError, TargetError) as e:
        return "blocked", list(e.blockers), "", {}
    except SeqlowerError as e:
        return "error", [], first_line(e), {}
    return "ok", [], "", dict(op_counts(ir_model))


def _claimed(view: PipelineView) -> tuple[str, list[str], str, dict[str, int]]:
    outcome = "blocked" if view.blockers else "error" if view.error else "ok"
    return outcome, view.blockers, view.error, view.ops_after


def _assert_inspect_tells(model: onnx.ModelProto, planning: LowerOptions | None = None) -> None:
    inspection = inspect_model(model, NAMES, planning)
    for view in inspection.pipelines:
        assert _claimed(view) == _lowered(model, view.name, planning), view.name


@pytest.mark.parametrize("name", list(CORPUS))
def test_inspect_claims_what_lower_does_on_the_corpus(name: str) -> None:
    _assert_inspect_tells(CORPUS[name]())


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_inspect_claims_what_lower_does_on_the_samples(path: Path) -> None:
    _assert_inspect_tells(onnx.load(path))


#: Models lowered with the planning flags (``inspect`` takes them as ``lower`` does): a stacked
#: tf2onnx RNN at a fixed length (both layers unrolled, the second once the fold makes its count
#: constant), an optional input made present, a sequence input unrolled, a converted opset.
PLANNED: dict[str, tuple[Callable[[], onnx.ModelProto], LowerOptions]] = {
    "stacked-rnn-at-fixed-shapes": (
        lambda: onnx.load(DATA / "k2_stacked_bisimple_op13.onnx"),
        LowerOptions(overwrite_input_shapes={"x": (3, 7, 4)}),
    ),
    "optional-input-present": (
        lambda: onnx.parser.parse_model(
            """
            <ir_version: 8, opset_import: ["" : 18]>
            maybe (float[2] x, optional(float[2]) o) => (float[2] y) {
                has = OptionalHasElement(o)
                y = If(has) <then_branch = t () => (float[2] a) {
                    e = OptionalGetElement(o)
                    a = Add(x, e)
                }, else_branch = f () => (float[2] b) { b = Identity(x) }>
            }
            """
        ),
        LowerOptions(optional_inputs={"o": True}),
    ),
    "sequence-input-unrolled": (
        lambda: onnx.parser.parse_model(
            """
            <ir_version: 8, opset_import: ["" : 18]>
            g (seq(float[3]) s) => (float[n] y) {
                mapped = SequenceMap<body = f (float[3] e) => (float[3] r) { r = Neg(e) }>(s)
                y = ConcatFromSequence<axis = 0>(mapped)
            }
            """
        ),
        LowerOptions(unroll_inputs={"s": 3}),
    ),
    "opset-16": (lambda: onnx.load(DATA / "hstack_1d_dyn.onnx"), LowerOptions(opset=16)),
}


@pytest.mark.parametrize("name", list(PLANNED))
def test_inspect_takes_the_planning_flags_lower_takes(name: str) -> None:
    make, planning = PLANNED[name]
    _assert_inspect_tells(make(), planning)


def test_inspect_fixes_input_shapes_on_the_command_line(tmp_path: Path) -> None:
    source = tmp_path / "rnn.onnx"
    onnx.save(onnx.load(DATA / "k2_stacked_bisimple_op13.onnx"), source)
    args = ["inspect", str(source), "--target", "tinygrad", "--json"]
    dynamic = json.loads(CliRunner().invoke(cli, args).output)["pipelines"][0]
    assert dynamic["blocked"] and "--overwrite-input-shape" in dynamic["blockers"][0]
    result = CliRunner().invoke(cli, [*args, "--overwrite-input-shape", "x=3,7,4"])
    assert result.exit_code == 0, result.output
    (view,) = json.loads(result.output)["pipelines"]
    assert not view["blocked"] and "Scan" not in view["ops_after"], view
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rnn.onnx"]  # nothing written


def test_openvino_keeps_reverse_sequence_at_any_size(tmp_path: Path) -> None:
    """Over 1000 nodes inspect used to scan the protobuf and said the openvino target lowers
    ReverseSequence, which it keeps; it now runs the pipeline whatever the size."""
    text = """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[T, 2, 3] x, int64[2] lens) => (float[T, 2, 3] y) {
            r = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
    """
    last = "r"
    for i in range(1100):
        text += f"    a{i} = Relu({last})\n"
        last = f"a{i}"
    model = onnx.parser.parse_model(text + f"    y = Identity({last})\n}}")
    source = tmp_path / "big.onnx"
    onnx.save(model, source)
    result = CliRunner().invoke(cli, ["inspect", str(source), "--target", "openvino", "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert found["nodes"] == 1102
    (view,) = found["pipelines"]
    assert view["name"] == "openvino" and not view["blocked"]
    assert "ReverseSequence" not in view["lowered"] and view["ops_after"]["ReverseSequence"] == 1
    lowered = seqlower.lower(model, target="openvino", check=False)
    assert [n.op_type for n in lowered.graph.node].count("ReverseSequence") == 1


def test_inspect_json_names_blockers(tmp_path: Path) -> None:
    source = tmp_path / "loop.onnx"
    onnx.save(loop_cases.CASES["map_fn"]()[0], source)
    result = CliRunner().invoke(cli, ["inspect", str(source), "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert [view["name"] for view in found["pipelines"]] == [
        "default",
        "sequence-free",
        "openvino",
        "tract",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop.onnx"]  # nothing written


@pytest.mark.parametrize(
    "flag",
    [
        ["--overwrite-input-shape", "nosuch=1,2"],
        ["--overwrite-input-shape", "x=1,2,3,4,5"],
        ["--unroll-input", "nosuch=2"],
        ["--optional-input", "nosuch=present"],
    ],
)
def test_a_flag_that_does_not_fit_is_exit_2_in_inspect_as_in_lower(
    tmp_path: Path, flag: list[str]
) -> None:
    """A planning flag the model cannot take is the user's mistake, not one pipeline's
    failure: inspect says it once, exit 2, as lower does, and writes nothing."""
    source = tmp_path / "rnn.onnx"
    onnx.save(onnx.load(DATA / "k2_stacked_bisimple_op13.onnx"), source)
    lowered = CliRunner().invoke(cli, [str(source), "-o", str(tmp_path / "out.onnx"), *flag])
    inspected = CliRunner().invoke(cli, ["inspect", str(source), *flag])
    assert lowered.exit_code == inspected.exit_code == 2, (lowered.output, inspected.output)
    assert "fails:" not in inspected.output and flag[1].split("=")[0] in inspected.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rnn.onnx"]
