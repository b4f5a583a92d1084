"""What a check found: per output, per run, and the verdict, with a JSON round-trip."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

__all__ = ["Culprit", "OutputReport", "RunReport", "SkippedRun", "Status", "VerifyReport"]

Status = Literal["equivalent", "mismatch", "cannot_verify"]
#: Whose fault a failure on a target or against the framework's outputs is: the lowering's (the
#: original passes, or does not even load there), the export's (the original differs from the
#: framework's outputs as much) or the runtime's (the original fails there the same way).
Culprit = Literal["", "lowering", "export", "runtime"]


@dataclasses.dataclass
class OutputReport:
    """How one output of one run compared."""

    name: str
    ok: bool
    kind: str = "tensor"  # or "sequence"
    max_abs: float = 0.0
    max_rel: float = 0.0
    mismatches: int = 0
    elements: int = 0
    reference_shape: list[Any] | None = None
    candidate_shape: list[Any] | None = None
    reference_length: int | None = None
    candidate_length: int | None = None
    message: str = ""


@dataclasses.dataclass
class RunReport:
    """One run (numbered from 1): the inputs it used (shapes), and each output's comparison."""

    index: int
    ok: bool
    inputs: dict[str, Any]
    outputs: list[OutputReport]
    error: str = ""  # the candidate's failure, when it failed to run
    attempts: int = 1
    #: False when the runtime could not even prepare the candidate for these inputs (tract's
    #: typing with their shapes): nothing ran on them, so they are not saved as failing inputs.
    loaded: bool = True
    #: For a failed comparison on a target or against the framework's outputs: whose fault it
    #: is, and the original's own comparison there (same outputs, same reference) or its error.
    culprit: Culprit = ""
    original: list[OutputReport] = dataclasses.field(default_factory=list)
    original_error: str = ""


@dataclasses.dataclass
class SkippedRun:
    """A planned run that was not compared (numbered from 1), ``what`` it was and why not."""

    index: int
    what: str
    reason: str

    def __str__(self) -> str:
        return f"run {self.index} ({self.what}) was skipped: {self.reason}"


@dataclasses.dataclass
class VerifyReport:
    """The verdict, and everything needed to understand or reproduce it."""

    status: Status
    reason: str
    runs: list[RunReport]
    oracles: dict[str, str]
    seed: int
    versions: dict[str, str]
    input_problems: list[str] = dataclasses.field(default_factory=list)
    skipped: list[SkippedRun] = dataclasses.field(default_factory=list)
    #: Per target runtime (``--target``), one line: ``runs and matches on tract 0.23.9`` or why not.
    targets: dict[str, str] = dataclasses.field(default_factory=dict)
    target_runs: dict[str, list[RunReport]] = dataclasses.field(default_factory=dict)
    #: Against the framework's outputs (``--expected``): one line, '' when not asked.
    expected: str = ""
    expected_runs: list[RunReport] = dataclasses.field(default_factory=list)
    #: Failures that are not the lowering's (the export's, a runtime's), one line each: the
    #: verdict stays ``equivalent``, and these are said as warnings.
    warnings: list[str] = dataclasses.field(default_factory=list)
    #: The feeds of the first failing run, for saving; not part of the JSON report.
    failing_inputs: dict[str, Any] | None = dataclasses.field(default=None, repr=False)
    #: The framework's outputs for those feeds (with ``expected``), saved beside them.
    failing_outputs: dict[str, Any] | None = dataclasses.field(default=None, repr=False)
    #: Each compared run's feeds and the reference's outputs, when ``CheckOptions.keep_runs``
    #: asks (``--save-inputs``/``--save-outputs``); not part of the JSON report.
    kept_runs: list[tuple[dict[str, Any], list[Any]]] = dataclasses.field(
        default_factory=list, repr=False
    )

    @property
    def ok(self) -> bool:
        return self.status == "equivalent"

    def __str__(self) -> str:
        """The verdict and the per-output table, as ``seqlower ... -v`` prints them."""
        from seqlower.summary import verdict_lines

        return "\n".join(verdict_lines(self, verbose=1))

    def to_dict(self) -> dict[str, Any]:
        # The arrays are left out before asdict, which would deep-copy them.
        data = dataclasses.asdict(
            dataclasses.replace(self, failing_inputs=None, failing_outputs=None, kept_runs=[])
        )
        data.pop("failing_inputs")
        data.pop("failing_outputs")
        data.pop("kept_runs")
        data["ok"] = self.ok
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VerifyReport:
        fields = dict(data)
        fields.pop("ok", None)

        def runs_of(items: list[Any]) -> list[RunReport]:
            return [
                RunReport(
                    **{
                        **run,
                        "outputs": [OutputReport(**o) for o in run["outputs"]],
                        "original": [OutputReport(**o) for o in run.get("original", [])],
                    }
                )
                for run in items
            ]

        runs = runs_of(fields.pop("runs"))
        skipped = [SkippedRun(**s) for s in fields.pop("skipped", [])]
        target_runs = {k: runs_of(v) for k, v in fields.pop("target_runs", {}).items()}
        expected_runs = runs_of(fields.pop("expected_runs", []))
        return cls(
            runs=runs,
            skipped=skipped,
            target_runs=target_runs,
            expected_runs=expected_runs,
            **fields,
        )
