"""The one lowering plan: what a run does, worked out once from its options and the model.

What a ``--target`` (or ``target=``) means is decided here and nowhere else: :func:`make_plan`
resolves the names to the row of :data:`seqlower.targets.PIPELINES` whose passes run, the
check's runtimes that must prove the result (each installed, else exit 2 before any work), and
the opset the lowered model is converted to (the row's converters' newest when the model is
newer); :func:`run_plan` runs it. :func:`seqlower.lower`, the command line's file job and
``inspect`` call these two.
"""

from __future__ import annotations

import os
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import onnx
import onnx_ir as ir

from seqlower._gc import gc_paused
from seqlower.errors import (
    BadArgumentError,
    BadOptionError,
    InvalidModelError,
    ModelTypeError,
)
from seqlower.io import load_model, model_from_proto, self_contained_proto
from seqlower.passes._declared import forget_declared_sizes
from seqlower.pipeline import (
    TOO_DEEP_TO_WALK,
    PassRow,
    PassSpec,
    _caused_by,
    check_arguments,
    lacks_ops,
    op_counts,
    pass_rows,
    pipeline_for_row,
    restamp,
    run_pipeline,
)
from seqlower.proof import (
    as_exported_warning,
    keeps_as_exported,
    prepare_proof,
    proof_proto,
    prove,
    prove_as_exported,
    raise_unless_proven,
)
from seqlower.targets import (
    PIPELINES,
    TARGETS,
    Deployment,
    Pipeline,
    Target,
    deployment,
    get_pipeline,
    get_target,
)

if TYPE_CHECKING:  # onnxruntime loads with it: only when a proof runs
    from seqlower.verification import CheckOptions

__all__ = [
    "DECLARED_SIZES",
    "LowerReport",
    "Plan",
    "build_pipeline",
    "lower",
    "lower_with_report",
    "make_plan",
    "pipeline_rows",
    "plan_pipeline",
    "run_plan",
    "target_rows",
    "verification_runtimes",
]

#: The name of the step that forgets the sizes a model declares but nothing enforces, in
#: reports (``-v``'s timings).
DECLARED_SIZES = "forget-declared-sizes"


@dataclass(frozen=True)
class Plan:
    """A lowering, resolved: the row whose passes run (or the passes asked for), the interface
    and shape changes, the opset to convert to, and the runtimes that must prove the result."""

    #: The row of the pipeline table that runs (a :class:`~seqlower.targets.Target` for
    #: ``--target``).
    row: Pipeline
    #: The passes asked for by name or instance (``--passes``); None: the row's.
    passes: tuple[PassSpec, ...] | None = None
    cleanup: bool = True
    unroll_inputs: Mapping[str, int] = field(default_factory=dict)
    optional_inputs: Mapping[str, bool] = field(default_factory=dict)
    #: ``--overwrite-input-shape``: the static shapes the model is lowered (and checked) at.
    input_shapes: Mapping[str, Sequence[int]] = field(default_factory=dict)
    #: ``--constant-input``: the one value each of these inputs is lowered (and checked) at,
    #: and whether they leave the interface (``--drop-constant-inputs``).
    constant_inputs: Mapping[str, Any] = field(default_factory=dict)
    drop_constant_inputs: bool = False
    #: The default-domain opset asked for (``--opset``; None: kept, or the target's converters'
    #: newest when the model is newer: :meth:`opset_for`).
    opset: int | None = None
    #: The check's runtimes that must prove the lowered model (empty: no proof asked).
    runtimes: tuple[str, ...] = ()
    #: What the plan says of itself (a target unproven, a conversion the target asks for).
    notes: tuple[str, ...] = ()

    #: Whether messages name :func:`seqlower.lower`'s arguments rather than flags.
    api: bool = False

    @property
    def changes_interface(self) -> bool:
        """Whether the lowered model's inputs differ from the model's (unrolled, fixed or made
        constant): then it is never the model as read."""
        return bool(
            self.unroll_inputs or self.optional_inputs or self.input_shapes or self.constant_inputs
        )

    @property
    def new_inputs(self) -> bool:
        """Whether the lowered model takes other inputs than the model (unrolled, an optional
        fixed, constants dropped): the check then compares it with a copy given the same."""
        return bool(self.unroll_inputs or self.optional_inputs or self.drop_constant_inputs)

    @property
    def target(self) -> Target | None:
        return self.row if isinstance(self.row, Target) else None

    def opset_for(self, model: ir.Model) -> tuple[int | None, str | None, str | None]:
        """The opset ``model`` is converted to (None: kept), what asks for it (for messages;
        None: ``--opset``), and a note when the target does: the model is newer than its
        converters know (onnx2torch: 17), or older than the forms it converts (iree: 13)."""
        newest = None if self.target is None else self.target.max_opset
        oldest = None if self.target is None else self.target.min_opset
        current = model.opset_imports.get("", 1)
        if self.opset is None and oldest is not None and current < oldest:
            name = self.row.name
            flag = f"target={name!r}" if self.api else f"--target {name}"
            note = f"--target {name}: converting to opset {oldest}, the oldest forms it converts"
            return oldest, f"{flag} (converting to opset {oldest})", note
        if self.opset is not None or newest is None or current <= newest:
            return self.opset, None, None
        name = self.row.name
        flag = f"target={name!r}" if self.api else f"--target {name}"
        note = f"--target {name}: converting to opset {newest}, the newest its converters know"
        return newest, f"{flag} (converting to opset {newest})", note


