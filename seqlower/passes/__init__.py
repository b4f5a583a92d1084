"""seqlower's lowering passes, each an ``onnx_ir.passes.InPlacePass`` usable in any PassManager.

``PASSES`` maps the names the CLI and :func:`seqlower.lower` accept to the pass classes, in the
order the default pipeline runs them.
"""

from __future__ import annotations

import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass
from seqlower.passes.lower_reverse_sequence import LowerReverseSequence
from seqlower.passes.lower_sequence_map import LowerSequenceMap

__all__ = ["PASSES", "LowerReverseSequence", "LowerSequenceMap", "NodeLoweringPass", "create_pass"]

#: Lowering passes by name, in default pipeline order.
PASSES: dict[str, type[ir.passes.InPlacePass]] = {
    "lower-sequence-map": LowerSequenceMap,
    "lower-reverse-sequence": LowerReverseSequence,
}


def create_pass(name: str) -> ir.passes.InPlacePass:
    """A new instance of the pass registered as ``name``."""
    try:
        return PASSES[name]()
    except KeyError:
        known = ", ".join(PASSES)
        raise ValueError(f"unknown pass '{name}'; known passes: {known}") from None
