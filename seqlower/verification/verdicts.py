"""Whose fault a failed run is, and the lines that say so: a target's verdict
(:func:`target_summary`), the framework's outputs' (:func:`expected_summary`), whether the
original fails as much (:func:`no_worse`), and what the user could give (:func:`hint`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from seqlower.verification.check_options import CheckOptions
from seqlower.verification.compare import Tolerances, default_tolerance
from seqlower.verification.inputs import input_specs
from seqlower.verification.report import Culprit, OutputReport, RunReport, SkippedRun
from seqlower.verification.runs import FAILED, KNOWN_HANG
from seqlower.verification.runtimes import Runner

__all__ = [
    "SAME_REFUSAL",
    "expected_summary",
    "hint",
    "no_worse",
    "other_facts",
    "refused_on",
    "same_refusal",
    "skips",
    "target_summary",
    "tolerance_of",
]


#: A run's ``original_error`` when the original fails to load on the target as the lowered
#: model does, with the very same error.
SAME_REFUSAL = "does not load, with the same error"

#: tract's "node #N": the node's index in its graph, which a lowering that adds nodes before an
#: op it leaves as it was shifts (the node's name follows it).
_NODE_INDEX = re.compile(r"(?<=node )#\d+ ")


def same_refusal(lowered: str, original: str) -> bool:
    """Whether the lowered model's refusal is the original's: the same words but for the index
    of the node named (tract: a Keras ``tf.cond`` whose branches give rows of different counts,
    'Failed analyse for node #12 "cond" If', node #5 in the original, was blamed on the
    lowering)."""
    return _NODE_INDEX.sub("#", lowered) == _NODE_INDEX.sub("#", original)


def other_facts(verdicts: Mapping[str, tuple[str, Culprit]], oracles: Mapping[str, Any]) -> str:
    """Where a runtime proves a model two ways (tract: input facts set from the inputs, and the
    model's declared ones) and only one failed, what the other says: the file is not written,
    as a user may load it either way (issue 44), but it runs when loaded so."""
    failed = [n for n, (_, c) in verdicts.items() if c]
    passed = [n for n, (_, c) in verdicts.items() if not c]
    kinds = {n: getattr(oracles.get(n), "concrete", None) for n in verdicts}
    if not failed or not all(kinds[n] is False for n in failed):
        return ""
    concrete = next((n for n in passed if kinds[n] is True), None)
    if concrete is None:
        return ""
    return (
        f"; it runs and matches on {concrete} with input facts set from the inputs (fix the "
        "input shapes with --overwrite-input-shape, or keep the file with --keep-on-failure)"
    )


def refused_on(label: str, error: str, original: Runner | str) -> tuple[str, Culprit]:
    """Why the lowered model does not load on target ``label``, and whose fault that is: the
    lowering's when the original loads there, or fails to load another way (the lowering did
    not reach the target); the runtime's when the original fails with the very same error: it
    refuses what the lowering left as it was (OpenVINO: an ``Inverse`` of onnxruntime's
    contrib ops, which was blamed on the lowering)."""
    refused = f"does not load on {label}: {error}"
    if not isinstance(original, str):
        return f"{refused}; the original loads there", "lowering"
    if not same_refusal(error, original):
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


def target_summary(name: str, runs: list[RunReport]) -> tuple[str, Culprit]:
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
    if not first.loaded and first.original_error == SAME_REFUSAL:
        return (
            _failure_on(name, first) + f"; the original does not load there either, with the "
            f"same error: {name} cannot run what the lowering left as it was; not the "
            "lowering's fault",
            "runtime",
        )
    if first.afresh:
        return (
            _failure_on(name, first) + f"; loaded afresh, the lowered model "
            f"{'matches there' if all(o.ok for o in first.original) else 'does no worse'} "
            f"on these inputs: {name}'s results depend on the runs before; not the lowering's "
            "fault",
            "runtime",
        )
    if first.original_error == KNOWN_HANG:
        return _failure_on(name, first) + "; not the lowering's fault", "runtime"
    if not first.loaded:  # the candidate is the original (verify A A), and neither loads
        return (
            _failure_on(name, first)
            + f"; the candidate is the reference itself: {name} cannot run this model",
            "runtime",
        )
    if first.error:
        return (
            f"{name} fails on the original too in run {first.index}: {first.original_error} "
            f"(the lowered model: {first.error.removeprefix(FAILED)}); not the lowering's fault",
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
        return f"fails on {name} in run {run.index}: {run.error.removeprefix(FAILED)}"
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


def no_worse(
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


def tolerance_of(tolerances: Tolerances, name: str, value: Any) -> tuple[float, float]:
    """The (rtol, atol) an output is compared with: the user's, else its dtype's default."""
    rtol, atol = tolerances.for_output(name)
    while isinstance(value, list):
        if not value:
            return rtol or 0.0, atol or 0.0
        value = value[0]
    default_rtol, default_atol = default_tolerance(np.asarray(value).dtype)
    return (default_rtol if rtol is None else rtol), (default_atol if atol is None else atol)


def expected_summary(runs: list[RunReport]) -> tuple[str, Culprit]:
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


def skips(skipped: list[SkippedRun]) -> str:
    return "".join(f"; {s}" for s in skipped)


def hint(model: onnx.ModelProto, options: CheckOptions) -> str:
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
