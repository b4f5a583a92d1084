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
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from seqlower._graphs import is_onnx
from seqlower._version import __version__, dependency_versions
from seqlower.errors import BadOptionError, CheckLimitError, ModelTypeError, first_line
from seqlower.io import load_model, self_contained_proto, strict_inference_problem
from seqlower.verification.compare import Tolerances, default_tolerance
from seqlower.verification.constraints import Analysis, analyze
from seqlower.verification.input_files import load_inputs, load_outputs
from seqlower.verification.inputs import (
    InputError,
    estimate_input_bytes,
    estimate_output_bytes,
    generate_inputs,
    input_specs,
    validate_inputs,
)
from seqlower.verification.report import (
    Culprit,
    OutputReport,
    RunReport,
    SkippedRun,
    Status,
    VerifyReport,
)
from seqlower.verification.runtimes import (
    ORACLES,
    CandidateRefused,
    NotLoaded,
    Oracle,
    Runner,
    bounded,
    load_pair,
    load_target,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "CheckOptions",
    "check_names",
    "default_memory_budget",
    "verify",
]

ModelLike = onnx.ModelProto | ir.Model | str | os.PathLike[str]
InputsLike = str | os.PathLike[str] | Sequence[Mapping[str, Any]]
DEFAULT_TIMEOUT = 600.0  # seconds for all the runs of one check
_ATTEMPTS = 8  # generated inputs tried per run before the reference is declared unable


