"""The opset-8 ``Scan`` as one opset-9 ``Scan`` per batch entry (target ``tract``; ``openvino``
when a ``Scan`` has ``sequence_lens``), the model moved to opset 9.

``Scan``-8 has a batch axis: states and scan inputs are ``[B, ...]`` and ``[B, T, ...]``, each
batch entry is scanned on its own, an optional ``sequence_lens`` (``[B]``, first input) gives
each entry's length (onnxruntime refuses one outside ``[1, T]``), a reverse scan input is read
from row ``length - 1`` down to 0, and the scan outputs hold ``T`` rows per entry, those past the
entry's length zero (onnxruntime writes zeros; the spec calls them undefined). tract 0.23.9
cannot type it (``Impossible to unify Val(2) with Val(1)``; with ``sequence_lens``, ``Scan
receives 4 inputs, mappings expects 3``), OpenVINO 2026.4.1 refuses ``sequence_lens``
(``is_null(node.get_ov_inputs().at(0))``), and onnx's 8 -> 9 adapter drops the batch axis
(shapes and numbers wrong).

The model goes to opset 9 first (``_op_versions.convert_model``: onnx's adapters for the other
ops, ``BatchNormalization``/``Upsample`` among them, the ``Scan`` nodes re-stamped as they are),
then each becomes, for ``b`` in ``range(B)``: ``Gather(v, b, axis=0)`` of every state and scan
input (``Slice``d to the entry's length when a constant length is shorter than ``T``), a
``Scan``-9 on a copy of the body with the same ``directions``, each result ``Unsqueeze``d (a scan
output first padded with zero rows to ``T``), the entries joined by ``Concat``. Lengths
computed at run time: each entry scans all ``T`` rows (a reverse input's first ``length`` rows
reversed by a ``Gather`` first) with a step counter, its states kept (``Where``) and its scan
outputs zero once the counter reaches the length, the lengths checked to be ``B`` values in
``[1, T]`` (an out-of-range ``Gather``; for OpenVINO a ``Reshape`` of two values to a scalar
too); the steps past a length run the body again on the rows and input states of the last
step within it (carried as more states; the results discarded), since the rows past a length
may hold values the body fails on and the original never reads them. Nodes are planned on
the model as read, so a refusal (exit 2, naming the node) leaves it untouched: a batch size
or (with constant lengths) a ``T`` not known when lowering (``--overwrite-input-shape`` fixes
both), a batch of 0, a node in a body that changed between opsets 8 and 9 other than a
``Scan`` (the converter does not reach into a body kept as it is).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import onnx_ir as ir

from seqlower.errors import TargetError, describe_node
from seqlower.passes._base import (
    NodeLoweringPass,
    Rewrite,
    Site,
    find_sites,
    model_names,
    rewire,
)
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import constant_array, graph_attr, int_attr, ints_attr, is_onnx, nodes_in
from seqlower.passes._op_versions import convert_model, same_but_types
from seqlower.passes._shared import body_copy, prepend
from seqlower.passes._types import TypeOracle

__all__ = ["LowerScan8"]

_OPSET = 9  # the first opset of the batch-free Scan
_FIX = "--overwrite-input-shape fixes it"


@dataclasses.dataclass
class _Plan:
    body: ir.Graph
    states: int  # N: the body's first N inputs and outputs
    batch: int
    directions: list[int]
    #: Each entry's length when sequence_lens is a constant (None: every entry scans T rows).
    lengths: list[int] | None
    time: int  # T (0 when not needed: no lengths)
    #: The scan outputs' element types (for the zero rows that pad a short entry).
    dtypes: list[ir.DataType]
    #: Whether sequence_lens is computed at run time (each entry then scans T rows with its
    #: states frozen and its scan outputs zero past its length).
    run_time: bool = False


class LowerScan8(NodeLoweringPass[_Plan]):
    """Every opset-8 ``Scan`` as one opset-9 ``Scan`` per batch entry (module docstring)."""

    op_type = "Scan"
    takes_all = False  # the opset-9 Scans it writes stay

    def __init__(
        self, *, only_with_lengths: bool = False, reshape_check: bool = False, target: str = "tract"
    ) -> None:
        """``only_with_lengths``: lower only a model with a Scan-8 that has ``sequence_lens``
        (OpenVINO runs the others; every Scan of such a model is lowered, since the model's
        opset moves). ``reshape_check``: run-time lengths outside [1, T] fail through a
        ``Reshape`` too (OpenVINO's ``Gather`` returns zeros for an out-of-range index; tract
        loads no such ``Reshape``, its ``Gather`` aborts). ``target``: the runtime a refusal
        names."""
        super().__init__()
        self.only_with_lengths = only_with_lengths
        self.reshape_check = reshape_check
        self.target = target
        #: The plans made on the model as read, by node name (the conversion makes new nodes).
        self._plans: dict[str, _Plan] = {}

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self._plans = {}
        sites = [s for s in find_sites(model, lambda n: is_onnx(n, "Scan")) if s.opset < _OPSET]
        if not sites or (self.only_with_lengths and not any(_lengths(s.node) for s in sites)):
            return ir.passes.PassResult(model, modified=False)
        types = TypeOracle(model)
        planned = [(site, *self._problems(model, site, types)) for site in sites]
        blockers = [problem for _, _, problems in planned for problem in problems]
        if blockers:
            raise TargetError(self.target, blockers, f"it runs no opset-8 Scan; {_FIX}")
        names = model_names(model)
        for site, plan, _ in planned:
            if not site.node.name or site.node.name in self._plans:
                site.node.name = names.fresh("Scan")
            assert plan is not None
            self._plans[site.node.name] = plan
        convert_model(model, _OPSET, frozenset({"Scan"}))
        try:
            return super().call(model)
        finally:
            self._plans = {}

    def matches(self, node: ir.Node) -> bool:
        return is_onnx(node, "Scan") and node.name in self._plans

    def _problems(
        self, model: ir.Model, site: Site, types: TypeOracle
    ) -> tuple[_Plan | None, list[str]]:
        """The node's plan, or why it cannot be made exact, asked of the model as read."""
        node = site.node
        owners = [f for f in model.functions.values() if f.opset_imports.get("", 0) >= _OPSET]
        if owners:
            return None, [f"{describe_node(node)}: function '{owners[0].name}' has another opset"]
        try:
            plan = _plan(node, types)
        except _Refused as refused:
            return None, [f"{describe_node(node)}: {refused}"]
        return plan, [
            f"{describe_node(inner)} in the body of {describe_node(node)}: "
            f"{inner.op_type} changed in opset {_OPSET} and a kept body is not converted"
            for inner in nodes_in(plan.body)
            if is_onnx(inner)
            and inner.op_type != "Scan"
            and not same_but_types(inner.op_type, site.opset, _OPSET)
        ]

    def plan(self, site: Site, types: TypeOracle) -> _Plan:
        """The plan made before the conversion, on the converted node's body."""
        body = graph_attr(site.node, "body")
        assert body is not None, "planned with a body"
        return dataclasses.replace(self._plans[site.node.name or ""], body=body)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        op = ctx.before()
        values = [v for v in ctx.node.inputs[1:] if v is not None]
        lens = _checked_lengths(op, ctx.node, plan, values, self.reshape_check)
        entries = [_entry(op, ctx, plan, values, b, lens) for b in range(plan.batch)]
        joined = [
            op.Concat(*column, axis=0, _hint="batch") if len(column) > 1 else column[0]
            for column in zip(*entries, strict=True)
        ]
        for new, old in zip(joined, ctx.node.outputs, strict=True):
            new.type, new.shape = old.type, old.shape  # the same values, batch axis and all
        ctx.replace(joined)


