"""bfloat16 (ml_dtypes') arrays in the check: read by ``--inputs`` from ``.npz`` and ONNX
test-data folders, fed to onnxruntime and OpenVINO, their outputs read back (issue 30)."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnx.parser
from onnx import numpy_helper

from tests.helpers import run_cli
from tests.runtimes import require, run

# The smallest model that shows OpenVINO 2026.4.1's Python API misreading an ml_dtypes array.
CAST = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 18]>
    g (bfloat16[3] x) => (bfloat16[3] y, float[3] z) {
        y = Identity(x)
        z = Cast<to = 1>(x)
    }
    """
)
X = np.array([1.5, 2, 3], dtype=ml_dtypes.bfloat16)

# A lowering with bfloat16 data: ReverseSequence (no sequence op admits bfloat16).
REVERSE = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 18]>
    g (bfloat16[3, 2] x, int64[2] lens) => (bfloat16[3, 2] y) {
        y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
    }
    """
)


def test_openvino_takes_an_ml_dtypes_array_as_float16_values() -> None:
    """The runtime's behaviour the OpenVINO oracle works around (feeding the bits as a bf16
    tensor): given as is, 1.5 is read as 0.125, with no error."""
    require("openvino")
    import openvino as ov

    compiled = ov.Core().compile_model(
        ov.Core().read_model(CAST.SerializeToString(), b""),
        "CPU",
        {"INFERENCE_PRECISION_HINT": "f32"},
    )
    result = compiled.create_infer_request().infer({"x": X})
    z = np.array(result[compiled.outputs[1]])
    assert not np.array_equal(z, X.astype(np.float32))


def test_runtimes_take_and_return_bfloat16() -> None:
    for runtime in ("onnxruntime", "openvino"):
        y, z = run(runtime, CAST, {"x": X})
        assert y.dtype == np.dtype(ml_dtypes.bfloat16), runtime
        np.testing.assert_array_equal(y, X)
        np.testing.assert_array_equal(z, X.astype(np.float32))


def test_inputs_reads_bfloat16_from_npz_and_test_data(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    onnx.save(REVERSE, model)
    x = np.arange(6, dtype=np.float32).reshape(3, 2).astype(ml_dtypes.bfloat16)
    lens = np.array([2, 3], np.int64)
    np.savez(tmp_path / "data.npz", x=x, lens=lens)  # numpy stores bfloat16 as void bytes
    folder = tmp_path / "test_data_set_0"
    folder.mkdir()
    for k, (name, value) in enumerate((("x", x), ("lens", lens))):
        tensor = numpy_helper.from_array(value, name)
        (folder / f"input_{k}.pb").write_bytes(tensor.SerializeToString())
    for target in ("onnxruntime", "openvino"):
        for k, data in enumerate((tmp_path / "data.npz", folder)):
            out = tmp_path / f"out_{target}_{k}.onnx"
            result = run_cli(model, "-o", out, "--target", target, "--inputs", data)
            assert result.exit_code == 0, result.stderr
            assert "matches" in result.stdout + result.stderr
    (y,) = run(
        "onnxruntime", onnx.load(tmp_path / "out_onnxruntime_0.onnx"), {"x": x, "lens": lens}
    )
    np.testing.assert_array_equal(y[:, 0], x[[1, 0, 2], 0])
