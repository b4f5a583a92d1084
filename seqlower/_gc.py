"""Pausing Python's cyclic garbage collector while a whole model is in memory."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["gc_paused"]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Run the body with the cyclic collector off; restore its previous state afterwards.

    Reading, lowering and writing a model create millions of long-lived objects (an onnx_ir
    node is a dozen), so the collector's full passes keep walking all of them while none is
    garbage: on a 116k-node model they took over 40% of a run. Reference counting still frees
    everything acyclic at once; cycles wait until the collector is back on.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
