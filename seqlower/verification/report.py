"""What a check found: per output, per run, and the verdict, with a JSON round-trip, and the
verdict as text (:func:`verdict_lines`: what ``str(VerifyReport)`` and the command line print)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

__all__ = [
    "Culprit",
    "OutputReport",
    "RunReport",
    "SkippedRun",
    "Status",
    "VerifyReport",
    "verdict_lines",
]

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
    #: Of the mismatches, those where a NaN or an infinity meets something else (max abs, over
    #: finite pairs only, says nothing of them).
    special: int = 0
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
    #: True when the target, given the candidate loaded afresh, did on these inputs no worse
    #: than the original (loaded there when a run fails): its results depend on earlier runs.
    afresh: bool = False


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
    #: Failures that are not the lowering's and do not fail the check, one line each: the
    #: export's (the original differs from ``--expected`` as much), unless ``strict_expected``.
    warnings: list[str] = dataclasses.field(default_factory=list)
    #: Whose fault a mismatch is ('' when none): "lowering" when it is at fault anywhere, else
    #: "runtime" (a target gets the original wrong too: the lowered model is still wrong there,
    #: so the check fails), else "export" (``strict_expected``).
    culprit: Culprit = ""
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


def verdict_lines(
    report: VerifyReport,
    *,
    verbose: int = 0,
    style: Callable[[str, str], str] | None = None,
    warnings: bool = True,
) -> list[str]:
    """The check's verdict line, per-run errors, the per-output table of each comparison that
    failed (the original against the lowered model; on a target; against the framework's
    outputs; the first with -v too), notes on redrawn inputs (with -v), and the failures that
    are not the lowering's as ``warning:`` lines (unless ``warnings`` is false: the command
    line prints them on stderr). ``style(label, colour)`` may colour the verdict."""
    label, colour = {
        "equivalent": ("outputs match", "green"),
        "mismatch": ("MISMATCH", "red"),
    }.get(report.status, ("cannot verify", "yellow"))
    styled = style(label, colour) if style is not None else label
    oracles = ", ".join(f"{k}: {v}" for k, v in report.oracles.items())
    reason = report.reason
    if report.ok and reason.startswith("all outputs match"):
        reason = reason[len("all outputs match") :].strip()
    text = f"check: {styled}" + (f"{' ' if report.ok else ': '}{reason}" if reason else "")
    lines = [text + (f" ({oracles})" if oracles else "")]
    for extra in [*report.targets.values(), report.expected]:
        # --target and --expected, one line each; warnings are said as such
        if extra and extra not in reason and extra not in report.warnings:
            lines.append(f"check: {extra}")
    lines += [f"  run {run.index}: {run.error}" for run in report.runs if run.error]
    if verbose or any(not run.ok for run in report.runs):
        lines += _output_table("output", report.runs)
    for name, runs in report.target_runs.items():
        if (verbose or not report.ok) and any(not run.ok and run.outputs for run in runs):
            lines += _output_table(f"on {name}", runs)
    if (verbose or not report.ok) and any(not run.ok for run in report.expected_runs):
        lines += _output_table("vs the framework", report.expected_runs)
    if verbose:
        lines += [f"  note: {problem}" for problem in report.input_problems]
    if warnings:
        lines += [f"warning: {warning}" for warning in report.warnings]
    return lines


def _output_table(heading: str, runs: Sequence[Any]) -> list[str]:
    """Per output, over ``runs`` (``RunReport``s): largest differences and mismatch counts,
    and the original's largest difference where it ran the same comparison."""
    rows: dict[str, list[float]] = {}
    originals: dict[str, float] = {}
    for run in runs:
        for o in run.outputs:
            row = rows.setdefault(o.name, [0.0, 0.0, 0, 0])
            row[0], row[1] = max(row[0], o.max_abs), max(row[1], o.max_rel)
            row[2] += o.mismatches
            row[3] += o.elements
        for o in run.original:
            originals[o.name] = max(originals.get(o.name, 0.0), o.max_abs)
    if not rows:
        return []
    head = f"  {heading:24} {'max abs':>12} {'max rel':>12} {'mismatches':>14}"
    lines = [head + (f" {'original max abs':>17}" if originals else "")]
    for name, (max_abs, max_rel, bad, total) in rows.items():
        count = f"{bad}/{total}"
        line = f"  {name:24} {max_abs:>12.4g} {max_rel:>12.4g} {count:>14}"
        if name in originals:
            line += f" {originals[name]:>17.4g}"
        lines.append(line)
    return lines