class _Refused(Exception):
    """Why one Scan-8 cannot be made exact (becomes a blocker naming the node)."""


def _plan(node: ir.Node, types: TypeOracle) -> _Plan:
    """What lowering ``node`` needs; raises _Refused when it cannot be made exact."""
    body = graph_attr(node, "body")
    scanned = int_attr(node, "num_scan_inputs")
    values = list(node.inputs[1:])
    if body is None or scanned is None or not 0 < scanned <= len(values):
        raise _Refused("a body and num_scan_inputs between 1 and its inputs are needed")
    states = len(values) - scanned
    directions = ints_attr(node, "directions") or [0] * scanned
    if len(directions) != scanned or not set(directions) <= {0, 1}:
        raise _Refused(f"directions {directions} must be {scanned} flags of 0 or 1")
    batch = _dim(types, values, 0)
    if batch is None or batch == 0:
        raise _Refused(f"its batch size is {'0' if batch == 0 else 'not known'}; {_FIX}")
    lens = _lengths(node)
    run_time = lens is not None and constant_array(lens) is None
    lengths, time = (None, 0) if run_time else _entry_lengths(node, types, values[states:], batch)
    dtypes = [_dtype(types, v) for v in body.outputs[states:]]
    return _Plan(body, states, batch, directions, lengths, time, dtypes, run_time)


