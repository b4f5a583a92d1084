"""Check every node of the ops seqlower lowers, whether this pipeline lowers or keeps it.

A malformed ``ReverseSequence`` (``time_axis=2``) or ``SequenceMap`` (a body of the wrong arity)
was exit 2 with a clear message where a pipeline lowered it, and where a target kept it
(OpenVINO's native ``ReverseSequence``) it went on to the check and failed there as a mismatch.
This pass, first in every pipeline, asks each node the questions the lowering pass's own
``validate`` asks (the code ``plan`` runs), so the message and the exit code are the same
under every mode and target. It changes nothing.
"""

from __future__ import annotations

import onnx_ir as ir

__all__ = ["ValidateNodes"]


class ValidateNodes(ir.passes.InPlacePass):
    """Raise InvalidNodeError for the first malformed ReverseSequence or SequenceMap."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        from seqlower.passes import LowerReverseSequence, LowerSequenceMap

        for lowering in (LowerReverseSequence(), LowerSequenceMap()):
            for site in lowering.find_sites(model):
                lowering.validate(site.node)
        return ir.passes.PassResult(model, modified=False)
