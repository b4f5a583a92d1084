"""Numerical verification: run two models on the same inputs and compare every output.

This module knows nothing of seqlower's passes: it compares any reference model with any
candidate. Both run in onnxruntime's CPU provider with graph optimizations off. Where
onnxruntime cannot load the reference, a copy re-stamped to an IR version it reads is tried, then
``onnx.reference``; the report says which oracle ran each model. When nothing can run the
reference, the report says it cannot verify, and why: it is never ``ok``.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
from onnx.reference import ReferenceEvaluator

from seqlower.errors import CheckLimitError
from seqlower.inputs import estimate_input_bytes, generate_inputs, input_specs, load_inputs
from seqlower.io import load_model, self_contained_proto

__all__ = [
    "DEFAULT_TIMEOUT",
    "OutputReport",
    "RunReport",
    "VerifyReport",
    "default_memory_budget",
    "default_tolerance",
    "verify",
    "with_explicit_loop_conditions",
]

Status = Literal["equivalent", "mismatch", "cannot_verify"]
ModelLike = onnx.ModelProto | ir.Model | str | os.PathLike[str]

# (rtol, atol) by element type; float16/bfloat16 carry 11 and 8 bits of mantissa.
_TOLERANCES: dict[int, tuple[float, float]] = {
    onnx.TensorProto.FLOAT: (1e-5, 1e-6),
    onnx.TensorProto.COMPLEX64: (1e-5, 1e-6),
    onnx.TensorProto.DOUBLE: (1e-9, 1e-12),
    onnx.TensorProto.COMPLEX128: (1e-9, 1e-12),
    onnx.TensorProto.FLOAT16: (1e-3, 1e-3),
    onnx.TensorProto.BFLOAT16: (1e-2, 1e-2),
}
_ATTEMPTS = 5  # generated inputs tried per run before the reference is declared unable
_ORT_IR_VERSIONS = (13, 12, 11, 10)  # re-stamps tried when only the IR version stops onnxruntime


def default_tolerance(np_dtype: np.dtype) -> tuple[float, float]:
    """(rtol, atol) for a numpy dtype; (0, 0) means bit-exact (ints, bools, strings)."""
    try:
        onnx_type = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(np_dtype))
    except Exception:
        return (0.0, 0.0)
    return _TOLERANCES.get(onnx_type, (0.0, 0.0))


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
    """One run: the inputs it used (shapes), and each output's comparison."""

    index: int
    ok: bool
    inputs: dict[str, Any]
    outputs: list[OutputReport]
    error: str = ""  # the candidate's failure, when it failed to run
    attempts: int = 1


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
    #: The feeds of the first failing run, for saving; not part of the JSON report.
    failing_inputs: dict[str, Any] | None = dataclasses.field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == "equivalent"

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("failing_inputs")
        data["ok"] = self.ok
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VerifyReport:
        fields = dict(data)
        fields.pop("ok", None)
        runs = [
            RunReport(**{**run, "outputs": [OutputReport(**o) for o in run["outputs"]]})
            for run in fields.pop("runs")
        ]
        return cls(runs=runs, **fields)


