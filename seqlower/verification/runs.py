"""The runs of a check and each run compared: the inputs of every run (given, or drawn within
the model's constraints, :func:`run_plans`), the reference's outputs on the first draw it
accepts (:func:`reference_outputs`), and a runner's outputs compared with them
(:func:`compare_run`) or the framework's (:func:`compare_expected`)."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from seqlower.errors import BadOptionError, CheckLimitError, first_line
from seqlower.verification.check_options import CheckOptions
from seqlower.verification.compare import Tolerances
from seqlower.verification.constraints import Analysis, analyze
from seqlower.verification.input_files import load_inputs, load_outputs
from seqlower.verification.inputs import (
    InputError,
    generate_inputs,
    input_specs,
    validate_inputs,
)
from seqlower.verification.report import OutputReport, RunReport
from seqlower.verification.runtimes import KnownHang, NotLoaded, Runner

__all__ = [
    "ATTEMPTS",
    "FAILED",
    "KNOWN_HANG",
    "RunPlan",
    "compare_expected",
    "compare_run",
    "given_inputs",
    "load_expected",
    "reference_outputs",
    "rejection",
    "run_plans",
]

ATTEMPTS = 8  # generated inputs tried per run before the reference is declared unable


def load_expected(
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


def compare_expected(
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


@dataclasses.dataclass
class RunPlan:
    feeds: Callable[[int], dict[str, Any]]  # the feeds of attempt k
    retry: bool  # new draws may be tried
    optional: bool  # may be skipped (the empty-sequence run)
    what: str = "generated inputs"


def run_plans(
    model: onnx.ModelProto, options: CheckOptions, analysis: Analysis, flag: str = "--inputs"
) -> list[RunPlan]:
    if options.inputs is not None:
        given = given_inputs(model, options, analysis, flag)
        return [RunPlan(_fixed(feeds), False, False, "given inputs") for feeds in given]

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

    plans = [RunPlan(generated(i, options.seq_len), True, False) for i in range(options.n)]
    if any(s.is_sequence for s in input_specs(model)) and options.seq_len is None:
        # Lengths are all 0: retrying changes nothing.
        plans.append(RunPlan(generated(options.n, 0), False, True, "empty sequences"))
    return plans


def given_inputs(
    model: onnx.ModelProto,
    options: CheckOptions,
    analysis: Analysis | None = None,
    flag: str = "--inputs",
) -> list[dict[str, Any]]:
    """Each set of the inputs ``options`` give (``--inputs``, read), with the values
    ``--constant-input`` fixes; InputError naming the set when one cannot be ``model``'s. The
    file job asks it also of a model it writes unchecked: wrong inputs are exit 2 all the
    same."""
    inputs = options.inputs
    if inputs is None:
        return []
    if isinstance(inputs, (str, os.PathLike)):
        given: Sequence[Mapping[str, Any]] = load_inputs(inputs, model, flag)
        source = str(inputs)
    else:
        given, source = inputs, "inputs"
    analysis = analyze(model) if analysis is None and given else analysis
    sets = []
    for k, feeds in enumerate(given, start=1):
        where = source if len(given) == 1 else f"{source} (set {k})"
        feeds = _with_constants(dict(feeds), options.constant_inputs, where)
        validate_inputs(model, feeds, analysis, where=where)
        sets.append(feeds)
    return sets


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


def reference_outputs(
    runner: Runner,
    plan: RunPlan,
    index: int,
    problems: list[str],
    analysis: Analysis,
    names: list[str],
) -> tuple[dict[str, Any], list[Any], int] | str:
    """The reference's outputs on the first draw it accepts; else why it rejected the last."""
    attempts = ATTEMPTS if plan.retry else 1
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


FAILED = "the candidate failed: "  # a run's error, when the candidate ran and failed
#: A target run's ``original_error`` when its adapter knew the runtime would hang on the
#: lowered model (:class:`KnownHang`): the original was not run, the runtime is to blame.
KNOWN_HANG = "not run: the runtime is known to hang there"


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


def compare_run(
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
    except KnownHang as e:  # the runtime's own bug, named by its adapter instead of a run
        report = RunReport(index, False, summary, [], error=first_line(e), loaded=False)
        report.culprit, report.original_error = "runtime", KNOWN_HANG
        return report, None
    except NotLoaded as e:
        return RunReport(index, False, summary, [], error=first_line(e), loaded=False), None
    except Exception as e:
        error = f"{FAILED}{first_line(e)}"
        return RunReport(index, False, summary, [], error=error), None
    outputs = [
        tolerances.compare(name, e, a) for name, e, a in zip(names, expected, actual, strict=True)
    ]
    return RunReport(index, all(o.ok for o in outputs), summary, outputs), actual


def _describe(value: Any) -> Any:
    if isinstance(value, list):
        return [list(np.shape(v)) for v in value]
    return list(np.shape(value))
