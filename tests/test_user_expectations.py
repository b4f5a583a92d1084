"""What a new user still tripped on (issue 34), each as a user of onnxsim or polygraphy expects."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

import seqlower
from tests.runtimes import require

NEG = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 3] x) => (float[N, 3] y) { y = Neg(x) }
    """
)


def save(model: onnx.ModelProto, folder: Path, name: str = "in.onnx") -> Path:
    path = folder / name
    onnx.save(model, path)
    return path


# ------------------------------------------------------- 6. Python API errors


@pytest.mark.parametrize(
    "call",
    [
        lambda p: seqlower.lower(p, target="nosuch"),
        lambda p: seqlower.lower(p, passes=["bogus"]),
        lambda p: seqlower.build_pipeline(["bogus"]),
        lambda p: seqlower.inspect_model(p, ["nosuch"]),
    ],
    ids=["target", "pass", "pipeline-pass", "inspect"],
)
def test_unknown_names_are_seqlower_errors_and_still_value_errors(
    tmp_path: Path, call: Callable[[Path], object]
) -> None:
    source = save(NEG, tmp_path)
    with pytest.raises(seqlower.SeqlowerError) as caught:
        call(source)
    assert isinstance(caught.value, ValueError)  # what these raised before: callers catch it
    assert "unknown" in str(caught.value) and "known" in str(caught.value)


def test_verify_takes_one_target_as_a_string(tmp_path: Path) -> None:
    require("tract")
    source = save(NEG, tmp_path)
    report = seqlower.verify(source, source, targets="tract")
    assert report.ok and [name.split()[0] for name in report.targets] == ["tract"]
    with pytest.raises(seqlower.SeqlowerError, match="nosuch: unknown target"):
        seqlower.verify(source, source, targets="nosuch")


def test_model_bytes_are_a_short_type_error(tmp_path: Path) -> None:
    data = NEG.SerializeToString()
    for call in (
        lambda: seqlower.lower(data),
        lambda: seqlower.verify(data, data),
        lambda: seqlower.inspect_model(data),  # type: ignore[arg-type]
    ):
        with pytest.raises(seqlower.SeqlowerError) as caught:
            call()
        assert isinstance(caught.value, TypeError)
        message = str(caught.value)
        assert "not bytes" in message and "load_model_from_string" in message
        assert len(message) < 200 and "\\x" not in message