def verify(
    reference: ModelLike,
    candidate: ModelLike,
    *,
    inputs: str | os.PathLike[str] | Sequence[Mapping[str, Any]] | None = None,
    n: int = 3,
    seed: int = 0,
    rtol: float | Mapping[str, float] | None = None,
    atol: float | Mapping[str, float] | None = None,
    dims: Mapping[str, int] | None = None,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    seq_len: int | None = None,
    memory_budget: int | None = None,
    timeout: float | None = None,
) -> VerifyReport:
    """Run ``reference`` and ``candidate`` on the same inputs and compare every output.

    ``inputs``: a ``.npz`` file or ONNX test-data directory, or a list of feed dicts; by default
    ``n`` runs of generated inputs (seeded by ``seed``), plus, unless ``seq_len`` is given, one
    with empty sequences when the model has sequence inputs and accepts them. ``rtol``/``atol``:
    one number, or per output name (others keep the dtype's default). ``dims`` sizes symbolic
    dimensions by name, ``input_shapes`` fixes shapes per input, ``seq_len`` sets sequence lengths.

    The check is bounded: generated inputs larger than ``memory_budget`` bytes (default: a
    quarter of physical memory) are refused before anything is allocated, and the runs stop
    after ``timeout`` seconds in all (default 600); both raise :class:`CheckLimitError`, as does
    running out of memory. Ctrl-C stops a run within a fraction of a second.
    """
    reference_proto = _as_proto(reference)
    candidate_proto = _as_proto(candidate)
    versions = _versions()
    budget = default_memory_budget() if memory_budget is None else memory_budget
    limit = DEFAULT_TIMEOUT if timeout is None else timeout
    if inputs is None:
        _check_input_budget(reference_proto, budget, dims, input_shapes, seq_len)
    deadline = time.monotonic() + limit

    def report(status: Status, reason: str, **extra: Any) -> VerifyReport:
        return VerifyReport(
            status, reason, extra.pop("runs", []), extra.pop("oracles", {}), seed, versions, **extra
        )

    signature_problem = _compare_signatures(reference_proto, candidate_proto)
    if signature_problem:
        return report("mismatch", signature_problem)

    reference_runner, reference_notes = _make_runner(reference_proto, deadline, limit)
    if reference_runner is None:
        return report(
            "cannot_verify", "no runtime can run the reference: " + "; ".join(reference_notes)
        )
    candidate_runner, candidate_notes = _make_runner(candidate_proto, deadline, limit)
    if candidate_runner is None:
        return report(
            "cannot_verify", "no runtime can run the candidate: " + "; ".join(candidate_notes)
        )
    oracles = {"reference": reference_runner.name, "candidate": candidate_runner.name}

    output_names = [o.name for o in reference_proto.graph.output]
    plans = _run_plans(reference_proto, inputs, n, seed, dims, input_shapes, seq_len)
    runs: list[RunReport] = []
    problems: list[str] = []
    failing: dict[str, Any] | None = None
    for index, (make_feeds, retry, optional) in enumerate(plans):
        # A reference that loads but fails on an input says the input is wrong for it: new
        # inputs are drawn, but no other oracle is asked (it might accept what the model rejects).
        outcome = _reference_outputs(reference_runner, make_feeds, retry, index, problems)
        if outcome is None:
            if optional:
                problems.append(
                    f"run {index}: the reference ({reference_runner.name}) fails on empty "
                    "sequences; run skipped"
                )
                continue
            return report(
                "cannot_verify",
                f"the reference failed on every input tried in run {index}"
                + (
                    f" (last: {problems[-1].split('(', 1)[-1].rsplit(')', 1)[0]})"
                    if problems
                    else ""
                )
                + "; give real shapes with --dim/--input-shape or real inputs with --inputs",
                runs=runs,
                oracles=oracles,
                input_problems=problems,
            )
        feeds, expected, attempts = outcome
        run = _compare_run(index, feeds, expected, candidate_runner, output_names, rtol, atol)
        run.attempts = attempts
        runs.append(run)
        if not run.ok and failing is None:
            failing = feeds
    if not runs:
        return report(
            "cannot_verify", "no run could be made", oracles=oracles, input_problems=problems
        )
    bad = [run.index for run in runs if not run.ok]
    if bad:
        return report(
            "mismatch",
            f"outputs differ in run(s) {', '.join(map(str, bad))}",
            runs=runs,
            oracles=oracles,
            input_problems=problems,
            failing_inputs=failing,
        )
    return report(
        "equivalent",
        f"all outputs match in {len(runs)} run(s)",
        runs=runs,
        oracles=oracles,
        input_problems=problems,
    )


# ---------------------------------------------------------------- models and oracles


def _as_proto(model: ModelLike) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, ir.Model):
        return self_contained_proto(model)
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


@dataclasses.dataclass
class _Runner:
    name: str
    run: Callable[[Mapping[str, Any]], list[Any]]
    #: Asks a run in progress to stop (onnxruntime's RunOptions.terminate); None: cannot.
    stop: Callable[[], None] | None = None


DEFAULT_TIMEOUT = 600.0  # seconds for all the runs of one check


