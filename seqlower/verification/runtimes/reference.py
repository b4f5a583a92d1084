"""``onnx.reference`` as the oracle of last resort, with the corrected ops of
:mod:`seqlower.verification._reference_ops`.
"""

from __future__ import annotations

import onnx

from seqlower.verification.runtimes.base import (
    Oracle,
    Runner,
)


class Reference(Oracle):
    """``onnx.reference`` with corrected SequenceMap and Loop; pure Python, so slow, and it
    cannot be stopped mid-run (past the time limit its thread is abandoned)."""

    name = "onnx.reference"
    package = "onnx"

    def load(self, model: onnx.ModelProto) -> Runner:
        from seqlower.verification._reference_ops import Evaluator

        evaluator = Evaluator(model)
        return Runner(self.name, lambda feeds: list(evaluator.run(None, dict(feeds))))