@dataclasses.dataclass(frozen=True)
class CheckOptions:
    """How :func:`verify` checks.

    ``inputs``: a ``.npz`` file or ONNX test-data directory, or a list of feed dicts; by default
    ``n`` runs of generated inputs (seeded by ``seed``), plus, unless ``seq_len`` is given, one
    with empty sequences when the model has sequence inputs. ``dims`` sizes symbolic dimensions
    by name, ``input_shapes`` fixes shapes per input, ``seq_len`` sets sequence lengths.
    ``memory_budget`` (bytes of generated inputs and of both models' declared outputs on them;
    default a quarter of physical memory) and ``timeout`` (seconds in all; default 600) bound
    the check. ``on_run(k, total)`` is called before run k (from 1), for progress displays.
    ``oracles``: tried in order for the reference; the candidate runs in the one that took it.
    ``runtimes``: names in :data:`~.runtimes.TARGET_ORACLES` the candidate is also run on.
    ``expected``: a file (as ``inputs``) or a list of dicts of the framework's outputs for the
    given inputs, run by run; without ``inputs``, the inputs come from the same file.
    """

    inputs: InputsLike | None = None
    n: int = 3
    seed: int = 0
    tolerances: Tolerances = dataclasses.field(default_factory=Tolerances)
    dims: Mapping[str, int] = dataclasses.field(default_factory=dict)
    input_shapes: Mapping[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    seq_len: int | None = None
    memory_budget: int | None = None
    timeout: float | None = None
    #: Seconds one run may take on a target that runs in a child process (tract; default
    #: :data:`~.runtimes.DEFAULT_TARGET_TIMEOUT`): past it the run fails, the runtime's fault
    #: when the original times out there too.
    target_timeout: float | None = None
    on_run: Callable[[int, int], None] | None = None
    oracles: tuple[Oracle, ...] = ORACLES
    runtimes: tuple[str, ...] = ()
    expected: InputsLike | None = None
    #: Let ``input_shapes`` change dimensions the model declares (see :func:`check_names`).
    force_input_shape: bool = False
    #: Keep each compared run's feeds and reference outputs in the report (``kept_runs``).
    keep_runs: bool = False
    #: Differences from ``expected`` that the original shares (the export's fault) fail the
    #: check too (``--strict-expected``), instead of being warnings.
    strict_expected: bool = False
    #: Inputs fed this one value in every run (``--constant-input``: the lowering fixed it):
    #: generated runs take it, given inputs must hold it.
    constant_inputs: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        # ``runtimes="tract"`` means one runtime: iterating the string would ask for "t", "r"...
        runtimes = (self.runtimes,) if isinstance(self.runtimes, str) else tuple(self.runtimes)
        object.__setattr__(self, "runtimes", runtimes)

    @classmethod
    def from_kwargs(
        cls,
        *,
        rtol: float | Mapping[str, float] | None = None,
        atol: float | Mapping[str, float] | None = None,
        dims: Mapping[str, int] | None = None,
        input_shapes: Mapping[str, tuple[int, ...]] | None = None,
        **rest: Any,
    ) -> CheckOptions:
        """From :func:`verify`'s keyword form (``rtol``/``atol`` a number or per output)."""
        return cls(
            tolerances=Tolerances.from_options(rtol, atol),
            dims=dict(dims or {}),
            input_shapes=dict(input_shapes or {}),
            **rest,
        )


def check_names(model: onnx.ModelProto, options: CheckOptions) -> None:
    """Raise BadOptionError when a check option names what the model does not have, or
    (unless ``force_input_shape``) an input shape contradicts a dimension the model declares."""
    initializers = {t.name for t in model.graph.initializer}
    inputs = {i.name: i.type for i in model.graph.input if i.name not in initializers}
    outputs = [o.name for o in model.graph.output]
    symbols: set[str] = set()
    for type_proto in inputs.values():
        symbols.update(d.dim_param for d in _dims(type_proto) if d.HasField("dim_param"))
    for name in options.dims:
        if name not in symbols:
            known = ", ".join(sorted(symbols)) or "none"
            raise BadOptionError(
                f"--dim {name}: the model's inputs have no dimension of that name "
                f"(symbolic dimensions: {known})"
            )
    for name, shape in options.input_shapes.items():
        if name not in inputs:
            raise BadOptionError(
                f"--input-shape {name}: the model has no input of that name "
                f"(inputs: {', '.join(inputs)})"
            )
        declared = _dims(inputs[name])
        if not declared:
            continue
        if len(declared) != len(shape):
            raise BadOptionError(
                f"--input-shape {name}: {len(shape)} dimensions given, the input has "
                f"{len(declared)}"
            )
        for axis, (dim, size) in enumerate(zip(declared, shape, strict=True)):
            if (
                dim.HasField("dim_value")
                and dim.dim_value != size
                and not options.force_input_shape
            ):
                raise BadOptionError(
                    f"--input-shape {name}: axis {axis} is declared {dim.dim_value}, not "
                    f"{size} (--force-input-shape to override)"
                )
    for index, flag in enumerate(("--rtol", "--atol")):
        for name, pair in options.tolerances.per_output.items():
            if pair[index] is not None and name not in outputs:
                raise BadOptionError(
                    f"{flag} {name}: the model has no output of that name "
                    f"(outputs: {', '.join(outputs)})"
                )


def _dims(type_proto: onnx.TypeProto) -> list[Any]:
    """The declared dimensions of a tensor type or of a sequence's elements ([] if none)."""
    while type_proto.HasField("sequence_type"):
        type_proto = type_proto.sequence_type.elem_type
    if type_proto.HasField("tensor_type") and type_proto.tensor_type.HasField("shape"):
        return list(type_proto.tensor_type.shape.dim)
    return []


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
        _check_input_budget(reference_proto, budget, options, candidate_proto)
    check = _Check(options, _versions(), time.monotonic() + limit, limit, reference_proto)
    signature_problem = _compare_signatures(reference_proto, candidate_proto)
    if signature_problem:
        return check.report("mismatch", signature_problem)
    try:
        analysis = analyze(reference_proto)
    except Exception as e:  # a model the analysis does not understand still gets checked
        analysis = Analysis()
        check.problems.append(f"inputs drawn from declared types only: {first_line(e)[:300]}")
    plans = _run_plans(reference_proto, options, analysis, inputs_flag)
    expected_outputs = _expected_outputs(options, reference_proto, len(plans))
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
                    refused, culprit = _refused_on(label, first_line(e), original)
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
        plans: list[_Plan],
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
            outcome = _reference_outputs(
                self.reference, plan, index, self.problems, analysis, names
            )
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
                    + _hint(model, self.options),
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
        run, actual = _compare_run(index, feeds, expected, self.candidate, output_names, tolerances)
        run.attempts = attempts
        self.runs.append(run)
        if self.options.keep_runs:
            self.kept.append((feeds, expected))
        blamed: list[RunReport] = []  # failures on a target or against the framework's outputs
        for runner in self.on_targets:
            at_precision = dataclasses.replace(tolerances, narrowed=runner.narrows)
            on_target, outputs = _compare_run(
                index, feeds, expected, runner, output_names, at_precision
            )
            if not on_target.ok:
                self.blame_target(runner.name, on_target, feeds, expected, outputs, output_names)
                blamed.append(on_target)
            self.target_runs[runner.name].append(on_target)
        if framework_outputs is not None and actual is not None:
            framework = _compare_expected(
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
        same = {
            name: tolerances.compare(name, o, a)
            for name, o, a in zip(names, outputs, actual, strict=True)
        }
        limits = {n: _resolved(tolerances, n, e) for n, e in zip(names, expected, strict=True)}
        if _no_worse(failed.outputs, failed.original, same, limits):
            failed.culprit = "runtime"

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
        original = _compare_expected(run.index, run, reference, framework_outputs, self.options)
        failed.original = original.outputs
        same = {o.name: o for o in run.outputs}  # the candidate against the original
        tolerances = self.options.tolerances
        limits = {name: _resolved(tolerances, name, v) for name, v in framework_outputs.items()}
        ok = _no_worse(failed.outputs, failed.original, same, limits)
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
        verdicts = {name: _target_summary(name, r) for name, r in self.target_runs.items()}
        expected_line, expected_culprit = (
            _expected_summary(self.expected_runs) if with_expected else ("", "")
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
                "cannot_verify", "no run could be compared" + _skips(skipped), **extra
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
            return self.report(
                "mismatch",
                "; ".join(reasons),
                culprit=culprit,
                failing_inputs=self.failing,
                failing_outputs=self.failing_outputs,
                **extra,
            )
        count = f"{len(runs)} run{'s' if len(runs) > 1 else ''}"
        return self.report("equivalent", f"all outputs match in {count}" + _skips(skipped), **extra)


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


def _refused_on(label: str, error: str, original: Runner | str) -> tuple[str, Culprit]:
    """Why the lowered model does not load on target ``label``, and whose fault that is: the
    lowering's when the original loads there, or fails to load another way (the lowering did
    not reach the target); the runtime's when the original fails with the very same error: it
    refuses what the lowering left as it was (OpenVINO: an ``Inverse`` of onnxruntime's
    contrib ops, which was blamed on the lowering)."""
    refused = f"does not load on {label}: {error}"
    if not isinstance(original, str):
        return f"{refused}; the original loads there", "lowering"
    if original != error:
        return (
            f"{refused}; the original does not load there either: the lowering did not reach "
            "the target",
            "lowering",
        )
    return (
        f"{refused}; the original does not load there either, with the same error: {label} "
        "cannot run what the lowering left as it was; not the lowering's fault",
        "runtime",
    )


def _target_summary(name: str, runs: list[RunReport]) -> tuple[str, Culprit]:
    """The line a target gets, and whose fault its failures are ('' when none failed): the
    lowering's first failure, else the first the original shares there."""
    bad = [r for r in runs if not r.ok]
    if not runs:
        return f"not run on {name}", ""
    if not bad:
        return f"runs and matches on {name}", ""
    first = next((r for r in bad if r.culprit == "lowering"), bad[0])
    if first.culprit == "lowering":
        return _failure_on(name, first) + _original_clause(first, "there"), "lowering"
    if not first.loaded:  # the candidate is the original (verify A A), and neither loads
        return (
            _failure_on(name, first)
            + f"; the candidate is the reference itself: {name} cannot run this model",
            "runtime",
        )
    if first.error:
        return (
            f"{name} fails on the original too in run {first.index}: {first.original_error} "
            f"(the lowered model: {first.error.removeprefix(_FAILED)}); not the lowering's fault",
            "runtime",
        )
    return (
        f"{name} computes this model wrongly, the original too, in run {first.index}: "
        + _shared_numbers(first)
        + "; not the lowering's fault",
        "runtime",
    )


def _failure_on(name: str, run: RunReport) -> str:
    """How the lowered model failed on target ``name`` in ``run``."""
    if not run.loaded:
        shapes = "" if run.index == 1 else f" with the input shapes of run {run.index}"
        return f"does not load on {name}{shapes}: {run.error}"
    if run.error:
        return f"fails on {name} in run {run.index}: {run.error.removeprefix(_FAILED)}"
    worst = next(o for o in run.outputs if not o.ok)
    return f"differs on {name} in run {run.index}: output '{worst.name}' {_numbers(worst)}"


def _original_clause(run: RunReport, there: str) -> str:
    """What the original did where the lowered model failed (the lowering's fault); ``there``
    names the place (a target: "there"; the framework's outputs: "them")."""
    if run.original_error.startswith("does not load"):
        return "; the original does not load there either: the lowering did not reach the target"
    if run.original_error:
        return f"; the original fails there instead: {run.original_error}"
    if not run.outputs:  # the lowered model did not load or run
        if not run.original:
            return ""
        matches = " and matches" if all(o.ok for o in run.original) else ""
        return f"; the original loads and runs there{matches}"
    originals = {o.name: o for o in run.original}
    worst = next(o for o in run.outputs if not o.ok)
    original = originals.get(worst.name)
    if original is None:
        return ""
    if original.ok:
        return f"; the original matches {there}"
    return f"; the original: {_numbers(original)}"


def _shared_numbers(run: RunReport) -> str:
    """``output 'y' max abs 0.34 (the lowered model: the same)``: a failure both share."""
    originals = {o.name: o for o in run.original}
    worst = next(o for o in run.outputs if not o.ok)
    original = originals[worst.name]
    mine = _numbers(worst)
    return (
        f"output '{worst.name}' {_numbers(original)} "
        f"(the lowered model: {'the same' if mine == _numbers(original) else mine})"
    )


def _numbers(output: OutputReport) -> str:
    """How an output differs: its largest difference, or what is wrong with its shape/type."""
    if not _numeric(output):
        return output.message
    special = f", {output.special} NaN or infinite values unmatched" if output.special else ""
    return f"max abs {output.max_abs:.3g}{special}"


def _numeric(output: OutputReport) -> bool:
    """A failure in the values (shape, type and lengths as expected)."""
    return output.message.endswith(" elements differ")


def _kind(output: OutputReport) -> str:
    """What is wrong with an output that is not its values: ``shape``, ``dtype``, ``sequence``
    (length), ``one`` (a sequence against a tensor), ``element`` (a sequence's element)."""
    return output.message.split(" ", 1)[0]


def _no_worse(
    candidate: list[OutputReport],
    original: list[OutputReport],
    same: Mapping[str, OutputReport],
    limits: Mapping[str, tuple[float, float]],
) -> bool:
    """Whether every output the candidate gets wrong the original gets wrong as much: the
    candidate gives what the original gives (within tolerance), or its largest difference is
    no larger than the original's (within the output's tolerance) in no more elements, or both
    get its shape (type, length) wrong."""
    originals = {o.name: o for o in original}
    for output in candidate:
        if output.ok:
            continue
        theirs = originals.get(output.name)
        if theirs is None or theirs.ok:
            return False
        if output.name in same and same[output.name].ok:
            continue
        if not (_numeric(output) and _numeric(theirs)):
            # A wrong shape (type, length) where the original's is wrong too: OpenVINO gives a
            # zero-trip Loop's scan output a stale shape, whichever model it runs.
            if _numeric(output) or _numeric(theirs) or _kind(output) != _kind(theirs):
                return False
            continue
        rtol, atol = limits.get(output.name, (0.0, 0.0))
        if output.max_abs > theirs.max_abs * (1 + rtol) + atol:
            return False
        if output.mismatches > theirs.mismatches:
            return False
    return True


def _resolved(tolerances: Tolerances, name: str, value: Any) -> tuple[float, float]:
    """The (rtol, atol) an output is compared with: the user's, else its dtype's default."""
    rtol, atol = tolerances.for_output(name)
    while isinstance(value, list):
        if not value:
            return rtol or 0.0, atol or 0.0
        value = value[0]
    default_rtol, default_atol = default_tolerance(np.asarray(value).dtype)
    return (default_rtol if rtol is None else rtol), (default_atol if atol is None else atol)


def _expected_outputs(
    options: CheckOptions, model: onnx.ModelProto, runs: int
) -> list[dict[str, Any]] | None:
    """The framework's outputs, one dict per run of the given inputs."""
    if options.expected is None:
        return None
    expected = options.expected
    if isinstance(expected, (str, os.PathLike)):
        outputs = load_outputs(expected, model)
    else:
        outputs = [dict(e) for e in expected]
    if len(outputs) != runs:
        raise InputError(
            f"--expected: {len(outputs)} set{'s' if len(outputs) != 1 else ''} of outputs for "
            f"{runs} set{'s' if runs != 1 else ''} of inputs"
        )
    return outputs


def _compare_expected(
    index: int,
    run: RunReport,
    actual: Mapping[str, Any],
    expected: Mapping[str, Any],
    options: CheckOptions,
) -> RunReport:
    """The candidate's outputs against the framework's, for the outputs the file holds."""
    outputs: list[OutputReport] = [
        options.tolerances.compare(name, value, actual[name]) for name, value in expected.items()
    ]
    return RunReport(index, all(o.ok for o in outputs), run.inputs, outputs)


def _expected_summary(runs: list[RunReport]) -> tuple[str, Culprit]:
    """The line comparing with the framework's outputs, and whose fault a difference is."""
    outputs = [o for r in runs for o in r.outputs]
    worst = max((o.max_abs for o in outputs), default=0.0)
    if all(r.ok for r in runs):
        return f"matches the framework's outputs: max abs {worst:.2g}", ""
    bad = [r for r in runs if not r.ok]
    first = next((r for r in bad if r.culprit == "lowering"), bad[0])
    if first.culprit == "lowering":
        output = next(o for o in first.outputs if not o.ok)
        return (
            f"does NOT match the framework's outputs: output '{output.name}' "
            f"{_numbers(output)}{_original_clause(first, 'them')}",
            "lowering",
        )
    return (
        "the original export already differs from the framework's outputs: "
        f"{_shared_numbers(first)}; not the lowering's fault",
        "export",
    )


def _skips(skipped: list[SkippedRun]) -> str:
    return "".join(f"; {s}" for s in skipped)


def _hint(model: onnx.ModelProto, options: CheckOptions) -> str:
    """What the user could give, when giving it can help."""
    if options.inputs is not None:
        return ""
    if options.seq_len == 0 and any(spec.is_sequence for spec in input_specs(model)):
        return "; with --seq-len 0 every sequence is empty, which the model may not accept"
    unfixed = [
        spec.name
        for spec in input_specs(model)
        if spec.name not in options.input_shapes
        and any(not isinstance(d, int) and d not in options.dims for d in spec.shape or (None,))
    ]
    if unfixed:
        return "; give real shapes with --dim/--input-shape, or real inputs with --inputs"
    return "; give real inputs with --inputs"


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


def default_memory_budget() -> int:
    """A quarter of physical memory: room for both models' outputs and intermediates too."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
    except (ValueError, OSError, AttributeError):
        return 2**31


def _check_input_budget(
    model: onnx.ModelProto,
    budget: int,
    options: CheckOptions,
    candidate: onnx.ModelProto | None = None,
) -> None:
    """Refuse, before anything is allocated, a check whose inputs and outputs would exceed the
    budget: the generated inputs, and what the reference and the candidate return on them (both
    are held while they are compared), from the declared shapes."""
    sizes: dict[str, Any] = {
        "dims": options.dims,
        "input_shapes": options.input_shapes,
        "seq_len": options.seq_len,
    }
    inputs = estimate_input_bytes(model, **sizes)
    outputs = estimate_output_bytes(model, **sizes)
    if candidate is not None:
        outputs += estimate_output_bytes(candidate, **sizes)
    in_total = sum(size for _, _, size in inputs)
    out_total = sum(size for _, _, size in outputs)
    if in_total + out_total <= budget:
        return
    kind, (name, written, size) = max(
        [("input", e) for e in inputs] + [("output", e) for e in outputs],
        key=lambda pair: pair[1][2],
    )
    held = f"{_bytes(in_total)} of inputs"
    if out_total:
        held = f"{_bytes(in_total + out_total)} ({held}, {_bytes(out_total)} of outputs)"
    raise CheckLimitError(
        f"the check would {'hold' if out_total else 'generate'} {held}, over its memory budget "
        f"of {_bytes(budget)} ({kind} '{name}', {written}: {_bytes(size)}); give smaller sizes "
        "with --dim/--input-shape, or a larger --check-memory"
    )


def _bytes(count: int) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} bytes"


# ---------------------------------------------------------------- runs


@dataclasses.dataclass
class _Plan:
    feeds: Callable[[int], dict[str, Any]]  # the feeds of attempt k
    retry: bool  # new draws may be tried
    optional: bool  # may be skipped (the empty-sequence run)
    what: str = "generated inputs"


def _run_plans(
    model: onnx.ModelProto, options: CheckOptions, analysis: Analysis, flag: str = "--inputs"
) -> list[_Plan]:
    if options.inputs is not None:
        inputs = options.inputs
        given = (
            load_inputs(inputs, model, flag) if isinstance(inputs, (str, os.PathLike)) else inputs
        )
        source = str(inputs) if isinstance(inputs, (str, os.PathLike)) else "inputs"
        plans = []
        for k, feeds in enumerate(given, start=1):
            where = source if len(given) == 1 else f"{source} (set {k})"
            feeds = _with_constants(dict(feeds), options.constant_inputs, where)
            validate_inputs(model, feeds, analysis, where=where)
            plans.append(_Plan(_fixed(feeds), False, False, "given inputs"))
        return plans

    def generated(run: int, length: int | None) -> Callable[[int], dict[str, Any]]:
        return lambda attempt: {
            **generate_inputs(
                model,
                np.random.default_rng([options.seed, run, attempt]),
                dims=options.dims,
                input_shapes=options.input_shapes,
                seq_len=length,
                analysis=analysis,
            ),
            **options.constant_inputs,
        }

    plans = [_Plan(generated(i, options.seq_len), True, False) for i in range(options.n)]
    if any(s.is_sequence for s in input_specs(model)) and options.seq_len is None:
        # Lengths are all 0: retrying changes nothing.
        plans.append(_Plan(generated(options.n, 0), False, True, "empty sequences"))
    return plans


def _with_constants(
    feeds: dict[str, Any], constants: Mapping[str, np.ndarray], where: str
) -> dict[str, Any]:
    """Given ``feeds`` with the ``--constant-input`` values the lowering fixed (where a list of
    feeds lacks them); a given value that differs is an error (the lowered model would compute
    at the fixed one)."""
    for name, value in constants.items():
        given = feeds.setdefault(name, value)
        if given is not value and not np.array_equal(np.asarray(given), value):
            raise BadOptionError(
                f"{where}: input '{name}' holds {np.asarray(given).tolist()}, but "
                f"--constant-input fixes it to {value.tolist()}; give inputs holding that "
                "value, or leave it out of them"
            )
    return feeds


def _fixed(feeds: dict[str, Any]) -> Callable[[int], dict[str, Any]]:
    """The same feeds whatever the attempt."""
    return lambda _attempt: feeds


def _reference_outputs(
    runner: Runner,
    plan: _Plan,
    index: int,
    problems: list[str],
    analysis: Analysis,
    names: list[str],
) -> tuple[dict[str, Any], list[Any], int] | str:
    """The reference's outputs on the first draw it accepts; else why it rejected the last."""
    attempts = _ATTEMPTS if plan.retry else 1
    last: tuple[dict[str, Any], list[Any], int] | None = None
    why = ""
    for attempt in range(1, attempts + 1):
        try:
            feeds = plan.feeds(attempt - 1)
        except MemoryError:
            raise CheckLimitError(
                f"the check ran out of memory drawing the inputs of run {index}; give smaller "
                "sizes with --dim/--input-shape, or a smaller --check-memory"
            ) from None
        try:
            outputs = runner.run(feeds)
        except CheckLimitError:
            raise
        except InputError:
            raise
        except Exception as e:
            why = rejection(e, analysis, names)
            problems.append(f"run {index}, attempt {attempt}: {why}")
            continue
        last = (feeds, outputs, attempt)
        if attempt < attempts and _has_nan(outputs):
            problems.append(f"run {index}, attempt {attempt}: the reference returned NaN")
            continue
        return last
    return last if last is not None else why


_FAILED = "the candidate failed: "  # a run's error, when the candidate ran and failed
_NODE = re.compile(r"running (\w+) node\. Name:'([^']*)'")
_INPUT = re.compile(r"for input: (\S+)")


def rejection(error: BaseException, analysis: Analysis, names: Sequence[str]) -> str:
    """Why a runtime rejected inputs, naming the node (innermost, for nested graphs) and the
    graph inputs that reach it."""
    text = first_line(error)
    found = _NODE.findall(str(error))
    message = text.rsplit("Status Message:", 1)[-1].strip()[:300]
    refused = _INPUT.search(text)
    if refused and not found:  # onnxruntime checks feeds against declared shapes first
        return f"onnxruntime refused input '{refused.group(1)}': {text.split(' : ')[-1][:300]}"
    if not found:
        return text[:300]
    op, name = found[-1]
    label = f"{op} node '{name}'" if name else f"a {op} node"
    reached = sorted(analysis.reaches.get(label, set()) & set(names))
    inputs = ", ".join(f"'{n}'" for n in reached)
    noun = "input" if len(reached) == 1 else "inputs"
    return f"{label} rejected " + (f"{noun} {inputs}" if inputs else "the inputs") + f": {message}"


def _has_nan(values: Any) -> bool:
    if isinstance(values, list):
        return any(_has_nan(v) for v in values)
    array = np.asarray(values)
    return array.dtype.kind in "fc" and bool(np.isnan(array).any())


def _compare_run(
    index: int,
    feeds: dict[str, Any],
    expected: list[Any],
    candidate: Runner,
    names: list[str],
    tolerances: Tolerances,
) -> tuple[RunReport, list[Any] | None]:
    summary = {name: _describe(value) for name, value in feeds.items()}
    try:
        actual = candidate.run(feeds)
    except CheckLimitError:
        raise
    except NotLoaded as e:
        return RunReport(index, False, summary, [], error=first_line(e), loaded=False), None
    except Exception as e:
        error = f"{_FAILED}{first_line(e)}"
        return RunReport(index, False, summary, [], error=error), None
    outputs = [
        tolerances.compare(name, e, a) for name, e, a in zip(names, expected, actual, strict=True)
    ]
    return RunReport(index, all(o.ok for o in outputs), summary, outputs), actual


def _describe(value: Any) -> Any:
    if isinstance(value, list):
        return [list(np.shape(v)) for v in value]
    return list(np.shape(value))


def _versions() -> dict[str, str]:
    return {"seqlower": __version__, **dependency_versions()}