def make_plan(
    targets: Sequence[str] = (),
    *,
    passes: Sequence[PassSpec] | None = None,
    sequence_free: bool = False,
    cleanup: bool = True,
    unroll_inputs: Mapping[str, int] | None = None,
    optional_inputs: Mapping[str, bool] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    constant_inputs: Mapping[str, Any] | None = None,
    drop_constant_inputs: bool = False,
    opset: int | None = None,
    check: bool = True,
    api: bool = False,
) -> Plan:
    """The plan for ``targets`` (deploy targets or the check's runtime names; at most one
    lowering among them) and the other options. With ``check`` every runtime that proves the
    target must be installed, and a target nothing here runs is refused
    (TargetUnavailableError, before any work); ``api`` words the errors as
    :func:`seqlower.lower`'s arguments, not flags."""
    if api:  # the arguments checked as given by _api_plan, before this
        for name in targets:
            get_target(name)  # the API's error: BadArgumentError naming the known targets
    deploy = deployment(targets)
    row: Pipeline = deploy.target if deploy.target is not None else get_pipeline(sequence_free)
    if deploy.target is not None and (passes is not None or sequence_free):
        if api:
            raise BadArgumentError(
                "a target chooses its own passes: give target or passes/sequence_free"
            )
        flag = "--sequence-free" if sequence_free else "--passes/--skip"
        raise BadOptionError(
            f"--target {row.name} chooses its own passes; leave out {flag} "
            "(seqlower --list-targets shows them)"
        )
    notes = _proven_here(deploy, check=check, api=api)
    return Plan(
        row=row,
        passes=None if passes is None else tuple(passes),
        cleanup=cleanup,
        unroll_inputs=dict(unroll_inputs or {}),
        optional_inputs=dict(optional_inputs or {}),
        input_shapes=dict(input_shapes or {}),
        constant_inputs=dict(constant_inputs or {}),
        drop_constant_inputs=drop_constant_inputs,
        opset=opset,
        runtimes=deploy.proofs if check else (),
        notes=tuple(notes),
        api=api,
    )


def target_rows(names: Sequence[str] | None = None) -> tuple[Target, ...]:
    """The rows of the target table: every one (``--list-targets``), or the one ``names``
    lower with, resolved as ``--target`` resolves them (unknown names, or two lowerings, are a
    BadOptionError): the command line's check before the model is read, and ``inspect``'s."""
    if names is None:
        return tuple(TARGETS.values())
    row = deployment(names).target
    return () if row is None else (row,)


