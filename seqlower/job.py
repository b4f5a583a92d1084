"""One whole run, file to file: what ``seqlower MODEL -o OUT`` does, callable from Python.

:func:`lower_file` reads a model, lowers it, checks it against the original, and writes it
(only when the check passed, unless told otherwise), returning a :class:`LowerResult` that holds
everything a front end may want to show. The command line only parses flags and prints results.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx
import onnx_ir as ir

import seqlower.io
from seqlower._fs import check_external_data_name
from seqlower._onnxruntime_ir import (
    ir_version_every_onnxruntime_reads,
    newest_ir_version_onnxruntime_reads,
)
from seqlower._saving import (
    SaveOptions,
    check_paths,
    keeps_runs,
    save_failing,
    save_failing_inputs,
    save_runs,
)
from seqlower.errors import (
    BadOptionError,
    ExitCode,
    InvalidModelError,
    ModelLoadError,
    OutputError,
)
from seqlower.io import check_model, load_model
from seqlower.pipeline import (
    PassRow,
    lacks_ops,
    op_counts,
    restamp,
)
from seqlower.plan import Plan, make_plan, run_plan, verification_runtimes
from seqlower.proof import (
    as_exported_warning,
    keeps_as_exported,
    prepare_proof,
    proof_proto,
    prove,
    prove_as_exported,
)
from seqlower.summary import ModelFacts
from seqlower.writing import save_model

if TYPE_CHECKING:
    from seqlower.verification import VerifyReport
    from seqlower.verification.check import CheckOptions

__all__ = [
    "LowerOptions",
    "LowerResult",
    "SaveOptions",
    "VerifyResult",
    "check_names",
    "check_paths",
    "lower_file",
    "restamp",
    "save_failing_inputs",
    "verify_files",
]

#: The note of a run with nothing to lower, which writes the model as read and checks nothing.
KEPT_AS_READ = "the model is kept as read and not checked (the check would compare it with itself)"

#: Progress hook: ``with progress("lowering"): ...`` around each long step.
Progress = Callable[[str], contextlib.AbstractContextManager[None]]


@dataclass
class LowerOptions:
    """How :func:`lower_file` runs: ``targets`` the deploy targets it lowers for (``--target``:
    rows of the target table, or the check's runtime names; the plan resolves them);
    ``check_options`` how the check runs (when ``check``), its ``runtimes`` set by the plan to
    the runtimes that prove the target."""

    passes: Sequence[str] | None = None
    cleanup: bool = True
    check: bool = True
    check_options: CheckOptions = field(default_factory=lambda: _check_options())
    external_data: str | None = None
    keep_on_failure: bool = False
    dry_run: bool = False
    count_ops: bool = True
    ir_version: int | None = None
    opset: int | None = None
    sequence_free: bool = False
    unroll_inputs: Mapping[str, int] = field(default_factory=dict)
    #: ``--optional-input NAME=present|absent``: optional input name -> whether it is passed.
    optional_inputs: Mapping[str, bool] = field(default_factory=dict)
    #: ``--overwrite-input-shape``: input name -> the static shape it is lowered (and checked) at.
    overwrite_input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    #: ``--constant-input NAME=VALUE``: input name -> the one value it is lowered (and checked)
    #: at (a ``str`` read as the command line reads VALUE, else an array-like).
    constant_inputs: Mapping[str, Any] = field(default_factory=dict)
    #: ``--drop-constant-inputs``: the inputs ``constant_inputs`` fixes leave the interface.
    drop_constant_inputs: bool = False
    save: SaveOptions = field(default_factory=SaveOptions)
    #: ``--target``: the deploy targets (or the check's runtime names) it lowers for.
    targets: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # ``targets="tract"`` means one target: iterating the string would ask for "t", "r"...
        self.targets = (self.targets,) if isinstance(self.targets, str) else tuple(self.targets)
        if keeps_runs(self.save) and not self.check_options.keep_runs:
            self.check_options = dataclasses.replace(self.check_options, keep_runs=True)


def _check_options() -> CheckOptions:
    # The check's modules load when a run needs them, not with the command line.
    from seqlower.verification.check import CheckOptions

    return CheckOptions()


def check_names(model: onnx.ModelProto, options: CheckOptions) -> None:
    """:func:`seqlower.verification.check.check_names`, its module imported when a run
    needs it (not with the command line)."""
    from seqlower.verification.check import check_names as check

    check(model, options)


@dataclass
class LowerResult:
    """What a run did; ``exit_code`` is the command line's (see :class:`ExitCode`)."""

    input: Path
    output: Path | None
    passes: list[PassRow]
    ops_before: Counter[str]
    ops_after: Counter[str]
    verification: VerifyReport | None
    written: bool = False
    external_data: str | None = None
    failing_inputs: Path | None = None
    notes: list[str] = field(default_factory=list)  # what was done besides lowering
    warnings: list[str] = field(default_factory=list)  # what the user should act on
    exit_code: int = ExitCode.OK
    #: Nothing was lowered: OUT is the model as read (re-stamped only if asked), unchecked
    #: unless a target, expected outputs or an opset conversion called for the check.
    unchanged: bool = False
    #: The refusal of a ``--target`` lowering that OUT replaces by the model as exported,
    #: proven on the target's runtimes (:func:`seqlower.proof.prove_as_exported`).
    refused: str | None = None
    before: ModelFacts | None = None  # opset, IR version, interface, size of MODEL
    after: ModelFacts | None = None  # the same for OUT (its size once written)
    seconds: float = 0.0  # the whole run

    def __str__(self) -> str:
        """The summary ``seqlower MODEL -o OUT -v`` prints (tables, facts, the check)."""
        from seqlower.summary import facts_lines, pass_lines, seconds
        from seqlower.verification.report import verdict_lines

        lines = pass_lines(self.passes, self.ops_before, self.ops_after, verbose=1)
        if self.before is not None:
            lines += facts_lines(self.before, self.after, verbose=1)
        if self.verification is not None:
            lines += verdict_lines(self.verification, verbose=1)
        lines.append(f"{'total time':26} {seconds(self.seconds)}")
        return "\n".join(lines)

    @property
    def lowered_anything(self) -> bool:
        return any(row.rewritten for row in self.passes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "input": str(self.input),
            "output": None if self.output is None else str(self.output),
            "written": self.written,
            "external_data": self.external_data,
            "exit_code": int(self.exit_code),
            "unchanged": self.unchanged,
            "refused": self.refused,
            "passes": [row.__dict__ for row in self.passes],
            "ops": {"before": dict(self.ops_before), "after": dict(self.ops_after)},
            "notes": self.notes,
            "warnings": self.warnings,
            "failing_inputs": None if self.failing_inputs is None else str(self.failing_inputs),
            "model": {
                "before": None if self.before is None else self.before.__dict__,
                "after": None if self.after is None else self.after.__dict__,
            },
            "seconds": self.seconds,
            "verification": None if self.verification is None else self.verification.to_dict(),
        }


@contextlib.contextmanager
def _no_progress(_: str) -> Iterator[None]:
    yield


def lower_file(
    model: str | os.PathLike[str],
    output: str | os.PathLike[str] | None,
    options: LowerOptions,
    *,
    progress: Progress = _no_progress,
    on_run: Callable[[int, int], None] | None = None,
) -> LowerResult:
    """Lower the model at ``model``, check it, and write it to ``output``.

    Raises :class:`seqlower.SeqlowerError` for anything the user can fix; a mismatch or an
    impossible check is not an error but a result (``exit_code`` 1 or 3, OUT not written unless
    ``keep_on_failure``). ``output`` may be None only with ``dry_run``. Paths may be ``str``.
    """
    start = time.perf_counter()
    model = Path(model)
    output = None if output is None else Path(output)
    written = _checked_paths(model, output, options)
    plan = make_lower_plan(options)
    with progress(f"reading {model}"):
        ir_model = load_model(model)
    reads, keep = _files_read(model, ir_model, output)
    result = _read_result(model, output, ir_model, _files_size(reads), counted=options.count_ops)
    if options.external_data is not None and written is not None:
        check_external_data_name(options.external_data, written, inputs=reads)
    proof = prepare_proof(plan, ir_model, options.check_options, check=options.check)
    original, check = proof.original, proof.options
    if original is not None:
        check_names(original, check)
    with progress("lowering"):
        lowered = _lower(model, ir_model, plan, options.ir_version, result, original is not None)
        if lowered.unchanged and _kept_unchecked(original, check, lowered.opset):
            result.notes[:0] = [] if original is None else [KEPT_AS_READ]
            original = None  # the check would compare the model with itself
        # Without the check the written file is checked before it replaces anything
        # (cheaper); with it, the proto made for the runtimes is checked (a lowered one).
        proto = proof_proto(lowered.model) if original is not None else None
        if lowered.refused is None and (proto is not None or options.dry_run):
            check_model(lowered.model if proto is None else proto, what="lowered model")
    result.ops_after = op_counts(lowered.model) if options.count_ops else Counter()
    result.after = ModelFacts.of(lowered.model)
    if original is not None and proto is not None:
        with progress("checking"):
            report = _checked(original, proto, check, plan, lowered.refused, result, on_run)
        _record_check(result, report, original, written, options.save)
        if result.exit_code != ExitCode.OK and plan.target is not None:
            result.warnings += _constant_input_hints(original, plan)
    if not options.dry_run and (result.exit_code == ExitCode.OK or options.keep_on_failure):
        assert output is not None
        with progress(f"writing {output}"):
            _write(result, lowered, output, options.external_data, keep=keep)
    if keeps_runs(options.save) and result.verification is None:
        result.warnings.append("--save-inputs/--save-outputs: no check ran, so nothing was saved")
    result.seconds = time.perf_counter() - start
    return result


def _checked_paths(model: Path, output: Path | None, options: LowerOptions) -> Path | None:
    """Where OUT goes (None: a dry run), once the paths of the run are found fit before any
    work: the model, OUT and its weights, ``--inputs``, the folders the check's data goes to."""
    if output is None and not options.dry_run:
        raise OutputError("no output given (-o OUT), and not a dry run")
    written = None if options.dry_run else output
    beside = written if options.check else None
    inputs = _inputs_path(options.check_options)
    external_data = options.external_data
    check_paths(model, written, external_data, None, inputs, options.save, failing_beside=beside)
    return written


def _read_result(
    model: Path, output: Path | None, ir_model: ir.Model, nbytes: int | None, *, counted: bool
) -> LowerResult:
    """The result as far as the model read tells: its facts, its ops (when ``counted``) and its
    inputs nothing reads."""
    return LowerResult(
        input=model,
        output=output,
        passes=[],
        ops_before=op_counts(ir_model) if counted else Counter(),
        ops_after=Counter(),
        verification=None,
        before=ModelFacts.of(ir_model, nbytes),
        warnings=_unread_inputs(ir_model),
    )


@dataclass
class _Lowered:
    """What the lowering made: the model to write (the model as read when nothing was lowered,
    ``unchanged``, with its proto as read when it can be written byte for byte: ``as_read``)
    and the opset it was converted to (None: kept)."""

    model: ir.Model
    unchanged: bool
    opset: int | None
    as_read: onnx.ModelProto | None = None
    #: The refusal of the target's lowering this model (the model as exported) stands in for,
    #: if the check proves it there.
    refused: InvalidModelError | None = None


def _lower(
    path: Path,
    ir_model: ir.Model,
    plan: Plan,
    ir_version: int | None,
    result: LowerResult,
    checked: bool,
) -> _Lowered:
    """``plan`` run on ``ir_model`` (read from ``path``), re-stamped to the plan's opset and
    ``ir_version``; its steps and notes recorded in ``result``. A target's lowering refused
    gives the model as exported for the check (``checked``) to prove there instead."""
    opset, flag, converting = plan.opset_for(ir_model)
    try:
        result.passes = run_plan(plan, ir_model)
    except InvalidModelError as refusal:
        if not checked or not keeps_as_exported(plan):
            raise
        return _as_exported(path, plan, ir_version, result, refusal)
    load_notes = seqlower.io.load_notes(ir_model)
    unchanged = not plan.changes_interface and not result.lowered_anything
    lowered = _Lowered(ir_model, unchanged, opset)
    if unchanged:
        lowered.model, lowered.as_read = _as_read(path, opset, repaired=bool(load_notes))
    notes = restamp(lowered.model, opset=opset, flag=flag, ir_version=ir_version)
    if lowered.as_read is not None:
        lowered.as_read.ir_version = lowered.model.ir_version  # re-stamped only when asked
    result.notes += [*plan.notes, *([converting] if converting else []), *load_notes, *notes]
    result.unchanged = unchanged
    return lowered


def _as_exported(
    path: Path, plan: Plan, ir_version: int | None, result: LowerResult, refusal: InvalidModelError
) -> _Lowered:
    """The model at ``path`` as read (re-stamped only to ``ir_version``), for a run whose
    lowering was refused (``refusal``) to keep once the check proves it on the target;
    ``result`` says nothing was lowered. The refusal stands, unproven, when the target's op
    tables say its runtime cannot run the model as read either."""
    read = load_model(path)
    if lacks_ops(plan.row, read):
        raise refusal
    notes = seqlower.io.load_notes(read)
    model, as_read = _as_read(path, None, repaired=bool(notes))
    lowered = _Lowered(model, unchanged=True, opset=None, as_read=as_read, refused=refusal)
    result.notes += notes
    result.notes += restamp(lowered.model, opset=None, flag=None, ir_version=ir_version)
    if lowered.as_read is not None:
        lowered.as_read.ir_version = lowered.model.ir_version
    result.passes, result.unchanged = [], True
    return lowered


def _checked(
    original: onnx.ModelProto,
    proto: onnx.ModelProto,
    check: CheckOptions,
    plan: Plan,
    refused: InvalidModelError | None,
    result: LowerResult,
    on_run: Callable[[int, int], None] | None,
) -> VerifyReport:
    """The check of the lowered model, or of the model as exported when the target's lowering
    was ``refused``: then a failure raises the refusal, and a pass says so in ``result``."""
    if refused is None:
        return prove(original, proto, check, on_run)
    report = prove_as_exported(original, proto, check, refused, on_run)
    result.refused = str(refused)
    result.warnings.append(as_exported_warning(plan, refused))
    return report


def _constant_input_hints(original: onnx.ModelProto, plan: Plan) -> list[str]:
    """A failed target run's hint: the inputs whose value decides ``If``s, unless
    ``--constant-input`` already fixes them."""
    from seqlower.passes.inputs.fix_input_shapes import constant_input_hints

    if plan.constant_inputs:
        return []
    return constant_input_hints(ir.serde.deserialize_model(original))


def _files_read(
    model: Path, ir_model: ir.Model, output: Path | None
) -> tuple[list[Path], list[Path]]:
    """The files this run reads, and those the write must keep: never overwritten, never
    removed as stale weights (unless OUT replaces the input itself: then its weights are OUT's
    old ones)."""
    weights = ir_model.meta.get(seqlower.io.WEIGHTS_READ)  # as read, nothing changed since
    if weights is None:
        weights = seqlower.io.external_locations(ir_model)
    reads = [model, *(Path(p) for p in weights)]
    in_place = output is not None and os.path.realpath(output) == os.path.realpath(model)
    return reads, [model] if in_place else reads


def _kept_unchecked(
    original: onnx.ModelProto | None, check: CheckOptions, opset: int | None
) -> bool:
    """Whether a model with nothing lowered goes unchecked: unless a target (the runtimes
    proving it), the framework's outputs or an opset conversion call for the check.
    ``--inputs`` must fit all the same."""
    if opset is not None or check.runtimes or check.expected is not None:
        return False
    if original is not None:
        from seqlower.verification.runs import given_inputs

        given_inputs(original, check)  # still wrong inputs: exit 2
    return True


def _as_read(
    model: Path, opset: int | None, repaired: bool = False
) -> tuple[ir.Model, onnx.ModelProto | None]:
    """Nothing lowered: OUT is the model as read (the pipeline's tidying, dropped unused
    optional outputs or inferred value_info, is not the user's request), and its proto as read
    when it can be written byte for byte (not when loading repaired it: ``repaired``)."""
    ir_model = load_model(model, check=repaired)  # the checker's pass makes the same repairs
    if opset is not None or repaired or seqlower.io.has_external_data(ir_model):
        return ir_model, None
    as_read = onnx.load(model, load_external_data=False)
    if seqlower.io.proto_has_external_data(as_read):  # a Constant's, read in
        return ir_model, None
    return ir_model, as_read


def _record_check(
    result: LowerResult,
    report: VerifyReport,
    original: onnx.ModelProto,
    output: Path | None,
    save: SaveOptions,
) -> None:
    """The check's report and exit code in ``result``; a mismatch's inputs beside OUT (or where
    ``save`` says), every run's data where ``save`` asks."""
    result.verification = report
    result.exit_code = _exit_code(report)
    result.warnings += report.warnings
    if result.exit_code == ExitCode.MISMATCH and output is not None:
        result.failing_inputs, warning = save_failing(report, original, output, save)
        result.warnings += warning
    if output is not None:
        result.warnings += save_runs(report, original, save)


def _write(
    result: LowerResult,
    lowered: _Lowered,
    output: Path,
    external_data: str | None,
    *,
    keep: list[Path],
) -> None:
    """Write OUT (and its weights; byte for byte the model as read when it can be) and record
    what was written in ``result``."""
    ir_model = lowered.model
    result.external_data = save_model(
        ir_model,
        output,
        external_data=external_data,
        check=result.verification is None,
        keep=keep,
        exact=lowered.as_read,
        warnings=result.warnings,
    )
    result.written = True
    try:
        result.warnings += _runtime_notes(ir_model)
    except KeyboardInterrupt as e:  # OUT is in place: the interrupt must not say otherwise
        data = [] if result.external_data is None else [output.parent / result.external_data]
        e.written = [output, *data]  # type: ignore[attr-defined]
        raise
    if result.after is not None:
        result.after.nbytes = _files_size(
            [output]
            + ([] if result.external_data is None else [output.parent / result.external_data])
        )


@dataclass
class VerifyResult:
    """What :func:`verify_files` did; ``exit_code`` is the command line's."""

    reference: Path
    candidate: Path
    verification: VerifyReport
    exit_code: int
    failing_inputs: Path | None = None  # the first failing run's inputs (--save-failing-inputs)
    warnings: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return str(self.verification)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "reference": str(self.reference.resolve()),
            "candidate": str(self.candidate.resolve()),
            "exit_code": int(self.exit_code),
        }
        if self.failing_inputs is not None:
            data["failing_inputs"] = str(self.failing_inputs)
        return {**data, "verification": self.verification.to_dict()}


