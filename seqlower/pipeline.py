"""The default pipeline and :func:`lower`, the one call most users need."""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
from onnx_ir.passes.common import TopologicalSortPass

from seqlower._cleanup import RemoveUnusedNodes
from seqlower._graphs import all_graphs, is_onnx, subgraphs_of
from seqlower.errors import (
    BadArgumentError,
    InvalidModelError,
    SeqlowerError,
    TargetError,
)
from seqlower.io import (
    self_contained_proto,
    version_converter_problem,
)
from seqlower.passes import PASSES, PassEntry, create_pass
from seqlower.passes._base import NodeLoweringPass
from seqlower.passes._declared import forget_declared_sizes
from seqlower.passes.checks.validate_nodes import ValidateNodes
from seqlower.passes.functions.expand_function_ops import ExpandFunctionOps
from seqlower.passes.inputs.fix_input_shapes import FixConstantInputs, FixInputShapes
from seqlower.passes.inputs.fix_optional_inputs import FixOptionalInputs
from seqlower.passes.inputs.fold_static_shapes import FoldStaticShapes
from seqlower.passes.inputs.unroll_inputs import UnrollInputs
from seqlower.passes.repairs.explicit_attribute_defaults import ExplicitAttributeDefaults
from seqlower.passes.repairs.restamp_op_versions import RestampOpVersions
from seqlower.passes.sequences.fold_optionals import FoldOptionals
from seqlower.targets import Pipeline, Repeat, Target

__all__ = [
    "PassRow",
    "PassSpec",
    "SortIfNeeded",
    "TimedPass",
    "check_arguments",
    "leaf_passes",
    "op_counts",
    "pass_name",
    "pass_rows",
    "pipeline_for_row",
    "pipeline_pass_names",
    "run_pipeline",
]

PassSpec = str | Repeat | ir.passes.PassBase


class TimedPass(ir.passes.PassBase):
    """Runs another pass and records how long it took (``seconds``) and, over every run of a
    repeated pass, how many nodes it rewrote (``rewritten``), for summaries."""

    def __init__(self, inner: ir.passes.PassBase) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.rewritten: int | None = None

    @property
    def in_place(self) -> bool:
        return self.inner.in_place

    @property
    def changes_input(self) -> bool:
        return self.inner.changes_input

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        start = time.perf_counter()
        try:
            result = self.inner(model)
        finally:
            self.seconds += time.perf_counter() - start
        rewritten = getattr(self.inner, "rewritten", None)
        if rewritten is not None:
            self.rewritten = (self.rewritten or 0) + rewritten
        return result


class SortIfNeeded(ir.passes.InPlacePass):
    """onnx_ir's TopologicalSortPass, run only when some node reads a value defined after it.

    The lowering passes insert every new node before its first use, so on a valid input the
    sort finds nothing to do; checking the order is several times cheaper than sorting.
    """

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graphs: list[ir.Graph | ir.Function] = [model.graph, *model.functions.values()]
        if all(_in_order(graph, set()) for graph in graphs):
            return ir.passes.PassResult(model, modified=False)
        return TopologicalSortPass()(model)


def _in_order(graph: ir.Graph | ir.Function, defined: set[int]) -> bool:
    """Whether every node of ``graph`` (and its subgraphs) only reads values defined before it."""
    added = [id(v) for v in graph.inputs]
    if isinstance(graph, ir.Graph):
        added += [id(v) for v in graph.initializers.values()]
    defined.update(added)
    try:
        for node in graph:
            for value in node.inputs:
                if value is not None and id(value) not in defined and value.producer() is not None:
                    return False
            if node.attributes.data:  # most hold none: no call
                for subgraph in subgraphs_of(node):
                    if not _in_order(subgraph, defined):
                        return False
            for value in node.outputs:
                added.append(id(value))
                defined.add(id(value))
        return True
    finally:
        defined.difference_update(added)


_CLEANUP_NAMES = {
    RemoveUnusedNodes: "remove-unused-nodes",
    SortIfNeeded: "topological-sort",
    UnrollInputs: "unroll-inputs",
    FixOptionalInputs: "fix-optional-inputs",
    FixInputShapes: "fix-input-shapes",
    FixConstantInputs: "fix-constant-inputs",
    RestampOpVersions: "restamp-op-versions",
}


