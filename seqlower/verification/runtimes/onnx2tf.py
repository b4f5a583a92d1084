"""onnx2tf and LiteRT as a target oracle (``--target onnx2tf``): the model converted to a
``.tflite`` in a child process and run in LiteRT's interpreter.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from seqlower._graphs import proto_graphs
from seqlower.verification.runtimes.base import (
    Oracle,
    Runner,
    RuntimeRefusal,
    feed_names,
    runtime_errors,
)


class Onnx2Tf(Oracle):
    """onnx2tf 2.x: the model converted to a float32 ``.tflite`` (its default ``flatbuffer_direct``
    backend, no TensorFlow) in a private temporary folder, and run in LiteRT's interpreter with
    its default delegates (XNNPACK), as a TFLite user deploys it. Every input keeps the ONNX
    layout (``keep_shape_absolutely_input_names``: onnx2tf would make 4-D inputs NHWC).

    onnx2tf rewrites names it dislikes (``out:0`` becomes ``out__0``), so the copy converted has
    its inputs and outputs renamed to plain positional names (inputs through ``Identity`` nodes,
    which onnx2tf removes; outputs where they are computed): feeds and outputs are matched by
    those names, never by position. TFLite
    narrows 64-bit integers to 32 bits; an integer output narrowed so (its values exact) is
    widened back to the declared type, an input is narrowed only when its values fit."""

    name = "onnx2tf"
    package = "onnx2tf"
    runs_on = "ai-edge-litert"
    runs_on_module = "ai_edge_litert"
    extra = "onnx2tf"
    python = (3, 12)  # onnx2tf 2.x: on older Pythons the extra installs nothing

    def load(self, model: onnx.ModelProto) -> Runner:
        from ai_edge_litert.interpreter import Interpreter

        converted, inputs, outputs = _positional_names(model)
        with tempfile.TemporaryDirectory(prefix="seqlower-onnx2tf-") as folder:
            source = os.path.join(folder, "model.onnx")
            onnx.save(converted, source)
            with runtime_errors():
                _onnx2tf_convert(source, os.path.join(folder, "tflite"), list(inputs))
                tflite = os.path.join(folder, "tflite", "model_float32.tflite")
                _refuse_custom_ops(tflite)
                interpreter = Interpreter(model_path=tflite)
                signature = interpreter.get_signature_list()
        (key, names), *others = signature.items()
        if others or set(names["inputs"]) != set(inputs) or set(names["outputs"]) != set(outputs):
            raise RuntimeRefusal(
                f"onnx2tf's .tflite signature {signature} does not name the model's inputs and "
                "outputs, so its outputs cannot be matched to the model's"
            )
        runner = interpreter.get_signature_runner(key)
        details = runner.get_input_details()
        declared = {k: details[k]["dtype"] for k in inputs}  # what the .tflite takes
        widths = {o.name: o.type.tensor_type.elem_type for o in model.graph.output}

        def run(feeds: Mapping[str, Any]) -> list[Any]:
            given = {k: _litert_feed(feeds[name], declared[k], name) for k, name in inputs.items()}
            with runtime_errors():
                result = runner(**given)
            return [_widened(np.asarray(result[k]), widths[name]) for k, name in outputs.items()]

        return Runner(self.label(), run)


#: onnx2tf's conversion, run in a child process (see :func:`_onnx2tf_convert`).
_ONNX2TF_CHILD = """
import contextlib, importlib.util, io, json, sys
spec = importlib.util.spec_from_file_location("_seqlower_signals", sys.argv[4])
children = importlib.util.module_from_spec(spec)
spec.loader.exec_module(children)
children.die_with_parent()
import onnx2tf
printed = io.StringIO()
try:
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        onnx2tf.convert(
            input_onnx_file_path=sys.argv[1],
            output_folder_path=sys.argv[2],
            keep_shape_absolutely_input_names=json.loads(sys.argv[3]),
            non_verbose=True,
        )
except SystemExit:
    sys.stdout.write(printed.getvalue())
    sys.exit(1)
