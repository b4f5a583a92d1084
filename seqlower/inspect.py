"""``seqlower inspect MODEL``: what seqlower would do to a model, without running it.

A quick look before a run: which nodes each pipeline would lower (and in which form, where
that is cheap to tell), which sequence ops would remain, and, per pipeline, what would still
block it. Small models are lowered for real, in memory and without the check, so every answer
is the passes' own; above :data:`EXACT_LIMIT` nodes that would take seconds, so the answer
comes from a scan of the protobuf (a 100k-node model in a fraction of a second) and says so.

Pipelines are named: ``default``, ``sequence-free``, or a deploy target of
:data:`seqlower.targets.TARGETS` (``tract``, ``openvino``, ...); :func:`inspect_model` takes the
list.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from seqlower.errors import (
    BadArgumentError,
    ModelLoadError,
    ModelTypeError,
    SeqlowerError,
    SequenceFreeError,
    TargetError,
    first_line,
)
from seqlower.passes._sequences import SEQUENCE_OPS

#: What a runtime without sequence support refuses, in a stable order.
_SEQUENCE_OPS = tuple(sorted(SEQUENCE_OPS))

__all__ = ["EXACT_LIMIT", "PIPELINES", "Inspection", "PipelineView", "inspect_model"]

#: The pipelines inspect knows, by name: whether each is the sequence-free one.
PIPELINES = {"default": False, "sequence-free": True}

#: Above this many nodes the pipelines are not run, only the protobuf scanned.
EXACT_LIMIT = 1000  # about 0.5 s for both pipelines

#: Blockers listed per pipeline (a model that repeats one pattern repeats its blockers).
MAX_BLOCKERS = 20

#: The ops the default pipeline lowers.
_LOWERED = ("ReverseSequence", "SequenceMap")


@dataclass
class PipelineView:
    """One pipeline's answer: what it would rewrite, what would remain, what blocks it."""

    name: str
    exact: bool  # the passes ran (on a copy); otherwise a scan of the protobuf
    rewritten: dict[str, int] = field(default_factory=dict)  # op -> nodes
    forms: dict[str, dict[str, int]] = field(default_factory=dict)  # op -> form -> nodes
    remaining: dict[str, int] = field(default_factory=dict)  # sequence ops left
    repaired: dict[str, tuple[int, str]] = field(default_factory=dict)  # op -> (nodes, passes)
    blockers: list[str] = field(default_factory=list)  # why this pipeline would fail
    error: str = ""  # the error the run stopped on (one line), if any
    notes: list[str] = field(default_factory=list)


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

    def __str__(self) -> str:
        from seqlower.summary import describe_forms, seconds

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
            lines.append("no sequence op and no ReverseSequence: nothing to lower, runs anywhere")
        for op, n in sorted(lowered.items()):
            lines.append(f"  {op:24} {n:>6}  lowered by seqlower")
        for op, n in sorted(others.items()):
            lines.append(f"  {op:24} {n:>6}  needs sequence support unless --sequence-free")
        for view in self.pipelines:
            how = "ran in memory, no check" if view.exact else "scanned, not run"
            flag = (
                ""
                if view.name == "default"
                else f" (--{view.name})"
                if view.name in PIPELINES
                else f" (--target {view.name})"
            )
            lines.append(f"{view.name}{flag}, {how}:")
            for op, n in sorted(view.rewritten.items()):
                forms = view.forms.get(op)
                lines.append(f"  lowers {n} {op}" + (f": {describe_forms(forms)}" if forms else ""))
            for op, (n, names) in sorted(view.repaired.items()):
                lines.append(f"  repairs {n} {op} for the runtime, keeping it ({names})")
            if view.remaining:
                left = ", ".join(f"{n} {op}" for op, n in sorted(view.remaining.items()))
                lines.append(f"  leaves {left}: runtimes without sequence support refuse these")
            elif view.exact and not view.blockers and not view.error:
                lines.append("  leaves no sequence op")
            lines += [f"  note: {note}" for note in view.notes]
            if view.error:
                lines.append(f"  fails: {view.error}")
            if view.blockers:
                lines.append(f"  blocked by {len(view.blockers)}:")
                lines += [f"    - {blocker}" for blocker in view.blockers[:MAX_BLOCKERS]]
                if len(view.blockers) > MAX_BLOCKERS:
                    lines.append(f"    ... and {len(view.blockers) - MAX_BLOCKERS} more")
        lines.append(f"inspected in {seconds(self.seconds)}")
        return "\n".join(lines)


