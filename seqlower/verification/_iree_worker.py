"""The child process IREE compiles and runs one model in for the check
(:class:`~.runtimes.iree.Iree`).

Import (torch-mlir's ONNX importer, ``iree-import-onnx``'s Python API), ``iree-compile`` for
``llvm-cpu`` and the ``local-task`` driver can hang or abort the process (an MLIR assertion);
neither can be stopped from a thread, so each model is compiled and run here. Run by path
(``python _iree_worker.py``, importing numpy, onnx and IREE only), it reads pickled requests on
stdin and answers each on stdout, length-prefixed: ``("load", model_bytes)`` (import and
compile), ``("run", arrays)``; answers are ``("ok", value)`` or ``("error", kind, message)``
with kind ``load`` or ``run``. It dies with its parent however the parent ends
(:mod:`seqlower._signals`, loaded by path); the parent kills it past its time limit or on Ctrl-C.
"""

from __future__ import annotations

import os
import pickle
import re
import sys
from typing import Any

#: What ``iree-compile`` is given besides the backend: the host's CPU features (as a deployment
#: on this CPU compiles), and float64 kept as float64 (IREE demotes it to float32 by default, so
#: a float64 model's inputs no longer fit its buffers: 'buffer view byte length 16 exceeds
#: backing buffer byte length 8').
COMPILE_FLAGS = ("--iree-llvmcpu-target-cpu=host", "--iree-input-demote-f64-to-f32=false")


def _die_with_parent() -> None:
    """seqlower._signals's watch of the parent, without importing the seqlower package."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_signals.py")
    spec = importlib.util.spec_from_file_location("_seqlower_signals", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.die_with_parent()


#: torch-mlir's words for an ONNX node it has no conversion for (or whose conversion refused it).
_UNCONVERTED = r"failed to legalize operation 'torch.operator'.*?name = \"(onnx\.\w+)"


def _first_error(text: str) -> str:
    """The compiler's first ``error:`` line, without its location (its output spans pages); an
    ONNX op torch-mlir did not convert named first (the line prints its operation whole)."""
    for line in text.splitlines():
        found = re.search(r"error: (.*)", line)
        if found:
            op = re.search(_UNCONVERTED, line)
            if op:
                return f"{op.group(1)} not converted (failed to legalize 'torch.operator')"
            return found.group(1).strip()[:300]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "failed"


class _Model:
    """One model, imported and compiled: its entry function, called with numpy arrays."""

    def __init__(self, data: bytes) -> None:
        import iree.compiler as compiler
        import iree.runtime as runtime
        import onnx
        from iree.compiler.extras import onnx_importer
        from iree.compiler.ir import Context

        model = onnx.load_from_string(data)
        # As iree-import-onnx does: shape inference with data propagation first (the importer
        # types every value from it).
        model = onnx.shape_inference.infer_shapes(model, data_prop=True)
        info = onnx_importer.ModelInfo(model)
        module = info.create_module(context=Context()).operation
        onnx_importer.NodeImporter.define_function(info.main_graph, module).import_all()
        module.verify()
        try:
            binary = compiler.compile_str(
                module.get_asm(),
                target_backends=["llvm-cpu"],
                input_type="onnx",
                extra_args=list(COMPILE_FLAGS),
            )
        except compiler.CompilerToolError as e:
            raise RuntimeError(f"iree-compile failed: {_first_error(str(e))}") from None
        context = runtime.SystemContext(config=runtime.Config("local-task"))
        vm_module = runtime.VmModule.copy_buffer(context.instance, binary)
        context.add_vm_module(vm_module)
        names = [
            name
            for name in vm_module.function_names
            if not name.endswith("$async") and name != "__init"
        ]
        if len(names) != 1:
            raise RuntimeError(f"IREE's module has no one entry function: {names}")
        self.function = context.modules[vm_module.name][names[0]]

    def run(self, arrays: list[Any]) -> list[Any]:
        import numpy as np

        # Not np.ascontiguousarray: it makes a scalar 1-D, which IREE refuses for a 0-d input.
        out = self.function(*[a if a.flags.c_contiguous else a.copy(order="C") for a in arrays])
        outputs = list(out) if isinstance(out, (list, tuple)) else [out]
        return [np.asarray(o.to_host() if hasattr(o, "to_host") else o) for o in outputs]


def serve(requests: Any, answers: Any) -> None:
    model: _Model | None = None
    while True:
        try:
            request = pickle.load(requests)
        except EOFError:
            return
        kind = request[0]
        try:
            if kind == "load":
                model = _Model(request[1])
                answer: tuple[Any, ...] = ("ok", None)
            elif model is None:
                answer = ("error", "load", "no model loaded")
            else:
                answer = ("ok", model.run(request[1]))
        except Exception as e:
            answer = ("error", kind, str(e) or type(e).__name__)
        data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        answers.write(len(data).to_bytes(8, "little") + data)
        answers.flush()


if __name__ == "__main__":
    _die_with_parent()
    # Answers go to a private copy of stdout; anything printed goes to stderr.
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    serve(sys.stdin.buffer, answers)