def _lengths(node: ir.Node) -> ir.Value | None:
    return node.inputs[0] if node.inputs else None


def _dim(types: TypeOracle, values: list[ir.Value | None], axis: int) -> int | None:
    """Dimension ``axis`` of the first of ``values`` that has it static."""
    for value in values:
        shape = None if value is None else types.shape_of(value)
        dim = shape[axis] if shape is not None and len(shape) > axis else None
        if isinstance(dim, int):
            return dim
    return None


def _entry_lengths(
    node: ir.Node, types: TypeOracle, scanned: list[ir.Value | None], batch: int
) -> tuple[list[int] | None, int]:
    """Each entry's length (None: all T) and T, from a constant ``sequence_lens``."""
    lens = _lengths(node)
    if lens is None:
        return None, 0
    array = constant_array(lens)
    assert array is not None, "run-time lengths are planned apart"
    time = _dim(types, scanned, 1)
    if time is None:
        raise _Refused(f"the length of its scan axis is not known; {_FIX}")
    lengths = [int(v) for v in array.reshape(-1)]
    if len(lengths) != batch or not all(1 <= v <= time for v in lengths):
        raise _Refused(f"sequence_lens {lengths} is not {batch} lengths in [1, {time}]")
    return (None if all(v == time for v in lengths) else lengths), time


def _dtype(types: TypeOracle, value: ir.Value) -> ir.DataType:
    kind = types.type_of(value)
    if not isinstance(kind, ir.TensorType):
        raise _Refused(f"the element type of '{value.name}' is not known")
    return kind.dtype


def _entry(
    op: Emitter, ctx: Rewrite, plan: _Plan, values: list[ir.Value], b: int, lens: ir.Value | None
) -> list[ir.Value]:
    """Batch entry ``b``: its rows, its Scan-9, its results with a batch axis of 1."""
    index = op.int64s(b, hint="entry")
    rows = [op.Gather(v, index, axis=0, _hint="entry") for v in values]
    if lens is not None:
        return _frozen_entry(op, ctx, plan, rows, op.Gather(lens, index, _hint="length"))
    length = plan.time if plan.lengths is None else plan.lengths[b]
    short = plan.lengths is not None and length < plan.time
    if short:
        rows[plan.states :] = [
            op.Slice(r, starts=[0], ends=[length], axes=[0], _hint="steps")
            for r in rows[plan.states :]
        ]
    body = _own_outputs(ctx, body_copy(plan.body, ctx.names, f"{ctx.base}_{b}"))
    results = [ir.Value(name=ctx.names.fresh(f"{ctx.base}_{b}_out")) for _ in body.outputs]
    attributes: dict[str, Any] = {"num_scan_inputs": len(values) - plan.states}
    if any(plan.directions):
        attributes["scan_input_directions"] = plan.directions
    op.Scan(*rows, body=body, **attributes, _outputs=results)
    if short:
        results[plan.states :] = [
            _padded(op, r, plan.time - length, dtype)
            for r, dtype in zip(results[plan.states :], plan.dtypes, strict=True)
        ]
    return [op.unsqueeze(r, [0], hint="entry_out") for r in results]


