"""``seqlower inspect MODEL``: what seqlower would do to a model, without running it anywhere.

A look before a run: which nodes each pipeline lowers (and in which form), what a target's
pipeline repairs and keeps, which sequence ops remain, and what blocks it. Each pipeline is
the one ``lower`` runs, on a copy of the model read the same way, with no check and nothing
written: a dry run, so what inspect says is what ``lower`` then does, at any size (it takes
what the passes take: seconds per 10k nodes for the sequence-free pipelines, which infer
shapes).

Pipelines are named as the rows of :data:`seqlower.targets.PIPELINES`: ``default``,
``sequence-free``, or a deploy target (``tract``, ``openvino``, ...); :func:`inspect_model`
takes the list. ``Inspection.to_dict()`` is ``inspect --json``.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import onnx

from seqlower.errors import (
    BadArgumentError,
    BadOptionError,
    ModelTypeError,
    SeqlowerError,
    SequenceFreeError,
    TargetError,
    first_line,
)
from seqlower.passes import SEQUENCE_OPS

if TYPE_CHECKING:
    from seqlower.job import LowerOptions
    from seqlower.pipeline import PassRow

#: What a runtime without sequence support refuses, in a stable order.
_SEQUENCE_OPS = tuple(sorted(SEQUENCE_OPS))

__all__ = ["GENERAL", "Inspection", "PipelineView", "inspect_model"]

#: The pipelines inspect runs unless told: the two that are no deploy target.
GENERAL = ("default", "sequence-free")

#: Blockers listed per pipeline (a model that repeats one pattern repeats its blockers).
MAX_BLOCKERS = 20

#: The ops the default pipeline lowers.
_LOWERED = ("ReverseSequence", "SequenceMap")


@dataclass
class PipelineView:
    """One pipeline's answer: what it would rewrite, what would remain, what blocks it."""

    name: str
    rewritten: dict[str, int] = field(default_factory=dict)  # op -> nodes
    forms: dict[str, dict[str, int]] = field(default_factory=dict)  # op -> form -> nodes
    remaining: dict[str, int] = field(default_factory=dict)  # sequence ops left
    repaired: dict[str, tuple[int, str]] = field(default_factory=dict)  # op -> (nodes, passes)
    blockers: list[str] = field(default_factory=list)  # why this pipeline would fail
    error: str = ""  # the error the run stopped on (one line), if any
    notes: list[str] = field(default_factory=list)
    ops_after: dict[str, int] = field(default_factory=dict)  # every op of the lowered model

    @property
    def blocked(self) -> bool:
        """Whether ``lower`` would refuse the model (exit 2): blockers or an error."""
        return bool(self.blockers or self.error)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "blocked": self.blocked,
            "lowered": dict(sorted(self.rewritten.items())),
            "forms": {op: dict(forms) for op, forms in sorted(self.forms.items())},
            "repaired": {
                op: {"nodes": n, "passes": names.split(", ")}
                for op, (n, names) in sorted(self.repaired.items())
            },
            "remaining": dict(sorted(self.remaining.items())),
            "blockers": list(self.blockers),
            "error": self.error or None,
            "notes": list(self.notes),
            "ops_after": dict(sorted(self.ops_after.items())),
        }

    def lines(self) -> list[str]:
        """What ``seqlower inspect`` prints of this pipeline."""
        from seqlower.summary import describe_forms

        lines: list[str] = []
        flag = (
            ""
            if self.name == "default"
            else f" (--{self.name})"
            if self.name in GENERAL
            else f" (--target {self.name})"
        )
        lines.append(f"{self.name}{flag}, a dry run of lower (no check):")
        for op, n in sorted(self.rewritten.items()):
            forms = self.forms.get(op)
            lines.append(
                f"  lowers {n} {_plural(op, n)}" + (f": {describe_forms(forms)}" if forms else "")
            )
        for op, (n, names) in sorted(self.repaired.items()):
            keeping = "it" if n == 1 else "them"
            lines.append(
                f"  repairs {n} {_plural(op, n)} for the runtime, keeping {keeping} ({names})"
            )
        if self.remaining:
            left = ", ".join(f"{n} {op}" for op, n in sorted(self.remaining.items()))
            lines.append(f"  leaves {left}: runtimes without sequence support refuse these")
        elif not self.blocked:
            lines.append("  leaves no sequence op")
        lines += [f"  note: {note}" for note in self.notes]
        if self.error:
            lines.append(f"  fails: {self.error}")
        if self.blockers:
            lines.append(f"  blocked by {len(self.blockers)}:")
            lines += [f"    - {blocker}" for blocker in self.blockers[:MAX_BLOCKERS]]
            if len(self.blockers) > MAX_BLOCKERS:
                lines.append(f"    ... and {len(self.blockers) - MAX_BLOCKERS} more")
        return lines


