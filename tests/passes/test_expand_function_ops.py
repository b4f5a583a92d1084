"""Function ops a target lacks (tract: CenterCropPad) become their ONNX function bodies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seqlower
from seqlower.cli.output import describe_targets
from seqlower.passes import ExpandFunctionOps
from seqlower.targets import TARGETS
from tests.helpers import EXAMPLE, all_op_types
from tests.runtimes import assert_same, require, run


def crop(shape: str, size: tuple[int, int], opset: int = 18) -> onnx.ModelProto:
    """y = CenterCropPad(x, size) over the first two axes (crops or pads each)."""
    return onnx.parser.parse_model(
        f"""
        <ir_version: 8, opset_import: ["" : {opset}]>
        g (float[{shape}] x) => (float[?,?,3] y) <int64[2] size = {{{size[0]}, {size[1]}}}> {{
            [crop] y = CenterCropPad <axes = [0, 1]> (x, size)
        }}
        """
    )


def expanded(model: onnx.ModelProto, ops: Any = ("CenterCropPad",)) -> onnx.ModelProto:
    ir_model = ir.serde.deserialize_model(model)
    ExpandFunctionOps(ops)(ir_model)
    result = ir.serde.serialize_model(ir_model)
    onnx.checker.check_model(result, full_check=True)
    onnx.shape_inference.infer_shapes(result, check_type=True, strict_mode=True)
    return result


@pytest.mark.parametrize(
    ("shape", "x_shape", "size"),
    [
        ("5,7,3", (5, 7, 3), (4, 4)),  # crop both
        ("2,3,3", (2, 3, 3), (4, 5)),  # pad both, odd amounts
        ("h,w,3", (6, 2, 3), (3, 4)),  # crop one, pad the other; symbolic dims
    ],
)
def test_center_crop_pad_expands_and_matches_everywhere(
    shape: str, x_shape: tuple[int, ...], size: tuple[int, int]
) -> None:
    model = crop(shape, size)
    lowered = expanded(model)
    assert "CenterCropPad" not in all_op_types(lowered)
    assert not lowered.functions and [o.domain for o in lowered.opset_import] == [""]
    assert all(n.name.startswith("crop/") for n in lowered.graph.node)  # runtimes name these
    feeds = {"x": np.random.default_rng(0).standard_normal(x_shape).astype(np.float32)}
    want = run("onnxruntime", model, feeds)
    assert want[0].shape == (*size, 3)
    assert_same(want, run("onnxruntime", lowered, feeds))
    assert_same(want, run("tract", lowered, feeds))
    assert_same(want, run("openvino", lowered, feeds))


def test_nested_nodes_expand_and_others_stay() -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 18]>
        g (bool c, float[4,4] x) => (float[?,?] y, float[4,4] z) <int64[2] size = {2, 2}> {
            y = If (c) <
                then_branch = t () => (float[] a) { a = CenterCropPad (x, size) },
                else_branch = e () => (float[] b) { b = Identity (x) }>
            z = Shrink <lambd = 0.5> (x)
        }
        """
    )
    lowered = expanded(model)
    ops = all_op_types(lowered)
    assert "CenterCropPad" not in ops and "Shrink" in ops  # only the ops asked for
    feeds = {"c": np.array(True), "x": np.arange(16, dtype=np.float32).reshape(4, 4)}
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))
    # By default every op ONNX defines as a function is expanded.
    assert "Shrink" not in all_op_types(expanded(model, None))


def test_an_op_with_no_function_at_the_opset_is_left() -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2,3] x) => (float[2,3] y) { y = Relu (x) }
        """
    )
    ir_model = ir.serde.deserialize_model(model)
    result = ExpandFunctionOps(("Relu",))(ir_model)
    assert not result.modified and all_op_types(ir.serde.serialize_model(ir_model)) == ["Relu"]


def test_tract_target_expands_center_crop_pad(cli: Any, tmp_path: Path) -> None:
    """The bundled example, lowered for tract, now runs there (it failed on CenterCropPad), at
    fixed image sizes: with its declared symbols tract 0.23.9 cannot type the expansion's
    ``Pad`` ((max(height, 64) - height) / 2, "Undetermined symbol in expression"), which the
    proof on tract's declared facts makes exit 1, naming --overwrite-input-shape."""
    require("tract")
    assert TARGETS["tract"].expand_ops == ("CenterCropPad",)
    assert "expanded:         CenterCropPad" in describe_targets()
    out = tmp_path / "out.onnx"
    unrolled = ("--target", "tract", "--unroll-input", "images=3")
    symbolic = cli(EXAMPLE, "-o", out, *unrolled)
    assert symbolic.exit_code == 1 and "--overwrite-input-shape" in symbolic.stderr
    assert "with input facts set from the inputs" in symbolic.stderr
    shapes = [f"--overwrite-input-shape=images_{k}=48,80,3" for k in range(3)]
    result = cli(EXAMPLE, "-o", out, *unrolled, *shapes)
    assert result.exit_code == 0, result.stderr
    assert "runs and matches on tract" in result.stdout
    assert "CenterCropPad" not in all_op_types(onnx.load(out))
    # The default pipeline keeps the op (onnxruntime has it).
    assert "CenterCropPad" in all_op_types(seqlower.lower(onnx.load(EXAMPLE)))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.lists(st.integers(1, 6), min_size=2, max_size=3),
    data=st.data(),
)
def test_center_crop_pad_property(shape: list[int], data: st.DataObject) -> None:
    """Any input shape, any non-empty set of axes, any target sizes (crop, pad or keep, odd
    amounts included): the expanded body gives exactly what onnxruntime's kernel does."""
    axes = sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))
    sizes = data.draw(st.lists(st.integers(1, 7), min_size=len(axes), max_size=len(axes)))
    dims = ",".join("?" for _ in shape)
    model = onnx.parser.parse_model(
        f"""
        <ir_version: 8, opset_import: ["" : 18]>
        g (float[{",".join(map(str, shape))}] x) => (float[{dims}] y)
            <int64[{len(sizes)}] size = {{{", ".join(map(str, sizes))}}}> {{
            y = CenterCropPad <axes = [{", ".join(map(str, axes))}]> (x, size)
        }}
        """
    )
    lowered = expanded(model)
    feeds = {"x": np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)}
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))