def _own_outputs(ctx: Rewrite, body: ir.Graph) -> ir.Graph:
    """``body`` with an ``Identity`` for each input it returns as an output: onnxruntime 1.32
    returns another entry's values for such a state of a Scan-9 and tract 0.23.9 panics on it
    (onnxruntime's Scan-8 returns zeros for it)."""
    inputs = {id(v) for v in body.inputs}
    copies = ctx.into(body, pool=None)
    for k, value in enumerate(body.outputs):
        if id(value) in inputs:
            copy = copies.Identity(value, _hint=f"{value.name or 'state'}_out")
            copy.type, copy.shape = value.type, value.shape
            body.outputs[k] = copy
    body.extend(copies.nodes)
    return body


def _padded(op: Emitter, rows: ir.Value, missing: int, dtype: ir.DataType) -> ir.Value:
    """``rows`` and ``missing`` rows of zeros after them (what onnxruntime writes)."""
    shape = op.Shape(rows, _hint="rows_shape")
    inner = op.Slice(shape, starts=[1], ends=[np.iinfo(np.int64).max], axes=[0], _hint="row")
    zeros_shape = op.Concat(op.int64s([missing], hint="padding"), inner, axis=0, _hint="pad")
    zero = ir.Tensor(np.zeros(1, dtype=dtype.numpy()))
    zeros = op.ConstantOfShape(zeros_shape, value=zero, _hint="zeros")
    return op.Concat(rows, zeros, axis=0, _hint="padded")


def _checked_lengths(
    op: Emitter, node: ir.Node, plan: _Plan, values: list[ir.Value], reshape_check: bool
) -> ir.Value | None:
    """Run-time lengths, failing at run time unless there are B of them in [1, T], as
    onnxruntime's Scan-8 does: an out-of-range ``Gather`` (and, for OpenVINO, a ``Reshape``
    of two values to a scalar)."""
    lens = _lengths(node)
    if not plan.run_time or lens is None:
        return None
    one = op.int64s(1, hint="one")
    steps = op.Gather(op.Shape(values[plan.states], _hint="scan_shape"), one, _hint="steps")
    short = op.Less(op.ReduceMin(lens, keepdims=0, _hint="shortest"), one, _hint="empty")
    long = op.Less(steps, op.ReduceMax(lens, keepdims=0, _hint="longest"), _hint="too_long")
    count = op.Equal(op.Size(lens, _hint="count"), op.int64s(plan.batch, hint="batch"))
    bad = op.Or(op.Or(short, long, _hint="bad_length"), op.Not(count), _hint="bad")
    bad_int = op.Cast(bad, to=int(ir.DataType.INT64), _hint="bad_int")
    check = op.Gather(op.int64s([0], hint="zero_row"), bad_int, _hint="zero_if_good")
    if reshape_check:
        ones = op.arange(op.Add(one, bad_int, _hint="check_count"), hint="check")
        zero = op.Reshape(ones, op.int64s([], hint="scalar"), _hint="zero_unless_bad")
        check = op.Add(check, zero, _hint="checked")
    return op.Add(lens, check, _hint="lengths")