def verify_files(
    reference: str | os.PathLike[str],
    candidate: str | os.PathLike[str],
    options: CheckOptions,
    *,
    progress: Progress = _no_progress,
    on_run: Callable[[int, int], None] | None = None,
    save: SaveOptions | None = None,
) -> VerifyResult:
    """Compare the models at ``reference`` and ``candidate``: what ``seqlower verify`` does.

    Raises :class:`seqlower.SeqlowerError` for anything the user can fix (paths, models of
    different interfaces, options naming what the reference lacks); a mismatch (its inputs
    saved only where ``save.failing_inputs`` says: a compare leaves the models' folder alone)
    or an impossible check is a result, with ``exit_code`` 1 or 3.
    """
    reference, candidate = Path(reference), Path(candidate)
    save = save or SaveOptions()
    if save.failing_inputs is None:
        save = dataclasses.replace(save, no_failing_inputs=True)
    if keeps_runs(save):
        options = dataclasses.replace(options, keep_runs=True)
    # not installed: exit 2 before any model is read
    options = dataclasses.replace(options, runtimes=verification_runtimes(options.runtimes))
    check_paths(reference, None, None, None)
    check_paths(
        candidate, None, None, None, _as_path(options.inputs), save, failing_beside=candidate
    )
    expected = _as_path(options.expected)
    if expected is not None and not expected.exists():
        raise ModelLoadError(f"--expected {expected}: no such file or folder")
    protos = []
    for path in (reference, candidate):
        with progress(f"reading {path}"):
            protos.append(seqlower.io.self_contained_proto(load_model(path)))
    _same_interface(protos[0], protos[1], reference, candidate)
    check_names(protos[0], options)
    with progress("checking"):
        from seqlower.verification import verify

        report = verify(protos[0], protos[1], _with_progress(options, on_run))
    result = VerifyResult(reference, candidate, report, _exit_code(report))
    result.warnings += report.warnings
    if result.exit_code == ExitCode.MISMATCH:
        result.failing_inputs, warning = save_failing(report, protos[0], candidate, save)
        result.warnings += warning
    result.warnings += save_runs(report, protos[0], save)
    return result


