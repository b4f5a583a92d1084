"""What a refusal or a verdict says is what happened (issue 42, item 9): an external-data offset
past the file is not "negative", a negative one does not leak onnx_ir's wrapper error, the
summary lists the inputs the written file has, and a runtime that cannot load the original is
not the lowering's fault."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import pytest

import seqlower
from seqlower.errors import InvalidModelError
from tests.helpers import assert_one_line_error, run_cli
from tests.runtimes import require

WEIGHTS = 1000


def _external_model(folder: Path, fields: dict[str, str | None]) -> Path:
    """y = x * w with w's 4000 bytes in ``in.bin``; ``fields`` set (or, None, removed) in w's
    external-data entries."""
    model = onnx.parser.parse_model(
        f"""
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[{WEIGHTS}] x) => (float[{WEIGHTS}] y) {{
            y = Mul(x, w)
        }}
        """
    )
    w = np.full(WEIGHTS, 2, np.float32)
    model.graph.initializer.append(onnx.numpy_helper.from_array(w, "w"))
    path = folder / "in.onnx"
    onnx.save(model, path, save_as_external_data=True, location="in.bin", size_threshold=0)
    proto = onnx.load(path, load_external_data=False)
    entries = {e.key: e.value for e in proto.graph.initializer[0].external_data}
    for key, value in fields.items():
        if value is None:
            entries.pop(key, None)
        else:
            entries[key] = value
    del proto.graph.initializer[0].external_data[:]
    for key, value in entries.items():
        proto.graph.initializer[0].external_data.add(key=key, value=value)
    onnx.save(proto, path)
    return path


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        # No length: the bytes to the end of the file are none at all, not a negative count.
        ({"offset": str(10**15), "length": None}, ["offset 1000000000000000", "past the end"]),
        ({"offset": str(10**15)}, ["past the end"]),
        ({"offset": "-8"}, ["initializer 'w'", "offset '-8'"]),
        ({"offset": "-8", "length": None}, ["initializer 'w'", "offset '-8'"]),
        ({"length": "-4"}, ["initializer 'w'", "length '-4'"]),
    ],
)
def test_an_external_offset_or_length_is_refused_saying_what_is_wrong(
    tmp_path: Path, fields: dict[str, str | None], words: list[str]
) -> None:
    source = _external_model(tmp_path, fields)
    for command in (
        ["lower", source, "-o", tmp_path / "out.onnx", "--no-check"],
        ["inspect", source],
    ):
        result = run_cli(*command)
        line = assert_one_line_error(result, *words, code=2)
        assert "negative offset or length" not in line and "lambda" not in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.bin", "in.onnx"]


def test_a_negative_offset_in_a_proto_is_refused_by_the_api(tmp_path: Path) -> None:
    proto = onnx.load(_external_model(tmp_path, {"offset": "-8"}), load_external_data=False)
    with pytest.raises(InvalidModelError, match=r"initializer 'w'.*offset '-8'"):
        seqlower.lower(proto, check=False)


MAYBE = """
<ir_version: 8, opset_import: ["" : 18]>
maybe (float[2] x, optional(float[2]) o) => (bool has, float[2] y) {
    has = OptionalHasElement(o)
    y = Neg(x)
}
"""


def test_the_summary_says_an_input_the_output_no_longer_has_is_removed(tmp_path: Path) -> None:
    """``--optional-input o=absent`` removes ``o``: the summary listed it as kept."""
    source = tmp_path / "maybe.onnx"
    onnx.save(onnx.parser.parse_model(MAYBE), source)
    out = tmp_path / "out.onnx"
    result = run_cli("lower", source, "-o", out, "--optional-input", "o=absent")
    assert result.exit_code == 0, result.output
    assert [i.name for i in onnx.load(out).graph.input] == ["x"]
    rows = {
        line.split()[1]: line for line in result.output.splitlines() if line.startswith("input ")
    }
    assert set(rows) == {"x", "o"}, result.output
    assert "(removed)" in rows["o"] and "(removed)" not in rows["x"], result.output


# onnxruntime runs its contrib op Inverse, OpenVINO 2026.4.1 converts none ("No conversion rule
# found for operations: com.microsoft.Inverse"): neither model loads there, the same way, though
# the lowering changed the model (its sequence ops are gone).
INVERSE = """
<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
g (float[2, 2] m, float[3, 4] x) => (float[2, 2] t, float[3, 4] y) {
    t = com.microsoft.Inverse(m)
    s = SequenceConstruct(x, x)
    one = Constant<value = int64 {1}>()
    y = SequenceAt(s, one)
}
"""


def test_a_target_that_loads_neither_model_the_same_way_is_not_the_lowerings_fault(
    tmp_path: Path,
) -> None:
    """The original does not load on OpenVINO either, with the same error: the lowering left
    what OpenVINO refuses as it was, so the verdict names the runtime (still a failure of the
    --target run: exit 1, nothing written)."""
    require("openvino")
    source = tmp_path / "inverse.onnx"
    onnx.save(onnx.parser.parse_model(INVERSE), source)
    out = tmp_path / "out.onnx"
    result = run_cli("lower", source, "-o", out, "--target", "openvino")
    assert result.exit_code == 1, result.output
    assert "com.microsoft.Inverse" in result.stderr, result.stderr
    assert "with the same error" in result.stderr and "not the lowering's fault" in result.stderr
    assert "the lowering did not reach the target" not in result.stderr
    assert not out.exists()
    model = onnx.parser.parse_model(INVERSE)
    lowered = seqlower.lower(model, sequence_free=True)
    assert "SequenceAt" not in {n.op_type for n in lowered.graph.node}
    report = seqlower.verify(model, lowered, runtimes=("openvino",))
    assert report.status == "mismatch" and report.culprit == "runtime", report.reason
    assert "with the same error" in report.reason, report.reason


def test_the_external_fields_are_walked_whenever_the_file_writes_their_keys(
    tmp_path: Path,
) -> None:
    """The load reads a model's tensors one by one for external offsets and lengths only when
    the file holds the bytes of those keys (a model without any is not walked): a file that
    writes them is walked, and refused as above."""
    from seqlower._external import mentions_external_fields

    source = _external_model(tmp_path, {"length": "-4"})
    assert mentions_external_fields(source)
    result = run_cli("lower", source, "-o", tmp_path / "out.onnx", "--no-check")
    assert_one_line_error(result, "initializer 'w'", "length '-4'", code=2)
    plain = tmp_path / "plain.onnx"
    onnx.save(onnx.parser.parse_model(PLAIN), plain)
    assert not mentions_external_fields(plain)


PLAIN = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[4] x) => (float[4] y) {
    y = Relu(x)
}
"""
