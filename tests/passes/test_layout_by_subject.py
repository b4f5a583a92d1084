"""``passes/`` laid out by subject, the registry one table (issue 45).

Which pipeline runs a pass is the pipeline table's alone: no pass module imports
``seqlower.targets``, the folders named for pipelines are gone, a variant of a pass is its class
configured by the registry (no subclass that only sets flags), a pipeline row is built from
named fragments (no slice of another row's list), and ONNX's domain is tested in one place.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from seqlower.passes import PASSES, PassEntry
from tests.helpers import ROOT
from tests.passes.test_kit import GROUPS

PACKAGE = ROOT / "seqlower"
PASSES_DIR = PACKAGE / "passes"
SUBJECTS = set(GROUPS)  # the subject folders, as the kit's rules list them


def pass_modules() -> list[Path]:
    return sorted(
        path
        for path in PASSES_DIR.rglob("*.py")
        if path.parent != PASSES_DIR and not path.name.startswith("_")
    )


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_pass_folders_are_subjects() -> None:
    folders = {p.name for p in PASSES_DIR.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == SUBJECTS
    for gone in ("default", "sequence_free", "targets"):
        assert not (PASSES_DIR / gone).exists()


@pytest.mark.parametrize("path", pass_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_pass_module_reads_the_pipeline_table(path: Path) -> None:
    assert not {m for m in imported(path) if m.startswith("seqlower.targets")}, path


@pytest.mark.parametrize("path", pass_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_one_pass_class_a_module_and_no_variant_subclass(path: Path) -> None:
    """A registered module holds one pass class, named in the registry; no class there
    derives from another registered pass class (a variant is constructor arguments)."""
    registered = {e.class_name for e in PASSES.values() if isinstance(e, PassEntry)}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    passes = [c.name for c in classes if c.name in registered]
    for cls in classes:
        bases = {ast.unparse(b).split("[")[0] for b in cls.bases}
        assert not bases & registered, f"{path.name}: {cls.name} subclasses {bases & registered}"
    public = [c.name for c in classes if not c.name.startswith("_")]
    assert len(passes) <= 1, f"{path.name} holds the passes {passes}"
    assert set(passes) <= set(public)


def test_every_registry_entry_makes_its_class() -> None:
    for name, entry in PASSES.items():
        assert isinstance(entry, PassEntry), name
        assert type(entry()) is entry.cls, name


def test_rows_are_built_from_named_fragments() -> None:
    tree = ast.parse((PACKAGE / "targets.py").read_text(encoding="utf-8"))
    sliced = [
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice)
    ]
    assert not sliced, sliced


def test_onnx_domain_tested_in_one_place() -> None:
    literal = ('"", "ai.onnx"', "'', 'ai.onnx'", '"ai.onnx", ""')
    found = [
        str(path.relative_to(ROOT))
        for path in PACKAGE.rglob("*.py")
        if path.name != "_graphs.py" and any(s in path.read_text(encoding="utf-8") for s in literal)
    ]
    assert not found, f"use seqlower._graphs.is_onnx (or ONNX_DOMAINS): {found}"