def _as_path(value: object) -> Path | None:
    return Path(value) if isinstance(value, (str, os.PathLike)) else None


def _same_interface(
    reference: onnx.ModelProto, candidate: onnx.ModelProto, a: Path, b: Path
) -> None:
    """Models with different input or output names cannot be compared: a usage error."""

    def names(model: onnx.ModelProto) -> tuple[list[str], list[str]]:
        initializers = {t.name for t in model.graph.initializer}
        inputs = [i.name for i in model.graph.input if i.name not in initializers]
        return sorted(inputs), [o.name for o in model.graph.output]

    (ins_a, outs_a), (ins_b, outs_b) = names(reference), names(candidate)
    if ins_a != ins_b:
        raise InvalidModelError(f"{a} and {b} take different inputs: {ins_a} vs {ins_b}")
    if outs_a != outs_b:
        raise InvalidModelError(f"{a} and {b} have different outputs: {outs_a} vs {outs_b}")


def _files_size(paths: Sequence[Path]) -> int | None:
    """The bytes a model takes on disk, its weights files included (None if one is gone)."""
    try:
        return sum(os.path.getsize(p) for p in dict.fromkeys(paths))
    except OSError:
        return None


def _with_progress(
    options: CheckOptions, on_run: Callable[[int, int], None] | None
) -> CheckOptions:
    """``options`` reporting run k of n to ``on_run`` (when given), for progress."""
    return options if on_run is None else dataclasses.replace(options, on_run=on_run)


