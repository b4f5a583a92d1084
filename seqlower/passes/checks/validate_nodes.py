"""Check every node of the ops seqlower lowers, whether this pipeline lowers or keeps it.

A malformed ``ReverseSequence`` (``time_axis=2``) or ``SequenceMap`` (a body of the wrong arity)
was exit 2 with a clear message where a pipeline lowered it, and where a target kept it
(OpenVINO's native ``ReverseSequence``) it went on to the check and failed there as a mismatch.
This pass, first in every pipeline, asks each node the questions the lowering pass's ``plan``
asks (``_validate.py``), so the message and the exit code are the same under every mode and
target. It changes nothing.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from seqlower.passes._base import Census, NodeLoweringPass, find_sites
from seqlower.passes._ir import is_onnx
from seqlower.passes._validate import validate_reverse_sequence, validate_sequence_map

__all__ = ["ValidateNodes"]


class ValidateNodes(ir.passes.InPlacePass):
    """Raise InvalidNodeError for the first malformed ReverseSequence or SequenceMap."""

    def __init__(self) -> None:
        super().__init__()
        self._hands_to: NodeLoweringPass[Any] | None = None

    def hand_walk_to(self, following: NodeLoweringPass[Any]) -> None:
        """Walk the model as the kit's passes do and give the walk to ``following``, the pass
        the row runs right after this one (this one changes nothing)."""
        self._hands_to = following

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        # One walk for both ops (every pipeline's first pass: on big models a walk counts);
        # the ReverseSequence nodes are asked first, as when each op had a walk of its own.
        following = self._hands_to
        census = None if following is None else Census(model)
        if census is None:
            sites = find_sites(model, _onnx_op, _VALIDATED)
        else:
            sites = census.sites(_onnx_op, _VALIDATED)
        for site in sites:
            if site.node.op_type == "ReverseSequence":
                validate_reverse_sequence(site.node)
        for site in sites:
            if site.node.op_type == "SequenceMap":
                validate_sequence_map(site.node)
        if following is not None:
            following.take_walk(census)
        return ir.passes.PassResult(model, modified=False)


_VALIDATED = frozenset(["ReverseSequence", "SequenceMap"])


def _onnx_op(node: ir.Node) -> bool:
    return is_onnx(node)