def pipeline_rows() -> Mapping[str, Pipeline]:
    """The pipeline table by name (``default``, ``sequence-free`` and each target's row), for
    what lists or names rows without lowering: ``inspect``, ``--list-passes``, ``--passes``."""
    return PIPELINES


def verification_runtimes(names: Sequence[str]) -> tuple[str, ...]:
    """The check's runtimes that prove ``names`` for ``seqlower verify`` (a deploy target's
    name: the runtime proving it), each installed: exit 2 before any model is read."""
    proven = deployment(names)
    if proven.unproven:
        raise BadOptionError(
            f"--target {proven.unproven[0]}: seqlower cannot run it, so cannot verify on it "
            "(seqlower --list-targets)"
        )
    from seqlower.verification.runtimes import load_target

    for name in proven.proofs:
        load_target(name, lowering=False)
    return proven.proofs


def _proven_here(deploy: Deployment, *, check: bool, api: bool) -> list[str]:
    """With the check, every runtime that proves the targets found installed (not imported:
    the check imports it; torch takes 6 s), a target nothing here runs refused
    (TargetUnavailableError); without it, a note per target left unproven."""
    if not check:
        return [
            f"--target {name}: not proven on {name} (--no-check: the lowered model was not run "
            "there)"
            for name in dict.fromkeys([*deploy.proofs, *deploy.unproven])
        ]
    from seqlower.verification.runtimes import cannot_run, load_target

    if deploy.unproven:
        raise cannot_run(deploy.unproven[0], api=api)
    for name in deploy.proofs:
        load_target(name, api=api, imports=False)
    return []


def build_pipeline(
    passes: Sequence[PassSpec] | None = None,
    *,
    cleanup: bool = True,
    timed: bool = False,
    sequence_free: bool = False,
    unroll_inputs: Mapping[str, int] | None = None,
    target: str | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    optional_inputs: Mapping[str, bool] | None = None,
    constant_inputs: Mapping[str, Any] | None = None,
    drop_constant_inputs: bool = False,
) -> ir.passes.PassManager:
    """A PassManager for one row of :data:`seqlower.targets.PIPELINES`: ``target`` (a name in
    :data:`~seqlower.targets.TARGETS`), else ``sequence-free`` when ``sequence_free``, else
    ``default``; ``passes`` (names or instances) instead of the row's, not with a target, which
    chooses its own. Every row is built the same way
    (:func:`seqlower.pipeline.pipeline_for_row` says how, and what each argument adds);
    ``timed`` wraps every pass in :class:`TimedPass`.
    """
    check_arguments(
        passes,
        unroll_inputs,
        optional_inputs,
        input_shapes,
        target,
        constant_inputs=constant_inputs,
        drop_constant_inputs=drop_constant_inputs,
    )
    if target is not None and (passes is not None or sequence_free):
        raise BadArgumentError(
            "a target chooses its own passes: give target or passes/sequence_free"
        )
    row = get_target(target) if target is not None else get_pipeline(sequence_free)
    return _row_pipeline(
        row,
        passes,
        cleanup=cleanup,
        timed=timed,
        unroll_inputs=unroll_inputs,
        input_shapes=input_shapes,
        optional_inputs=optional_inputs,
        constant_inputs=constant_inputs,
        drop_constant_inputs=drop_constant_inputs,
    )


def plan_pipeline(plan: Plan, *, timed: bool = False) -> ir.passes.PassManager:
    """The passes ``plan`` runs, as one PassManager (``timed``: each in a TimedPass)."""
    return _row_pipeline(
        plan.row,
        plan.passes,
        cleanup=plan.cleanup,
        timed=timed,
        unroll_inputs=plan.unroll_inputs,
        input_shapes=plan.input_shapes,
        optional_inputs=plan.optional_inputs,
        constant_inputs=plan.constant_inputs,
        drop_constant_inputs=plan.drop_constant_inputs,
    )


