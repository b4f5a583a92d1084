"""Lower only the ``ReverseSequence`` nodes onnxruntime has no kernel for (target ``onnxruntime``).

onnxruntime runs ``ReverseSequence`` natively for every tensor type but bfloat16, complex64 and
complex128 (``NOT_IMPLEMENTED``), and its kernel is faster than any decomposition: 1.25-4.3x
for slices of 1 or 8 elements (``benchmarks/reverse_sequence.py --inner``). Lowering for
onnxruntime therefore keeps the native kernel and rewrites, in the row ``Gather`` form
(the faster one there), only the nodes whose data type onnxruntime lacks, or whose type is not
known (asking for it may run ONNX's shape inference once; a node whose type stays unknown is
lowered, which runs everywhere).
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from seqlower.passes._base import Site
from seqlower.passes._types import TypeOracle, element_dtype
from seqlower.passes.default.lower_reverse_sequence import LowerReverseSequence

__all__ = ["LowerReverseSequenceGaps"]

#: Element types onnxruntime 1.32's ReverseSequence kernel does not take.
ONNXRUNTIME_LACKS = frozenset({ir.DataType.BFLOAT16, ir.DataType.COMPLEX64, ir.DataType.COMPLEX128})


class LowerReverseSequenceGaps(LowerReverseSequence):
    """:class:`LowerReverseSequence` (row form) for the nodes onnxruntime cannot run; the
    others are kept."""

    takes_all = False

    def __init__(self) -> None:
        super().__init__(form="gather")

    def plan(self, site: Site, types: TypeOracle) -> Any:
        data = site.node.inputs[0] if site.node.inputs else None
        dtype = None if data is None else element_dtype(types.type_of(data))
        if dtype is not None and dtype not in ONNXRUNTIME_LACKS:
            return None  # onnxruntime's own kernel: kept
        return super().plan(site, types)