@dataclass
class Inspection:
    """What :func:`inspect_model` found; ``str()`` is what ``seqlower inspect`` prints."""

    path: str
    nodes: int
    ops: dict[str, int]  # the ops seqlower lowers or that need sequence support, as found
    opset: int | None
    ir_version: int
    pipelines: list[PipelineView]
    seconds: float = 0.0
    loops: int = 0  # Loop nodes, in every scope

    def to_dict(self) -> dict[str, Any]:
        """What ``seqlower inspect --json`` prints."""
        return {
            "path": self.path,
            "nodes": self.nodes,
            "opset": self.opset,
            "ir_version": self.ir_version,
            "ops": dict(sorted(self.ops.items())),
            "loops": self.loops,
            "pipelines": [view.to_dict() for view in self.pipelines],
            "seconds": round(self.seconds, 3),
        }

    def __str__(self) -> str:
        from seqlower.summary import seconds

        lines = [
            f"{self.path}: {self.nodes} nodes, opset {self.opset}, IR version {self.ir_version}"
        ]
        lowered = {op: n for op, n in self.ops.items() if op in _LOWERED}
        others = {op: n for op, n in self.ops.items() if op not in _LOWERED}
        if not self.ops and self.loops:
            lines.append(
                f"no sequence op and no ReverseSequence: nothing to lower by default; {self.loops} "
                "Loop, which tract lacks and OpenVINO's importer refuses in some forms "
                "(--target tract, --target openvino)"
            )
        elif not self.ops:
            blocked = [view.name for view in self.pipelines if view.blocked]
            lines.append(
                "no sequence op and no ReverseSequence: nothing to lower, "
                + (
                    f"but {', '.join(blocked)} cannot run it as it stands (below)"
                    if blocked
                    else "runs anywhere"
                )
            )
        for op, n in sorted(lowered.items()):
            lines.append(f"  {op:24} {n:>6}  lowered by seqlower")
        for op, n in sorted(others.items()):
            lines.append(f"  {op:24} {n:>6}  needs sequence support unless --sequence-free")
        for view in self.pipelines:
            lines += view.lines()
        lines.append(f"inspected in {seconds(self.seconds)}")
        return "\n".join(lines)


def _plural(op: str, count: int) -> str:
    """``Loop`` or ``Loops``: an op type counted."""
    return op if count == 1 else f"{op}s"


def inspect_model(
    model: str | os.PathLike[str] | onnx.ModelProto,
    pipelines: Sequence[str] = GENERAL,
    planning: LowerOptions | None = None,
) -> Inspection:
    """Say what each named pipeline would do to ``model``, writing and running nothing: each
    is run as ``lower`` runs it, on a copy read as ``lower`` reads it, without the check.

    ``planning`` holds what ``lower`` is told besides the pipeline (its ``opset``,
    ``unroll_inputs``, ``optional_inputs``, ``overwrite_input_shapes`` and
    ``constant_inputs``: the CLI's planning flags); its passes, check and output are not
    read."""
    start = time.perf_counter()
    from seqlower.pipeline import op_counts
    from seqlower.plan import pipeline_rows

    rows = pipeline_rows()
    unknown = [name for name in pipelines if name not in rows]
    if unknown:
        known = ", ".join(rows)
        raise BadArgumentError(f"unknown pipeline or target {unknown[0]!r}; known: {known}")
    if not isinstance(model, (onnx.ModelProto, str, os.PathLike)):
        raise ModelTypeError("inspect_model", model, "a ModelProto or a path")
    where = "the model" if isinstance(model, onnx.ModelProto) else str(model)
    first = _load(model)  # a model lower refuses to read is refused here, as there
    counts = op_counts(first)
    from seqlower.job import LowerOptions

    plan = LowerOptions() if planning is None else planning
    views = [
        _dry_run(first if i == 0 else _load(model), name, counts, plan)
        for i, name in enumerate(pipelines)
    ]
    found = {op: counts[op] for op in (*_LOWERED, *_SEQUENCE_OPS) if counts[op]}
    return Inspection(
        path=where,
        nodes=sum(counts.values()),
        ops=found,
        opset=first.opset_imports.get("", first.opset_imports.get("ai.onnx")),
        ir_version=first.ir_version,
        pipelines=views,
        seconds=time.perf_counter() - start,
        loops=counts["Loop"],
    )


