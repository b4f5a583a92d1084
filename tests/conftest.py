"""The tests' fixtures and hypothesis profile (shared functions are in ``tests/helpers.py``)."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from hypothesis import settings

from tests.helpers import CliResult, run_cli

# CI draws the same examples on every run (a red CI must mean a change broke something, not a
# new draw); at a desk, hypothesis explores and remembers failures in .hypothesis/.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def cli() -> Callable[..., CliResult]:
    """:func:`tests.helpers.run_cli`, for tests that take the command as a fixture."""
    return run_cli
