"""``restamp-op-versions``: a model whose opset resolves an op to a version newer than the
target's runtime runs (a row's ``op_versions``: onnxruntime 1.32 and the opset-28 optional
ops) re-stamped to the newest opset that resolves it to one it runs, when ONNX changed only
type lists in between; refused naming the node otherwise."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest

import seqlower
from seqlower.errors import TargetError
from seqlower.passes._op_versions import same_but_types
from seqlower.passes.repairs.restamp_op_versions import RestampOpVersions
from seqlower.targets import TARGETS
from tests.helpers import assert_same, onnx_node_cases
from tests.runtimes import run

#: op -> versions whose change from the version before only added types to its type lists
#: (ONNX's Changelog.md): ``same_but_types``, what the pass asks, must say so from the schemas.
CHANGELOG_TYPES_ONLY: dict[str, tuple[int, ...]] = {
    "Optional": (28,),
    "OptionalHasElement": (28,),
    "OptionalGetElement": (28,),
    "ReverseSequence": (28,),
    "Scan": (16, 19, 21, 23, 24, 25),
    "Loop": (13, 16, 19, 21, 23, 24, 25),
    "If": (13, 16, 19, 21, 23, 24, 25),
    "Identity": (16, 19, 21, 23, 24, 25),
}


def _versions(op: str) -> list[int]:
    return sorted(
        {s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.name == op}
    )


@pytest.mark.parametrize("op", sorted(CHANGELOG_TYPES_ONLY))
def test_same_but_types_agrees_with_the_changelog(op: str) -> None:
    for version in CHANGELOG_TYPES_ONLY[op]:
        before = max(v for v in _versions(op) if v < version)
        assert same_but_types(op, before, version), (op, before, version)


@pytest.mark.parametrize(
    ("op", "older", "newer"),
    [("ReduceMean", 13, 18), ("Split", 13, 18), ("Scan", 8, 9), ("Max", 6, 8), ("Mod", 27, 28)],
)
def test_same_but_types_refuses_other_changes(op: str, older: int, newer: int) -> None:
    """An attribute made an input, an attribute added, the batch axis dropped (Scan-9), and
    versions whose schema is the one before (Max-8 broadcasts, Mod-28): what they change is
    not their types."""
    assert not same_but_types(op, older, newer)


def _model(version: int, text: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(f'<ir_version: 10, opset_import: ["" : {version}]>\n{text}')


@pytest.mark.parametrize(("op", "newest"), TARGETS["onnxruntime"].op_versions)
def test_onnxruntime_runs_the_recorded_version_and_not_the_next(op: str, newest: int) -> None:
    """What the row records is what onnxruntime does (``benchmarks/op_versions.py`` measures
    every op and runtime)."""
    bodies = {
        "Optional": "g (float[2] x) => (float[2] y) { o = Optional(x) y = OptionalGetElement(o) }",
        "OptionalGetElement": "g (float[2] x) => (float[2] y) { y = OptionalGetElement(x) }",
        "OptionalHasElement": "g (float[2] x) => (bool y) { y = OptionalHasElement(x) }",
    }
    later = min(v for v in _versions(op) if v > newest)
    feeds = {"x": np.array([1.0, 2.0], np.float32)}
    run("onnxruntime", _model(max(newest, 18), bodies[op]), feeds)
    with pytest.raises(Exception, match=rf"Could not find an implementation for \w+\({later}\)"):
        run("onnxruntime", _model(later, bodies[op]), feeds)


def _optional_cases() -> dict[str, Any]:
    return {
        c.name: c
        for c in onnx_node_cases()
        if c.name.startswith("test_optional_")
        and any(i.type.HasField("optional_type") for i in c.model.graph.input)
    }


CASES = _optional_cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_optional_inputs_run_on_onnxruntime_without_the_flag(name: str) -> None:
    """An optional graph input left optional: the opset-28 ops re-stamped to 27 (their
    version 18), which onnxruntime runs, on the case's own inputs, absent ones included."""
    case = CASES[name]
    lowered = seqlower.lower(case.model, target="onnxruntime")
    assert {(o.domain, o.version) for o in lowered.opset_import} == {("", 27)}
    inputs, expected = case.data_sets[0]
    feeds = dict(zip((i.name for i in case.model.graph.input), inputs, strict=True))
    got = run("onnxruntime", lowered, feeds)
    for have, want in zip(got, expected, strict=True):
        assert_same([np.asarray(h) for h in have] if isinstance(want, list) else have, want)


MIXED = """
g (optional(float[2]) o, float[2] x, float[2] d) => (bool h, float[2] m) {
    h = OptionalHasElement(o)
    m = Mod <fmod = 1> (x, d)
}
"""


def test_an_op_changed_beyond_its_types_is_refused() -> None:
    """``Mod`` changed at 28 (not in the table): re-stamping would rename it too (the optional
    input keeps the OptionalHasElement-28, which onnxruntime lacks)."""
    model = _model(28, MIXED)
    with pytest.raises(
        TargetError, match=r"producing 'm' .*\(Mod-28\): ONNX changed more than its types"
    ):
        seqlower.lower(model, target="onnxruntime", check=False)


def test_a_type_outside_the_older_list_is_refused() -> None:
    """float8 elements are OptionalHasElement-28's, not -18's."""
    model = _model(28, "g (float8e4m3fn[2] x) => (bool h) { h = OptionalHasElement(x) }")
    ir_model = ir.serde.deserialize_model(model)
    with pytest.raises(TargetError, match=r"'x' is tensor\(float8e4m3fn\), not in Optional"):
        RestampOpVersions(TARGETS["onnxruntime"].op_versions, "onnxruntime", "onnxruntime 1.32.0")(
            ir_model
        )
    assert ir_model.opset_imports[""] == 28  # nothing changed


def test_a_model_of_an_older_opset_is_left() -> None:
    model = _model(21, "g (float[2] x) => (bool h) { h = OptionalHasElement(x) }")
    ir_model = ir.serde.deserialize_model(model)
    result = RestampOpVersions(
        TARGETS["onnxruntime"].op_versions, "onnxruntime", "onnxruntime 1.32.0"
    )(ir_model)
    assert not result.modified and ir_model.opset_imports[""] == 21
