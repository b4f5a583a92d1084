"""Whether a ``Loop``'s body cannot fail on iteration 0, given only its initial states.

``LoopToScan`` (tract's variant) runs a Loop that may run zero times as a ``Scan`` of at least
one iteration, its results masked (no runtime runs a ``Scan`` of zero iterations right). That
extra iteration runs the body on ``i = 0`` and the initial states, which the original never
does when it runs zero times: exact only when the body cannot fail there. Proven here from
static shapes, for bodies of ops that fail only on shapes (broadcasting, ``Unsqueeze``) or on
an index (``Gather`` at the iteration number, 0, along a static axis of at least one row, or at
constant indices in range); anything else (a subgraph, an integer ``Div``, an unknown shape)
is taken as able to fail.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from seqlower.passes._ir import (
    BROADCASTING_CANNOT_FAIL,
    CANNOT_FAIL,
    FLOAT_TYPES,
    constant_array,
    graph_attr,
    int_attr,
    ints_attr,
    is_onnx,
)
from seqlower.passes._types import TypeOracle

__all__ = ["cannot_fail_first"]

Dims = tuple[int, ...]


def cannot_fail_first(loop: ir.Node, types: TypeOracle) -> bool:
    """Whether every node of ``loop``'s body is proven not to fail on iteration 0."""
    body = graph_attr(loop, "body")
    if body is None or len(body.inputs) != len(loop.inputs) or len(body.inputs) < 2:
        return False
    known: dict[int, Dims] = {id(body.inputs[0]): (), id(body.inputs[1]): ()}
    for state, initial in zip(body.inputs[2:], loop.inputs[2:], strict=True):
        dims = None if initial is None else _static(initial, types)
        if dims is None:
            return False
        known[id(state)] = dims
    for node in body:
        if node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
            return False
        if any(a.type == ir.AttributeType.GRAPH for a in node.attributes.values()):
            return False
        shapes = [None if v is None else _dims(v, known, body, types) for v in node.inputs]
        dims = _rule(node, shapes, body.inputs[0], types)
        if dims is None:
            return False
        known[id(node.outputs[0])] = dims
    return True


def _static(value: ir.Value, types: TypeOracle) -> Dims | None:
    array = constant_array(value)
    if array is not None:
        return tuple(array.shape)
    shape = value.shape or types.shape_of(value)
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return tuple(int(d) for d in shape)  # type: ignore[arg-type]


def _dims(
    value: ir.Value, known: dict[int, Dims], body: ir.Graph, types: TypeOracle
) -> Dims | None:
    """A body value's proven shape, or the static shape of a value read from outside (or an
    initializer)."""
    if id(value) in known:
        return known[id(value)]
    if value.graph is body and value.producer() is not None:
        return None  # computed in the body by a node not (yet) proven
    return _static(value, types)


def _rule(
    node: ir.Node, shapes: list[Dims | None], iteration: ir.Value, types: TypeOracle
) -> Dims | None:
    """The output's shape when ``node`` cannot fail on inputs of ``shapes``, else None."""
    op = node.op_type
    if op == "Constant":
        array = constant_array(node.outputs[0])
        return None if array is None else tuple(array.shape)
    if not shapes or any(s is None for s in shapes[:1]):
        return None
    first = shapes[0]
    assert first is not None
    if op in CANNOT_FAIL:
        source = node.inputs[0]
        dtype = None if source is None else types.type_of(source)
        if op == "Cast" and (dtype is None or dtype.dtype == ir.DataType.STRING):
            return None  # a string that does not parse
        return first
    if op in BROADCASTING_CANNOT_FAIL:
        if any(s is None for s in shapes):
            return None
        source = node.inputs[0]
        dtype = None if source is None else types.type_of(source)
        if op == "Div" and (dtype is None or dtype.dtype not in FLOAT_TYPES):
            return None  # an integer division by zero
        try:
            return tuple(np.broadcast_shapes(*shapes))  # type: ignore[arg-type]
        except ValueError:
            return None
    if op == "Unsqueeze":
        axes = ints_attr(node, "axes")
        if axes is None and len(node.inputs) > 1:
            array = constant_array(node.inputs[1])
            axes = None if array is None else [int(a) for a in array.reshape(-1)]
        rank = len(first) + len(axes or [])
        if not axes or any(not -rank <= a < rank for a in axes):
            return None
        inserted = {a % rank for a in axes}
        if len(inserted) != len(axes):
            return None
        rest = iter(first)
        return tuple(1 if k in inserted else next(rest) for k in range(rank))
    if op == "Gather" and len(shapes) == 2 and shapes[1] is not None:
        return _gather(node, first, shapes[1], iteration)
    return None


def _gather(node: ir.Node, data: Dims, index: Dims, iteration: ir.Value) -> Dims | None:
    """``Gather`` at the iteration number (0 on iteration 0) or at constant indices, in range
    on a static axis."""
    axis = int_attr(node, "axis", 0)
    if axis is None or not -len(data) <= axis < len(data):
        return None
    axis %= len(data)
    size = data[axis]
    source = node.inputs[1]
    while source is not None and is_onnx(source.producer(), "Identity"):
        source = source.producer().inputs[0]  # type: ignore[union-attr]
    if source is iteration:
        ok = size >= 1
    else:
        array = None if source is None else constant_array(source)
        ok = array is not None and bool(np.all((array >= -size) & (array < size)))
    return (*data[:axis], *index, *data[axis + 1 :]) if ok else None