def inspect_model(
    model: str | os.PathLike[str] | onnx.ModelProto,
    pipelines: Sequence[str] = tuple(PIPELINES),
    *,
    exact: bool | None = None,
) -> Inspection:
    """Say what each named pipeline would do to ``model``, writing and running nothing.

    ``exact`` forces (True) or forbids (False) running the passes on a copy; by default they
    run when the model has at most :data:`EXACT_LIMIT` nodes.
    """
    start = time.perf_counter()
    from seqlower.targets import TARGETS

    unknown = [name for name in pipelines if name not in PIPELINES and name not in TARGETS]
    if unknown:
        known = ", ".join([*PIPELINES, *TARGETS])
        raise BadArgumentError(f"unknown pipeline or target {unknown[0]!r}; known: {known}")
    if isinstance(model, onnx.ModelProto):
        proto, where = model, "the model"
    elif not isinstance(model, (str, os.PathLike)):
        raise ModelTypeError("inspect_model", model, "a ModelProto or a path")
    else:
        proto, where = _read(Path(model)), str(model)
    counts, total, map_forms = _walk(proto)
    run = total <= EXACT_LIMIT if exact is None else exact
    views = [
        _run(proto, name) if run else _scan(proto, counts, map_forms, name) for name in pipelines
    ]
    found = {op: counts[op] for op in (*_LOWERED, *_SEQUENCE_OPS) if counts[op]}
    opsets = {o.domain: o.version for o in proto.opset_import}
    return Inspection(
        path=where,
        nodes=total,
        ops=found,
        opset=opsets.get("", opsets.get("ai.onnx")),
        ir_version=proto.ir_version,
        pipelines=views,
        seconds=time.perf_counter() - start,
        loops=counts["Loop"],
    )


def _read(path: Path) -> onnx.ModelProto:
    if not path.is_file():
        raise ModelLoadError(
            f"{path}: no such file" if not path.exists() else f"{path}: not a file"
        )
    try:
        proto = onnx.load(path, load_external_data=False)
    except Exception as e:
        raise ModelLoadError(f"{path}: not a readable ONNX model ({first_line(e)})") from e
    if not proto.HasField("graph"):
        raise ModelLoadError(f"{path}: not an ONNX model (it holds no graph)")
    return proto


