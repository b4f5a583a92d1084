"""Expand the ONNX function ops a converter cannot convert, at the opset it converts at.

onnx2torch 1.5.15 has no converter for many function ops (``Gelu``, ``Mish``,
``GroupNormalization``, ...), and ops newer than the opset the model is converted to for it
(``Gelu`` is of opset 20, the target converts to 17) made the conversion fail outright
(``--opset 18: Gelu does not exist at opset 18``). Their ONNX bodies are made of ops it
converts: each node of a function op the converter's table lacks, or that does not exist at the
target row's ``max_opset``, is expanded (:class:`ExpandFunctionOps`, the body for the opset in
force, re-stamped with the model). Ops that are no functions are left for the target's check to
name.
"""

from __future__ import annotations

from typing import ClassVar

import onnx_ir as ir

from seqlower.passes._base import ONNX_DOMAINS
from seqlower.passes._ir import SEQUENCE_OPS
from seqlower.passes._op_versions import since_version
from seqlower.passes.targets._converter_ops import ONNX2TORCH
from seqlower.passes.targets.expand_function_ops import ExpandFunctionOps

__all__ = ["ExpandUnconvertedFunctionOps"]


class ExpandUnconvertedFunctionOps(ExpandFunctionOps):
    """``ExpandFunctionOps`` for the nodes onnx2torch cannot convert (module docstring)."""

    #: The converter's table (op -> since_versions) and the target row it converts for.
    table: ClassVar[dict[str, tuple[int, ...]]] = ONNX2TORCH
    target: ClassVar[str] = "onnx2torch"

    def __init__(self) -> None:
        super().__init__(None)
        from seqlower.targets import get_target

        self._opset = get_target(self.target).max_opset

    def matches(self, node: ir.Node) -> bool:
        if node.domain not in ONNX_DOMAINS or node.op_type in SEQUENCE_OPS:
            return False  # SequenceMap is a function too: the sequence-free passes lower it
        if node.op_type not in self.table:
            return True
        return self._opset is not None and since_version(node.op_type, self._opset) is None