def _inputs_path(check: CheckOptions) -> Path | None:
    inputs, expected = check.inputs, check.expected
    if isinstance(expected, (str, os.PathLike)) and not Path(expected).exists():
        raise ModelLoadError(f"--expected {expected}: no such file or folder")
    return Path(inputs) if isinstance(inputs, (str, os.PathLike)) else None


def make_lower_plan(options: LowerOptions) -> Plan:
    """The plan ``options`` ask for (:func:`seqlower.plan.make_plan`): with the check each
    runtime that proves the target must be installed, and a target seqlower cannot run is
    refused: exit 2 before any work, naming ``--no-check``, the one way to lower for a target
    unproven. What :func:`lower_file` runs and ``inspect`` runs dry."""
    if options.check_options.expected is not None and not options.check:
        raise BadOptionError("--expected: comparing with the framework's outputs needs the check")
    return make_plan(
        options.targets,
        passes=options.passes,
        sequence_free=options.sequence_free,
        cleanup=options.cleanup,
        unroll_inputs=options.unroll_inputs,
        optional_inputs=options.optional_inputs,
        input_shapes=options.overwrite_input_shapes,
        constant_inputs=options.constant_inputs,
        drop_constant_inputs=options.drop_constant_inputs,
        opset=options.opset,
        check=options.check,
    )