def _load(model: str | os.PathLike[str] | onnx.ModelProto) -> Any:
    """A fresh ``onnx_ir.Model``, read as ``lower`` reads it (a path with the loader of the
    command line, a proto deserialized from a copy)."""
    from seqlower.io import load_model, model_from_proto

    if not isinstance(model, onnx.ModelProto):
        return load_model(model)
    return model_from_proto(model)


def _dry_run(
    ir_model: Any, name: str, before: Counter[str], planning: LowerOptions
) -> PipelineView:
    """The plan ``lower`` runs for ``name`` (:func:`seqlower.job.make_lower_plan`, with
    ``planning``'s interface and shapes), run on ``ir_model`` (a copy of its own): the passes,
    the target's checks, and the opset asked for or a target's converter needs; no check."""
    import dataclasses

    from seqlower._gc import gc_paused
    from seqlower.job import make_lower_plan
    from seqlower.pipeline import op_counts, restamp
    from seqlower.plan import run_plan, target_rows

    view = PipelineView(name)
    options = dataclasses.replace(
        planning,
        passes=None,
        cleanup=True,
        sequence_free=name == "sequence-free",
        check=False,
        targets=(name,) if name in {row.name for row in target_rows()} else (),
        check_options=dataclasses.replace(planning.check_options, expected=None),
    )
    try:
        with gc_paused():
            plan = make_lower_plan(options)
            rows = run_plan(plan, ir_model)
            opset, flag, converting = plan.opset_for(ir_model)
            if converting is not None:
                view.notes.append(f"converted to opset {opset}, the newest its converters know")
            if opset is not None:
                restamp(ir_model, ir_version=None, opset=opset, flag=flag)
    except (SequenceFreeError, TargetError) as e:
        view.blockers = list(e.blockers)
        view.notes += _as_exported_note(options.targets)
        return view
    except BadOptionError:  # a flag that does not fit the model: lower's exit 2, not a view
        raise
    except SeqlowerError as e:
        view.error = first_line(e)
        return view
    after = op_counts(ir_model)
    for pass_row in rows:
        op, n = pass_row.op_type, pass_row.rewritten
        if op and n and pass_row.repairs:
            done, names = view.repaired.get(op, (0, ""))
            view.repaired[op] = (done + n, ", ".join(filter(None, [names, pass_row.name])))
        elif op and n:
            view.rewritten[op] = view.rewritten.get(op, 0) + n
            if pass_row.forms:
                view.forms[op] = dict(pass_row.forms)
    # Two passes may rewrite the same node (a sequence-carrying Loop is stacked, then made a
    # Scan): count nodes, not rewrites, where the model held that many.
    for op, n in view.rewritten.items():
        if before[op]:
            view.rewritten[op] = min(n, before[op])
    view.remaining = {op: n for op in _SEQUENCE_OPS if (n := after[op])}
    view.notes += _constant_notes(planning, rows, before, after)
    view.ops_after = dict(after)
    return view


def _as_exported_note(targets: Sequence[str]) -> list[str]:
    """What a refused target's run does instead: keep the model as exported if the check
    proves it on the target (``seqlower.proof.keeps_as_exported``)."""
    return [
        f"lower --target {name} writes the model as exported instead if the check proves it "
        f"runs and matches on {name} (not with --no-check, nor with flags that change its "
        "interface or opset)"
        for name in targets
    ]


def _constant_notes(
    planning: LowerOptions, rows: Sequence[PassRow], before: Counter[str], after: Counter[str]
) -> list[str]:
    """What ``--constant-input`` folded: the nodes, and the ``If``s left of those there were."""
    if not planning.constant_inputs:
        return []
    from seqlower.passes.inputs.fix_input_shapes import spelled_constant

    folded = sum(row.rewritten or 0 for row in rows if row.name == "fix-constant-inputs")
    given = "; ".join(
        spelled_constant(name, value) for name, value in planning.constant_inputs.items()
    )
    kept = "dropped" if planning.drop_constant_inputs else "kept, read by nothing"
    return [
        f"{given}: {folded} nodes fold, {after['If']} of {before['If']} If left (the input {kept})"
    ]