def _nodes(proto: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    """Every node: the graph, subgraphs at any depth, model-local functions."""
    stack: list[Sequence[onnx.NodeProto]] = [proto.graph.node]
    stack += [function.node for function in proto.functions]
    while stack:
        for node in stack.pop():
            yield node
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    stack.append(attr.g.node)
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    stack += [g.node for g in attr.graphs]


def _run(proto: onnx.ModelProto, name: str) -> PipelineView:
    """The pipeline's own answer: lowered on an in-memory copy, cleanup on, no check."""
    from seqlower.pipeline import lower_with_report

    view = PipelineView(name, exact=True)
    try:
        if name in PIPELINES:
            report = lower_with_report(proto, sequence_free=PIPELINES[name])
        else:
            report = lower_with_report(proto, target=name)
    except (SequenceFreeError, TargetError) as e:
        view.blockers = list(e.blockers)
        return view
    except SeqlowerError as e:
        view.error = first_line(e)
        return view
    for row in report.passes:
        if row.op_type and row.rewritten and row.repairs:
            n, names = view.repaired.get(row.op_type, (0, ""))
            view.repaired[row.op_type] = (
                n + row.rewritten,
                ", ".join(filter(None, [names, row.name])),
            )
        elif row.op_type and row.rewritten:
            view.rewritten[row.op_type] = view.rewritten.get(row.op_type, 0) + row.rewritten
            if row.forms:
                view.forms[row.op_type] = dict(row.forms)
    # Two passes may rewrite the same node (a sequence-carrying Loop is stacked, then made a
    # Scan): count nodes, not rewrites, where the model held that many.
    for op, n in view.rewritten.items():
        if report.ops_before[op]:
            view.rewritten[op] = min(n, report.ops_before[op])
    view.remaining = {op: n for op in _SEQUENCE_OPS if (n := report.ops_after[op])}
    return view


def _scan(
    proto: onnx.ModelProto, counts: Counter[str], map_forms: Counter[str], name: str
) -> PipelineView:
    """What can be told without running the passes: the ops each pipeline takes, and for the
    sequence-free one the blockers no rewrite can remove (a sequence in the interface)."""
    from seqlower.targets import TARGETS

    view = PipelineView(name, exact=False)
    view.rewritten = {op: counts[op] for op in _LOWERED if counts[op]}
    row = TARGETS.get(name) if name not in PIPELINES else None
    if row is not None and row.loops != "kept" and counts["Loop"]:
        view.notes.append(
            f"{counts['Loop']} Loop: those whose trip count is fixed when they start become "
            "Scans; which ones is known only by running the passes (--exact)"
        )
    if not (PIPELINES[name] if row is None else row.sequence_free):
        if map_forms:
            view.forms = {"SequenceMap": dict(map_forms)}
        view.remaining = {op: counts[op] for op in _SEQUENCE_OPS if counts[op]}
        view.remaining.pop("SequenceMap", None)
        if counts["SequenceMap"]:
            view.notes.append(
                "each SequenceMap becomes a Loop that reads its sequence with SequenceAt and "
                "SequenceLength (and builds one with SequenceInsert or SplitToSequence), or, "
                "with an elementwise body over one sequence of a static shape, its body run "
                "once on the stacked elements (which one is known by running the passes: "
                "--exact)"
            )
        return view
    for kind, values in (("input", proto.graph.input), ("output", proto.graph.output)):
        for value in values:
            if value.type.HasField("sequence_type"):
                view.blockers.append(
                    f"graph {kind} '{value.name}' is a sequence: a sequence-free model cannot "
                    f"{'take' if kind == 'input' else 'return'} it"
                    + (
                        f"; when it always holds K tensors, --unroll-input {value.name}=K takes "
                        "them as K inputs"
                        if kind == "input"
                        else ""
                    )
                )
    if any(counts[op] for op in _SEQUENCE_OPS):
        view.notes.append(
            f"not run (over {EXACT_LIMIT} nodes): whether every sequence op folds away is known "
            "only by running the passes (seqlower inspect --exact MODEL)"
        )
    elif not view.blockers:
        view.notes.append("no sequence op in the model: nothing can block it")
    return view


def _walk(proto: onnx.ModelProto) -> tuple[Counter[str], int, Counter[str]]:
    """One pass over every node: default-domain op counts, the node count, and each
    SequenceMap's form where cheap to tell (scan outputs when every body output declares a
    static shape; the pass also infers shapes, so ``scan`` may be undercounted)."""
    counts: Counter[str] = Counter()
    forms: Counter[str] = Counter()
    total = 0
    for node in _nodes(proto):
        total += 1
        if node.domain not in ("", "ai.onnx"):
            continue
        counts[node.op_type] += 1
        if node.op_type == "SequenceMap":
            body = next((a.g for a in node.attribute if a.name == "body"), None)
            static = body is not None and all(_static(output.type) for output in body.output)
            forms["scan" if static else "carried"] += 1
    return counts, total, forms


def _static(type_proto: onnx.TypeProto) -> bool:
    if not type_proto.HasField("tensor_type") or not type_proto.tensor_type.HasField("shape"):
        return False
    return all(d.HasField("dim_value") for d in type_proto.tensor_type.shape.dim)