def default_memory_budget() -> int:
    """A quarter of physical memory: room for both models' outputs and intermediates too."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
    except (ValueError, OSError, AttributeError):
        return 2**31


def _check_input_budget(
    model: onnx.ModelProto,
    budget: int,
    dims: Mapping[str, int] | None,
    input_shapes: Mapping[str, tuple[int, ...]] | None,
    seq_len: int | None,
) -> None:
    estimates = estimate_input_bytes(model, dims=dims, input_shapes=input_shapes, seq_len=seq_len)
    total = sum(size for _, _, size in estimates)
    if total <= budget:
        return
    name, written, size = max(estimates, key=lambda e: e[2])
    raise CheckLimitError(
        f"the check would generate {_bytes(total)} of inputs, over its memory budget of "
        f"{_bytes(budget)} (input '{name}', {written}: {_bytes(size)}); give smaller sizes "
        "with --dim/--input-shape, or a larger --check-memory"
    )


def _bytes(count: int) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} bytes"


def _bounded(
    runner: _Runner, deadline: float, limit: float
) -> Callable[[Mapping[str, Any]], list[Any]]:
    """``runner.run`` in a worker thread, watched: past the deadline or on Ctrl-C it is told to
    stop (onnxruntime checks between kernels, a Loop between iterations); running out of memory
    becomes a CheckLimitError rather than a failed or mismatching run."""
    run = runner.run

    def bounded(feeds: Mapping[str, Any]) -> list[Any]:
        box: dict[str, Any] = {}
        # An Event, not Thread.join: a join interrupted by Ctrl-C can mark a running thread as
        # stopped (CPython gh-90882), and a process that exits while onnxruntime still runs in
        # a thread aborts.
        done = threading.Event()

        def work() -> None:
            # Signals go to the main thread, which handles them; onnxruntime's binding, hit by
            # one, drops the thread without a Python exception.
            signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
            try:
                box["value"] = run(feeds)
            except BaseException as e:
                box["error"] = e
            finally:
                done.set()

        threading.Thread(target=work, name="seqlower-check", daemon=True).start()
        try:
            while not done.wait(min(max(deadline - time.monotonic(), 0), 0.1)):
                if time.monotonic() >= deadline:
                    _stop(runner, done)
                    raise CheckLimitError(
                        f"the check took longer than its time limit ({limit:g} s, "
                        f"--check-timeout); {runner.name} was stopped"
                    )
        except KeyboardInterrupt:
            _stop(runner, done)
            raise
        error = box.get("error")
        if error is not None:
            if isinstance(error, MemoryError) or "Failed to allocate" in str(error):
                raise CheckLimitError(
                    f"the check ran out of memory in {runner.name} ({_first_line(error)}); "
                    "give smaller sizes with --dim/--input-shape"
                ) from None
            raise error
        return box["value"]

    return bounded


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _stop(runner: _Runner, done: threading.Event) -> None:
    """Ask the run to stop and wait for it; onnx.reference (pure Python) cannot be told, so its
    thread is left to finish in the background (a daemon: it dies with the process)."""
    if runner.stop is not None:
        runner.stop()
        done.wait(10)


def _make_runner(
    model: onnx.ModelProto, deadline: float, limit: float
) -> tuple[_Runner | None, list[str]]:
    runner, notes = _load_runner(model)
    if runner is not None:
        runner.run = _bounded(runner, deadline, limit)
    return runner, notes


def _load_runner(model: onnx.ModelProto) -> tuple[_Runner | None, list[str]]:
    notes: list[str] = []
    try:
        return _ort_runner(model, "onnxruntime"), notes
    except Exception as e:
        notes.append(f"onnxruntime: {_first_line(e)}")
    for ir_version in _ORT_IR_VERSIONS:
        if ir_version >= model.ir_version:
            continue
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        copy.ir_version = ir_version
        try:
            return _ort_runner(copy, f"onnxruntime (re-stamped to IR version {ir_version})"), notes
        except Exception:
            continue
    runner = _reference_evaluator(model)
    if runner is not None:
        return runner, notes
    notes.append("onnx.reference could not load it either")
    return None, notes


def _ort_runner(model: onnx.ModelProto, name: str) -> _Runner:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4  # failures surface as exceptions, not as stderr noise
    # onnxruntime's memory-reuse planner compares every new buffer with every freed one it
    # could not match, which is quadratic in the intermediates of unknown shape: a lowered
    # model with 1,700 ReverseSequence took 4 minutes to load with it and seconds without. The
    # check runs small inputs; reuse saves nothing here.
    options.enable_mem_reuse = False
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    run_options: list[ort.RunOptions] = []

    def run(feeds: Mapping[str, Any]) -> list[Any]:
        run_options[:] = [ort.RunOptions()]
        return session.run(None, dict(feeds), run_options[0])

    def stop() -> None:
        for options in run_options:
            options.terminate = True

    return _Runner(name, run, stop)


def _reference_evaluator(model: onnx.ModelProto) -> _Runner | None:
    try:
        evaluator = ReferenceEvaluator(with_explicit_loop_conditions(model))
    except Exception:
        return None
    return _Runner("onnx.reference", lambda feeds: list(evaluator.run(None, dict(feeds))))


def with_explicit_loop_conditions(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy where each Loop with an omitted condition gets a constant true one.

    The two mean the same in ONNX, but onnx's ReferenceEvaluator runs a Loop whose condition is
    omitted zero times (op_loop.py: ``while cond and ...`` with cond None).
    """
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    counter = 0

    def patch(nodes: Any) -> None:
        nonlocal counter
        for node in list(nodes):
            for attr in node.attribute:
                if attr.HasField("g"):
                    patch(attr.g.node)
                for graph in attr.graphs:
                    patch(graph.node)
            if node.op_type == "Loop" and len(node.input) > 1 and not node.input[1]:
                counter += 1
                name = f"__seqlower_verify_true_{counter}"
                true = onnx.helper.make_node(
                    "Constant",
                    [],
                    [name],
                    value=onnx.helper.make_tensor(name, onnx.TensorProto.BOOL, [], [True]),
                )
                nodes.insert(list(nodes).index(node), true)
                node.input[1] = name

    patch(copy.graph.node)
    for function in copy.functions:
        patch(function.node)
    return copy