def _unread_inputs(model: ir.Model) -> list[str]:
    """A warning per main-graph input that nothing reads: the model ignores its value, which
    the user feeds believing otherwise (paddle2onnx's LSTM drops what read its
    ``sequence_length``: every sequence then runs to full length)."""
    outputs = {id(value) for value in model.graph.outputs}
    return [
        f"input '{value.name}' is read by no node: the model ignores its value (did the "
        "exporter drop what read it, such as a recurrence's sequence_lens?)"
        for value in model.graph.inputs
        if not value.uses() and id(value) not in outputs and not value.is_initializer()
    ]


def _runtime_notes(model: ir.Model) -> list[str]:
    """A warning when the installed onnxruntime cannot load OUT's IR version. Asked of it only
    past the IR version every onnxruntime seqlower takes reads: importing onnxruntime to ask
    was a quarter of a ``--no-check`` run's peak memory (issue 33: 26 of 122 MiB)."""
    if model.ir_version <= ir_version_every_onnxruntime_reads():
        return []
    newest = newest_ir_version_onnxruntime_reads()
    if newest is not None and model.ir_version > newest:
        import onnxruntime

        return [
            f"OUT has IR version {model.ir_version}, but onnxruntime {onnxruntime.__version__} "
            f"reads up to {newest}: rerun with --ir-version {newest} to load it there"
        ]
    return []


def _exit_code(report: VerifyReport) -> int:
    codes = {
        "equivalent": ExitCode.OK,
        "mismatch": ExitCode.MISMATCH,
        "cannot_verify": ExitCode.CANNOT_VERIFY,
    }
    return codes[report.status]
