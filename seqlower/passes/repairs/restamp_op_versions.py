"""Re-stamp a model to an older default-domain opset when a runtime lacks an op's newest
version and ONNX changed nothing in between but type lists.

An op's version is the opset's: ``OptionalGetElement`` in an opset-28 model is
``OptionalGetElement-28``, which onnxruntime 1.32 has no kernel for (``Could not find an
implementation for OptionalGetElement(28)``), though it runs ``OptionalGetElement-18``, and
ONNX's change log says 28 only added types (float8, 4-bit, ... elements). A target row's
``op_versions`` records, per op, the newest version its runtime runs where that lags onnx's
(measured: ``benchmarks/op_versions.py``). For a model using such an op at a newer version,
this pass lowers the model's default-domain opset (and its functions') to the newest opset
that resolves every such op to a version the runtime runs, but only when every op of the model
whose version differs between the two opsets changed there by type lists alone
(``_op_versions.same_but_types``, the schemas compared: what ``job.restamp`` asks too) and each
such node's types are in the older version's lists: the same model, read the same, by an older
name. Otherwise it raises ``TargetError`` naming the node, its
version and why (the runtime would refuse the node).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping

import onnx
import onnx_ir as ir

from seqlower._graphs import all_graphs
from seqlower.errors import TargetError, describe_node
from seqlower.passes._ir import ONNX_DOMAINS, is_onnx
from seqlower.passes._op_versions import same_but_types, since_version
from seqlower.passes._types import TypeOracle

__all__ = ["RestampOpVersions"]


@functools.cache
def _versions(op: str) -> tuple[int, ...]:
    return tuple(
        sorted(
            {
                s.since_version
                for s in onnx.defs.get_all_schemas_with_history()
                if s.name == op and s.domain in ONNX_DOMAINS
            }
        )
    )


def _type_string(kind: ir.TypeProtocol | None) -> str | None:
    """ONNX's spelling of a type in schemas' type lists: ``optional(seq(tensor(float)))``."""
    if isinstance(kind, ir.TensorType):
        return f"tensor({kind.dtype.name.lower()})"
    if isinstance(kind, ir.SequenceType):
        inner = _type_string(kind.elem_type)
        return None if inner is None else f"seq({inner})"
    if isinstance(kind, ir.OptionalType):
        inner = _type_string(kind.elem_type)
        return None if inner is None else f"optional({inner})"
    return None


def _outside(node: ir.Node, version: int, types: TypeOracle) -> str | None:
    """Why ``node`` cannot be read as its op's ``version``: a type outside that version's
    lists, or one not known when lowering; None when it can."""
    schema = onnx.defs.get_schema(node.op_type, version, "")
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    pairs = [
        *zip(schema.inputs, node.inputs, strict=False),
        *zip(schema.outputs, node.outputs, strict=False),
    ]
    variadic = [p for p in (*schema.inputs, *schema.outputs) if p.option == p.option.Variadic]
    if variadic:  # the last formal parameter takes every value after it
        last_in, last_out = schema.inputs[-1:], schema.outputs[-1:]
        pairs += [(last_in[0], v) for v in node.inputs[len(schema.inputs) :]] if last_in else []
        pairs += [(last_out[0], v) for v in node.outputs[len(schema.outputs) :]] if last_out else []
    for parameter, value in pairs:
        if value is None or parameter.type_str not in allowed:
            continue
        kind = _type_string(value.type) or _type_string(types.type_of(value))
        if kind is None:
            return f"the type of '{value.name}' is not known when lowering"
        if kind not in allowed[parameter.type_str]:
            return f"'{value.name}' is {kind}, not in {node.op_type}-{version}'s types"
    return None


class RestampOpVersions(ir.passes.InPlacePass):
    """Lower the default-domain opset so that the ``newest`` ops resolve to versions the
    runtime runs (module docstring)."""

    def __init__(
        self,
        newest: Iterable[tuple[str, int]],
        target: str,
        runtime: str = "",
        *,
        strict: bool = True,
    ) -> None:
        """``target``: the row's name; ``runtime``: its runtime and version, for messages;
        ``strict=False`` (the default pipeline, not a target) leaves a model it cannot
        re-stamp as it is instead of refusing it."""
        super().__init__()
        self.strict = strict
        self.newest: Mapping[str, int] = dict(newest)
        self.target = target
        self.runtime = runtime or target
        self.op_type = ", ".join(sorted(self.newest)) or None
        self.rewritten = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = 0
        current = model.opset_imports.get("", None)
        if current is None:
            return ir.passes.PassResult(model, modified=False)
        graphs, newest = all_graphs(model), self.newest
        # Every run of the default row asks (quietly): the op type first, a set lookup, then
        # the domain; the list of every ONNX node only when something lags.
        lagging = {
            node.op_type
            for graph in graphs
            for node in graph
            if node.op_type in newest
            and is_onnx(node)
            and (since_version(node.op_type, current) or 0) > newest[node.op_type]
        }
        if not lagging:
            return ir.passes.PassResult(model, modified=False)
        nodes = [node for graph in graphs for node in graph if is_onnx(node)]
        target = min(min(v for v in _versions(op) if v > self.newest[op]) - 1 for op in lagging)
        types = TypeOracle(model)  # a pass's new values may be untyped: traced or inferred
        blockers = []
        changed = 0
        for node in nodes:
            old, new = since_version(node.op_type, current), since_version(node.op_type, target)
            if old == new:
                continue
            where = f"{describe_node(node)} ({node.op_type}-{old})"
            if new is None:
                blockers.append(f"{where}: no version of {node.op_type} at opset {target}")
                continue
            if not same_but_types(node.op_type, target, current):
                blockers.append(
                    f"{where}: ONNX changed more than its types after {node.op_type}-{new}"
                )
                continue
            problem = _outside(node, new, types)
            if problem is not None:
                blockers.append(f"{where}: {problem}")
                continue
            changed += 1
        if blockers and not self.strict:
            return ir.passes.PassResult(model, modified=False)
        if blockers:
            ops = ", ".join(f"{op}-{self.newest[op]}" for op in sorted(lagging))
            raise TargetError(
                self.target,
                blockers,
                f"{self.runtime} runs only {ops}; re-stamping the model to opset {target} "
                "would change what these nodes mean",
            )
        model.opset_imports[""] = target
        for function in model.functions.values():
            if function.opset_imports.get("", None) == current:
                function.opset_imports[""] = target
        self.rewritten = changed
        return ir.passes.PassResult(model, modified=True)
