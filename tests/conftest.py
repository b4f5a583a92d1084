"""The tests' fixtures (and only fixtures: shared functions are in ``tests/helpers.py``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.helpers import CliResult, run_cli


@pytest.fixture
def cli() -> Callable[..., CliResult]:
    """:func:`tests.helpers.run_cli`, for tests that take the command as a fixture."""
    return run_cli
