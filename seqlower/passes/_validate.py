"""The checks every pipeline makes of the nodes seqlower lowers, lowered or kept.

``ValidateNodes`` (first in every pipeline) and the lowering passes' ``plan`` ask the same
questions, so a malformed ``ReverseSequence`` or ``SequenceMap`` is the same exit-2 message
under every mode and target; they live here, not in a pass module, so no pass imports another.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from seqlower.errors import InvalidNodeError
from seqlower.passes._ir import constant_array, int_attr, rank_of, static_dim
from seqlower.passes._shared import body_of

__all__ = ["check_lengths_count", "validate_reverse_sequence", "validate_sequence_map"]


def validate_reverse_sequence(node: ir.Node) -> tuple[int, int, np.ndarray | None]:
    """Raise InvalidNodeError for a malformed node (every pipeline asks, lowered or kept:
    ``ValidateNodes``); its time axis, batch axis and constant lengths otherwise."""
    if len(node.inputs) != 2 or any(v is None for v in node.inputs):
        raise InvalidNodeError(node, "ReverseSequence takes exactly two inputs")
    if len(node.outputs) != 1:
        raise InvalidNodeError(node, "ReverseSequence has exactly one output")
    time_axis, batch_axis = int_attr(node, "time_axis", 0), int_attr(node, "batch_axis", 1)
    for name, axis in (("time_axis", time_axis), ("batch_axis", batch_axis)):
        if axis is None:
            raise InvalidNodeError(node, f"attribute '{name}' must be an int")
    assert time_axis is not None and batch_axis is not None
    if {time_axis, batch_axis} != {0, 1}:
        raise InvalidNodeError(
            node,
            f"time_axis={time_axis} and batch_axis={batch_axis}: one must be 0 and the other 1",
        )
    data, lens_value = node.inputs
    assert data is not None and lens_value is not None
    rank = rank_of(data)
    if rank is not None and rank < 2:
        raise InvalidNodeError(node, f"input '{data.name}' has rank {rank}; it must be >= 2")
    lens_type = lens_value.dtype
    if lens_type is not None and lens_type != ir.DataType.INT64:
        raise InvalidNodeError(
            node,
            f"sequence_lens '{lens_value.name}' is {lens_type.name.lower()}; ReverseSequence "
            "takes int64 lengths (a Cast<to = 7> of them before the node fixes the model)",
        )
    lens_rank = rank_of(lens_value)
    if lens_rank is not None and lens_rank != 1:
        raise InvalidNodeError(
            node, f"sequence_lens '{lens_value.name}' has rank {lens_rank}; it must be 1"
        )
    lens = constant_array(lens_value)
    if lens is not None and lens.ndim != 1:
        raise InvalidNodeError(
            node, f"sequence_lens '{lens_value.name}' has rank {lens.ndim}; it must be 1"
        )
    if lens is not None:
        lens = lens.astype(np.int64)
    count = lens.size if lens is not None else static_dim(lens_value.shape, 0)
    check_lengths_count(node, static_dim(data.shape, batch_axis), count)
    return time_axis, batch_axis, lens


def check_lengths_count(node: ir.Node, batch: object, count: object) -> None:
    """Raise InvalidNodeError when the batch size and the number of lengths are both known
    numbers and differ: the node fails whenever it runs (the kernel wants one length per batch
    entry), so no lowering of it can be right."""
    if isinstance(batch, int) and isinstance(count, int) and batch != count:
        data, lens = node.inputs
        assert data is not None and lens is not None
        raise InvalidNodeError(
            node,
            f"sequence_lens '{lens.name}' holds {count} lengths but input '{data.name}' has "
            f"{batch} batch entries; ReverseSequence needs one length per batch entry",
        )


def validate_sequence_map(node: ir.Node) -> ir.Graph:
    """Raise InvalidNodeError for a malformed node (every pipeline asks, lowered or kept:
    ``ValidateNodes``); its body otherwise."""
    body = body_of(node)
    if len(body.inputs) != len(node.inputs):
        raise InvalidNodeError(
            node,
            f"the body takes {len(body.inputs)} input(s) but the node has "
            f"{len(node.inputs)}; SequenceMap needs one body input per node input",
        )
    if len(body.outputs) != len(node.outputs):
        raise InvalidNodeError(
            node,
            f"the body returns {len(body.outputs)} output(s) but the node has "
            f"{len(node.outputs)}; SequenceMap needs one body output per node output",
        )
    if not node.outputs:
        raise InvalidNodeError(node, "SequenceMap needs at least one output")
    if any(value is None for value in node.inputs):
        raise InvalidNodeError(node, "an input is empty; SequenceMap inputs cannot be omitted")
    return body