# ---------------------------------------------------------------- runs


_FeedMaker = Callable[[int], dict[str, Any]]


def _run_plans(
    model: onnx.ModelProto,
    inputs: str | os.PathLike[str] | Sequence[Mapping[str, Any]] | None,
    n: int,
    seed: int,
    dims: Mapping[str, int] | None,
    input_shapes: Mapping[str, tuple[int, ...]] | None,
    seq_len: int | None,
) -> list[tuple[_FeedMaker, bool, bool]]:
    """(feeds for attempt k, retry allowed, optional run) for each run."""
    if inputs is not None:
        given = load_inputs(inputs, model) if isinstance(inputs, (str, os.PathLike)) else inputs
        return [((lambda _k, f=dict(f): f), False, False) for f in given]

    def generated(run: int, length: int | None) -> _FeedMaker:
        return lambda attempt: generate_inputs(
            model,
            np.random.default_rng([seed, run, attempt]),
            dims=dims,
            input_shapes=input_shapes,
            seq_len=length,
        )

    plans = [(generated(i, seq_len), True, False) for i in range(n)]
    if any(s.is_sequence for s in input_specs(model)) and seq_len is None:
        plans.append((generated(n, 0), False, True))  # lengths are all 0: retrying changes nothing
    return plans


def _reference_outputs(
    runner: _Runner, make_feeds: _FeedMaker, retry: bool, index: int, problems: list[str]
) -> tuple[dict[str, Any], list[Any], int] | None:
    attempts = _ATTEMPTS if retry else 1
    last: tuple[dict[str, Any], list[Any], int] | None = None
    for attempt in range(attempts):
        feeds = make_feeds(attempt)
        try:
            outputs = runner.run(feeds)
        except CheckLimitError:
            raise
        except Exception as e:
            problems.append(
                f"run {index}, attempt {attempt}: the reference failed on these "
                f"inputs ({_first_line(e)}); new inputs drawn"
            )
            continue
        last = (feeds, outputs, attempt + 1)
        if retry and attempt + 1 < attempts and _has_nan(outputs):
            problems.append(
                f"run {index}, attempt {attempt}: the reference returned NaN; new inputs drawn"
            )
            continue
        return last
    return last


def _has_nan(values: Any) -> bool:
    if isinstance(values, list):
        return any(_has_nan(v) for v in values)
    array = np.asarray(values)
    return array.dtype.kind in "fc" and bool(np.isnan(array).any())


def _compare_run(
    index: int,
    feeds: dict[str, Any],
    expected: list[Any],
    candidate: _Runner,
    names: list[str],
    rtol: float | Mapping[str, float] | None,
    atol: float | Mapping[str, float] | None,
) -> RunReport:
    summary = {name: _describe(value) for name, value in feeds.items()}
    try:
        actual = candidate.run(feeds)
    except CheckLimitError:
        raise
    except Exception as e:
        return RunReport(index, False, summary, [], error=f"the candidate failed: {_first_line(e)}")
    outputs = [
        compare_values(name, e, a, _pick(rtol, name), _pick(atol, name))
        for name, e, a in zip(names, expected, actual, strict=True)
    ]
    return RunReport(index, all(o.ok for o in outputs), summary, outputs)