def _row_pipeline(
    row: Pipeline, passes: Sequence[PassSpec] | None, **options: Any
) -> ir.passes.PassManager:
    """``row``'s PassManager, with the target whose op versions it re-stamps to (a row that
    re-stamps like another, unless ``passes`` replace its own) resolved here: a row the table
    itself names, so no user's error to word."""
    like = TARGETS[row.restamps_like] if row.restamps_like and passes is None else None
    return pipeline_for_row(row, passes, like=like, **options)


def run_plan(
    plan: Plan, model: ir.Model, *, pipeline: ir.passes.PassManager | None = None
) -> list[PassRow]:
    """Run ``plan`` on ``model`` in place; a row per step, timed: first the declared sizes
    nothing enforces forgotten (the passes read none of them; the main graph's unread outputs
    get theirs back after), then the passes (``pipeline``: the plan's, built by the caller)."""
    pipeline = plan_pipeline(plan, timed=True) if pipeline is None else pipeline
    start = time.perf_counter()
    forgotten = forget_declared_sizes(model)
    seconds = time.perf_counter() - start
    declared = PassRow(DECLARED_SIZES, None, None, seconds, verbose_only=True)
    run_pipeline(model, pipeline, forget_sizes=False)
    forgotten.restore_interface(model)
    return [declared, *pass_rows(pipeline.passes)]


def _api_plan(
    passes: Sequence[PassSpec] | None,
    *,
    cleanup: bool,
    sequence_free: bool,
    unroll_inputs: Mapping[str, int] | None,
    optional_inputs: Mapping[str, bool] | None,
    target: str | None,
    check: bool | CheckOptions,
    input_shapes: Mapping[str, Sequence[int]] | None,
    constant_inputs: Mapping[str, Any] | None,
    drop_constant_inputs: bool,
) -> tuple[Plan, ir.passes.PassManager]:
    """:func:`lower`'s plan (a proof only for a target, and unless ``check=False``) and its
    pipeline, timed; the arguments checked first, as given (the plan's ``dict()`` would take a
    list of pairs, the row a target of another type)."""
    check_arguments(
        passes,
        unroll_inputs,
        optional_inputs,
        input_shapes,
        target,
        constant_inputs=constant_inputs,
        drop_constant_inputs=drop_constant_inputs,
    )
    plan = make_plan(
        () if target is None else (target,),
        passes=passes,
        sequence_free=sequence_free,
        cleanup=cleanup,
        unroll_inputs=unroll_inputs,
        optional_inputs=optional_inputs,
        input_shapes=input_shapes,
        constant_inputs=constant_inputs,
        drop_constant_inputs=drop_constant_inputs,
        check=check is not False and target is not None,
        api=True,
    )
    return plan, plan_pipeline(plan, timed=True)


