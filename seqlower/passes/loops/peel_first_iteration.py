"""A ``Loop`` whose states change shape on its first iteration, with that iteration run before it
(targets ``tract``, ``openvino`` and the converters that unroll, before their other loop passes).

A Scan's states keep their shape (onnxruntime preallocates them, tract fixes their facts), but a
Loop's need not: Paddle2ONNX starts a state the body only writes as a scalar 0 and the body returns
it as a ``[3]`` or a ``[1, 4]``; other exporters start a state of size 0 that the first iteration
gives its size. From the second iteration on such a state keeps the shape the body returns
(OpenVINO runs no Loop whose state changes rank either: "dynamic rank"). So when the Loop is proven
to run at least once (``runs``: ``M`` at least 1 and its initial condition true, each fixed when
lowering or absent), its first iteration is run before it: a copy of the body inlined with the
iteration number 0, the initial condition and the initial states. The Loop then runs from there:
``M - 1`` iterations, the copy's condition as its initial condition, the copy's states as its
initial states (at their shapes after one iteration), and one added to the iteration number where
the body reads it. Each scan output is the copy's row in front of the Loop's rows. A Loop that may
run no iteration is left, with the reason named: its outputs' rank would then depend on the data.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site, rewire
from seqlower.passes._emit import Emitter
from seqlower.passes._induction import Condition
from seqlower.passes._ir import NO_LOOP, block, blocked, constant_array, is_static, loop_body
from seqlower.passes._shared import inline_copy, prepend
from seqlower.passes._types import TypeOracle
from seqlower.passes.loops._scan_plan import LoopShapes, changed_shape, shape_text
from seqlower.passes.loops._zero_trips import runs

__all__ = ["PeelFirstIteration"]

_INT64_MAX = 2**63 - 1


@dataclasses.dataclass
class _Plan:
    body: ir.Graph
    carried: int
    #: The states that change shape on the first iteration: their shape after it, by state.
    changed: dict[int, ir.Shape]
    #: Counters of a constant start: their value after the first iteration, by state.
    counters: dict[int, np.ndarray]


class PeelFirstIteration(NodeLoweringPass[_Plan]):
    """Loops whose states change shape on their first iteration, that iteration run before them
    (module docstring)."""

    op_type = "Loop"
    takes_all = False

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self._shapes = LoopShapes(model)
        return super().call(model)

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        body = loop_body(node)
        carried = len(node.inputs) - 2
        if body is None or carried < 1 or any(v is None for v in node.inputs[2:]):
            return None
        changed: dict[int, ir.Shape] = {}
        described: list[str] = []
        for k in range(carried):
            found = changed_shape(node.inputs[2 + k], body.outputs[1 + k], types, self._shapes)
            if found is not None and body.inputs[2 + k].uses():
                changed[k] = found[1]
                name = body.inputs[2 + k].name or f"state {k}"
                described.append(
                    f"'{name}' starts of shape {shape_text(found[0])} and the body returns it "
                    f"of shape {shape_text(found[1])}"
                )
        if not changed:
            return None
        # ``[]``: a Loop without M whose condition the body computes runs its first iteration
        # whenever its initial condition is true (what ``runs`` proves).
        if not runs(node, [], site.opset, self._shapes.inferred):
            if blocked(node, NO_LOOP) is None:
                block(
                    node,
                    f"its state {described[0]}, and a Scan's states keep their shape: its first "
                    "iteration run before it would fix them, but it may run no iteration (its "
                    "M or initial condition is not proven to let one run), and its outputs' "
                    "rank would then depend on the data",
                    NO_LOOP,
                )
            return None
        return _Plan(body, carried, changed, self._counters(node, body, types))

    def _counters(self, node: ir.Node, body: ir.Graph, types: TypeOracle) -> dict[int, np.ndarray]:
        """The states the induction analysis proves step by a constant from a constant start:
        their value after one iteration is a constant, so the loop's count stays one known when
        lowering (tract folds a Range of constants; computed, it fails to type the Scan)."""
        analysis = Condition(node, body, types)
        found: dict[int, np.ndarray] = {}
        for k in range(len(node.inputs) - 2):
            step = analysis.step(k)
            start = constant_array(node.inputs[2 + k])
            result = body.outputs[1 + k]
            shape = result.shape or self._shapes.inferred(result)
            if step is None or start is None or shape is None or not is_static(shape):
                continue
            dims = [int(d) for d in shape]  # type: ignore[arg-type]
            if math.prod(dims) != start.size or not analysis.is_integer(k):
                continue
            found[k] = (start + np.array(step, start.dtype)).astype(start.dtype).reshape(dims)
        return found

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, body, carried = ctx.node, plan.body, plan.carried
        results, made = _first_iteration(ctx, plan)
        m = constant_array(node.inputs[0]) if node.inputs[0] is not None else None
        if m is not None and m.size == 1 and int(m.reshape(-1)[0]) == 1:
            _one_iteration(
                ctx, results, made, carried
            )  # no Loop left (none unrolls a Scan of none)
            return
        for k, shape in plan.changed.items():  # the body's input for it: its shape from now on
            body.inputs[2 + k].shape = shape
        _shift_iteration(ctx, body)
        emit = ctx.before()
        finals = [
            ir.Value(name=ctx.names.fresh(f"{v.name or ctx.base}_rest")) for v in node.outputs
        ]
        for k, (new, old) in enumerate(zip(finals, node.outputs, strict=True)):
            new.type = old.type or body.outputs[1 + k].type
            if k < carried:
                new.shape = plan.changed.get(k, old.shape)
        del node.attributes["body"]
        emit.Loop(
            _one_fewer(emit, node.inputs[0]),
            results[0],
            *results[1 : 1 + carried],
            body=body,
            _outputs=finals,
            _name=node.name,
            _doc_string=node.doc_string,
        )
        outputs = list(finals[:carried])
        for j, (rows, old) in enumerate(zip(finals[carried:], node.outputs[carried:], strict=True)):
            row = emit.unsqueeze(results[1 + carried + j], [0], hint="first_row")
            whole = emit.Concat(row, rows, axis=0, _hint=f"{rows.name}_all")
            whole.type, whole.shape = old.type, old.shape
            outputs.append(whole)
        ctx.replace(outputs, rename=True)


def _one_iteration(ctx: Rewrite, results: list[ir.Value], made: set[int], carried: int) -> None:
    """The Loop replaced by its one iteration, run before it: each state the copy's, each scan
    output the copy's row (``Identity`` of what the copy passes through, so that a graph output
    keeps its name)."""
    node, emit = ctx.node, ctx.before()
    outputs = []
    for k, old in enumerate(node.outputs):
        new = results[1 + k]
        if k >= carried:
            new = emit.unsqueeze(new, [0], hint="rows")
        elif id(new.producer()) not in made:
            new = emit.Identity(new, _hint="state")
        new.type, new.shape = old.type or new.type, old.shape or new.shape
        outputs.append(new)
    ctx.replace(outputs, rename=True)


def _first_iteration(ctx: Rewrite, plan: _Plan) -> tuple[list[ir.Value], set[int]]:
    """The body's copy put before the Loop, run on iteration 0, the initial condition and the
    initial states; returns what its outputs are there (a counter of a constant start: its
    value after one iteration, as a constant) and the ids of the nodes it put there."""
    node, body = ctx.node, plan.body
    first = ctx.before(prefix=f"{ctx.base}_first")
    iteration = first.int64s(0, hint="iteration")
    cond0 = node.inputs[1]
    if cond0 is None:
        cond0 = first.constant(np.array(True), hint="runs")
    counted = {k: first.constant(v, hint="counter") for k, v in plan.counters.items()}
    inserted = ctx.insert()
    arguments = [iteration, cond0, *node.inputs[2:]]
    copied, results = inline_copy(ctx, body, arguments, f"{ctx.base}_first")  # type: ignore[arg-type]
    ctx.graph.insert_before(node, copied)
    inside = {id(n) for n in copied}
    for k, counter in counted.items():
        producer = results[1 + k].producer()
        if producer is not None and id(producer) in inside:  # every reader reads the constant
            rewire(results[1 + k], counter)
            results[1 + k] = counter
    return results, inside | {id(n) for n in inserted}


def _one_fewer(emit: Emitter, m: ir.Value | None) -> ir.Value | None:
    """``M - 1`` (a constant when ``M`` is; INT64_MAX, jax2onnx's "no bound", stays itself)."""
    if m is None:
        return None
    array = constant_array(m)
    if array is not None and array.size == 1:
        count = int(array.reshape(-1)[0])
        left = count if count == _INT64_MAX else count - 1
        return emit.constant(np.array(left, array.dtype).reshape(array.shape), hint="M")
    rest = emit.Sub(m, emit.constant(np.array(1, np.int64), hint="one"), _hint="rest")
    rest.dtype = ir.DataType.INT64
    return rest


def _shift_iteration(ctx: Rewrite, body: ir.Graph) -> None:
    """Where the body reads its iteration number, it reads one more (the Loop now starts at the
    original's second iteration)."""
    old = body.inputs[0]
    if not old.uses() and not old.is_graph_output():
        return
    inside = ctx.into(body, pool="own")
    new = ir.Value(name=ctx.names.fresh(old.name or "iteration"), type=old.type, shape=old.shape)
    one = inside.constant(np.array(1, np.int64), hint="one")
    shifted = inside.Add(new, one, _hint="iteration")
    shifted.type, shifted.shape = old.type, old.shape
    rewire(old, shifted)
    inputs = list(body.inputs)
    body.inputs.clear()
    body.inputs.extend([new, *inputs[1:]])
    prepend(body, inside.nodes)