"""


def _onnx2tf_convert(source: str, folder: str, inputs: list[str]) -> None:
    """onnx2tf's conversion to ``folder``, in a child process, its progress bars and notes
    kept off the console. onnx2tf 2.6.9 crashes the process writing the float16 ``.tflite`` of
    some models (a segmentation fault; it has no option to skip that file): the float32 one,
    written before, is the one proven; a crash before it is a refusal, as is a conversion it
    ends with ``sys.exit(1)`` after printing why (with its last error line)."""
    import json
    import subprocess

    from seqlower._signals import spawn

    argv = [sys.executable, "-c", _ONNX2TF_CHILD, source, folder, json.dumps(inputs)]
    # It dies with seqlower (seqlower/_signals.py, loaded by path: no package to import).
    argv.append(
        os.path.join(
            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
            "_signals.py",
        )
    )
    with spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
        try:
            stdout, stderr = child.communicate()
        except BaseException:
            child.kill()
            raise
    done = subprocess.CompletedProcess(argv, child.returncode, stdout, stderr)
    if done.returncode < 0:
        if os.path.exists(os.path.join(folder, "model_float32.tflite")):
            return  # written before the float16 one it crashed on: what a user deploys
        name = signal.Signals(-done.returncode).name
        raise RuntimeError(f"onnx2tf crashed converting the model ({name})")
    if done.returncode != 0:
        text = done.stdout + done.stderr
        lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in text.splitlines()]
        errors = [line for line in lines if "ERROR" in line or "Error" in line] or lines or [""]
        raise RuntimeError(f"onnx2tf could not convert the model: {errors[-1]}")


def _refuse_custom_ops(path: str) -> None:
    """onnx2tf writes ops it cannot express as TFLite custom ops (``ONNX_SCAN``, ``ONNX_LOOP``,
    ``ONNX_SEQUENCEINSERT`` in a Loop body) that LiteRT has no kernel for: a refusal at load,
    as a converter's missing op is, not a failure of the runs that reach it (which the check
    could blame on the original sharing it, or never reach). Read from the ``.tflite``'s
    operator codes, which list the ops of every subgraph."""
    from ai_edge_litert import schema_py_generated as schema

    with open(path, "rb") as file:
        model = schema.Model.GetRootAs(file.read(), 0)
    codes = (model.OperatorCodes(k) for k in range(model.OperatorCodesLength()))
    custom = sorted(
        (code.CustomCode() or b"?").decode()
        for code in codes
        if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) == schema.BuiltinOperator.CUSTOM
    )
    if custom:
        raise RuntimeError(f"onnx2tf wrote custom ops LiteRT cannot run: {', '.join(custom)}")


def _positional_names(
    model: onnx.ModelProto,
) -> tuple[onnx.ModelProto, dict[str, str], dict[str, str]]:
    """A copy whose fed inputs and outputs are named ``seqlower_input_K``/``seqlower_output_K``
    (an ``Identity`` each to the original names), with ``{new: original}`` for each."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    taken = {
        name for g in proto_graphs(graph) for node in g.node for name in (*node.input, *node.output)
    }
    taken |= {value.name for value in (*graph.input, *graph.output)}

    def fresh(stem: str) -> str:
        name = stem
        while name in taken:
            name += "_"
        taken.add(name)
        return name

    fed = set(feed_names(model))
    inputs: dict[str, str] = {}
    for k, value in enumerate(graph.input):
        if value.name in fed:
            new = fresh(f"seqlower_input_{k}")
            inputs[new] = value.name
            graph.node.insert(
                len(inputs) - 1, onnx.helper.make_node("Identity", [new], [value.name])
            )
            value.name = new
    outputs: dict[str, str] = {}
    produced = {name for node in graph.node for name in node.output if name}
    renamed: set[str] = set()
    for k, value in enumerate(graph.output):
        new = fresh(f"seqlower_output_{k}")
        outputs[new] = value.name
        if value.name in produced and value.name not in renamed:
            # Renamed where it is computed: onnx2tf 2.6.9 drops an Identity to an output whose
            # value other nodes also read, and LiteRT then fails ("Input tensor 1 lacks data").
            renamed.add(value.name)
            _rename(graph, value.name, new)
        else:  # an input passed through, or an output listed twice: an Identity
            graph.node.append(onnx.helper.make_node("Identity", [value.name], [new]))
        value.name = new
    return copy, inputs, outputs


def _rename(graph: onnx.GraphProto, old: str, new: str) -> None:
    """Every use of ``old`` in ``graph`` and the graphs inside it (names are unique in a valid
    model, so a body that reads ``old`` reads the outer value) as ``new``."""
    for inner in proto_graphs(graph):
        for node in inner.node:
            for names in (node.input, node.output):
                for j, name in enumerate(names):
                    if name == old:
                        names[j] = new
    for info in graph.value_info:
        if info.name == old:
            info.name = new


def _litert_feed(value: Any, dtype: Any, name: str) -> Any:
    """``value`` as the .tflite input takes it: 64-bit integers narrowed to its 32 bits only
    when every value fits (else the run would compute on other inputs than the check's)."""
    array = np.asarray(value)
    if array.dtype == dtype:
        return array
    if array.dtype.kind in "iu" and np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise RuntimeError(
                f"input '{name}' holds values outside the {np.dtype(dtype)} the .tflite takes"
            )
    return array.astype(dtype)


def _widened(array: Any, elem_type: int) -> Any:
    """An integer output TFLite narrowed, back in its declared type (exact: it only widens)."""
    if not elem_type or array.dtype.kind not in "iu":
        return array
    declared = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    if declared != array.dtype and np.can_cast(array.dtype, declared, "safe"):
        return array.astype(declared)
    return array