@overload
def lower(
    model: onnx.ModelProto | str | os.PathLike[str],
    passes: Sequence[PassSpec] | None = ...,
    *,
    cleanup: bool = ...,
    sequence_free: bool = ...,
    unroll_inputs: Mapping[str, int] | None = ...,
    optional_inputs: Mapping[str, bool] | None = ...,
    target: str | None = ...,
    check: bool | CheckOptions = ...,
    input_shapes: Mapping[str, Sequence[int]] | None = ...,
    constant_inputs: Mapping[str, Any] | None = ...,
    drop_constant_inputs: bool = ...,
) -> onnx.ModelProto: ...
@overload
def lower(
    model: ir.Model,
    passes: Sequence[PassSpec] | None = ...,
    *,
    cleanup: bool = ...,
    sequence_free: bool = ...,
    unroll_inputs: Mapping[str, int] | None = ...,
    optional_inputs: Mapping[str, bool] | None = ...,
    target: str | None = ...,
    check: bool | CheckOptions = ...,
    input_shapes: Mapping[str, Sequence[int]] | None = ...,
    constant_inputs: Mapping[str, Any] | None = ...,
    drop_constant_inputs: bool = ...,
) -> ir.Model: ...
def lower(
    model: onnx.ModelProto | ir.Model | str | os.PathLike[str],
    passes: Sequence[PassSpec] | None = None,
    *,
    cleanup: bool = True,
    sequence_free: bool = False,
    unroll_inputs: Mapping[str, int] | None = None,
    optional_inputs: Mapping[str, bool] | None = None,
    target: str | None = None,
    check: bool | CheckOptions = True,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    constant_inputs: Mapping[str, Any] | None = None,
    drop_constant_inputs: bool = False,
) -> onnx.ModelProto | ir.Model:
    """Lower every SequenceMap (and the other registered ops) in ``model``.

    - ``onnx.ModelProto``: returns a new ModelProto; the input is not modified.
    - ``onnx_ir.Model``: lowered in place and returned.
    - a path: the file is read and a ModelProto returned.

    ``passes`` picks lowering passes by name (see ``seqlower.passes.PASSES``) or instance;
    ``cleanup=False`` skips dead-node removal and sorting, leaving all else as it was.
    ``sequence_free=True`` returns a model with no sequence op or sequence-typed value, or
    raises :class:`seqlower.errors.SequenceFreeError` naming every blocker (README: "Which
    mode for which runtime"). ``unroll_inputs={"NAME": K}`` replaces the sequence
    input NAME by K tensor inputs ``NAME_0``..``NAME_{K-1}`` (a new interface, so only on request).
    ``target="tract"`` (see :data:`seqlower.targets.TARGETS`) lowers for that runtime, or raises
    :class:`seqlower.errors.TargetError` / ``SequenceFreeError`` naming every blocker; then
    proves the result on the target's runtime as ``seqlower --target`` does (a ``CheckOptions``
    as ``check`` says how), raising ``ProofFailedError`` when it fails there and
    ``TargetUnavailableError`` before any work when the runtime is not installed;
    ``check=False`` lowers for the target unproven.
    ``input_shapes={"x": (1, 8, 16)}`` fixes those inputs' shapes before lowering (as
    ``--overwrite-input-shape``) and folds what they make constant; the proof runs at them.
    ``constant_inputs={"mode": 1}`` fixes those inputs' values (as ``--constant-input``; a
    ``str`` is read as the command line reads VALUE) and folds what they decide (the ``If``s
    choosing by them); the inputs stay, read by nothing (the lowered model computes what the
    original computes at that value, whatever it is fed), unless ``drop_constant_inputs``; the
    proof feeds that value.
    :func:`lower_with_report` does the same and also says what each pass did (README: "Python
    API").
    """
    plan, pipeline = _api_plan(
        passes,
        cleanup=cleanup,
        sequence_free=sequence_free,
        unroll_inputs=unroll_inputs,
        optional_inputs=optional_inputs,
        target=target,
        check=check,
        input_shapes=input_shapes,
        constant_inputs=constant_inputs,
        drop_constant_inputs=drop_constant_inputs,
    )
    with gc_paused():
        return _lower(model, plan, pipeline, check)


def _lower(
    model: onnx.ModelProto | ir.Model | str | os.PathLike[str],
    plan: Plan,
    pipeline: ir.passes.PassManager,
    check: bool | CheckOptions,
    counts: list[Counter[str]] | None = None,
    rows: list[PassRow] | None = None,
) -> onnx.ModelProto | ir.Model:
    """``plan`` run on ``model`` (:func:`_run_and_prove`); an ``onnx_ir.Model`` in place, all or
    nothing; a proto or a path in a copy, returned as a proto."""

    def run(ir_model: ir.Model) -> ir.Model:
        return _run_and_prove(ir_model, plan, pipeline, check, counts, rows)

    if not isinstance(model, (ir.Model, onnx.ModelProto, str, os.PathLike)):
        raise ModelTypeError("lower", model)
    try:
        if isinstance(model, ir.Model):
            return _all_or_nothing(model, run)
        if isinstance(model, onnx.ModelProto):
            return ir.serde.serialize_model(run(model_from_proto(model)))
        ir_model = run(load_model(model))
        # Like onnx.load, return a self-contained proto: external weights read into it.
        return self_contained_proto(ir_model, may_modify=True)
    except InvalidModelError as refusal:  # kept as exported if it runs on the target
        if not keeps_as_exported(plan):
            raise
        return _as_exported(model, plan, check, refusal, counts)


