"""The README and ``--help`` show what the tool does: the sample output is a run's, the example
commands parse (issue 31: they had drifted from the tool)."""

from __future__ import annotations

import contextlib
import re
import shlex
from pathlib import Path

import click
import pytest

from seqlower.cli.commands import cli
from tests.helpers import EXAMPLE, ROOT, run_cli

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _normalized(text: str) -> list[str]:
    """Lines with times as ``T`` and runs of spaces as one (column widths follow the times)."""
    text = re.sub(r"\b\d+(\.\d+)?(ms|s)\b", "T", text)
    return [" ".join(line.split()) for line in text.strip().splitlines()]


def test_the_readmes_sample_output_is_a_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The block after "What `seqlower examples/preprocess.onnx -o lowered.onnx` prints" is what
    that command prints (times aside)."""
    intro = "What `seqlower examples/preprocess.onnx -o lowered.onnx` prints"
    assert intro in README
    block = README.split(intro, 1)[1].split("```\n", 2)[1]
    monkeypatch.chdir(tmp_path)
    result = run_cli(EXAMPLE, "-o", "lowered.onnx")
    assert result.exit_code == 0, result.stderr
    assert _normalized(block) == _normalized(result.stdout + result.stderr)


def _readme_commands() -> list[str]:
    """The ``seqlower ...`` lines of the shell blocks of the README and the CLI reference
    (placeholders in brackets and ``...`` left out: they are not commands)."""
    commands = []
    text = README + (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.splitlines():
            command = line.split("  #", 1)[0].strip()
            if command.startswith("seqlower ") and "[" not in command and "..." not in command:
                commands.append(command)
    return commands


def _help_commands() -> list[str]:
    """The examples of every command's ``--help``."""
    commands = []
    for args in ([], ["lower"], ["verify"], ["inspect"], ["example"]):
        text = run_cli(*args, "--help").stdout
        commands += [
            line.split("  #", 1)[0].strip()
            for line in text.splitlines()
            if line.strip().startswith("seqlower ")
        ]
    return sorted(set(commands))


def _parses(command: str) -> None:
    """Parse ``command`` as seqlower would, flags and values included, running nothing."""
    args = shlex.split(command)[1:]
    group_flags = {o for p in cli.params for o in p.opts}
    if len(args) == 1 and args[0] in group_flags:
        return  # --version, --list-passes, --list-targets: the group's own
    name = args[0] if args and args[0] in cli.commands else "lower"
    rest = args[1:] if name == args[0] else args
    root = click.Context(cli, info_name="seqlower")
    with contextlib.suppress(click.exceptions.Exit):  # --help
        cli.commands[name].make_context(name, rest, parent=root)


@pytest.mark.parametrize("command", _readme_commands() + _help_commands())
def test_example_commands_parse(command: str) -> None:
    _parses(command)


def test_the_help_says_what_each_target_does() -> None:
    """``--target`` lowers in ``lower`` and only runs CANDIDATE in ``verify``; OpenVINO's
    target keeps Loops (repaired), tract's writes Scans."""
    assert "Lower for this runtime" in run_cli("lower", "--help").stdout
    verify = " ".join(run_cli("verify", "--help").stdout.split())
    assert "Lower for this runtime" not in verify and "Also run CANDIDATE on this runtime" in verify
    assert "compare CANDIDATE with" in verify and "lowered model" not in verify
    main = " ".join(run_cli("--help").stdout.split())
    assert "Loops as Scans for tract, repaired for OpenVINO" in main


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@pytest.mark.parametrize(
    "doc",
    [
        "README.md",
        "ARCHITECTURE.md",
        "CHANGELOG.md",
        *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")),
    ],
)
def test_relative_links_lead_somewhere(doc: str) -> None:
    """Every relative link of the docs names a file that exists, and a heading in it when it
    has an anchor (the README's details moved to docs/: it links them)."""
    path = ROOT / doc
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8")):
        if "://" in target:
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        assert linked.exists(), f"{doc} links {target}: no such file"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.M)
            assert anchor in {_slug(h) for h in headings}, f"{doc} links {target}: no heading"