def _frozen_entry(
    op: Emitter, ctx: Rewrite, plan: _Plan, rows: list[ir.Value], length: ir.Value
) -> list[ir.Value]:
    """An entry of a run-time ``length``: all T rows scanned forward (a reverse input's first
    ``length`` rows reversed first), a step counter, the states frozen and the scan outputs zero
    once the counter reaches the length. The steps past the length run the body again on what
    step ``length - 1`` read (its rows, and its input states, carried as more states): the
    original never runs the body on the rows past the length, which may hold anything it
    would fail on (an index out of range), and the body did not fail on that step."""
    n = plan.states
    for k, direction in enumerate(plan.directions):
        rows[n + k] = _rows_within(op, rows[n + k], length, reverse=bool(direction))
    body = _own_outputs(ctx, body_copy(plan.body, ctx.names, ctx.base))
    _freeze(ctx, body, plan, length)
    results = [ir.Value(name=ctx.names.fresh(f"{ctx.base}_out")) for _ in body.outputs]
    start = op.int64s(0, hint="step")
    op.Scan(*rows[:n], start, *rows[:n], *rows[n:], body=body, num_scan_inputs=len(rows) - n,
            _outputs=results)  # fmt: skip
    outputs = results[:n] + results[2 * n + 1 :]
    return [op.unsqueeze(r, [0], hint="entry_out") for r in outputs]


def _rows_within(op: Emitter, rows: ir.Value, length: ir.Value, *, reverse: bool) -> ir.Value:
    """The rows step ``t`` reads: ``rows[t]`` (reverse: ``rows[length-1-t]``) for ``t < length``,
    then what step ``length - 1`` read (``rows[length-1]``; reverse: ``rows[0]``)."""
    steps = op.Gather(op.Shape(rows, _hint="rows_shape"), op.int64s(0, hint="zero"))
    r = op.arange(steps, hint="row")
    last = op.Sub(length, op.int64s(1, hint="one"), _hint="last")
    inside = op.Less(r, length, _hint="inside")
    if reverse:
        back = op.Sub(last, r, _hint="back")
        index = op.Where(inside, back, op.int64s(0, hint="first"), _hint="reversed_index")
    else:
        index = op.Where(inside, r, last, _hint="row_index")
    return op.Gather(rows, index, axis=0, _hint="within")


def _freeze(ctx: Rewrite, body: ir.Graph, plan: _Plan, length: ir.Value) -> None:
    """``body`` with a step counter after its states, then the input states of the last step
    within ``length`` (read from outside): each state kept and each scan output zero once the
    counter reaches the length, the body then run on those input states."""
    n = plan.states
    emit = ctx.into(body, pool=None)
    step = ir.Value(name=ctx.names.fresh(f"{ctx.base}_step"), type=ir.TensorType(ir.DataType.INT64))
    step.shape = ir.Shape([])
    front = ctx.into(body, pool=None)  # what the body's nodes read: before them
    alive = front.Less(step, length, _hint="alive")
    carried, before, used = [], [], []
    for k in range(n):
        old = body.inputs[k]
        carried.append(ir.Value(name=ctx.names.fresh(f"{ctx.base}_carried"), type=old.type))
        before.append(ir.Value(name=ctx.names.fresh(f"{ctx.base}_before"), type=old.type))
        carried[k].shape = before[k].shape = old.shape
        used.append(front.Where(alive, carried[k], before[k], _hint="state_in"))
        used[k].type, used[k].shape = old.type, old.shape
        rewire(old, used[k])
    outputs = list(body.outputs)
    for k in range(n):
        outputs[k] = emit.Where(alive, outputs[k], carried[k], _hint="state")
    for j, dtype in enumerate(plan.dtypes):
        zero = emit.constant(np.zeros((), dtype=dtype.numpy()), hint="zero")
        outputs[n + j] = emit.Where(alive, outputs[n + j], zero, _hint="row")
    for new, old in zip(outputs, body.outputs, strict=True):
        new.type, new.shape = old.type, old.shape
    following = emit.Add(step, emit.int64s(1, hint="one"), _hint="next_step")
    following.type, following.shape = step.type, step.shape
    kept = [emit.Identity(v, _hint="state_before") for v in used]
    for copy, v in zip(kept, used, strict=True):
        copy.type, copy.shape = v.type, v.shape
    prepend(body, list(front.nodes))
    body.extend(emit.nodes)
    inputs = list(body.inputs)
    body.inputs.clear()
    body.inputs.extend([*carried, step, *before, *inputs[n:]])
    body.outputs.clear()
    body.outputs.extend([*outputs[:n], following, *kept, *outputs[n:]])
