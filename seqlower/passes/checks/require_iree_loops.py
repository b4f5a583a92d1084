"""Check that IREE runs, and runs right, every ``Loop`` and ``Scan`` left, naming each one it
does not (the last step of the ``iree`` target).

IREE 3.13.0 (torch-mlir's ONNX importer, ``iree-compile`` for ``llvm-cpu``), measured one form
at a time (``tests/targets/test_iree.py``):

- a ``Scan`` whose length is known only at run time compiles and runs, but each scan output
  has one row (``(1, 6, 10)`` for ``(4, 6, 10)``): wrong results, no error. One of a static
  length runs right.
- a ``Loop`` runs only as a for-loop of states: torch-mlir converts no ``Loop`` with scan
  outputs (llvm/torch-mlir#3988) and none without a trip count ``M``; and it ignores the
  body's condition: a loop that stops on data runs all ``M`` iterations (wrong results, no
  error). So a ``Loop`` is left only with ``M``, an initial condition that is a constant true
  and a body that passes its condition through.
- a ``Loop`` state that grows by ``Concat`` from an initial value ONNX's shape inference finds
  empty (``float[0]``: the seed of a sequence stacked into a tensor) keeps that shape: the loop
  returns the empty seed (wrong results, no error). One grown from a value of a size known not
  to be 0 runs right; one whose size is unknown when lowering is named too.

The row's passes give loops that form where they can (``freeze-bounded-loops``,
``explicit-loop-counts``, ``scan-outputs-as-states``) and unroll those of a constant count; this
pass raises :class:`~seqlower.errors.TargetError` naming what remains before the check (which
would otherwise fail, or, for the wrong results, differ on IREE), and changes nothing.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower.errors import TargetError, describe_node
from seqlower.passes._induction import passes_through
from seqlower.passes._ir import NO_LOOP, blocked, constant_array, graph_attr, is_onnx, model_nodes

__all__ = ["RequireIreeLoops"]

#: The version measured.
IREE = "IREE 3.13.0"


class RequireIreeLoops(ir.passes.InPlacePass):
    """Raise TargetError naming every ``Scan`` of a run-time length and every ``Loop`` that
    is not a for-loop of states with a trip count."""

    target = IREE

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        blockers = []
        for node in model_nodes(model):
            why = None
            if is_onnx(node, "Scan"):
                why = _scan_problem(node)
            elif is_onnx(node, "Loop"):
                why = _loop_problem(node)
            if why:
                reason = blocked(node, NO_LOOP)
                blockers.append(
                    f"{describe_node(node)} remains: {why}" + (f" ({reason})" if reason else "")
                )
        if blockers:
            raise TargetError(self.target, blockers)
        return ir.passes.PassResult(model, modified=False)


def _scan_problem(node: ir.Node) -> str | None:
    body = graph_attr(node, "body")
    scanned = node.attributes.get("num_scan_inputs")
    if body is None or scanned is None or scanned.is_ref():
        return None  # the checker refuses it; IREE would say so
    states = len(node.inputs) - int(scanned.value)
    if len(body.outputs) <= states:
        return None  # no scan outputs: IREE's states are right
    axes_attr = node.attributes.get("scan_input_axes")
    axes = [] if axes_attr is None or axes_attr.is_ref() else list(axes_attr.value)
    for k, value in enumerate(node.inputs[states:]):
        if value is None or value.shape is None:
            continue
        axis = axes[k] if k < len(axes) else 0
        axis = axis + len(value.shape) if axis < 0 else axis
        if 0 <= axis < len(value.shape) and isinstance(value.shape[axis], int):
            return None  # the length is static
    return (
        f"{IREE} returns one row for each scan output of a Scan whose length is known only at "
        "run time (wrong results); one of a static length is unrolled or runs right"
    )


def _loop_problem(node: ir.Node) -> str | None:
    body = graph_attr(node, "body")
    if body is None:
        return None
    states = len(node.inputs) - 2
    if len(body.outputs) > states + 1:
        return (
            f"{IREE} converts no Loop with scan outputs (llvm/torch-mlir#3988); those of a "
            "bounded count become states, those of a constant count are unrolled"
        )
    if not node.inputs or node.inputs[0] is None:
        return f"{IREE} converts no Loop without a trip count M"
    start = node.inputs[1] if len(node.inputs) > 1 else None
    initial = None if start is None else constant_array(start)
    started = start is None or (initial is not None and initial.size == 1 and bool(initial.all()))
    if not started or not passes_through(body.outputs[0], body.inputs[1]):
        return (
            f"{IREE} ignores a Loop's condition (it runs all M iterations: wrong results); only "
            "a Loop whose condition is true throughout runs right"
        )
    for k in range(states):
        grown = body.outputs[1 + k]
        while is_onnx(grown.producer(), "Identity"):
            grown = grown.producer().inputs[0]  # type: ignore[union-attr,assignment]
        producer = grown.producer()
        if not (is_onnx(producer, "Concat") and body.inputs[2 + k] in producer.inputs):
            continue
        seed = node.inputs[2 + k]
        shape = None if seed is None else seed.shape
        if shape is None or not all(isinstance(d, int) and d > 0 for d in shape):
            return (
                f"its state '{body.inputs[2 + k].name}' grows by a Concat from a value that may "
                f"be empty, and {IREE} returns such a state as it started when ONNX's shape "
                "inference finds it empty (wrong results)"
            )
    return None
