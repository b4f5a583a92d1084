"""Re-stamping across op versions that changed only in their type lists (``_op_versions``):
what onnx's version converter has no adapter for (``ConstantOfShape``-20) moves as it is, the
rest through its adapters (``ReduceMean``-18's axes input), and the result means the same."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import pytest

from seqlower.io import version_converter_problem
from seqlower.passes._op_versions import convert_version, same_but_types
from tests.runtimes import assert_same, run


@pytest.mark.parametrize(
    ("op", "new", "old", "same"),
    [
        ("ConstantOfShape", 20, 17, True),  # 20 added types to 9
        ("Shape", 19, 17, True),
        ("If", 19, 16, True),
        ("Cast", 19, 13, True),  # saturate is about float8 alone
        ("ReduceMean", 18, 17, False),  # axes became an input
        ("Split", 18, 17, False),  # num_outputs
        ("Shape", 15, 13, False),  # start, end
        ("Gelu", 20, 18, False),  # absent at 18
    ],
)
def test_type_only_changes_are_told_from_the_others(
    op: str, new: int, old: int, same: bool
) -> None:
    assert same_but_types(op, new, old) is same


NEWER = onnx.parser.parse_model(
    """
    <ir_version: 9, opset_import: ["" : 20]>
    g (bool c, int64[2] s, float[2, 3] x) => (float[A, B] y, float[2] r) {
        y = If(c) <then_branch = t () => (float[A, B] a) { a = ConstantOfShape(s) },
                   else_branch = e () => (float[A, B] b) {
                       b = ConstantOfShape<value = float[1] {1.5}>(s)
                   }>
        ax = Constant<value = int64[1] {1}>()
        r = ReduceMean<keepdims = 0>(x, ax)
    }
    """
)


def test_a_model_moves_down_across_both_kinds() -> None:
    with pytest.raises(Exception, match="No Adapter To Version"):
        onnx.version_converter.convert_version(NEWER, 17)
    converted = convert_version(NEWER, 17)
    onnx.checker.check_model(converted, full_check=True)
    assert [o.version for o in converted.opset_import] == [17]
    mean = next(n for n in converted.graph.node if n.op_type == "ReduceMean")
    assert len(mean.input) == 1
    for c in (True, False):
        feeds = {
            "c": np.array(c),
            "s": np.array([2, 2], dtype=np.int64),
            "x": np.arange(6, dtype=np.float32).reshape(2, 3),
        }
        assert_same(run("onnxruntime", NEWER, feeds), run("onnxruntime", converted, feeds))


def test_no_adapter_is_not_said_to_be_a_missing_op() -> None:
    error = RuntimeError("BaseConverter.h:63: No Adapter To Version $19 for ConstantOfShape")
    text = version_converter_problem(error, 20, 18)
    assert "does not exist" not in text
    assert "no adapter for ConstantOfShape to opset 19" in text


# onnx has no adapter from Pad-18 down; a Pad without Pad-18's axes input and Pad-19's wrap
# mode means what Pad-13 does (seqlower's own padding, pad-empty-reductions, writes such).
PADS = """
<ir_version: 8, opset_import: ["" : 19]>
g (float[2, 3] x) => (float[3, 3] y) {{
    p = Constant<value = int64[4] {{0, 0, 1, 0}}>()
    v = Constant<value = float {{-1}}>()
    {extra}
    y = Pad<mode = "{mode}">(x, p, v{axes})
}}
"""


def test_a_pad_using_nothing_newer_moves_down() -> None:
    model = onnx.parser.parse_model(PADS.format(mode="constant", extra="", axes=""))
    converted = convert_version(model, 17)
    onnx.checker.check_model(converted, full_check=True)
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", converted, feeds))


@pytest.mark.parametrize(
    ("mode", "extra", "axes"),
    [
        ("wrap", "", ""),
        ("constant", "a = Constant<value = int64[2] {0, 1}>()", ", a"),
    ],
)
def test_a_pad_using_what_18_or_19_added_does_not(mode: str, extra: str, axes: str) -> None:
    model = onnx.parser.parse_model(PADS.format(mode=mode, extra=extra, axes=axes))
    with pytest.raises(Exception, match="No Adapter To Version"):
        convert_version(model, 17)
