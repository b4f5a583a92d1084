"""Numerical verification: run two models on the same inputs and compare every output.

It knows nothing of seqlower's passes: it compares any reference model with any candidate.

- :mod:`.check`: :func:`verify` and its :class:`CheckOptions` (runs, retries, the verdict).
- :mod:`.runtimes`: the runtimes, one adapter module each on the :class:`~.runtimes.Oracle`
  base class, tried in the order of :data:`~.runtimes.ORACLES` (both models in the first that
  loads the reference); :data:`~.runtimes.TARGET_ORACLES`, the runtimes ``--target`` also
  proves the candidate on.
- :mod:`.compare`: output comparison and :class:`Tolerances`.
- :mod:`.report`: :class:`VerifyReport` and its parts, with a JSON round-trip.
- :mod:`.inputs`: inputs for the check, generated or read from files and validated;
- :mod:`.constraints`: what the graph requires of them (index ranges, tied dimensions).
"""

from __future__ import annotations

from seqlower.verification.check import (
    DEFAULT_TIMEOUT,
    CheckOptions,
    default_memory_budget,
    verify,
)
from seqlower.verification.compare import Tolerances, compare_values, default_tolerance
from seqlower.verification.report import OutputReport, RunReport, SkippedRun, VerifyReport
from seqlower.verification.runtimes import ORACLES, TARGET_ORACLES, Oracle

__all__ = [
    "DEFAULT_TIMEOUT",
    "ORACLES",
    "TARGET_ORACLES",
    "CheckOptions",
    "Oracle",
    "OutputReport",
    "RunReport",
    "SkippedRun",
    "Tolerances",
    "VerifyReport",
    "compare_values",
    "default_memory_budget",
    "default_tolerance",
    "verify",
]
