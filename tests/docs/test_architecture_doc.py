"""ARCHITECTURE.md stays true: every module is in its table, every registered pass is named.

A module added without its row, or a pass registered without a word on where it runs, fails
here rather than drifting unnoticed (issue 31).
"""

from __future__ import annotations

import re

import pytest

from seqlower.passes import PASSES
from tests.helpers import ROOT

DOC = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")


def table_rows() -> dict[str, str]:
    """The module table: the path in the first cell -> the row's text."""
    rows = {}
    for line in DOC.splitlines():
        match = re.match(r"\| `(seqlower/[^`]*)` \|(.*)", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def modules() -> list[str]:
    package = ROOT / "seqlower"
    return sorted(
        str(path.relative_to(ROOT))
        for path in package.rglob("*.py")
        if path.name not in ("__init__.py", "__main__.py") or path.parent.name == "passes"
    )


@pytest.mark.parametrize("module", modules())
def test_every_module_has_its_row(module: str) -> None:
    """Named by its own row, or inside the row of its folder (``seqlower/cli/``)."""
    rows = table_rows()
    folder = module.rsplit("/", 1)[0] + "/"
    name = module.rsplit("/", 1)[1]
    named = module in rows or (folder in rows and f"`{name}`" in rows[folder])
    assert named, f"ARCHITECTURE.md's module table has no row for {module}"


def test_every_row_names_a_module_that_exists() -> None:
    for path in table_rows():
        assert (ROOT / path).exists(), f"ARCHITECTURE.md names {path}, which is gone"


@pytest.mark.parametrize("name", sorted(PASSES))
def test_every_registered_pass_is_named(name: str) -> None:
    """By its registry name or its class name, somewhere in ARCHITECTURE.md."""
    cls = PASSES[name]
    class_name = getattr(cls, "__name__", type(cls).__name__)
    assert f"`{name}`" in DOC or class_name in DOC, f"ARCHITECTURE.md never names pass {name}"
