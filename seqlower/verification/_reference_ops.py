"""Corrected ``onnx.reference`` implementations, for the
:class:`~.runtimes.reference.Reference` oracle.

onnx 1.23's reference runtime gets these wrong, and each is something a valid model does:

- ``SequenceMap``: the body cannot read outer-scope values ("Unable to find input 'sizes' in
  known results"); an empty input sequence crashes (no outputs to build from); more than one
  additional sequence is zipped wrongly.
- ``Loop``: an omitted condition runs zero iterations; scan outputs are joined with
  ``np.vstack`` (wrong for scalars and for rank 2 and up); a zero-trip loop with scan outputs
  crashes.
- ``Optional``: wraps its input in a list, so an empty ``Optional()`` holds ``[None]`` and
  ``OptionalHasElement`` of it is true (and ``OptionalGetElement`` returns the list).
- ``SequenceInsert``: the position is taken modulo the length, so inserting at ``n`` (the end)
  inserts at the front and a position out of ``[-n, n]`` inserts somewhere instead of failing
  (onnxruntime: "Invalid sequence index").

:class:`Evaluator` is a ``ReferenceEvaluator`` that uses them everywhere: in subgraphs, and in
model-local functions too (onnx builds those without the ``new_ops`` it was given).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

__all__ = ["Evaluator", "Loop", "Optional", "SequenceInsert", "SequenceMap"]


class SequenceMap(OpRun):
    """Runs the body once per element, outer-scope values visible, empty sequences mapped to
    empty sequences."""

    op_domain = ""

    def need_context(self) -> bool:
        return True

    def _run(self, first: list[Any], *extra: Any, context: Any = None, **_: Any) -> tuple:
        body = self.body  # type: ignore[attr-defined]  # set by OpRun from the attribute
        names = body.input_names
        outputs: list[list[Any]] = [[] for _ in body.output_names]
        for i in range(len(first)):
            feeds = dict(context or {})
            feeds[names[0]] = first[i]
            for name, value in zip(names[1:], extra, strict=False):
                feeds[name] = value[i] if isinstance(value, list) else value
            for out, value in zip(outputs, body.run(None, feeds), strict=True):
                out.append(value)
        return tuple(outputs)


class Loop(OpRun):
    """ONNX's Loop: an omitted condition is true, scan outputs are stacked on a new axis, and a
    zero-trip loop gives empty scan outputs shaped from the body's declared output types."""

    op_domain = ""

    def need_context(self) -> bool:
        return True

    def _run(self, trip: Any, cond: Any, *initial: Any, context: Any = None, **_: Any) -> tuple:
        body = self.body  # type: ignore[attr-defined]  # set by OpRun from the attribute
        names = body.input_names
        outs = body.output_names
        carried = len(names) - 2
        scans = len(outs) - 1 - carried
        state = dict(context or {})
        state.update(zip(names[2:], initial, strict=False))
        values = list(initial)
        stacked: list[list[Any]] = [[] for _ in range(scans)]
        keep_going = True if cond is None else bool(np.asarray(cond))
        limit = None if trip is None else int(np.asarray(trip))
        it = 0
        while keep_going and (limit is None or it < limit):
            state[names[0]] = np.array(it, dtype=np.int64)
            state[names[1]] = np.array(keep_going)
            results = body.run(None, state)
            keep_going = bool(np.asarray(results[0]))
            values = list(results[1 : 1 + carried])
            state.update(zip(names[2:], values, strict=False))
            for k in range(scans):
                stacked[k].append(np.asarray(results[1 + carried + k]))
            it += 1
        scan_values = []
        for k in range(scans):
            if stacked[k]:
                scan_values.append(np.stack(stacked[k]))
            else:
                scan_values.append(_empty_scan(body.output_types[1 + carried + k]))
        return (*values, *scan_values)


def _empty_scan(type_proto: onnx.TypeProto | None) -> np.ndarray:
    """A zero-length scan output: shape (0, *declared element shape), 0 where not declared."""
    tensor = type_proto.tensor_type if type_proto is not None else None
    if tensor is None or not tensor.elem_type:
        return np.empty((0,), np.float32)
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
    dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tensor.shape.dim]
    return np.empty((0, *dims), dtype)


class Optional(OpRun):
    """The optional as its value (``None`` when empty), as the other optional ops read it."""

    def _run(self, x: Any = None, type: Any = None) -> tuple[Any]:
        return (x,)

    def _check_and_fix_outputs(self, res: tuple[Any, ...]) -> tuple[Any, ...]:
        return res if len(res) == 1 and res[0] is None else super()._check_and_fix_outputs(res)


class SequenceInsert(OpRun):
    """Inserts before position ``p`` in ``[-n, n]`` (negative: ``p + n``; ``n``: appends, as
    without a position); any other position is an error."""

    op_domain = ""

    def _run(self, sequence: list[Any], tensor: Any, position: Any = None) -> tuple:
        result = list(sequence)
        if position is None:
            result.append(tensor)
            return (result,)
        p = int(np.asarray(position).reshape(()))
        if not -len(result) <= p <= len(result):
            raise IndexError(
                f"SequenceInsert: position {p} out of range for {len(result)} elements"
            )
        result.insert(p + len(result) if p < 0 else p, tensor)
        return (result,)


CORRECTED = (SequenceMap, Loop, Optional, SequenceInsert)


class Evaluator(ReferenceEvaluator):
    """A ReferenceEvaluator with the corrected ops in every scope and function, whose errors
    name the failing node as onnxruntime's do (``running Op node. Name:'n'``), innermost last,
    so the check can say which node rejected which inputs."""

    def __init__(self, proto: Any, new_ops: Any = None, **kwargs: Any) -> None:
        super().__init__(proto, new_ops=list(new_ops or CORRECTED), **kwargs)
        for op in getattr(self, "rt_nodes_", None) or []:
            _name_errors(op)


def _name_errors(op: OpRun) -> None:
    run = op.run
    node = op.onnx_node

    def named(*args: Any, **kwargs: Any) -> Any:
        try:
            return run(*args, **kwargs)
        except Exception as e:
            text = str(e).strip()
            first = text.splitlines()[0] if text else type(e).__name__
            raise RuntimeError(
                f"Non-zero status code returned while running {node.op_type} node. "
                f"Name:'{node.name}' Status Message: {first}"
            ) from e

    op.run = named  # type: ignore[method-assign]
