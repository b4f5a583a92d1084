"""``RNN``/``GRU``/``LSTM`` with ``sequence_lens`` run one batch entry at a time, each on its own
length, in a ``Loop`` (target ``openvino``).

OpenVINO 2026.4.1 ignores ``sequence_lens``: every entry runs all T steps, so ``Y`` is not zero
past an entry's length, the final states are those after step T, and a reverse direction starts
from step T-1 instead of the entry's last step (PyTorch's bidirectional LSTM over padded
batches: 0.35-0.66 off; tests/targets/test_recurrence_lengths.py). The op without
``sequence_lens`` on the entry's first ``len`` steps computes exactly what the spec says for
that entry, in both directions, so the Loop runs, for entry ``b``, the same op on
``X[:max(len_b, 1), b:b+1]`` (and the initial states' ``b``-th entry), zeroes its results when
``len_b`` is 0 (onnxruntime's: ``Y`` and the final states zero), pads ``Y`` with zeros to T
steps, and stacks the entries back into ``[T, D, B, H]`` (``[D, B, H]`` for the states).

Left as they are: ``layout=1`` (``time-major-recurrences`` runs first and rewrites those),
peephole LSTMs (OpenVINO computes those wrong anyway: ``unroll-peephole-lstms``), opsets before
13 (``Squeeze``/``Unsqueeze`` axes as inputs, ``Pad`` by a computed amount) and an ``X`` of
unknown rank or element type.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import RECURRENT_OPS, int_attr
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["RecurrenceLengthsPerEntry"]

_FLOATS = {ir.DataType.FLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.BFLOAT16}
#: Input positions: X, sequence_lens, initial_h, initial_c, P.
_X, _LENS, _H0, _C0, _P = 0, 4, 5, 6, 7


@dataclasses.dataclass(frozen=True)
class _Plan:
    dtype: ir.DataType


class RecurrenceLengthsPerEntry(NodeLoweringPass[_Plan]):
    """Every ``RNN``/``GRU``/``LSTM`` with ``sequence_lens`` as a ``Loop`` over its batch
    entries, each run on its own length (module docstring)."""

    op_type = "LSTM"
    op_types = RECURRENT_OPS
    takes_all = False
    repairs = True

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        inputs = list(node.inputs)
        if len(inputs) <= _LENS or inputs[_LENS] is None or site.opset < 13:
            return None
        if int_attr(node, "layout", 0) or (len(inputs) > _P and inputs[_P] is not None):
            return None
        x = inputs[_X]
        if x is None or any(v is None for v in inputs[1:3]):
            return None
        dtype = element_dtype(types.type_of(x))
        shape = types.shape_of(x)
        if dtype not in _FLOATS or shape is None or len(shape) != 3:
            return None
        assert dtype is not None
        return _Plan(dtype)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, op = ctx.node, ctx.before()
        inputs = [*node.inputs, *[None] * (8 - len(node.inputs))]
        x, lens = inputs[_X], inputs[_LENS]
        assert x is not None and lens is not None
        wanted = [bool(out.uses()) or out.is_graph_output() for out in node.outputs]

        shape = op.Shape(x, _hint="x_shape")
        steps = op.Gather(shape, op.int64s([0], hint="time_axis"), axis=0, _hint="steps")
        batch = op.Gather(shape, op.int64s(1, hint="batch_axis"), axis=0, _hint="batch")
        lens64 = op.Cast(lens, to=ir.DataType.INT64, _hint="lens")
        every = op.constant(np.array(True), hint="true")  # Loop takes no trailing omission
        graph = _entry_graph(plan, ctx, inputs, lens64, steps, wanted)
        stacked = [
            ir.Value(name=ctx.names.fresh(f"{ctx.base}_entries_{k}"))
            for k in range(len(graph.outputs) - 1)
        ]
        op.Loop(batch, every, body=graph, _outputs=stacked, _hint="entries")
        ctx.replace(_restacked(ctx.after(), node, stacked, wanted))


def _entry_graph(
    plan: _Plan,
    ctx: Rewrite,
    inputs: list[ir.Value | None],
    lens64: ir.Value,
    steps: ir.Value,
    wanted: list[bool],
) -> ir.Graph:
    """The Loop body: the op on batch entry ``b``'s first ``max(len_b, 1)`` steps, its results
    zeroed when ``len_b`` is 0 and ``Y`` padded with zero rows to T steps."""
    node, names, base = ctx.node, ctx.names, ctx.base
    body = ctx.into(ctx.graph, pool="own", prefix=f"{base}_entry")
    iteration = ir.Value(
        name=names.fresh(f"{base}_entry"), type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([])
    )
    cond_in = ir.Value(
        name=names.fresh(f"{base}_cond"), type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([])
    )
    entry_inputs, length, run, zero = _entry_inputs(body, inputs, lens64, iteration)
    results = [
        ir.Value(name=names.fresh(f"{base}_entry_out_{k}")) for k in range(len(node.outputs))
    ]
    body.build(
        node.op_type,
        entry_inputs,
        dict(node.attributes),
        outputs=results,
        name=names.fresh(f"{node.name or node.op_type}_entry"),
    )
    scans = _entry_results(body, plan, results, wanted, (length, run, zero, steps))
    cond_out = body.Identity(cond_in, _hint="cond_out")
    cond_out.type, cond_out.shape = ir.TensorType(ir.DataType.BOOL), ir.Shape([])
    return ir.Graph(
        [iteration, cond_in],
        [cond_out, *scans],
        nodes=body.nodes,
        name=names.fresh(f"{base}_per_entry"),
        opset_imports={},
    )


def _entry_inputs(
    body: Emitter, inputs: list[ir.Value | None], lens64: ir.Value, iteration: ir.Value
) -> tuple[list[ir.Value | None], ir.Value, ir.Value, ir.Value]:
    """The op's inputs for batch entry ``iteration``: its first ``max(len_b, 1)`` steps of X
    (a length-0 entry runs one step, zeroed after) and its entry of the initial states; with
    ``[len_b]``, ``[max(len_b, 1)]`` and ``[0]``."""
    at = body.unsqueeze(iteration, [0], hint="at")
    one = body.int64s([1], hint="one")
    zero = body.int64s([0], hint="zero")
    past = body.Add(at, one, _hint="past")
    length = body.Gather(lens64, at, axis=0, _hint="length")  # [1]
    run = body.Max(length, one, _hint="run_length")  # a length-0 entry runs one step
    x_b = body.Slice(
        inputs[_X],
        body.Concat(zero, at, axis=0, _hint="starts"),
        body.Concat(run, past, axis=0, _hint="ends"),
        body.int64s([0, 1], hint="axes"),
        _hint="x_entry",
    )
    entry_inputs: list[ir.Value | None] = [x_b, *inputs[1:_LENS], None]
    for k in (_H0, _C0):
        state = inputs[k]
        entry_inputs.append(
            None
            if state is None
            else body.Slice(state, at, past, body.int64s([1], hint="batch_axis"), _hint="state")
        )
    while entry_inputs and entry_inputs[-1] is None:
        entry_inputs.pop()
    return entry_inputs, length, run, zero


def _entry_results(
    body: Emitter,
    plan: _Plan,
    results: list[ir.Value],
    wanted: list[bool],
    sizes: tuple[ir.Value, ir.Value, ir.Value, ir.Value],
) -> list[ir.Value]:
    """The wanted results of the entry's op, zeroed when its length is 0, ``Y`` padded with
    zero rows to T steps (``sizes``: ``[len_b]``, the steps run, ``[0]``, T)."""
    length, run, zero, steps = sizes
    nonempty = body.Greater(length, zero, _hint="nonempty")
    nothing = body.constant(np.zeros((), dtype=plan.dtype.numpy()), hint="zero")
    scans: list[ir.Value] = []
    for k, result in enumerate(results):
        if not wanted[k]:
            continue
        masked = body.Where(nonempty, result, nothing, _hint=f"out_{k}")
        if k == 0:  # Y: padded with zero rows to T steps
            tail = body.Sub(steps, run, _hint="pad_steps")
            pads = body.Concat(
                body.int64s([0, 0, 0, 0], hint="no_pad"),
                tail,
                body.int64s([0, 0, 0], hint="no_pad_after"),
                axis=0,
                _hint="pads",
            )
            masked = body.Pad(masked, pads, _hint="y_entry")
        masked.type = ir.TensorType(plan.dtype)
        masked.shape = ir.Shape([None] * (4 if k == 0 else 3))
        scans.append(masked)
    return scans


def _restacked(
    after: Emitter, node: ir.Node, stacked: list[ir.Value], wanted: list[bool]
) -> list[ir.Value | None]:
    """The Loop's stacked entries back in the op's layout: ``Y`` ``[B, T, D, 1, H]`` ->
    ``[T, D, B, H]``, the final states ``[B, D, 1, H]`` -> ``[D, B, H]``."""
    finals: list[ir.Value | None] = []
    taken = iter(stacked)
    for k, old in enumerate(node.outputs):
        if not wanted[k]:
            finals.append(None)
            continue
        entries = next(taken)
        if k == 0:
            squeezed = after.squeeze(entries, [3], hint="y_entries")
            new = after.Transpose(squeezed, perm=[1, 2, 0, 3], _hint="y")
        else:
            squeezed = after.squeeze(entries, [2], hint="state_entries")
            new = after.Transpose(squeezed, perm=[1, 0, 2], _hint="state")
        new.type, new.shape = old.type, old.shape
        finals.append(new)
    return finals
