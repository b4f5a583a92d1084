"""onnx2torch as a target oracle (``--target onnx2torch``): the model converted to a torch
module, run without gradients."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from seqlower.verification.runtimes.base import (
    Oracle,
    Runner,
    feed_names,
)


def import_onnx2torch() -> Any:
    """onnx2torch, imported. It imports torchvision for its NonMaxSuppression and RoiAlign
    converters alone; a torchvision that does not load beside a CPU torch (the CUDA wheels) is
    stood in for, so every other op converts (those two then fail when converted)."""
    try:
        import torchvision  # noqa: F401
    except Exception:
        import types

        stub = types.ModuleType("torchvision")
        stub.ops = types.SimpleNamespace(nms=None, roi_align=None)  # type: ignore[attr-defined]
        sys.modules["torchvision"] = stub
        sys.modules["torchvision.ops"] = stub.ops
    import onnx2torch

    return onnx2torch


class Onnx2Torch(Oracle):
    """onnx2torch: the model converted to a ``torch.nn.Module`` and run in torch on the CPU
    without gradients, as a PyTorch user deploys it. Conversion is at load (an op it has no
    converter for is a refusal); outputs in graph order."""

    name = "onnx2torch"
    package = "onnx2torch"
    runs_on = "torch"
    extra = "onnx2torch"

    def importer(self) -> None:
        import_onnx2torch()

    def load(self, model: onnx.ModelProto) -> Runner:
        import torch

        convert = import_onnx2torch().convert
        copy = onnx.ModelProto()
        copy.CopyFrom(model)  # the converter may annotate what it is given
        module = convert(copy).eval()
        names = feed_names(model)

        def run(feeds: Mapping[str, Any]) -> list[Any]:
            arrays = [torch.from_numpy(np.array(feeds[name], copy=True)) for name in names]
            with torch.no_grad():
                out = module(*arrays)
            outputs = out if isinstance(out, (list, tuple)) else [out]
            return [o.numpy() if isinstance(o, torch.Tensor) else np.asarray(o) for o in outputs]

        return Runner(self.label(), run)