def pass_name(pass_: ir.passes.PassBase) -> str:
    """The registry name of a pass (the one it was made as, else that of its class without
    arguments), or its class name for passes seqlower did not register."""
    inner = pass_.inner if isinstance(pass_, TimedPass) else pass_
    made_as = getattr(inner, "registry_name", None)
    if made_as is not None:
        return str(made_as)
    for name, entry in PASSES.items():
        if isinstance(entry, PassEntry):
            if entry.class_name == type(inner).__name__ and not entry.arguments:
                return name
        elif type(inner) is entry:
            return name
    return _CLEANUP_NAMES.get(type(inner), type(inner).__name__)


def leaf_passes(passes: Sequence[ir.passes.PassBase]) -> list[ir.passes.PassBase]:
    """The passes of a pipeline, a repeated group's (a nested PassManager) once each."""
    leaves: list[ir.passes.PassBase] = []
    for pass_ in passes:
        if isinstance(pass_, ir.passes.PassManager):
            leaves += leaf_passes(pass_.passes)
        else:
            leaves.append(pass_)
    return leaves


def pipeline_pass_names(pipeline: ir.passes.PassManager) -> list[str]:
    """The names of a pipeline's passes in the order they may run, a repeated group ``steps``
    times (as its row lists them: :attr:`seqlower.targets.Pipeline.pass_names`)."""
    names: list[str] = []
    for pass_ in pipeline.passes:
        if isinstance(pass_, ir.passes.PassManager):
            names += pipeline_pass_names(pass_) * pass_.steps
        else:
            names.append(pass_name(pass_))
    return names


def _make(spec: PassSpec, row: Pipeline) -> ir.passes.PassBase:
    """The pass ``spec`` names, configured for ``row`` (its name and opsets); a repeated group as
    a PassManager that stops once a run changes nothing."""
    if isinstance(spec, Repeat):
        inner = [_make(name, row) for name in spec.passes]
        return ir.passes.PassManager(inner, steps=spec.steps, early_stop=True)
    if isinstance(spec, str):
        if not isinstance(row, Target):
            return create_pass(spec)
        return create_pass(spec, target=row.name, max_opset=row.max_opset, min_opset=row.min_opset)
    return spec


def lacks_ops(row: Pipeline, model: ir.Model) -> bool:
    """Whether ``model`` holds an op version ``row``'s runtime runs in no model, by the row's
    measured op tables (its ``require-*-ops`` checks, which only read the model): such a model
    cannot run there as it is either, and finding that out costs no runtime load (torch for
    onnx2torch: 6 s)."""
    for name in row.requires:
        if name.endswith("-ops"):
            try:
                _make(name, row)(model)
            except InvalidModelError:
                return True
    return False


def _timed(pass_: ir.passes.PassBase) -> ir.passes.PassBase:
    """``pass_`` in a :class:`TimedPass`, each pass of a repeated group in its own."""
    if isinstance(pass_, ir.passes.PassManager):
        inner = [_timed(p) for p in pass_.passes]
        return ir.passes.PassManager(inner, steps=pass_.steps, early_stop=pass_.early_stop)
    return TimedPass(pass_)


