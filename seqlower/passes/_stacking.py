"""A map whose body works element by element, run once on its elements stacked.

``SequenceMap`` lowerings share this: whether a body gives the same on the stacked elements
(:func:`elementwise`), where a sequence already is a stacked tensor (:func:`stacked_source`), and
moving a body into its graph to run on one (:func:`run_on_stack`).
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower.passes._base import Rewrite
from seqlower.passes._dims import BROADCASTING, ELEMENTWISE
from seqlower.passes._ir import constant_array, is_onnx
from seqlower.passes._shared import cut_interface, initializers_as_constants, unit_split

__all__ = ["elementwise", "run_on_stack", "stacked_source"]
#: Elementwise ops whose operands broadcast (numpy-style, aligned on the trailing axes), and
#: Clip and CastLike, whose other operands are scalars or only give a type.
_BROADCASTING = BROADCASTING | {"Clip", "CastLike"}


def elementwise(body: ir.Graph) -> bool:
    """Whether ``body`` (one input, of a declared rank) computes every output from its input
    element by element, so that it gives the same on the elements stacked along a new axis 0:
    each node elementwise, each operand not computed from the input a constant or an outer
    value of rank at most the input's (it never meets the stacked axis), each output computed
    from the input."""
    if len(body.inputs) != 1 or body.inputs[0].shape is None:
        return False
    rank = len(body.inputs[0].shape)
    derived = {id(body.inputs[0])}
    for node in body:
        if not is_onnx(node):
            return False
        if node.op_type == "Constant" and not node.inputs:
            continue
        if node.op_type not in ELEMENTWISE and node.op_type not in _BROADCASTING:
            return False
        if len(node.outputs) != 1:
            return False
        for value in node.inputs:
            if value is None or id(value) in derived:
                continue
            other_rank = None if value.shape is None else len(value.shape)
            producer = value.producer()
            if producer is not None and producer.graph is body and producer.op_type != "Constant":
                return False  # computed in the body but not from the element
            if other_rank is None:
                constant = constant_array(value)
                other_rank = None if constant is None else constant.ndim
            if other_rank is None or other_rank > rank:
                return False
        if not any(value is not None and id(value) in derived for value in node.inputs):
            return False
        derived.add(id(node.outputs[0]))
    return all(id(result) in derived for result in body.outputs)


def stacked_source(sequence: ir.Value, body: ir.Graph) -> ir.Value | None:
    """``x`` when ``sequence`` is ``SplitToSequence(x, axis=0, keepdims=0)`` without sizes and
    ``body`` (a map's) declares its element's rank: then ``x`` already is the elements stacked
    along a new axis 0, whatever their count."""
    split = unit_split(sequence)
    element = body.inputs[0].shape if len(body.inputs) == 1 else None
    if split is None or split[2] or element is None:
        return None
    x, axis, _ = split
    return x if axis in (0, -(len(element) + 1)) else None


def run_on_stack(
    ctx: Rewrite, body: ir.Graph, stacked: ir.Value, count: int | None = None
) -> tuple[list[ir.Value], set[int]]:
    """Move the nodes of ``body`` (a map's, :func:`elementwise`) into ``ctx.node``'s graph ahead of
    it, reading ``stacked`` for the element; returns what its outputs are there, and the ids of
    those the moved nodes compute (not ``stacked`` or an outer value the body returns as is:
    only those may be renamed). Its initializers become Constants and every name is kept where
    the model has it once (sibling bodies may reuse names; one graph may not). ``count``: the
    number of elements stacked, when known (the stacked axis' size in every value's shape)."""
    names, base = ctx.names, ctx.base
    constants = initializers_as_constants(body, ctx.into(body, pool=None), names)
    for inner in body:  # every value the body computes gains the stacked axis in front
        if inner.op_type != "Constant":
            for value in inner.outputs:
                if value.shape is not None:
                    value.shape = ir.Shape([count, *value.shape])
    results = cut_interface(body, {body.inputs[0]: stacked}, list(body.outputs))
    moved = [*constants, *body]
    body.remove(list(body))
    for inner in moved:
        if inner.name:
            inner.name = names.take_over(inner.name, f"{base}_{inner.op_type}")
        for value in inner.outputs:
            value.name = names.take_over(value.name, f"{base}_value")
    ctx.insert(moved)
    computed = {id(value) for inner in moved for value in inner.outputs}
    return results, {id(r) for r in results if id(r) in computed}