def _pick(tolerance: float | Mapping[str, float] | None, name: str) -> float | None:
    if isinstance(tolerance, Mapping):  # per output; "*" for every output not named
        return tolerance.get(name, tolerance.get("*"))
    return tolerance


def _describe(value: Any) -> Any:
    if isinstance(value, list):
        return [list(np.shape(v)) for v in value]
    return list(np.shape(value))


# ---------------------------------------------------------------- comparison


def compare_values(
    name: str, expected: Any, actual: Any, rtol: float | None = None, atol: float | None = None
) -> OutputReport:
    """Compare one output: sequences by length then element, tensors by shape, dtype, values."""
    if isinstance(expected, list) or isinstance(actual, list):
        report = OutputReport(name, True, kind="sequence")
        if not (isinstance(expected, list) and isinstance(actual, list)):
            report.ok, report.message = False, "one is a sequence, the other a tensor"
            return report
        report.reference_length, report.candidate_length = len(expected), len(actual)
        if len(expected) != len(actual):
            report.ok = False
            report.message = f"sequence length {len(actual)}, expected {len(expected)}"
            return report
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            element = compare_values(f"{name}[{i}]", e, a, rtol, atol)
            report.max_abs = max(report.max_abs, element.max_abs)
            report.max_rel = max(report.max_rel, element.max_rel)
            report.mismatches += element.mismatches
            report.elements += element.elements
            if not element.ok:
                report.ok = False
                report.message = report.message or f"element {i}: {element.message}"
        return report

    e, a = np.asarray(expected), np.asarray(actual)
    report = OutputReport(
        name,
        True,
        reference_shape=list(e.shape),
        candidate_shape=list(a.shape),
        elements=int(e.size),
    )
    if e.shape != a.shape:
        report.ok, report.message = False, f"shape {list(a.shape)}, expected {list(e.shape)}"
        report.mismatches = max(e.size, a.size)
        return report
    if e.dtype != a.dtype:
        report.ok, report.message = False, f"dtype {a.dtype}, expected {e.dtype}"
        report.mismatches = int(e.size)
        return report
    if e.dtype.kind in "OSUb" or e.dtype.kind in "iu":
        differ = e != a
        report.mismatches = int(np.count_nonzero(differ))
        if e.dtype.kind in "iu" and report.mismatches:
            diff = np.abs(e.astype(np.float64) - a.astype(np.float64))
            report.max_abs = float(diff.max())
            report.max_rel = float((diff / np.maximum(np.abs(e.astype(np.float64)), 1e-300)).max())
    else:
        default_rtol, default_atol = default_tolerance(e.dtype)
        rtol = default_rtol if rtol is None else rtol
        atol = default_atol if atol is None else atol
        e64 = e.astype(np.complex128 if e.dtype.kind == "c" else np.float64)
        a64 = a.astype(e64.dtype)
        nan_e, nan_a = np.isnan(e64), np.isnan(a64)
        inf_e, inf_a = np.isinf(e64), np.isinf(a64)
        finite = ~(nan_e | nan_a | inf_e | inf_a)
        diff = np.zeros(e.shape, dtype=np.float64)
        diff[finite] = np.abs(e64[finite] - a64[finite])
        within = diff <= atol + rtol * np.abs(e64)
        # NaN must meet NaN; an infinity must meet the same infinity; finite within tolerance.
        ok = np.where(finite, within, (nan_e & nan_a) | (inf_e & inf_a & (e64 == a64)))
        report.mismatches = int(np.count_nonzero(~ok))
        if diff.size:
            report.max_abs = float(diff.max())
            rel = diff / np.maximum(np.abs(e64), np.finfo(np.float64).tiny)
            report.max_rel = float(np.where(finite, rel, 0.0).max())
    if report.mismatches:
        report.ok = False
        report.message = f"{report.mismatches} of {report.elements} elements differ"
    return report


def _versions() -> dict[str, str]:
    try:
        own = importlib.metadata.version("seqlower")
    except importlib.metadata.PackageNotFoundError:
        own = "unknown"
    return {
        "seqlower": own,
        "onnx": onnx.__version__,
        "onnxruntime": ort.__version__,
        "numpy": np.__version__,
    }


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__
