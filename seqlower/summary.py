"""What seqlower prints after a run, as plain text.

The command line and Python callers see the same words: ``str(LowerResult)`` and
``str(LowerReport)`` are built here (the check's verdict is the check's own:
:func:`seqlower.verification.report.verdict_lines`), and ``cli/output.py`` only adds colour and
picks the stream. Nothing here imports click, onnx or onnx_ir.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FORM_WORDS",
    "ModelFacts",
    "describe_forms",
    "facts_lines",
    "pass_lines",
    "remaining_sequence_lines",
    "seconds",
    "size",
]

#: The forms a lowering pass records (``PassRow.forms``), in words a reader needs no legend for.
FORM_WORDS = {
    "slice": "as one Slice (lengths proven full)",
    "copy": "as a copy (constant lengths of 0 or 1)",
    "constant": "as a Gather with a constant index (constant lengths, static time axis)",
    "computed": "as a GatherND with its index computed at run time",
    "elements": "as a GatherElements with its index computed at run time (one element per step)",
    "row_gather": "as a Gather of whole slices with its index computed at run time",
    "rows": "as a row Gather (opset 10)",
    "scan": "as a Loop stacking scan outputs",
    "carried": "as a Loop carrying a sequence",
    "vector": "as its elementwise body run once on the stacked elements (no Loop)",
}


def seconds(value: float) -> str:
    """A duration as people read it: milliseconds below a second, seconds above."""
    return f"{value * 1e3:.1f}ms" if value < 1 else f"{value:.1f}s"


def size(nbytes: int) -> str:
    """A file size as people read it (powers of 1024)."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def describe_forms(forms: dict[str, int]) -> str:
    """``{"slice": 2, "computed": 1}`` as ``1 as a GatherND ...; 2 as one Slice (...)``."""
    return "; ".join(f"{n} {FORM_WORDS.get(form, form)}" for form, n in sorted(forms.items()))


def pass_lines(
    passes: Sequence[Any], before: Counter[str], after: Counter[str], *, verbose: int = 0
) -> list[str]:
    """The pass table (``PassRow``-like rows) and the op table (changed ops; all with -v)."""
    lines = [f"{'pass':26} {'rewritten':>9} {'time':>10}"]
    for row in passes:
        if getattr(row, "verbose_only", False) and not verbose:
            continue
        rewritten = "" if row.rewritten is None else str(row.rewritten)
        line = f"{row.name:26} {rewritten:>9} {seconds(row.seconds):>10}"
        if row.forms:
            line += f"   ({describe_forms(row.forms)})"
        lines.append(line)
    shown = [op for op in sorted(set(before) | set(after)) if verbose or before[op] != after[op]]
    if shown:
        lines.append(f"{'op':26} {'before':>9} {'after':>10}")
        lines += [f"{op:26} {before[op]:>9} {after[op]:>10}" for op in shown]
    return lines


def nothing_to_lower_line(passes: Sequence[Any], ops_before: Counter[str]) -> str:
    """Why a run rewrote nothing: the op types its passes handle that the model lacks, and
    those it has that needed no change (``--sequence-free`` leaves a Loop that builds no
    sequence; saying the model has no Loop would be false)."""
    handled = sorted({row.op_type for row in passes if row.op_type})
    absent = [op for op in handled if not ops_before.get(op)]
    present = [op for op in handled if ops_before.get(op)]
    parts = [f"no {' or '.join(absent)} in the model"] if absent else []
    if present:
        kept = ", ".join(f"{ops_before[op]} {op}" for op in present)
        verb = "needs" if sum(ops_before[op] for op in present) == 1 else "need"
        owner = "its" if absent else "the model's"
        parts.append(f"{owner} {kept} {verb} no change")
    return f"nothing to lower: {', and '.join(parts) if parts else 'no pass applies'}"


def remaining_sequence_lines(ops_after: Counter[str]) -> list[str]:
    """When sequence ops are left, which ones, and what to use for runtimes without them."""
    from seqlower.passes import SEQUENCE_OPS

    left = [f"{ops_after[op]} {op}" for op in sorted(SEQUENCE_OPS) if ops_after.get(op)]
    if not left:
        return []
    return [
        f"note: the output still has sequence ops ({', '.join(left)}); runtimes without "
        "sequence support need --target openvino or --target tract (lowered for it and "
        "proven there), or --sequence-free (TensorRT, ...)"
    ]


@dataclass
class ModelFacts:
    """What the summary says about one model: versions, interface, size on disk."""

    ir_version: int
    opset: int | None
    inputs: list[tuple[str, str]]  # (name, "float32[N,3]")
    outputs: list[tuple[str, str]]
    nbytes: int | None = None  # the file and its weights files; None when not on disk

    @classmethod
    def of(cls, model: Any, nbytes: int | None = None) -> ModelFacts:
        """The facts of an ``onnx_ir.Model`` (initializers are not inputs)."""
        graph = model.graph
        inputs = [v for v in graph.inputs if not v.is_initializer()]
        return cls(
            ir_version=model.ir_version,
            opset=model.opset_imports.get("", None),
            inputs=[(str(v.name), type_text(v)) for v in inputs],
            outputs=[(str(v.name), type_text(v)) for v in graph.outputs],
            nbytes=nbytes,
        )


def type_text(value: Any) -> str:
    """A value's type as ``float32[N,3]``, ``seq(int64)`` or ``?`` (an onnx_ir value)."""
    import onnx_ir as ir

    type_ = value.type
    if isinstance(type_, ir.SequenceType):
        element = type_.elem_type
        inner = element.dtype.name.lower() if isinstance(element, ir.TensorType) else "?"
        return f"seq({inner})"
    if type_ is not None and not isinstance(type_, ir.TensorType):
        return str(type_)
    dtype = "?" if type_ is None else type_.dtype.name.lower()
    shape = value.shape
    if shape is None:
        return f"{dtype}[rank ?]"
    dims = ["?" if getattr(d, "value", d) is None else str(d) for d in shape.dims]
    return f"{dtype}[{','.join(dims)}]"


#: Inputs or outputs listed in the summary without -v.
MAX_LISTED = 8


def facts_lines(before: ModelFacts, after: ModelFacts | None, *, verbose: int = 0) -> list[str]:
    """onnxslim-like facts: opset, IR version, inputs, outputs, size before -> after."""

    def pair(a: object, b: object) -> str:
        return f"{a}" if b is None or a == b else f"{a} -> {b}"

    lines = [
        f"{'opset':26} {pair(before.opset, after and after.opset)}",
        f"{'IR version':26} {pair(before.ir_version, after and after.ir_version)}",
    ]
    for kind, old, new in (
        ("input", before.inputs, after.inputs if after else []),
        ("output", before.outputs, after.outputs if after else []),
    ):
        known, changed = dict(old), dict(new)
        # One the output no longer has (--optional-input NAME=absent, --unroll-input) is said
        # gone: listed as it was, it read as kept.
        rows = [
            f"{kind} {name}".ljust(26)
            + (
                " (removed) " + t
                if after and name not in changed
                else f" {pair(t, changed.get(name))}"
            )
            for name, t in old
        ]
        rows += [f"{kind} {name}".ljust(26) + f" (new) {t}" for name, t in new if name not in known]
        if len(rows) > MAX_LISTED and not verbose:
            rows = [*rows[:MAX_LISTED], f"... and {len(rows) - MAX_LISTED} more {kind}s (-v)"]
        lines += rows
    if before.nbytes is not None:
        new_size = None if after is None or after.nbytes is None else size(after.nbytes)
        lines.append(f"{'size':26} {pair(size(before.nbytes), new_size)}")
    return lines