def pipeline_for_row(
    row: Pipeline,
    passes: Sequence[PassSpec] | None = None,
    *,
    like: Target | None = None,
    cleanup: bool = True,
    timed: bool = False,
    unroll_inputs: Mapping[str, int] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    optional_inputs: Mapping[str, bool] | None = None,
    constant_inputs: Mapping[str, Any] | None = None,
    drop_constant_inputs: bool = False,
) -> ir.passes.PassManager:
    """The PassManager for ``row``, a row :mod:`seqlower.plan` resolved (``like``: the target
    whose op versions the row re-stamps to, ``Pipeline.restamps_like``). Every row is built the
    same way: ``ValidateNodes`` (a malformed node is the same error, lowered or kept);
    ``optional_inputs`` fixed present or absent before any unrolling (``FixOptionalInputs``;
    ``FoldOptionals`` folds what reads them, in every row); ``unroll_inputs`` as K tensors each
    (``UnrollInputs``); ``input_shapes`` fixed and what they make constant folded
    (``FixInputShapes``); ``constant_inputs`` made constants and what they decide folded, the
    inputs kept (read by nothing) unless ``drop_constant_inputs`` (``FixConstantInputs``); the
    row's passes, or ``passes``; with ``input_shapes`` a second fold (``FoldStaticShapes``:
    after them, or where the row names ``fold-static-shapes``, else skipped); the row's
    function-op expansion and explicit attribute defaults; dead-node removal
    (:mod:`seqlower._cleanup`); the row's checks, which raise naming every node that blocks it;
    onnx_ir's stable topological sort when anything is out of order. ``cleanup=False`` skips
    the sort, and the default row's dead-node removal (a row with checks, or a target's, always
    removes dead nodes: dead sequence ops count). ``timed`` wraps every pass in ``TimedPass``.
    """
    check_arguments(
        passes,
        unroll_inputs,
        optional_inputs,
        input_shapes,
        row.name if isinstance(row, Target) else None,
        constant_inputs=constant_inputs,
        drop_constant_inputs=drop_constant_inputs,
    )
    names = passes or row.passes
    # A row may place the second fold itself ("fold-static-shapes": passes after it see the
    # folded shapes); it runs only with fixed input shapes, as the one appended otherwise.
    lowering = [_make(p, row) for p in names if p != "fold-static-shapes" or input_shapes]
    if like is not None:
        lowering.insert(0, _quiet(FoldOptionals()))
    steps: list[ir.passes.PassBase] = [ValidateNodes()]
    steps += interface_passes(unroll_inputs, optional_inputs, lowering)
    if input_shapes:
        steps.append(FixInputShapes(input_shapes))
    if constant_inputs:
        steps.append(FixConstantInputs(constant_inputs, drop=bool(drop_constant_inputs)))
    steps += lowering
    refold = bool(input_shapes) and "fold-static-shapes" not in names
    steps += _closing_steps(row, like, refold=refold, cleanup=cleanup)
    _share_walks(steps, given={id(p) for p in names if isinstance(p, ir.passes.PassBase)})
    manager = ir.passes.PassManager([_timed(p) for p in steps] if timed else steps, steps=1)
    if isinstance(row, Target) and row.static_shapes and not input_shapes:
        manager.static_shapes = (row.name, row.static_shapes)  # type: ignore[attr-defined]
    return manager


def _share_walks(passes: Sequence[ir.passes.PassBase], *, given: set[int]) -> None:
    """Each lowering pass built here hands its last walk of the model to the one that runs
    right after it (a repeated group's within the group): one walk of the whole model fewer
    per pair. Not the passes a caller gave: they may run elsewhere too."""
    for first, then in itertools.pairwise(passes):
        if (
            isinstance(first, NodeLoweringPass | ValidateNodes)
            and isinstance(then, NodeLoweringPass)
            and not {id(first), id(then)} & given
        ):
            first.hand_walk_to(then)
    for group in passes:
        if isinstance(group, ir.passes.PassManager):
            _share_walks(group.passes, given=given)


def _closing_steps(
    row: Pipeline, like: Target | None, *, refold: bool, cleanup: bool
) -> list[ir.passes.PassBase]:
    """What every row runs after its passes (:func:`seqlower.plan.build_pipeline` says
    which): the second fold (``refold``), the row's function-op expansion and attribute
    defaults, dead-node removal, the op-version restamp (the row's, or quietly ``like``'s), the
    row's checks and the sort."""
    steps: list[ir.passes.PassBase] = [FoldStaticShapes()] if refold else []
    if row.expand_ops:
        steps.append(ExpandFunctionOps(row.expand_ops))
    if row.attribute_defaults:
        steps.append(ExplicitAttributeDefaults(row.attribute_defaults))
    if cleanup or row.requires or isinstance(row, Target):
        steps.append(RemoveUnusedNodes())
    if isinstance(row, Target) and row.op_versions:
        steps.append(RestampOpVersions(row.op_versions, row.name, row.versions))
    elif like is not None:
        restamp = RestampOpVersions(like.op_versions, like.name, like.versions, strict=False)
        steps.append(_quiet(restamp))
    steps += [_make(p, row) for p in row.requires]
    if cleanup:
        steps.append(SortIfNeeded())
    return steps


_QUIET = "_seqlower_quiet"


def _quiet(step: ir.passes.PassBase) -> ir.passes.PassBase:
    """``step`` given a row in a run's table only when it rewrites something (what the default
    row does for onnxruntime besides lowering: ``Pipeline.restamps_like``)."""
    setattr(step, _QUIET, True)
    return step