def _as_exported(
    model: onnx.ModelProto | ir.Model | str | os.PathLike[str],
    plan: Plan,
    check: bool | CheckOptions,
    refusal: InvalidModelError,
    counts: list[Counter[str]] | None,
) -> onnx.ModelProto | ir.Model:
    """``model`` as given (an ``onnx_ir.Model`` put back by :func:`_all_or_nothing`), once the
    check proves it on the target whose lowering was refused (``refusal``), with a warning;
    else the refusal raised (:func:`seqlower.proof.prove_as_exported`)."""
    if isinstance(model, ir.Model):
        given = model
    elif isinstance(model, onnx.ModelProto):
        given = model_from_proto(model)
    else:
        given = load_model(model)
    if lacks_ops(plan.row, given):  # its runtime cannot run it as given either
        raise refusal
    proof = prepare_proof(plan, given, _check_options(check), check=True)
    assert proof.original is not None  # as exported: the plan gives no new inputs
    original = proof.original
    report = prove_as_exported(original, original, proof.options, refusal)
    for warning in [as_exported_warning(plan, refusal), *report.warnings]:
        warnings.warn(warning, stacklevel=4)
    if counts is not None:
        counts[:] = [op_counts(given)] * 2
    if isinstance(model, ir.Model):
        return model
    if isinstance(model, onnx.ModelProto):
        kept = onnx.ModelProto()
        kept.CopyFrom(model)
        return kept
    return original


def _run_and_prove(
    ir_model: ir.Model,
    plan: Plan,
    pipeline: ir.passes.PassManager,
    check: bool | CheckOptions,
    counts: list[Counter[str]] | None,
    rows: list[PassRow] | None,
) -> ir.Model:
    """``plan`` run on ``ir_model`` in place: proven on its runtimes (``check``: how) against
    the original with the interface the plan gives, at its input shapes; ``counts``, when
    given, gets the op counts before and after, ``rows`` the steps' rows. A model newer than
    the target's converters know is converted to their newest opset, as the command line
    does."""
    proof = None
    if plan.runtimes:  # else the check's modules are not even imported
        proof = prepare_proof(plan, ir_model, _check_options(check), check=True)
    if counts is not None:
        counts.append(op_counts(ir_model))
    done = run_plan(plan, ir_model, pipeline=pipeline)
    if rows is not None:
        rows.extend(done)
    opset, flag, _ = plan.opset_for(ir_model)
    if opset is not None:
        restamp(ir_model, ir_version=None, opset=opset, flag=flag)
    if counts is not None:
        counts.append(op_counts(ir_model))
    if proof is not None and proof.original is not None:
        lowered = proof_proto(ir_model, api=True)
        raise_unless_proven(prove(proof.original, lowered, proof.options), plan.runtimes)
    return ir_model


def _all_or_nothing(model: ir.Model, run: Callable[[ir.Model], ir.Model]) -> ir.Model:
    """``run`` on ``model`` in place; a later pass may fail after an earlier one changed the
    model, so a copy is kept and put back (every slot of the Model object) when any fails."""
    try:
        backup = model.clone()
    except Exception as e:
        if _caused_by(e, RecursionError):
            raise InvalidModelError(TOO_DEEP_TO_WALK) from None
        raise
    try:
        return run(model)
    except BaseException:
        for slot in ir.Model.__slots__:
            setattr(model, slot, getattr(backup, slot))
        raise


