"""The tests' own layout stays as issue 31 left it: test modules grouped by the code they cover
(a folder each), shared functions in ``tests/helpers.py``, fixtures alone in ``conftest.py``,
one ``parse``, runtimes asked for through ``tests/runtimes.py``."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import ROOT

TESTS = ROOT / "tests"
#: Beside the shared modules, the root holds only the tests of the test machinery itself.
ROOT_TESTS = {"test_layout.py", "test_runtimes.py"}


def _modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "data" not in p.relative_to(TESTS).parts)


def test_test_modules_sit_in_a_folder_of_the_code_they_cover() -> None:
    loose = [p.name for p in TESTS.glob("test_*.py") if p.name not in ROOT_TESTS]
    assert not loose, f"move {loose} into tests/<area>/ (passes, targets, verification, cli, docs)"


def test_conftest_holds_only_fixtures_and_nothing_imports_it() -> None:
    tree = ast.parse((TESTS / "conftest.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            decorators = [ast.unparse(d) for d in getattr(node, "decorator_list", [])]
            assert any(d.startswith("pytest.fixture") for d in decorators), node.name
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "tests.conftest", f"{path}: import from tests.helpers"


def test_one_parse_and_no_direct_runtime_import() -> None:
    for path in _modules():
        if path.name in ("helpers.py", "runtimes.py"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                assert node.name != "parse", f"{path}: use tests.helpers.parse"
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "pytest.importorskip":
                raise AssertionError(f"{path}: skip through tests.runtimes.require")