def check_arguments(
    passes: object,
    unroll_inputs: object,
    optional_inputs: object,
    input_shapes: object,
    target: object = None,
    *,
    constant_inputs: object = None,
    drop_constant_inputs: object = False,
) -> None:
    """BadArgumentError naming the argument a Python caller gave in a form the library does not
    take, before any work: a string where a list of passes goes was read letter by letter
    ("unknown pass 'l'"), a size of 5.5 silently became 5 and "abc" a PassError (issue 42).
    The command line's flags are parsed into these forms, so they pass."""
    if passes is not None:
        _check_passes(passes)
    if unroll_inputs is not None:
        for name, count in _named(unroll_inputs, "unroll_inputs", "input name to K"):
            if _integer(count, least=1) is None:
                raise BadArgumentError(
                    f"unroll_inputs[{name!r}] is {_shown(count)}: K must be an integer of at "
                    "least 1"
                )
    if optional_inputs is not None:
        for name, present in _named(optional_inputs, "optional_inputs", "input name to bool"):
            if not isinstance(present, (bool, np.bool_)):
                raise BadArgumentError(
                    f"optional_inputs[{name!r}] is {_shown(present)}: True (present) or False "
                    "(absent)"
                )
    if input_shapes is not None:
        _check_input_shapes(input_shapes)
    if target is not None and not isinstance(target, str):
        raise BadArgumentError(f"target= takes a target's name, not {_shown(target)}")
    if constant_inputs is not None:
        for name, value in _named(constant_inputs, "constant_inputs", "input name to value"):
            if not _value_like(value):
                raise BadArgumentError(
                    f"constant_inputs[{name!r}] is {_shown(value)}: a number, a bool, a str "
                    "(read as --constant-input's VALUE), or a (nested) list or array of them"
                )
    if not isinstance(drop_constant_inputs, (bool, np.bool_)):
        raise BadArgumentError(
            f"drop_constant_inputs= is {_shown(drop_constant_inputs)}: True or False"
        )
    if drop_constant_inputs and not constant_inputs:
        raise BadArgumentError("drop_constant_inputs without constant_inputs drops nothing")


def _check_passes(passes: object) -> None:
    """``passes=`` as a list of pass names or instances (a string was read letter by letter)."""
    if isinstance(passes, (str, bytes)) or not isinstance(passes, Sequence):
        hint = f"; for one pass, passes=[{passes!r}]" if isinstance(passes, str) else ""
        raise BadArgumentError(
            f"passes= takes a list of pass names or pass instances, not "
            f"{type(passes).__name__}{hint}"
        )
    for k, spec in enumerate(passes):
        if not isinstance(spec, (str, Repeat, ir.passes.PassBase)):
            raise BadArgumentError(
                f"passes[{k}] is {_shown(spec)}: each pass is a registered name "
                "(seqlower.passes.PASSES), a seqlower.targets.Repeat or an onnx_ir pass "
                "instance"
            )


def _check_input_shapes(input_shapes: object) -> None:
    """``input_shapes=`` as input names to sequences of sizes, each an integer of at least 0."""
    for name, dims in _named(input_shapes, "input_shapes", "input name to dimensions"):
        if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence | np.ndarray):
            raise BadArgumentError(
                f"input_shapes[{name!r}] is {_shown(dims)}: a sequence of sizes, such as (1, 8, 16)"
            )
        for axis, size in enumerate(dims):
            if _integer(size, least=0) is None:
                raise BadArgumentError(
                    f"input_shapes[{name!r}][{axis}] is {_shown(size)}: each size must be "
                    "an integer of at least 0"
                )


def _value_like(value: object) -> bool:
    """Whether ``value`` is what an input's one value may be given as."""
    if isinstance(value, (str, bytes, bool, int, float, np.generic, np.ndarray)):
        return not isinstance(value, np.ndarray) or value.dtype.kind in "biufUSO"
    if isinstance(value, (list, tuple)):
        return all(_value_like(v) for v in value)
    return False


def _named(mapping: object, argument: str, what: str) -> list[tuple[str, object]]:
    """The items of ``mapping``, refused unless it is a mapping keyed by input names."""
    if not isinstance(mapping, Mapping):
        raise BadArgumentError(
            f"{argument}= takes a mapping of {what}, not {type(mapping).__name__}"
        )
    for name in mapping:
        if not isinstance(name, str):
            raise BadArgumentError(f"{argument}: the key {name!r} is not an input name (a str)")
    return list(mapping.items())


