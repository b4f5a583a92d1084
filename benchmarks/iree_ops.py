"""Write ``seqlower/passes/_iree_ops.py``: the default-domain ONNX op versions IREE's ONNX
importer (torch-mlir's ONNX frontend, as ``iree-import-onnx`` + ``iree-compile`` run it) has
no conversion for, measured one op version at a time on the installed compiler.

torch-mlir registers its ONNX conversions in C++ (``onOp("Abs", 1, ...)``): nothing lists them
from Python, and a registered conversion may still refuse a form (``Unsqueeze`` with its
``axes`` attribute, a ``Loop`` with scan outputs). So each op version ONNX defines (each
``since_version``) is tried on valid models of that version, until one converts: ONNX's own
backend test cases of the op (re-stamped or converted to that opset by onnx's version
converter, kept when the checker accepts them), a few hand-written forms the test cases lack
(a ``Loop`` of states with a count, which IREE compiles), then a one-node model on float
``[2, 3]`` inputs (when the checker accepts it). Each is imported as ``iree-import-onnx`` does
(shape inference with data propagation, ``onnx_importer``) and compiled with
``iree-compile --compile-to=input``, where torch-mlir's conversion runs. An op version is
recorded as lacking only when at least one valid model of it was refused with ``failed to
legalize operation 'torch.operator' ... onnx.Op`` and none converted: any other outcome (it
converts, or a later stage fails, or the model is refused for something else) counts as
present, so the check built on the table (``require-iree-ops``) never refuses an op IREE
converts. ``tests/targets/test_iree.py`` re-measures a sample on the installed compiler.

    /work/wt/iree-venv/bin/python benchmarks/iree_ops.py   # IREE 3.13.0 (iree-base-compiler)
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
import warnings
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "seqlower" / "passes" / "_iree_ops.py"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import runtime_ops  # noqa: E402

from seqlower.passes._op_versions import convert_version, since_version  # noqa: E402

#: Valid models of one op version tried at most (ONNX has dozens of Resize cases).
MAX_TRIES = 40

#: torch-mlir's words for a node it has no conversion for (or whose conversion refused it).
_UNCONVERTED = re.compile(
    r"failed to legalize operation 'torch\.operator'.*?name = \"onnx\.(\w+)\""
)


def outcome(model: onnx.ModelProto) -> str:
    """``converted``, ``unconverted:Op`` (torch-mlir left ``onnx.Op``) or ``invalid:why``."""
    import iree.compiler as compiler
    from iree.compiler.extras import onnx_importer
    from iree.compiler.ir import Context

    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
        info = onnx_importer.ModelInfo(inferred)
        module = info.create_module(context=Context()).operation
        onnx_importer.NodeImporter.define_function(info.main_graph, module).import_all()
        module.verify()
    except Exception as e:
        return f"invalid:import: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
    try:
        compiler.compile_str(
            module.get_asm(),
            target_backends=["llvm-cpu"],
            input_type="onnx",
            extra_args=["--compile-to=input"],
        )
    except compiler.CompilerToolError as e:
        first = next((line for line in str(e).splitlines() if "error:" in line), "")
        found = _UNCONVERTED.search(first)
        if found:
            return f"unconverted:{found.group(1)}"
    return "converted"


def _valid(model: onnx.ModelProto) -> bool:
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception:
        return False
    return True


def _at(model: onnx.ModelProto, opset: int) -> onnx.ModelProto | None:
    """``model`` at ``opset`` (re-stamped when valid so, else converted), or None."""
    current = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if current is None:
        return None
    if current == opset:
        return model if _valid(model) else None
    stamped = onnx.ModelProto()
    stamped.CopyFrom(model)
    for entry in stamped.opset_import:
        if entry.domain in ("", "ai.onnx"):
            entry.version = opset
    if _valid(stamped):
        return stamped
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            converted = convert_version(model, opset)
    except Exception:
        return None
    return converted if _valid(converted) else None


def counted_loop(opset: int) -> onnx.ModelProto:
    """A ``Loop`` of one state with a count, a true condition passed through: IREE's form."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c"], ["c_out"]),
            helper.make_node("Add", ["s", "s"], ["s_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 3]),
        ],
        [
            helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2, 3]),
        ],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["m", "true", "x"], ["y"], body=body)],
        "probe",
        [
            helper.make_tensor_value_info("m", TensorProto.INT64, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor("true", TensorProto.BOOL, [], [True])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


#: Forms IREE converts that ONNX's test cases of the op lack, by op.
HAND_WRITTEN = {"Loop": counted_loop}


def test_cases() -> dict[str, list[onnx.ModelProto]]:
    """ONNX's backend node cases by the default-domain ops of their main graph."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators warn about numpy overflow
        np.seterr(all="ignore")
        from onnx.backend.test.case import node as node_cases

        found = node_cases.collect_testcases(None)
    by_op: dict[str, list[onnx.ModelProto]] = defaultdict(list)
    for case in found:
        if case.model is None or "_expanded" in case.name:
            continue
        models = [case.model]
        if case.data_sets:
            models.append(_integer_inputs_constant(case.model, case.data_sets[0][0]))
        for op in {n.op_type for n in case.model.graph.node if n.domain in ("", "ai.onnx")}:
            by_op[op] += models
    return by_op


def _integer_inputs_constant(model: onnx.ModelProto, values: list[Any]) -> onnx.ModelProto:
    """``model`` with its integer inputs made initializers of the case's values (axes, shapes,
    sizes): the older forms take them as attributes, which the version converter can only
    write from constants, and torch-mlir wants many of them constant."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    kept = []
    for info, value in zip(model.graph.input, values, strict=False):
        array = value if isinstance(value, np.ndarray) else None
        if array is not None and array.dtype.kind in "iu" and info.type.HasField("tensor_type"):
            copy.graph.initializer.append(onnx.numpy_helper.from_array(array, info.name))
        else:
            kept.append(info)
    del copy.graph.input[:]
    copy.graph.input.extend(kept)
    return copy


def candidates(
    op: str, since: int, cases: dict[str, list[onnx.ModelProto]]
) -> Iterator[onnx.ModelProto]:
    """Valid models holding ``op`` as defined in opset ``since``."""
    if op in HAND_WRITTEN:
        yield HAND_WRITTEN[op](since)
    for case in cases.get(op, []):
        found = _at(case, since)
        if found is not None:
            yield found
    probe = runtime_ops.probe_model(op, since)
    if _valid(probe):
        yield probe


def measure(op: str, since: int, cases: dict[str, list[onnx.ModelProto]]) -> tuple[bool, int]:
    """Whether IREE lacks ``op`` as defined in ``since``, and how many models were tried."""
    refused = tried = 0
    for model in candidates(op, since, cases):
        if since_version(op, since) != since:
            break
        tried += 1
        result = outcome(model)
        if result == "converted":
            return False, tried
        refused += result == f"unconverted:{op}"
        if tried >= MAX_TRIES:
            break
    return refused > 0, tried


def main(ops: list[str]) -> int:
    cases = test_cases()
    lacks: dict[str, list[int]] = {}
    untried: list[str] = []
    for op, since_versions in runtime_ops.versions().items():
        if ops and op not in ops:
            continue
        for since in since_versions:
            lacking, tried = measure(op, since, cases)
            if lacking:
                lacks.setdefault(op, []).append(since)
            if not tried:
                untried.append(f"{op}-{since}")
            print(f"{op}-{since}: {'lacks' if lacking else 'ok'} ({tried} tried)", file=sys.stderr)
    if ops:
        return 0
    version = importlib.metadata.version("iree-base-compiler")
    write(version, lacks, untried)
    print(f"IREE {version}: {sum(map(len, lacks.values()))} op versions lacking", file=sys.stderr)
    return 0


def write(version: str, lacks: dict[str, list[int]], untried: list[str]) -> None:
    """The table as a module."""
    lines = [
        '"""The default-domain ONNX op versions IREE\'s ONNX importer has no conversion for.',
        "",
        "Generated by ``benchmarks/iree_ops.py`` (valid models of each op version imported and",
        "compiled to IREE's input stage, torch-mlir's refusal read); do not edit by hand. Read",
        'by ``RequireRuntimeOps``."""',
        "",
        "from __future__ import annotations",
        "",
        f'IREE_VERSION = "{version}"',
        "",
        "#: op -> the since_versions IREE's importer converts no model of.",
        "IREE_LACKS: dict[str, tuple[int, ...]] = {",
        *(
            f'    "{op}": ({", ".join(map(str, v))}{"," if len(v) == 1 else ""}),'
            for op, v in sorted(lacks.items())
        ),
        "}",
        "",
        "#: Op versions no valid model was found for (not measured: never refused).",
        "UNTRIED = (",
        *(f'    "{name}",' for name in untried),
        ")",
    ]
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
