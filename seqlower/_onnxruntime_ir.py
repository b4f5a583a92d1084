"""Which IR versions the installed onnxruntime reads: every version up to 10 when its metadata
says it is 1.20 or later (nothing imported), else probed once with tiny models, since
onnxruntime has no API that says it."""

from __future__ import annotations

import onnx

__all__ = ["ir_version_every_onnxruntime_reads", "newest_ir_version_onnxruntime_reads"]

#: onnxruntime 1.20 (the oldest pyproject.toml takes) and every later one read IR versions up
#: to 10 (ONNX 1.16's).
_ONNXRUNTIME_FLOOR = ((1, 20), 10)


def ir_version_every_onnxruntime_reads() -> int:
    """The IR version the installed onnxruntime reads for sure, from its version as its metadata
    says (nothing imported); 0 when that is older than seqlower takes or unknown."""
    from seqlower._version import dependency_versions

    found = dependency_versions().get("onnxruntime", "")
    parts = found.split(".")[:2]
    if len(parts) < 2 or not all(part.isdigit() for part in parts):
        return 0
    release, newest = _ONNXRUNTIME_FLOOR
    return newest if (int(parts[0]), int(parts[1])) >= release else 0


def newest_ir_version_onnxruntime_reads() -> int | None:
    """Probed once with tiny models (onnxruntime has no API that says it)."""
    global _NEWEST_ORT_IR
    if _NEWEST_ORT_IR is None:
        try:
            import onnxruntime as ort
        except ImportError:
            return None
        graph = onnx.helper.make_graph(
            [onnx.helper.make_node("Identity", ["x"], ["y"])],
            "probe",
            [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
            [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
        )
        newest = 3
        for version in range(onnx.IR_VERSION, 3, -1):
            probe = onnx.helper.make_model(
                graph, opset_imports=[onnx.helper.make_opsetid("", 13)], ir_version=version
            )
            try:
                options = ort.SessionOptions()
                options.log_severity_level = 4
                ort.InferenceSession(
                    probe.SerializeToString(), options, providers=["CPUExecutionProvider"]
                )
            except Exception:
                continue
            newest = version
            break
        _NEWEST_ORT_IR = newest
    return _NEWEST_ORT_IR


_NEWEST_ORT_IR: int | None = None