def _integer(value: object, least: int) -> int | None:
    """``value`` as an int when it is an integer (numpy's too; not a bool, not a float) of at
    least ``least``, else None."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        return None
    return int(value) if value >= least else None


def _shown(value: object) -> str:
    """A value as an error message shows it: short, whatever its size."""
    text = repr(value)
    return text if len(text) <= 40 else f"a {type(value).__name__}"


def interface_passes(
    unroll_inputs: Mapping[str, int] | None,
    optional_inputs: Mapping[str, bool] | None,
    pipeline: Sequence[ir.passes.PassBase] = (),
) -> list[ir.passes.PassBase]:
    """The passes that change what the model takes (``--optional-input``, then
    ``--unroll-input``: a present optional sequence may be unrolled), in the order they run
    first; ``FoldOptionals`` after a fixed presence unless ``pipeline`` has it."""
    steps: list[ir.passes.PassBase] = []
    if optional_inputs:
        steps.append(FixOptionalInputs(optional_inputs))
    if unroll_inputs:
        steps.append(UnrollInputs(unroll_inputs))
    if optional_inputs and not any(isinstance(p, FoldOptionals) for p in pipeline):
        steps.append(FoldOptionals())
    return steps


def interface_reference(
    model: ir.Model,
    unroll_inputs: Mapping[str, int] | None,
    optional_inputs: Mapping[str, bool] | None,
    dropped_constants: Mapping[str, Any] | None = None,
) -> ir.Model:
    """The original the check compares with: ``model`` itself, or with a changed interface
    (``--unroll-input``, ``--optional-input``, ``--constant-input`` with
    ``--drop-constant-inputs``: ``dropped_constants``) a copy given the same change (the
    dropped inputs as constants, nothing folded), since the check compares models of one
    interface."""
    steps = [
        p
        for p in interface_passes(unroll_inputs, optional_inputs)
        if not isinstance(p, FoldOptionals)
    ]
    if dropped_constants:
        steps.append(FixConstantInputs(dropped_constants, drop=True, fold=False))
    if not steps:
        return model
    copy = model.clone()
    run_pipeline(copy, ir.passes.PassManager(steps))
    return copy


TOO_DEEP_TO_WALK = (
    "subgraphs are nested too deeply to walk (Python's recursion limit; models read from "
    "files nest at most about 30 levels, what protobuf reads)"
)


def _caused_by(error: BaseException, kind: type[BaseException]) -> bool:
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, kind):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def run_pipeline(
    model: ir.Model, pipeline: ir.passes.PassManager, *, forget_sizes: bool = True
) -> ir.passes.PassResult:
    """Run ``pipeline`` on ``model`` in place, surfacing seqlower's own errors unwrapped.

    PassManager wraps every exception in PassError; a user who gave a malformed node wants the
    message about that node, not the pass machinery's, and one who ran out of memory the
    README's exit 3. The passes read no unenforced declared
    size (``passes/_declared.py``): those not proven are forgotten first, for good but on the
    outputs nothing reads.
    """
    forgotten = forget_declared_sizes(model) if forget_sizes else None
    try:
        result = pipeline(model)
        if forgotten is not None:
            forgotten.restore_interface(model)
        return result
    except Exception as e:
        cause: BaseException | None = e
        while cause is not None:
            if isinstance(cause, TargetError):
                raise _with_static_shapes_hint(cause, model, pipeline) from None
            if isinstance(cause, SeqlowerError):
                raise cause from None
            if isinstance(cause, RecursionError):
                raise InvalidModelError(TOO_DEEP_TO_WALK) from None
            if isinstance(cause, MemoryError):
                raise cause from None  # exit 3 on the command line, not a bug (PassError's 70)
            cause = cause.__cause__ or cause.__context__
        raise


def _with_static_shapes_hint(
    error: TargetError, model: ir.Model, pipeline: ir.passes.PassManager
) -> TargetError:
    """``error`` saying ``--overwrite-input-shape`` when the target needs static shapes (its
    row's ``static_shapes``) and an input's shape is not static."""
    needs = getattr(pipeline, "static_shapes", None)
    dynamic = [
        value
        for value in model.graph.inputs
        if isinstance(value.type, ir.TensorType)
        and (value.shape is None or not value.shape.is_static())
        and value.name not in model.graph.initializers
    ]
    if needs is None or not dynamic or error.hint:
        return error
    name, why = needs
    value = dynamic[0]
    dims = (
        "D0,D1,..."
        if value.shape is None
        else ",".join(str(d) if isinstance(d, int) else "?" for d in value.shape)
    )
    hint = f"{name} needs static input shapes {why}: --overwrite-input-shape {value.name}={dims}"
    return TargetError(error.target, error.blockers, hint)


@dataclass
class PassRow:
    """One pass of a run: nodes it rewrote (None for the cleanup), time, forms chosen."""

    name: str
    op_type: str | None
    rewritten: int | None
    seconds: float
    forms: dict[str, int] | None = None  # how the nodes were lowered, for passes that choose
    repairs: bool = False  # the pass repairs nodes for a runtime (keeps their op)
    verbose_only: bool = False  # a step of every run, shown with -v only (the declared sizes')


def pass_rows(passes: Sequence[ir.passes.PassBase]) -> list[PassRow]:
    """The rows of a pipeline's passes after a run (timings when built with ``timed``), but
    ``ValidateNodes``'s."""
    rows = []
    for timed in leaf_passes(passes):
        inner = timed.inner if isinstance(timed, TimedPass) else timed
        if isinstance(inner, ValidateNodes):
            continue  # it rewrites nothing and runs in every pipeline: not worth a row
        rewritten = timed.rewritten if isinstance(timed, TimedPass) else None
        if getattr(inner, _QUIET, False) and not (
            getattr(inner, "rewritten", None) if rewritten is None else rewritten
        ):
            continue
        rows.append(
            PassRow(
                name=pass_name(timed),
                op_type=getattr(inner, "op_type", None),
                rewritten=getattr(inner, "rewritten", None) if rewritten is None else rewritten,
                seconds=getattr(timed, "seconds", 0.0),
                forms=dict(getattr(inner, "forms", None) or {}) or None,
                repairs=bool(getattr(inner, "repairs", False)),
            )
        )
    return rows


def op_counts(model: ir.Model) -> Counter[str]:
    """How many nodes of each op type the model holds, in every scope (``domain::Op`` outside
    the default domain)."""
    counts: Counter[str] = Counter()
    for graph in all_graphs(model):
        for node in graph:
            counts[node.op_type if is_onnx(node) else f"{node.domain}::{node.op_type}"] += 1
    return counts


def restamp(
    model: ir.Model, *, ir_version: int | None, opset: int | None, flag: str | None = None
) -> list[str]:
    """Re-stamp ``model`` for older runtimes: a lower IR version, another default opset.

    The opset goes through onnx's version converter (which knows each op's changes), nodes
    whose op changed only in its type lists re-stamped as they are (``_op_versions``); the IR
    version is only lowered as far as the model's own opsets allow (ONNX ties each opset to a
    minimal IR version). Raises InvalidModelError, naming the reason, when it cannot be done.
    """
    notes: list[str] = []
    if opset is not None and model.opset_imports.get("", None) != opset:
        proto = self_contained_proto(model)
        try:
            from seqlower.passes._op_versions import convert_version

            converted = convert_version(proto, opset)
            onnx.checker.check_model(converted, full_check=True)
        except Exception as e:
            current = model.opset_imports.get("", None)
            problem = version_converter_problem(e, current, opset)
            raise InvalidModelError(f"{flag or f'--opset {opset}'}: {problem}") from None
        new = ir.serde.deserialize_model(converted)
        for slot in ir.Model.__slots__:
            setattr(model, slot, getattr(new, slot))
        notes.append(f"converted to opset {opset}")
    if ir_version is not None and ir_version != model.ir_version:
        needed = _minimal_ir_version(model)
        if ir_version < needed:
            raise InvalidModelError(
                f"--ir-version {ir_version}: this model's opsets need IR version {needed} or newer"
            )
        if ir_version > onnx.IR_VERSION:
            raise InvalidModelError(
                f"--ir-version {ir_version}: onnx {onnx.__version__} knows IR versions up to "
                f"{onnx.IR_VERSION}"
            )
        model.ir_version = ir_version
        notes.append(f"IR version set to {ir_version}")
    return notes


def _minimal_ir_version(model: ir.Model) -> int:
    """The lowest IR version ONNX allows for the model's default-domain opset."""
    opset = model.opset_imports.get("", 1)
    table = onnx.helper.VERSION_TABLE  # (release, ir_version, ai.onnx opset, ml opset, ...)
    candidates = [row[1] for row in table if row[2] >= opset]
    return min(candidates) if candidates else onnx.IR_VERSION