def _check_options(check: bool | CheckOptions) -> CheckOptions:
    """How :func:`lower`'s proof runs: ``check`` when it says, else the check's defaults."""
    from seqlower.verification import CheckOptions

    return check if isinstance(check, CheckOptions) else CheckOptions()


M = TypeVar("M", onnx.ModelProto, ir.Model)


@dataclass
class LowerReport(Generic[M]):
    """What :func:`lower_with_report` returns: the lowered model and what each pass did.

    ``str(report)`` is the pass and op tables ``seqlower MODEL -o OUT -v`` prints.
    """

    model: M
    passes: list[PassRow]
    ops_before: Counter[str]
    ops_after: Counter[str]

    @property
    def rewritten(self) -> int:
        """Nodes rewritten by all passes together."""
        return sum(row.rewritten or 0 for row in self.passes)

    def __str__(self) -> str:
        from seqlower.summary import pass_lines

        return "\n".join(pass_lines(self.passes, self.ops_before, self.ops_after, verbose=1))


@overload
def lower_with_report(
    model: onnx.ModelProto | str | os.PathLike[str],
    passes: Sequence[PassSpec] | None = ...,
    *,
    cleanup: bool = ...,
    sequence_free: bool = ...,
    unroll_inputs: Mapping[str, int] | None = ...,
    optional_inputs: Mapping[str, bool] | None = ...,
    target: str | None = ...,
    check: bool | CheckOptions = ...,
    input_shapes: Mapping[str, Sequence[int]] | None = ...,
    constant_inputs: Mapping[str, Any] | None = ...,
    drop_constant_inputs: bool = ...,
) -> LowerReport[onnx.ModelProto]: ...
@overload
def lower_with_report(
    model: ir.Model,
    passes: Sequence[PassSpec] | None = ...,
    *,
    cleanup: bool = ...,
    sequence_free: bool = ...,
    unroll_inputs: Mapping[str, int] | None = ...,
    optional_inputs: Mapping[str, bool] | None = ...,
    target: str | None = ...,
    check: bool | CheckOptions = ...,
    input_shapes: Mapping[str, Sequence[int]] | None = ...,
    constant_inputs: Mapping[str, Any] | None = ...,
    drop_constant_inputs: bool = ...,
) -> LowerReport[ir.Model]: ...
def lower_with_report(
    model: onnx.ModelProto | ir.Model | str | os.PathLike[str],
    passes: Sequence[PassSpec] | None = None,
    *,
    cleanup: bool = True,
    sequence_free: bool = False,
    unroll_inputs: Mapping[str, int] | None = None,
    optional_inputs: Mapping[str, bool] | None = None,
    target: str | None = None,
    check: bool | CheckOptions = True,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    constant_inputs: Mapping[str, Any] | None = None,
    drop_constant_inputs: bool = False,
) -> LowerReport[Any]:
    """:func:`lower` (same arguments, same result in ``.model``), reporting what it did.

    ``report.passes`` holds one :class:`PassRow` per step (nodes rewritten, seconds, forms
    chosen; the declared sizes' step first), ``report.ops_before``/``ops_after`` the op counts
    of every scope (README: "Python API").
    """
    plan, pipeline = _api_plan(
        passes,
        cleanup=cleanup,
        sequence_free=sequence_free,
        unroll_inputs=unroll_inputs,
        optional_inputs=optional_inputs,
        target=target,
        check=check,
        input_shapes=input_shapes,
        constant_inputs=constant_inputs,
        drop_constant_inputs=drop_constant_inputs,
    )
    counts: list[Counter[str]] = []
    rows: list[PassRow] = []
    with gc_paused():
        lowered = _lower(model, plan, pipeline, check, counts, rows)
    return LowerReport(lowered, rows, counts[0], counts[1])
