"""The pass-writing kit holds: every pass builds through it (issue 31).

A pass module builds its nodes with the emitters its ``Rewrite`` hands out and replaces the node
with ``ctx.replace``, never with an ``Emitter(...)`` of its own or ``replace_all_uses_with``;
a rewrite holds only the ONNX it builds (40 lines at most); and no pass module imports another
(what two passes share goes in ``_shared.py``, ``_ir.py`` or another ``_`` module). A pass
added without the kit fails here, naming the file and line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import onnx_ir as ir
import pytest

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._types import TypeOracle
from tests.helpers import ROOT, ort_run, parse

PASSES = ROOT / "seqlower" / "passes"
#: The kit: the only modules that build emitters and rewire values by hand.
KIT = {"_base.py", "_emit.py"}
#: The folders whose public modules are passes (one pass class a file, registered by name).
GROUPS = (
    "branches",
    "checks",
    "functions",
    "inputs",
    "loops",
    "repairs",
    "reverse_sequence",
    "sequences",
)
MAX_REWRITE_LINES = 40


def hand_surgery(source: str) -> list[str]:
    """Where ``source`` builds an emitter or rewires a value by hand."""
    found = []
    for number, line in enumerate(source.splitlines(), 1):
        if re.search(r"\bEmitter\(", line) or "replace_all_uses_with" in line:
            found.append(f"{number}: {line.strip()}")
    return found


def long_rewrites(source: str) -> list[str]:
    """The ``rewrite`` methods of ``source`` longer than the limit."""
    return [
        f"rewrite at line {node.lineno}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef)
        and node.name == "rewrite"
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_REWRITE_LINES
    ]


def pass_modules_imported(source: str) -> list[str]:
    """The pass modules ``source`` imports (at any depth: a function's import counts too)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[:2] != ["seqlower", "passes"]:
                continue
            in_group = len(parts) >= 4 and parts[2] in GROUPS and not parts[3].startswith("_")
            registered = len(parts) == 3 and parts[2][:1].isupper()  # seqlower.passes.SomePass
            if in_group or registered:
                found.append(name)
    return sorted(set(found))


def modules(where: Path) -> list[Path]:
    return sorted(path for path in where.rglob("*.py") if path.name != "__init__.py")


def pass_modules() -> list[Path]:
    return [p for g in GROUPS for p in modules(PASSES / g) if not p.name.startswith("_")]


def label(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", [p for p in modules(PASSES) if p.name not in KIT], ids=label)
def test_no_module_but_the_kit_builds_emitters_or_rewires_by_hand(path: Path) -> None:
    found = hand_surgery(path.read_text(encoding="utf-8"))
    assert not found, f"{label(path)}: use the Rewrite the kit hands out: {found}"


@pytest.mark.parametrize("path", modules(PASSES), ids=label)
def test_every_rewrite_is_short(path: Path) -> None:
    found = long_rewrites(path.read_text(encoding="utf-8"))
    assert not found, f"{label(path)}: move the surgery into helpers: {found}"


@pytest.mark.parametrize("path", pass_modules(), ids=label)
def test_no_pass_module_imports_another(path: Path) -> None:
    found = pass_modules_imported(path.read_text(encoding="utf-8"))
    assert not found, f"{label(path)} imports pass modules {found}; share through a _ module"


def test_the_checks_see_what_they_look_for() -> None:
    bad = (
        """
from seqlower.passes.sequences.lower_sequence_map import LowerSequenceMap

class P:
    def rewrite(self, plan, ctx):
        from seqlower.passes import LowerReverseSequence
        op = Emitter(names, "x", 17)
        old.replace_all_uses_with(new)
"""
        + "        pass\n" * MAX_REWRITE_LINES
    )
    assert len(hand_surgery(bad)) == 2
    assert len(long_rewrites(bad)) == 1
    assert pass_modules_imported(bad) == [
        "seqlower.passes.LowerReverseSequence",
        "seqlower.passes.sequences.lower_sequence_map",
        "seqlower.passes.sequences.lower_sequence_map.LowerSequenceMap",
    ]
    fine = (
        "from seqlower.passes._ir import is_onnx\n"
        "from seqlower.passes.reverse_sequence import _reverse_rows"
    )
    assert pass_modules_imported(fine) == []


class _NegToSub(NodeLoweringPass[float]):
    """A pass written with the kit alone: ``Neg(x)`` as ``Sub(0, x)`` (the plan: the zero)."""

    op_type = "Neg"

    def plan(self, site: Site, types: TypeOracle) -> float | None:
        return 0.0

    def rewrite(self, plan: float, ctx: Rewrite) -> None:
        op = ctx.before()
        x = ctx.node.inputs[0]
        assert x is not None
        zero = op.constant(np.array(plan, dtype=np.float32), hint="zero")
        ctx.replace([op.Sub(zero, x)])


def test_a_pass_written_with_the_kit_alone() -> None:
    """Emitted nodes in, outputs rewired keeping their names (a graph output's too), constants
    pooled per graph, the node out."""
    model = parse(
        """
        agraph (float[3] x) => (float[3] y, float[3] z) {
            t = Neg(x)
            y = Neg(t)
            z = Add(t, x)
        }
        """
    )
    lowered = ir.serde.deserialize_model(model)
    _NegToSub()(lowered)
    proto = ir.serde.serialize_model(lowered)
    ops = [node.op_type for node in proto.graph.node]
    assert ops == ["Constant", "Sub", "Sub", "Add"]  # one zero for both rewrites
    assert [o.name for o in proto.graph.output] == ["y", "z"]
    assert proto.graph.node[2].output == ["y"] and "t" in proto.graph.node[3].input
    x = np.array([1.0, -2.0, 3.5], dtype=np.float32)
    assert np.array_equal(ort_run(proto, {"x": x})[0], ort_run(model, {"x": x})[0])
    assert np.array_equal(ort_run(proto, {"x": x})[1], ort_run(model, {"x": x})[1])


def _blocks(count: int) -> ir.Model:
    """``count`` blocks of a ``ReverseSequence`` then a ``SequenceMap`` over its result."""
    sys_path = str(ROOT / "benchmarks")
    import sys

    if sys_path not in sys.path:
        sys.path.insert(0, sys_path)
    from synthetic import constant_lengths_model

    return ir.serde.deserialize_model(constant_lengths_model(count, declared=False))


def _walks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the passes each whole-model walk of the kit runs for, as they happen."""
    import inspect

    from seqlower.passes import _base

    walks: list[str] = []
    model_walk = _base._Walk.model

    def counted(self: object, model: ir.Model) -> None:
        caller = next(
            (f.frame.f_locals["self"] for f in inspect.stack() if "self" in f.frame.f_locals
             and isinstance(f.frame.f_locals["self"], ir.passes.PassBase)),
            None,
        )  # fmt: skip
        walks.append(type(caller).__name__)
        model_walk(self, model)  # type: ignore[arg-type]

    monkeypatch.setattr(_base._Walk, "model", counted)
    return walks


def test_a_row_walks_the_model_once_per_lowering_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default row's check and lowering passes share their walks (issue 45's tool speed):
    each hands the walk its run ends with to the pass right after it, which finds its sites
    there; only the last lowering pass walks for its postcondition alone."""
    from seqlower.plan import make_plan, plan_pipeline, run_plan

    model = _blocks(3)
    walks = _walks(monkeypatch)
    run_plan(make_plan((), check=False), model, pipeline=plan_pipeline(make_plan((), check=False)))
    assert walks == ["ValidateNodes", "LowerReverseSequence", "LowerSequenceMap"]
    ops = {node.op_type for node in model.graph}
    assert not ops & {"ReverseSequence", "SequenceMap"}


def test_a_walk_handed_over_serves_only_its_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass handed a walk of another model, or told to drop it (``call`` changed the model
    first), walks the model itself, and lowers what the walk would have missed."""
    first, second = _NegToSub(), _NegToSub()
    first.hand_walk_to(second)
    text = """
        agraph (float[3] x) => (float[3] y) {
            y = Neg(x)
        }
        """
    one, other = ir.serde.deserialize_model(parse(text)), ir.serde.deserialize_model(parse(text))
    first(one)
    walks = _walks(monkeypatch)
    second(other)  # handed one's walk: its own instead
    assert walks == ["_NegToSub", "_NegToSub"]  # the sites, then the postcondition
    assert [node.op_type for node in other.graph] == ["Constant", "Sub"]
    for dropped in (False, True):
        third = ir.serde.deserialize_model(parse(text))
        first(third)
        if dropped:
            second.drop_walk()
        walks.clear()
        second(third)  # nothing left to lower: one walk, or none with first's
        assert walks == (["_NegToSub"] if dropped else [])


@pytest.mark.parametrize(
    "attribute",
    [
        "value = float[2, 3] {1, 2, 3, 4, 5, 6}",
        "value = int64[0] {}",
        "value_int = 7",
        "value_ints = [1, 2, 3]",
        "value_float = 0.5",
        "value_floats = [0.5, 1.5]",
        'value_string = "a"',
    ],
)
def test_a_constant_shape_without_its_array(attribute: str) -> None:
    """The declared-sizes step reads a ``Constant``'s shape without converting its tensor
    (issue 45's tool speed): the shape of the array constant_array gives, None where none."""
    from seqlower._graphs import constant_array, constant_shape

    model = ir.serde.deserialize_model(
        parse(
            f"""
            agraph (float[1] x) => (float[1] y) {{
                c = Constant <{attribute}> ()
                y = Identity(x)
            }}
            """,
            check=False,
        )
    )
    value = next(iter(model.graph)).outputs[0]
    array = constant_array(value)
    assert constant_shape(value) == (None if array is None else array.shape)
    assert constant_shape(model.graph.inputs[0]) is None
