"""The docs stay readable and true (issue 43): the README is a page a newcomer reads in five
minutes, the details live in ``docs/`` pages that the code keeps honest.

The README had grown to 112 KB with its quick start at line 128 and table cells of 12,000
characters; these limits stop it growing back, and the checks below stop the pages that took
its details from drifting away from the code.
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import onnx
import pytest

from seqlower.cli.commands import cli
from seqlower.targets import TARGETS
from tests.helpers import ROOT, parse
from tests.runtimes import require

README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = sorted((ROOT / "docs").rglob("*.md"))


def _outside_code(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def test_the_readme_is_short() -> None:
    assert len(README.splitlines()) <= 300, "README.md: at most 300 lines (details go to docs/)"
    assert len(README.encode()) <= 30_000, "README.md: at most 30 KB (details go to docs/)"
    long = [n for n, line in _outside_code(README) if len(line) > 400]
    assert not long, f"README.md lines over 400 characters: {long}"


def test_the_architecture_page_is_short() -> None:
    """ARCHITECTURE.md had module rows of 3,898 characters: a row is a sentence, the details
    are in the module's docstring."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert len(text.encode()) <= 30_000, "ARCHITECTURE.md: at most 30 KB"
    long = [n for n, line in _outside_code(text) if line.startswith("|") and len(line) > 300]
    assert not long, f"ARCHITECTURE.md table rows over 300 characters: {long}"


def test_install_and_quick_start_come_first() -> None:
    """Both sections begin, and end, within the first 60 lines."""
    headings = [(n, line) for n, line in _outside_code(README) if line.startswith("## ")]
    names = [line for _, line in headings]
    assert "## Install" in names and "## Quick start" in names
    after = names.index("## Quick start") + 1
    end = headings[after][0] if after < len(headings) else len(README.splitlines())
    assert names.index("## Install") < names.index("## Quick start") and end <= 61, end


def _sh_lines(text: str) -> list[str]:
    return [
        line for block in re.findall(r"```sh\n(.*?)```", text, re.S) for line in block.splitlines()
    ]


def test_the_quick_starts_test_command_is_what_ci_runs() -> None:
    """``.ci/run`` runs "the README's test command": the same line, word for word."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = [line for line in _sh_lines(quick) if "pytest" in line]
    assert len(commands) == 1, commands
    assert commands[0] in ci.splitlines(), "README's test command differs from .ci/run's"


def _target_rows() -> dict[str, str]:
    """The README's target table: target name -> the page its first cell links."""
    rows = {}
    for line in README.splitlines():
        match = re.match(r"\| \[`([\w-]+)`\]\(([^)]+)\) \|", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def test_every_target_has_its_row_and_its_page() -> None:
    """One README row per target, linking the runtime's page; no page for a target gone."""
    rows = _target_rows()
    assert sorted(rows) == sorted(TARGETS), "README's target table is not TARGETS"
    for name, page in rows.items():
        assert page == f"docs/targets/{name}.md", page
        assert (ROOT / page).is_file(), f"{page}: no such page"
    pages = {p.stem for p in (ROOT / "docs" / "targets").glob("*.md")}
    assert pages <= set(TARGETS), f"pages of no target: {sorted(pages - set(TARGETS))}"


def _flags() -> dict[str, list[str]]:
    """Each option's long name -> all its names (``--output``: ``-o`` too)."""
    params = list(cli.params)
    for command in cli.commands.values():
        params += command.params
    return {
        max(p.opts, key=len): [*p.opts, *p.secondary_opts]
        for p in params
        if p.opts and p.opts[0].startswith("-") and "--help" not in p.opts
    }


@pytest.mark.parametrize("flag", sorted(_flags()))
def test_every_flag_is_documented(flag: str) -> None:
    """Every flag of every command is in the CLI reference or the proof's page (by any of its
    names: ``-o`` is ``--output``)."""
    reference = (ROOT / "docs" / "cli.md").read_text() + (ROOT / "docs" / "proof.md").read_text()
    names = _flags()[flag]
    named = [n for n in names if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", reference)]
    assert named, f"docs/cli.md never names {flag}"


def _cited(pattern: str) -> list[str]:
    cited = set()
    for path in [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *DOCS]:
        cited |= set(re.findall(pattern, path.read_text(encoding="utf-8")))
    return sorted(cited)


@pytest.mark.parametrize("cited", _cited(r"`(tests/[\w/]+\.py(?:::\w+)?)`"))
def test_cited_tests_exist(cited: str) -> None:
    """A runtime bug worked around is named with its test: that test exists."""
    path, _, name = cited.partition("::")
    assert (ROOT / path).is_file(), f"the docs cite {path}, which is gone"
    if name:
        assert f"def {name}(" in (ROOT / path).read_text(), f"the docs cite {cited}, which is gone"


@pytest.mark.parametrize("cited", _cited(r"(?<![\w/])(seqlower/[\w/]+\.py|benchmarks/[\w/]+\.py)"))
def test_cited_modules_exist(cited: str) -> None:
    """Modules and benchmarks the docs name exist (the passes moved by subject, issue 45)."""
    assert (ROOT / cited).is_file(), f"the docs cite {cited}, which is gone"


#: The model the docs' Python examples read as ``model.onnx``: one ReverseSequence, which every
#: target the examples name lowers and proves.
_MODEL = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[T, 2, 3] x, int64[2] lens) => (float[T, 2, 3] y) {
  y = ReverseSequence<batch_axis=1, time_axis=0>(x, lens)
}
"""


@pytest.mark.parametrize("doc", ["README.md", "docs/api.md"])
def test_python_examples_run(doc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each ``python`` block runs as written, in a folder holding a ``model.onnx``."""
    require("tract")
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / doc).read_text(encoding="utf-8"), re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    onnx.save(parse(_MODEL), "model.onnx")
    for number, block in enumerate(blocks):
        script = tmp_path / f"example_{number}.py"
        script.write_text(block)
        runpy.run_path(str(script), run_name="__main__")
