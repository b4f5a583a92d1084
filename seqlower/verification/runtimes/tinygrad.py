"""tinygrad's ONNX runner on its CPU device as a target oracle (``--target tinygrad``)."""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from seqlower._graphs import proto_graphs
from seqlower.verification.runtimes.base import (
    Oracle,
    Runner,
)


class Tinygrad(Oracle):
    """tinygrad's ONNX runner (``tinygrad.nn.onnx.OnnxRunner``) on its CPU device, which
    compiles each kernel with clang (``CC``). A model with an op it lacks is refused at load,
    as its runner would refuse it at the op. A new runner each run: one keeps the symbolic
    sizes and the shape-derived constants of its first run. Its disk cache is off: the check
    runs each run in a new thread, and the cache's SQLite connection serves only one."""

    name = "tinygrad"
    package = "tinygrad"
    extra = "runtimes"

    @staticmethod
    def missing() -> str | None:
        """Why tinygrad cannot run here though installed: its CPU device needs clang."""
        compiler = os.environ.get("CC", "clang")
        if shutil.which(compiler) is None:
            return (
                f"tinygrad's CPU device compiles with {compiler}, which is not on PATH "
                "(apt-get install clang, or CC=/path/to/clang)"
            )
        return None

    def load(self, model: onnx.ModelProto) -> Runner:
        reason = self.missing()
        if reason is not None:
            raise RuntimeError(reason)
        from tinygrad import Tensor
        from tinygrad.helpers import Context
        from tinygrad.nn.onnx import onnx_ops

        ops = {node.op_type for graph in proto_graphs(model.graph) for node in graph.node}
        lacking = sorted(ops - set(onnx_ops))
        if lacking:
            raise NotImplementedError(f"tinygrad has no {', '.join(lacking)}")
        data = np.frombuffer(model.SerializeToString(), dtype=np.uint8)
        names = [o.name for o in model.graph.output]

        def run(feeds: Mapping[str, Any]) -> list[Any]:
            from tinygrad.nn.onnx import OnnxRunner

            with Context(DEV="CPU", CACHELEVEL=0), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # its dtype notes, not errors
                runner = OnnxRunner(Tensor(data, device="CPU"))
                out = runner({name: _tinygrad_feed(value) for name, value in feeds.items()})
                return [_tinygrad_numpy(out[name]) for name in names]

        return Runner(self.label(), run)


def _tinygrad_feed(value: Any) -> Any:
    """A feed as tinygrad's runner takes it: an array, a list of them (a sequence), or None
    (an empty optional)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [np.asarray(v) for v in value]
    return np.asarray(value)


def _tinygrad_numpy(value: Any) -> Any:
    """A tinygrad output as numpy (a sequence output as a list of arrays)."""
    if isinstance(value, (list, tuple)):
        return [_tinygrad_numpy(v) for v in value]
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)
