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
