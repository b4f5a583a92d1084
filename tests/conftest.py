"""What the tests share: the command line run in process, and the one-line-error check."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import click.testing
import pytest

from seqlower.cli.commands import cli as seqlower_cli


class CliResult:
    """A run of the command: ``exit_code``, ``stdout``, ``stderr`` (and click's ``Result``'s
    other fields); unpacks as ``code, stdout, stderr``."""

    def __init__(self, result: click.testing.Result) -> None:
        self.result = result
        self.exit_code = result.exit_code
        self.stdout = result.stdout
        self.stderr = result.stderr
        self.output = result.output

    def __iter__(self) -> Iterator[Any]:
        return iter((self.exit_code, self.stdout, self.stderr))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.result, name)


def run_cli(*args: Any, **kwargs: Any) -> CliResult:
    """``seqlower ARGS...`` in this process (exceptions propagate); ``kwargs`` go to click's
    ``CliRunner.invoke`` (``input``, ``env``, ``color``, ...)."""
    kwargs.setdefault("catch_exceptions", False)
    runner = click.testing.CliRunner()
    return CliResult(runner.invoke(seqlower_cli, [str(a) for a in args], **kwargs))


def assert_one_line_error(
    result: Any, *words: str, code: int = 2, prefix: str = "seqlower: error: "
) -> str:
    """The run failed with ``code`` and said why in one line, ``seqlower: error: ...`` (or
    another ``prefix``), holding each of ``words`` and no traceback; returns that line."""
    assert result.exit_code == code, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), result.stderr
    assert "Traceback" not in result.output, result.output
    for word in words:
        assert word in lines[0], (word, lines[0])
    return str(lines[0])


@pytest.fixture
def cli() -> Callable[..., CliResult]:
    """:func:`run_cli`, for tests that take the command as a fixture."""
    return run_cli
