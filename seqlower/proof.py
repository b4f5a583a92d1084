"""What the check of a plan's lowering needs, worked out once for the plan and the model.

:func:`reference_of` gives the original the check compares with (the model given the plan's
new interface), :func:`proof_proto` it as the runtimes load it, :func:`check_at_plan` the
check's options at the plan's fixed shapes and values, naming the runtimes that prove the plan;
:func:`prove` runs the check. The file job and :func:`seqlower.lower` both take their check
from here, so what is checked, and how, is written once.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import onnx
import onnx_ir as ir

import seqlower.io
from seqlower.errors import (
    BadOptionError,
    CannotVerifyError,
    InvalidModelError,
    ProofFailedError,
    SeqlowerError,
    first_line,
)
from seqlower.pipeline import interface_reference

if TYPE_CHECKING:  # onnxruntime loads with the check's modules: only when a proof runs
    from seqlower.targets import Pipeline, Target
    from seqlower.verification import CheckOptions, VerifyReport

__all__ = [
    "Proof",
    "as_exported_warning",
    "check_at_constant_inputs",
    "check_at_fixed_shapes",
    "check_at_plan",
    "keeps_as_exported",
    "prepare_proof",
    "proof_proto",
    "prove",
    "prove_as_exported",
    "raise_unless_proven",
    "reference_of",
]


class CheckedPlan(Protocol):
    """What the check reads of a :class:`seqlower.plan.Plan` (which imports this module)."""

    @property
    def unroll_inputs(self) -> Mapping[str, int]: ...
    @property
    def optional_inputs(self) -> Mapping[str, bool]: ...
    @property
    def input_shapes(self) -> Mapping[str, Sequence[int]]: ...
    @property
    def constant_inputs(self) -> Mapping[str, Any]: ...
    @property
    def drop_constant_inputs(self) -> bool: ...
    @property
    def new_inputs(self) -> bool: ...
    @property
    def runtimes(self) -> tuple[str, ...]: ...
    @property
    def changes_interface(self) -> bool: ...
    @property
    def opset(self) -> int | None: ...
    @property
    def row(self) -> Pipeline: ...
    @property
    def target(self) -> Target | None: ...
    @property
    def api(self) -> bool: ...


def reference_of(plan: CheckedPlan, model: ir.Model) -> ir.Model:
    """The original the check of ``plan`` compares with: ``model`` itself, or for a plan that
    gives the model new inputs (:attr:`~seqlower.plan.Plan.new_inputs`) a copy given the same
    ones, nothing folded, since the check compares models of one interface."""
    if not plan.new_inputs:
        return model
    dropped = plan.constant_inputs if plan.drop_constant_inputs else None
    return interface_reference(model, plan.unroll_inputs, plan.optional_inputs, dropped)


@dataclasses.dataclass(frozen=True)
class Proof:
    """The check a plan's lowering of a model gets, worked out before the passes change it."""

    #: What the lowered model is compared with, as the runtimes load it (None: no check).
    original: onnx.ModelProto | None
    #: How the check runs: at the plan's fixed shapes and values, on its runtimes.
    options: CheckOptions


def prepare_proof(
    plan: CheckedPlan, model: ir.Model, options: CheckOptions, *, check: bool
) -> Proof:
    """The check of ``plan`` run on ``model`` (``check``: whether one runs): its original
    (:func:`reference_of`, :func:`proof_proto`) and its options (:func:`check_at_plan`). The
    command line's unchecked runs still have the fixed shapes and values held against the
    model, before any lowering; a plan of new inputs, or the library's, leaves that to the
    passes."""
    early = not check and not plan.api and not plan.new_inputs
    reference = reference_of(plan, model) if check or early else None
    options = check_at_plan(plan, options, reference)
    original = proof_proto(reference, api=plan.api) if check and reference is not None else None
    return Proof(original, options)


def check_at_plan(
    plan: CheckedPlan, options: CheckOptions, reference: ir.Model | None
) -> CheckOptions:
    """``options`` as the check of ``plan`` runs: at its fixed shapes and values, on its
    runtimes. A shape or value that contradicts ``reference`` (:func:`reference_of`) is exit 2
    here, before any lowering, checked or not (None, a plan of new inputs unchecked: the
    passes find it after them)."""
    if reference is not None and plan.input_shapes:
        options = check_at_fixed_shapes(options, reference, plan.input_shapes)
    if reference is not None and plan.constant_inputs and not plan.drop_constant_inputs:
        options = check_at_constant_inputs(options, reference, plan.constant_inputs)
    return dataclasses.replace(options, runtimes=plan.runtimes)


def proof_proto(model: ir.Model, *, api: bool = False) -> onnx.ModelProto:
    """A self-contained proto of ``model`` (external weights read in) for the runtimes;
    CannotVerifyError past what one proto holds (``api``: worded as :func:`seqlower.lower`'s
    argument)."""
    if seqlower.io.weights_nbytes(model) > seqlower.io.INLINE_LIMIT:
        flag = "check=False" if api else "--no-check"
        raise CannotVerifyError(
            "the model's weights are over 2 GB, which the check cannot load yet; "
            f"rerun with {flag} to lower it without the check"
        )
    return seqlower.io.self_contained_proto(model)


