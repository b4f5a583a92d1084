"""A malformed node is exit 2 with the same message under every mode and target (issue 29),
whether the pipeline lowers the node or keeps it (OpenVINO's native ReverseSequence)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import onnx
import onnx.parser
import pytest

import seqlower
from seqlower.errors import InvalidNodeError
from seqlower.targets import TARGETS
from tests.helpers import assert_one_line_error, run_cli
from tests.malformed_cases import MALFORMED
from tests.runtimes import require


def _reverse(attrs: str, data: str = "float[T, 2, 3] x", lens: str = "int64[2] lens") -> str:
    return f"""
        <ir_version: 8, opset_import: ["" : 17]>
        g ({data}, {lens}) => (float[T, 2, 3] y) {{
            y = ReverseSequence<{attrs}>(x, lens)
        }}
        """


REVERSE: dict[str, tuple[str, str]] = {
    "time_axis_2": (_reverse("batch_axis = 1, time_axis = 2"), "one must be 0 and the other 1"),
    "same_axes": (_reverse("batch_axis = 0, time_axis = 0"), "one must be 0 and the other 1"),
    "rank_1": (_reverse("batch_axis = 1, time_axis = 0", data="float[T] x"), "must be >= 2"),
    "lens_rank_2": (
        _reverse("batch_axis = 1, time_axis = 0", lens="int64[2, 1] lens"),
        "it must be 1",
    ),
    "lens_count": (
        _reverse("batch_axis = 1, time_axis = 0", lens="int64[3] lens"),
        "holds 3 lengths but input 'x' has 2 batch entries",
    ),
    # issue 43: onnxruntime refused it in the check (exit 1, MISMATCH); lower() returned it.
    "lens_int32": (
        _reverse("batch_axis = 1, time_axis = 0", lens="int32[2] lens"),
        "sequence_lens 'lens' is int32; ReverseSequence takes int64 lengths",
    ),
}

#: Malformed SequenceMaps whose fault is in the node itself (the others need types).
MAPS = ["body_input_count", "body_output_count", "no_body"]

CASES: dict[str, tuple[Callable[[], onnx.ModelProto], str]] = {
    **{
        f"reverse_{name}": (lambda text=text: onnx.parser.parse_model(text), words)
        for name, (text, words) in REVERSE.items()
    },
    **{f"map_{name}": (MALFORMED[name][0], MALFORMED[name][1][-1]) for name in MAPS},
}
PIPELINES: list[dict[str, object]] = [
    {},
    {"sequence_free": True},
    *({"target": name, "check": False} for name in TARGETS),  # the lowering, not the proof
]


@pytest.mark.parametrize("name", list(CASES))
def test_malformed_node_is_the_same_error_in_every_pipeline(name: str) -> None:
    build, words = CASES[name]
    messages = set()
    for pipeline in PIPELINES:
        with pytest.raises(InvalidNodeError) as caught:
            seqlower.lower(build(), **pipeline)  # type: ignore[arg-type]
        messages.add(str(caught.value))
    (message,) = messages
    assert words in message


@pytest.mark.parametrize("target", ["openvino", "onnxruntime", "onnx2tf"])
def test_kept_reverse_sequence_is_exit_2_not_a_mismatch(tmp_path: Path, target: str) -> None:
    """These targets keep ReverseSequence native: it was never planned, and the check then
    failed (exit 1, MISMATCH) or the file was written."""
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(onnx.parser.parse_model(REVERSE["time_axis_2"][0]), source)
    default = run_cli(source, "-o", out, "--no-check")
    line = assert_one_line_error(default, "ReverseSequence", "time_axis=2")
    flags = ["--no-check"] if target == "onnx2tf" else []
    if not flags:
        require(target)  # --target names a missing runtime before the node
    result = run_cli(source, "-o", out, "--target", target, *flags)
    assert assert_one_line_error(result) == line
    assert not out.exists()


def test_int32_lengths_are_exit_2_naming_the_node(tmp_path: Path) -> None:
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(onnx.parser.parse_model(REVERSE["lens_int32"][0]), source)
    result = run_cli(source, "-o", out)
    assert_one_line_error(result, "ReverseSequence node", "int32", "Cast")
    assert not out.exists()
