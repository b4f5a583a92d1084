"""The check itself: run two models on the same inputs and compare every output.

This module knows nothing of seqlower's passes: it compares any reference model with any
candidate. Both run in the first oracle that loads the reference (:mod:`.runtimes`): a candidate
that oracle refuses, or that fails ONNX's strict shape inference where the reference passes, is a
failed check. With ``runtimes`` the candidate also runs on each target runtime and is compared
with the same reference outputs; with ``expected`` its outputs are compared with the framework's
own. A failure there is blamed (:meth:`_Check.blame_target`, :meth:`_Check.blame_export`): the
original runs the same way (on that target; its outputs against the framework's), and a failure
the original shares, as much, is the runtime's or the export's, said as a warning, not a
mismatch. Inputs are the
user's (validated against the model) or drawn from the model's declared types and the
constraints its graph puts on them (:mod:`.inputs`, :mod:`.constraints`). When
nothing can run the reference, the report says it cannot verify, and why: it is never ``ok``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from typing import Any

import onnx
import onnx_ir as ir

from seqlower._graphs import is_onnx
from seqlower._version import __version__, dependency_versions
from seqlower.errors import CheckLimitError, ModelTypeError, first_line
from seqlower.io import load_model, self_contained_proto, strict_inference_problem
from seqlower.verification.check_options import (
    DEFAULT_TIMEOUT,
    CheckOptions,
    check_input_budget,
    check_names,
    default_memory_budget,
)
from seqlower.verification.constraints import Analysis, analyze
from seqlower.verification.inputs import input_specs
from seqlower.verification.report import Culprit, RunReport, SkippedRun, Status, VerifyReport
from seqlower.verification.runs import (
    KNOWN_HANG,
    RunPlan,
    compare_expected,
    compare_run,
    load_expected,
    reference_outputs,
    run_plans,
)
from seqlower.verification.runtimes import (
    CandidateRefused,
    NotLoaded,
    Oracle,
    Runner,
    bounded,
    load_pair,
    load_target,
)
from seqlower.verification.verdicts import (
    SAME_REFUSAL,
    expected_summary,
    hint,
    no_worse,
    other_facts,
    refused_on,
    same_refusal,
    skips,
    target_summary,
    tolerance_of,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "CheckOptions",
    "check_names",
    "default_memory_budget",
    "verify",
]

ModelLike = onnx.ModelProto | ir.Model | str | os.PathLike[str]


def verify(
    reference: ModelLike,
    candidate: ModelLike,
    options: CheckOptions | None = None,
    **kwargs: Any,
) -> VerifyReport:
    """Run ``reference`` and ``candidate`` on the same inputs and compare every output.

    ``options`` is a :class:`CheckOptions`; its fields may be given as keywords instead
    (``rtol``/``atol`` as one number or per output name, others keeping the dtype's default).

    The check is bounded: generated inputs that, with both models' declared outputs on them, are
    larger than the memory budget are refused before anything is allocated, and the runs stop
    after the timeout; both raise :class:`CheckLimitError`, as does running out of memory.
    Ctrl-C stops a run within a fraction of a second. Inputs given by the user that do not fit
    the model raise :class:`seqlower.verification.inputs.InputError`.
    """
    if options is None:
        options = CheckOptions.from_kwargs(**kwargs)
    elif kwargs:
        raise TypeError("give verify() either a CheckOptions or keywords, not both")
    inputs_flag = "--inputs"
    if options.expected is not None and options.inputs is None:
        options = dataclasses.replace(options, inputs=options.expected)
        inputs_flag = "--expected"  # the file supplies the inputs too: named as given
    targets = [  # exit 2 at once when one is missing
        load_target(name, lowering=False).with_timeout(options.target_timeout)
        for name in options.runtimes
    ]
    reference_proto = _as_proto(reference)
    candidate_proto = _as_proto(candidate)
    open_axes = unspecified_empty_axes(reference_proto)
    if open_axes:
        tolerances = dataclasses.replace(options.tolerances, unspecified=open_axes)
        options = dataclasses.replace(options, tolerances=tolerances)
    budget = default_memory_budget() if options.memory_budget is None else options.memory_budget
    limit = DEFAULT_TIMEOUT if options.timeout is None else options.timeout
    if options.inputs is None:
        check_input_budget(reference_proto, budget, options, candidate_proto)
    check = _Check(options, _versions(), time.monotonic() + limit, limit, reference_proto)
    signature_problem = _compare_signatures(reference_proto, candidate_proto)
    if signature_problem:
        return check.report("mismatch", signature_problem)
    try:
        analysis = analyze(reference_proto)
    except Exception as e:  # a model the analysis does not understand still gets checked
        analysis = Analysis()
        check.problems.append(f"inputs drawn from declared types only: {first_line(e)[:300]}")
    plans = run_plans(reference_proto, options, analysis, inputs_flag)
    expected_outputs = load_expected(options, reference_proto, len(plans))
    refused = check.load(reference_proto, candidate_proto, targets)
    if refused is not None:
        return refused
    stopped = check.run(reference_proto, plans, analysis, expected_outputs)
    if stopped is not None:
        return stopped
    return check.conclude(expected_outputs is not None)


def unspecified_empty_axes(model: onnx.ModelProto) -> dict[str, frozenset[int]]:
    """Per graph output that is a ``Loop``'s scan output (directly or through ``Identity``s),
    the axes past the first where the body's output declares no size: after zero iterations
    ONNX says nothing of them (onnxruntime gives 0, OpenVINO the previous run's, a ``Scan`` its
    rows'), so two empty results may differ there."""
    producers = {out: node for node in model.graph.node for out in node.output}
    found: dict[str, frozenset[int]] = {}
    for output in model.graph.output:
        name, node = output.name, producers.get(output.name)
        while is_onnx(node, "Identity"):
            name = node.input[0]
            node = producers.get(name)
        if not is_onnx(node, "Loop"):
            continue
        body = next((a.g for a in node.attribute if a.name == "body"), None)
        k = list(node.output).index(name)
        states = len(node.input) - 2
        if body is None or k < states or 1 + k >= len(body.output):
            continue
        declared = body.output[1 + k].type.tensor_type
        if declared.HasField("shape"):
            dims = [(i + 1, d.HasField("dim_value")) for i, d in enumerate(declared.shape.dim)]
        elif output.type.tensor_type.HasField("shape"):  # no size declared: all past axis 0
            dims = [(i, False) for i in range(1, len(output.type.tensor_type.shape.dim))]
        else:
            continue
        open_dims = frozenset(axis for axis, static in dims if not static)
        if open_dims:
            found[output.name] = open_dims
    return found


@dataclasses.dataclass
class _Check:
    """One check under way: the runners, then each run's outputs and how they compared."""

    options: CheckOptions
    versions: dict[str, str]
    deadline: float
    limit: float
    original: onnx.ModelProto  # the reference, loaded on a target only to blame a failure there
    problems: list[str] = dataclasses.field(default_factory=list)
    oracles: dict[str, str] = dataclasses.field(default_factory=dict)
    reference: Runner | None = None
    candidate: Runner | None = None
    on_targets: list[Runner] = dataclasses.field(default_factory=list)
    runs: list[RunReport] = dataclasses.field(default_factory=list)
    target_runs: dict[str, list[RunReport]] = dataclasses.field(default_factory=dict)
    expected_runs: list[RunReport] = dataclasses.field(default_factory=list)
    skipped: list[SkippedRun] = dataclasses.field(default_factory=list)
    failing: dict[str, Any] | None = None
    failing_outputs: dict[str, Any] | None = None
    target_oracles: dict[str, Oracle] = dataclasses.field(default_factory=dict)
    originals: dict[str, Runner | str] = dataclasses.field(default_factory=dict)
    #: Targets whose candidate, loaded afresh, failed as before: the verdict blames the
    #: lowering there already (its first such run), so it is not loaded afresh again.
    failed_afresh: set[str] = dataclasses.field(default_factory=set)
    kept: list[tuple[dict[str, Any], list[Any]]] = dataclasses.field(default_factory=list)
    candidate_proto: onnx.ModelProto | None = None
    same: bool | None = None

    def report(self, status: Status, reason: str, **extra: Any) -> VerifyReport:
        if status == "mismatch":
            extra.setdefault("culprit", "lowering")
        return VerifyReport(
            status,
            reason,
            extra.pop("runs", []),
            extra.pop("oracles", {}),
            self.options.seed,
            self.versions,
            kept_runs=self.kept,
            **extra,
        )

    def load(
        self, reference: onnx.ModelProto, candidate: onnx.ModelProto, targets: list[Oracle]
    ) -> VerifyReport | None:
        """Load both models in the first oracle that takes the reference, and the candidate on
        each target; a report when that already decides the check."""
        problems = self.problems
        try:
            pair = load_pair(reference, candidate, self.options.oracles)
        except CandidateRefused as e:
            return self.report("mismatch", str(e), input_problems=problems)
        if isinstance(pair, list):
            return self.report(
                "cannot_verify", "no runtime can run the reference: " + "; ".join(pair)
            )
        strict = strict_inference_problem(candidate)
        if strict:
            if not strict_inference_problem(reference):
                return self.report(
                    "mismatch", f"the lowered model fails ONNX's strict shape inference: {strict}"
                )
            problems.append(f"strict shape inference fails on both models: {strict}")
        self.candidate_proto = candidate
        self.reference, self.candidate = (bounded(r, self.deadline, self.limit) for r in pair)
        self.oracles = {"reference": self.reference.name, "candidate": self.candidate.name}
        for name, target in zip(self.options.runtimes, targets, strict=True):
            label = target.label()
            self.target_oracles[label] = target
            try:
                loaded = dataclasses.replace(target.load(candidate), name=label)
                self.on_targets.append(bounded(loaded, self.deadline, self.limit))
                self.oracles[f"target {name}"] = self.on_targets[-1].name
            except Exception as e:
                # The lowering's: a lowered model must at least load where it is for; unless
                # there was no lowering (``verify A A``), or the original fails to load there
                # the same way (issue 42): then the runtime cannot run what it was given.
                original = self.original_on(label)
                same = isinstance(original, str) and self.candidate_is_original()
                if same:
                    refused = (
                        f"does not load on {label}: {first_line(e)}; the candidate is the "
                        f"reference itself: {label} cannot run this model"
                    )
                    culprit: Culprit = "runtime"
                else:
                    refused, culprit = refused_on(label, first_line(e), original)
                return self.report(
                    "mismatch",
                    f"the {'model' if same else 'lowered model'} {refused}",
                    oracles=self.oracles,
                    input_problems=problems,
                    targets={label: refused},
                    culprit=culprit,
                )
        self.target_runs = {r.name: [] for r in self.on_targets}
        return None

    def candidate_is_original(self) -> bool:
        """Whether the candidate is the reference itself (asked once)."""
        if self.same is None:
            self.same = _same_model(self.original, self.candidate_proto)
        return self.same

    def original_on(self, label: str) -> Runner | str:
        """The original loaded on target ``label`` (once), or why it does not load there."""
        if label not in self.originals:
            try:
                loaded = self.target_oracles[label].load(self.original)
                runner = dataclasses.replace(loaded, name=label)
                self.originals[label] = bounded(runner, self.deadline, self.limit)
            except CheckLimitError:
                raise
            except Exception as e:
                self.originals[label] = first_line(e)
        return self.originals[label]

    def run(
        self,
        model: onnx.ModelProto,
        plans: list[RunPlan],
        analysis: Analysis,
        expected_outputs: list[dict[str, Any]] | None,
    ) -> VerifyReport | None:
        """Produce the reference's outputs run by run and compare the candidate's (and each
        target's, and the framework's) with them; a report when a run stops the check."""
        assert self.reference is not None
        names = [s.name for s in input_specs(model)]
        for index, plan in enumerate(plans, start=1):
            if self.options.on_run is not None:
                self.options.on_run(index, len(plans))
            # A reference that loads but fails on an input says the input is wrong for it: new
            # inputs are drawn, but no other oracle is asked (it might accept what the model
            # rejects).
            outcome = reference_outputs(self.reference, plan, index, self.problems, analysis, names)
            if isinstance(outcome, str):
                why = f"the reference ({self.reference.name}) fails on them ({outcome})"
                if plan.optional:
                    self.skipped.append(SkippedRun(index, plan.what, why))
                    continue
                return self.report(
                    "cannot_verify",
                    f"the reference ({self.reference.name}) failed on "
                    + ("the given inputs" if not plan.retry else "every input drawn")
                    + f" in run {index}: {outcome}"
                    + hint(model, self.options),
                    runs=self.runs,
                    oracles=self.oracles,
                    input_problems=self.problems,
                    skipped=self.skipped,
                )
            expected = None if expected_outputs is None else expected_outputs[index - 1]
            self.compare(model, index, outcome, expected)
        return None

    def compare(
        self,
        model: onnx.ModelProto,
        index: int,
        outcome: tuple[dict[str, Any], list[Any], int],
        framework_outputs: dict[str, Any] | None,
    ) -> None:
        """Compare run ``index``'s candidate and target outputs with the reference's."""
        assert self.candidate is not None
        output_names = [o.name for o in model.graph.output]
        tolerances = self.options.tolerances
        feeds, expected, attempts = outcome
        run, actual = compare_run(index, feeds, expected, self.candidate, output_names, tolerances)
        run.attempts = attempts
        self.runs.append(run)
        if self.options.keep_runs:
            self.kept.append((feeds, expected))
        blamed: list[RunReport] = []  # failures on a target or against the framework's outputs
        for runner in self.on_targets:
            at_precision = dataclasses.replace(tolerances, narrowed=runner.narrows)
            on_target, outputs = compare_run(
                index, feeds, expected, runner, output_names, at_precision
            )
            if not on_target.ok:
                self.blame_target(runner.name, on_target, feeds, expected, outputs, output_names)
                blamed.append(on_target)
            self.target_runs[runner.name].append(on_target)
        if framework_outputs is not None and actual is not None:
            framework = compare_expected(
                index,
                run,
                dict(zip(output_names, actual, strict=True)),
                framework_outputs,
                self.options,
            )
            if not framework.ok:
                self.blame_export(framework, run, expected, framework_outputs, output_names)
                blamed.append(framework)
            self.expected_runs.append(framework)
        # Saved for reproducing: the first run that fails the check (and that ran: a runtime
        # that cannot load the model ran nothing on its inputs).
        failed = not run.ok or any(self.fails(r.culprit) and r.loaded for r in blamed)
        if failed and self.failing is None:
            self.failing, self.failing_outputs = feeds, framework_outputs

    def blame_target(
        self,
        label: str,
        failed: RunReport,
        feeds: dict[str, Any],
        expected: list[Any],
        actual: list[Any] | None,
        names: list[str],
    ) -> None:
        """Whose fault the candidate's failure on target ``label`` is: the original runs there
        on the same feeds. The runtime's when the original fails there the same way, as much;
        the lowering's when the original does not load there (the lowering did not reach the
        target) or does better."""
        if failed.original_error == KNOWN_HANG:
            return  # the runtime's, named by its adapter: nothing the original could say
        tolerances = self.options.tolerances
        original = self.original_on(label)
        failed.culprit = "lowering"
        if isinstance(original, str):
            failed.original_error = f"does not load: {original}"
            if self.candidate_is_original():  # verify A A: no lowering to blame
                failed.culprit = "runtime"
            return
        try:
            outputs = original.run(feeds)
        except CheckLimitError:
            raise
        except NotLoaded as e:
            failed.original_error = f"does not load: {first_line(e)}"
            if self.candidate_is_original():  # verify A A: no lowering to blame
                failed.culprit = "runtime"
            elif same_refusal(failed.error, first_line(e)):  # the same refusal (tract typing
                failed.original_error = SAME_REFUSAL  # both with declared facts): the runtime's
                failed.culprit = "runtime"
            return
        except Exception as e:
            failed.original_error = first_line(e)
            if not failed.loaded:
                return  # the original loads there: the lowered model must too
            # Both fail to run: the same failure. Wrong numbers where the original stops with
            # an error are worse, and the lowering's.
            failed.culprit = "runtime" if failed.error else "lowering"
            return
        failed.original = [
            tolerances.compare(name, e, o)
            for name, e, o in zip(names, expected, outputs, strict=True)
        ]
        if failed.error or actual is None:
            return  # the original loads and runs there
        limits = {n: tolerance_of(tolerances, n, e) for n, e in zip(names, expected, strict=True)}
        same = {
            name: tolerances.compare(name, o, a)
            for name, o, a in zip(names, outputs, actual, strict=True)
        }
        if no_worse(failed.outputs, failed.original, same, limits):
            failed.culprit = "runtime"
        else:
            self.judge_afresh(label, failed, feeds, expected, outputs, names, limits)

    def judge_afresh(
        self,
        label: str,
        failed: RunReport,
        feeds: dict[str, Any],
        expected: list[Any],
        original: list[Any],
        names: list[str],
        limits: Mapping[str, tuple[float, float]],
    ) -> None:
        """The original is loaded on target ``label`` only when a run fails there, so it has
        not had the runs before that the candidate had: a runtime whose results depend on them
        (OpenVINO 2026.4.1 gives a zero-trip Loop's scan output the previous run's rows) made
        the lowering look worse. The candidate is loaded afresh and run once more (only when it
        returned outputs: a run that failed or timed out is not waited for twice); when it then
        does no worse than the original, the difference was the runtime's. Once it fails
        afresh too, the verdict blames the lowering, and it is not loaded again (a converter's
        load is a compilation)."""
        assert self.candidate_proto is not None
        if label in self.failed_afresh:
            return
        self.failed_afresh.add(label)  # until it does no worse
        try:
            loaded = self.target_oracles[label].load(self.candidate_proto)
            runner = bounded(dataclasses.replace(loaded, name=label), self.deadline, self.limit)
            fresh = runner.run(feeds)
        except CheckLimitError:
            raise
        except Exception:  # loaded afresh it fails too: the blame stands
            return
        tolerances = self.options.tolerances
        outputs = [
            tolerances.compare(n, e, a) for n, e, a in zip(names, expected, fresh, strict=True)
        ]
        same = {
            n: tolerances.compare(n, o, a) for n, o, a in zip(names, original, fresh, strict=True)
        }
        if no_worse(outputs, failed.original, same, limits):
            failed.culprit, failed.afresh = "runtime", True
            self.failed_afresh.discard(label)

    def blame_export(
        self,
        failed: RunReport,
        run: RunReport,
        expected: list[Any],
        framework_outputs: dict[str, Any],
        names: list[str],
    ) -> None:
        """Whose fault the candidate's differing from the framework's outputs is: the export's
        when the original (its outputs in the oracle) differs from them as much, else the
        lowering's."""
        reference = dict(zip(names, expected, strict=True))
        original = compare_expected(run.index, run, reference, framework_outputs, self.options)
        failed.original = original.outputs
        same = {o.name: o for o in run.outputs}  # the candidate against the original
        tolerances = self.options.tolerances
        limits = {name: tolerance_of(tolerances, name, v) for name, v in framework_outputs.items()}
        ok = no_worse(failed.outputs, failed.original, same, limits)
        failed.culprit = "export" if ok else "lowering"

    def fails(self, culprit: Culprit) -> bool:
        """Whether a failure blamed on ``culprit`` fails the check: the lowering's and a target
        runtime's always (the lowered model is wrong where it is to run, whoever is to blame),
        the export's only with ``strict_expected``."""
        return culprit in ("lowering", "runtime") or (
            culprit == "export" and self.options.strict_expected
        )

    def conclude(self, with_expected: bool) -> VerifyReport:
        """The verdict once every run was compared: a mismatch when the lowering is at fault
        anywhere, or a target runtime (the original fails there too), or the export with
        ``strict_expected``; else the export's differences are warnings."""
        runs, skipped = self.runs, self.skipped
        verdicts = {name: target_summary(name, r) for name, r in self.target_runs.items()}
        expected_line, expected_culprit = (
            expected_summary(self.expected_runs) if with_expected else ("", "")
        )
        verdicts_and_expected = [*verdicts.values(), (expected_line, expected_culprit)]
        extra: dict[str, Any] = {
            "runs": runs,
            "oracles": self.oracles,
            "input_problems": self.problems,
            "skipped": skipped,
            "targets": {name: line for name, (line, _) in verdicts.items()},
            "target_runs": self.target_runs,
            "expected": expected_line,
            "expected_runs": self.expected_runs,
            "warnings": [
                line
                for line, culprit in verdicts_and_expected
                if culprit and not self.fails(culprit)
            ],
        }
        if not runs:
            return self.report(
                "cannot_verify", "no run could be compared" + skips(skipped), **extra
            )
        bad = [run.index for run in runs if not run.ok]
        reasons = [f"outputs differ in run{'s' if len(bad) > 1 else ''} {', '.join(map(str, bad))}"]
        reasons = reasons if bad else []
        culprits = ["lowering"] if bad else []
        for line, culprit in verdicts.values():
            if self.fails(culprit):
                reasons.append(line)
                culprits.append(culprit)
        if self.fails(expected_culprit):
            reasons.append(
                f"the lowered model {expected_line}"
                if expected_culprit == "lowering"
                else f"{expected_line} (--strict-expected)"
            )
            culprits.append(expected_culprit)
        if reasons:
            culprit = next(c for c in ("lowering", "runtime", "export") if c in culprits)
            reasons[-1] += other_facts(verdicts, self.target_oracles)
            return self.report(
                "mismatch",
                "; ".join(reasons),
                culprit=culprit,
                failing_inputs=self.failing,
                failing_outputs=self.failing_outputs,
                **extra,
            )
        count = f"{len(runs)} run{'s' if len(runs) > 1 else ''}"
        return self.report("equivalent", f"all outputs match in {count}" + skips(skipped), **extra)


def _same_model(reference: onnx.ModelProto, candidate: onnx.ModelProto | None) -> bool:
    """Whether the candidate is the reference itself (``seqlower verify A A``): nothing was
    lowered, so no lowering can be at fault."""
    if candidate is None:
        return False
    return reference is candidate or (
        reference.ByteSize() == candidate.ByteSize()
        and reference.SerializeToString(deterministic=True)
        == candidate.SerializeToString(deterministic=True)
    )


# ---------------------------------------------------------------- models


def _as_proto(model: ModelLike) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, ir.Model):
        return self_contained_proto(model)
    if not isinstance(model, (str, os.PathLike)):
        raise ModelTypeError("verify", model)
    # Not checked here: a model the checker rejects may still run, and the report says so.
    return self_contained_proto(load_model(model, check=False), may_modify=True)


def _compare_signatures(reference: onnx.ModelProto, candidate: onnx.ModelProto) -> str:
    ref_out = [o.name for o in reference.graph.output]
    cand_out = [o.name for o in candidate.graph.output]
    if ref_out != cand_out:
        return f"outputs differ: reference has {ref_out}, candidate has {cand_out}"
    ref_in = [s.name for s in input_specs(reference)]
    cand_in = [s.name for s in input_specs(candidate)]
    if sorted(ref_in) != sorted(cand_in):
        return f"inputs differ: reference takes {ref_in}, candidate takes {cand_in}"
    return ""


def _versions() -> dict[str, str]:
    return {"seqlower": __version__, **dependency_versions()}