def prove(
    reference: onnx.ModelProto,
    lowered: onnx.ModelProto,
    options: CheckOptions,
    on_run: Callable[[int, int], None] | None = None,
) -> VerifyReport:
    """The check of ``lowered`` against ``reference`` as ``options`` say (``on_run``: told run
    k of n, for progress)."""
    from seqlower.verification import verify  # imports onnxruntime: only when checking

    if on_run is not None:
        options = dataclasses.replace(options, on_run=on_run)
    return verify(reference, lowered, options)


def keeps_as_exported(plan: CheckedPlan) -> bool:
    """Whether a lowering for ``plan``'s target that is refused may end with the model as
    exported, proven on the target's runtimes (:func:`prove_as_exported`): never unproven, nor
    when the plan asks for another interface or opset than the model's."""
    if plan.target is None or not plan.runtimes or plan.changes_interface:
        return False
    return plan.opset is None


def prove_as_exported(
    original: onnx.ModelProto,
    candidate: onnx.ModelProto,
    options: CheckOptions,
    refusal: InvalidModelError,
    on_run: Callable[[int, int], None] | None = None,
) -> VerifyReport:
    """The check a lowering gets, of ``candidate`` (the model as exported, at most re-stamped)
    against ``original``, after the lowering for the target was refused (``refusal``):
    its report when the model runs on the target's runtimes as exported and matches there,
    else ``refusal`` raised (exit 2, nothing written), so a model that runs on the target is
    never lost by lowering for it, and none is kept unproven."""
    try:
        report = prove(original, candidate, options, on_run)
    except SeqlowerError:  # the check cannot run: nothing proven
        raise refusal from None
    if not report.ok:
        raise refusal
    return report


def as_exported_warning(plan: CheckedPlan, refusal: InvalidModelError) -> str:
    """What a run kept as exported says: the refusal, and the proof that replaced it."""
    blockers = getattr(refusal, "blockers", None)
    why = "; ".join(blockers) if blockers else first_line(refusal)
    name = plan.row.name
    flag, what = (f"target={name!r}", "the result") if plan.api else (f"--target {name}", "OUT")
    return (
        f"{flag}: seqlower cannot lower the model ({why}), but it runs on {name} as exported "
        f"and matches there (proven by the check on {', '.join(plan.runtimes)}): {what} is "
        "the model unchanged"
    )


def raise_unless_proven(report: VerifyReport, runtimes: Sequence[str]) -> None:
    """Raise unless ``report`` proves the lowered model on every one of ``runtimes``; warn of
    a difference the original shares (the export's)."""
    where = ", ".join(runtimes)
    if report.status == "cannot_verify":
        raise CannotVerifyError(f"cannot prove the lowered model on {where}: {report.reason}")
    if not report.ok:
        culprit = report.culprit or "lowering"
        raise ProofFailedError(
            f"the lowered model fails on {where}{_blamed(culprit)}: {report.reason}",
            report,
            culprit,
        )
    for warning in report.warnings:
        warnings.warn(warning, stacklevel=4)


def _blamed(culprit: str) -> str:
    """Whose fault a failed proof is, in words, when not the lowering's."""
    return {
        "runtime": " (the runtime's fault: it gets the original wrong too)",
        "export": " (the export's fault: the original differs from the expected outputs too)",
    }.get(culprit, "")


def check_at_fixed_shapes(
    options: CheckOptions, model: ir.Model, shapes: Mapping[str, Sequence[int]]
) -> CheckOptions:
    """``options`` running the check at the shapes ``--overwrite-input-shape`` fixes (and the
    sizes they give symbolic names); BadOptionError when ``--input-shape``/``--dim`` say
    otherwise, or the shapes contradict the model."""
    from seqlower.passes.inputs.fix_input_shapes import FLAG, resolve_input_shapes

    given, sizes = resolve_input_shapes(model, shapes)
    input_shapes = dict(options.input_shapes)
    for name, dims in given.items():
        other = tuple(input_shapes.setdefault(name, dims))
        if other != dims:
            raise BadOptionError(
                f"{FLAG} {name}={','.join(map(str, dims))}: --input-shape gives "
                f"{','.join(map(str, other))}"
            )
    dims_by_name = dict(options.dims)
    for symbol, size in sizes.items():
        if dims_by_name.setdefault(symbol, size) != size:
            raise BadOptionError(
                f"{FLAG}: the inputs fix '{symbol}' to {size}, --dim {symbol}="
                f"{dims_by_name[symbol]} says otherwise"
            )
    return dataclasses.replace(options, input_shapes=input_shapes, dims=dims_by_name)


def check_at_constant_inputs(
    options: CheckOptions, model: ir.Model, values: Mapping[str, Any]
) -> CheckOptions:
    """``options`` feeding the values ``--constant-input`` fixes (inputs kept in the
    interface) in every run; BadOptionError when a value contradicts ``model``."""
    from seqlower.passes.inputs.fix_input_shapes import resolve_constant_inputs

    fed = {**options.constant_inputs, **resolve_constant_inputs(model, values)}
    return dataclasses.replace(options, constant_inputs=fed)
