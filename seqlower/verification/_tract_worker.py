"""The child process tract runs in for the check (:class:`~.runtimes.tract.Tract`).

tract 0.23.9 aborts the whole process on some models (a panic in ``tract_state_run``: its
``Gather`` on an out-of-range index) and hangs on others (ONNX's expanded
``LinearAttention`` lowered for it ran over 10 minutes); neither can be stopped from a thread.
Run by path (``python _tract_worker.py``, importing numpy and tract only), it reads pickled
requests on stdin and answers each on stdout: ``("load", key, model_bytes, concrete)``,
``("run", key, arrays)``, ``("drop", key)``; answers are ``("ok", value)`` or
``("error", kind, message)`` with kind ``load`` (tract refused the model, or typing it with
these inputs' shapes) or ``run``. The parent kills it past its time limit or on Ctrl-C, and
it dies with the parent however the parent ends (:mod:`seqlower._signals`, loaded by path).
"""

from __future__ import annotations

import os
import pickle
import sys
import tempfile
from typing import Any

import numpy as np

_DTYPES = {
    "f2": "f16", "f4": "f32", "f8": "f64", "i1": "i8", "i2": "i16", "i4": "i32", "i8": "i64",
    "u1": "u8", "u2": "u16", "u4": "u32", "u8": "u64", "b1": "bool",
}  # fmt: skip


def _fact(array: np.ndarray) -> str:
    """tract's fact syntax for an array: ``2,3,f32`` (``f32`` for a scalar)."""
    dtype = _DTYPES.get(array.dtype.str[1:])
    if dtype is None:
        raise TypeError(f"tract has no dtype for {array.dtype}")
    shape = ",".join(str(d) for d in array.shape)
    return f"{shape},{dtype}" if shape else dtype


class _Model:
    """One loaded model: its bytes, and a runnable per input shapes (concrete facts)."""

    def __init__(self, data: bytes, concrete: bool) -> None:
        self.data, self.concrete = data, concrete
        self.runnables: dict[Any, Any] = {}
        self.parsed()  # refuses what tract cannot parse

    def parsed(self) -> Any:
        import tract

        with tempfile.TemporaryDirectory(prefix="seqlower-tract-") as folder:
            path = os.path.join(folder, "model.onnx")
            with open(path, "wb") as file:
                file.write(self.data)
            return tract.onnx().load(path)

    def runnable(self, arrays: list[np.ndarray]) -> Any:
        key = tuple((a.shape, a.dtype.str) for a in arrays) if self.concrete else None
        if key not in self.runnables:
            inference = self.parsed()
            for index, array in enumerate(arrays if self.concrete else []):
                inference.set_input_fact(index, _fact(array))
            self.runnables[key] = inference.into_model().into_runnable()
        return self.runnables[key]


def serve(requests: Any, answers: Any) -> None:
    models: dict[int, _Model] = {}
    while True:
        try:
            request = pickle.load(requests)
        except EOFError:
            return
        kind, key = request[0], request[1]
        try:
            if kind == "load":
                models[key] = _Model(request[2], request[3])
                answer: tuple[Any, ...] = ("ok", None)
            elif kind == "drop":
                models.pop(key, None)
                continue
            else:
                model, arrays = models[key], request[2]
                try:
                    ready = model.runnable(arrays)
                except Exception as e:
                    answer = ("error", "load", str(e))
                else:
                    answer = ("ok", [output.to_numpy() for output in ready.run(arrays)])
        except Exception as e:
            answer = ("error", "load" if kind == "load" else "run", str(e))
        data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        answers.write(len(data).to_bytes(8, "little") + data)
        answers.flush()


def _die_with_parent() -> None:
    """seqlower._signals's watch of the parent, without importing the seqlower package."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_signals.py")
    spec = importlib.util.spec_from_file_location("_seqlower_signals", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.die_with_parent()


if __name__ == "__main__":
    _die_with_parent()
    # Answers go to a private copy of stdout; anything printed goes to stderr.
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    serve(sys.stdin.buffer, answers)
