"""``inspect`` tells what ``lower`` will do (issue 29): over the test corpus and the real-world
samples, each pipeline's claims (the op counts of the lowered model, blocked or not, the
blockers named, the error) are what ``seqlower.lower`` then gives."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import onnx
import onnx_ir as ir
import pytest
from click.testing import CliRunner

import seqlower
from seqlower.cli.commands import cli
from seqlower.errors import SeqlowerError, SequenceFreeError, TargetError, first_line
from seqlower.inspect import PipelineView, inspect_model
from seqlower.job import restamp
from seqlower.pipeline import op_counts
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


def _lowered(model: onnx.ModelProto, name: str) -> tuple[str, list[str], str, dict[str, int]]:
    """What ``lower`` does: ok/blocked/error, the blockers, the error's line, the op counts."""
    ir_model = ir.serde.deserialize_model(model)
    try:
        if name not in TARGETS:
            seqlower.lower(ir_model, sequence_free=name == "sequence-free")
        else:
            seqlower.lower(ir_model, target=name, check=False)
            newest = TARGETS[name].max_opset
            if newest is not None and ir_model.opset_imports.get("", 1) > newest:
                restamp(ir_model, ir_version=None, opset=newest)  # as the command line does
    except (SequenceFreeError, TargetError) as e:
        return "blocked", list(e.blockers), "", {}
    except SeqlowerError as e:
        return "error", [], first_line(e), {}
    return "ok", [], "", dict(op_counts(ir_model))


def _claimed(view: PipelineView) -> tuple[str, list[str], str, dict[str, int]]:
    outcome = "blocked" if view.blockers else "error" if view.error else "ok"
    return outcome, view.blockers, view.error, view.ops_after


def _assert_inspect_tells(model: onnx.ModelProto) -> None:
    inspection = inspect_model(model, NAMES)
    for view in inspection.pipelines:
        assert _claimed(view) == _lowered(model, view.name), view.name


@pytest.mark.parametrize("name", list(CORPUS))
def test_inspect_claims_what_lower_does_on_the_corpus(name: str) -> None:
    _assert_inspect_tells(CORPUS[name]())


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_inspect_claims_what_lower_does_on_the_samples(path: Path) -> None:
    _assert_inspect_tells(onnx.load(path))


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
