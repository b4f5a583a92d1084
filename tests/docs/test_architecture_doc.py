"""ARCHITECTURE.md stays true: every module is in its table, every registered pass is named.

A module added without its row, or a pass registered without a word on where it runs, fails
here rather than drifting unnoticed (issue 31).
"""

from __future__ import annotations

import ast
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


def _imports() -> dict[str, set[str]]:
    """Each seqlower module -> the seqlower modules it imports, at the top or inside a
    function alike (a lazy import still ties the two modules together)."""
    modules = {}
    for path in (ROOT / "seqlower").rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            found: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                found += [a.name for a in node.names]
            graph[name].update(m for m in found if m in modules and m != name)
    return graph


def test_no_import_circle() -> None:
    """The layers hold (cli -> job -> pipeline -> passes, verification beside them): no module
    reaches itself through imports (``verification/report.py`` once formatted its verdict
    through ``summary.py``, which imports the report)."""
    graph = _imports()

    def reaches(start: str) -> list[str] | None:
        paths = [[start]]
        seen: set[str] = set()
        while paths:
            path = paths.pop()
            for nxt in sorted(graph[path[-1]]):
                if nxt == start:
                    return [*path, nxt]
                if nxt not in seen:
                    seen.add(nxt)
                    paths.append([*path, nxt])
        return None

    circles = [" -> ".join(circle) for name in graph if (circle := reaches(name))]
    assert not circles, circles[0]


def test_verification_knows_nothing_of_passes() -> None:
    """The check compares any two models: nothing under seqlower/verification imports a pass,
    the pipeline, the targets' table, the summary or the command line."""
    graph = _imports()
    above = ("seqlower.passes", "seqlower.pipeline", "seqlower.targets", "seqlower.summary")
    for name, imported in graph.items():
        if name.startswith("seqlower.verification"):
            wrong = sorted(m for m in imported if m.startswith((*above, "seqlower.cli")))
            assert not wrong, f"{name} imports {wrong}"


def _documented_pipelines() -> dict[str, list[str]]:
    """The "Pipelines" section: each row's list, ``[sequence-free passes]`` expanded."""
    section = DOC.split("\n## Pipelines\n", 1)[1].split("\n## ", 1)[0]
    words = " ".join(section.split())
    shared = words.split("`[sequence-free passes]` stands for: ", 1)[1].split(".", 1)[0]
    listed = words[words.index("- `") :]
    rows = re.findall(r"- `([\w-]+)`: (.*?)(?= - `|$)", listed)
    return {
        name: [p.strip() for p in text.replace("[sequence-free passes]", shared).split(",")]
        for name, text in rows
    }


def test_the_documented_pipelines_are_the_tables() -> None:
    """ARCHITECTURE.md's "Pipelines" lists, row by row, what build_pipeline runs."""
    from seqlower.pipeline import build_pipeline, pass_name
    from seqlower.targets import PIPELINES, TARGETS

    built = {}
    for name in PIPELINES:
        if name in TARGETS:
            pipeline = build_pipeline(target=name)
        else:
            pipeline = build_pipeline(sequence_free=name == "sequence-free")
        built[name] = [pass_name(p) for p in pipeline.passes]
    documented = _documented_pipelines()
    assert list(documented) == list(built), "ARCHITECTURE.md's pipelines are not the table's rows"
    for name, passes in built.items():
        assert documented[name] == passes, f"ARCHITECTURE.md's {name} pipeline: {passes}"
