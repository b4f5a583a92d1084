"""Arguments in a form seqlower does not take are refused, naming the argument (issue 42): a size
of 5.5 silently became 5, a string of pass names was read letter by letter ("unknown pass
'l'"), others raised PassError or AttributeError; a flag given twice for one input silently
kept the last."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h

import seqlower
from seqlower.errors import BadArgumentError, ExitCode
from tests.helpers import assert_one_line_error, run_cli


def _model() -> onnx.ModelProto:
    x = h.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 2, 3])
    lens = h.make_tensor_value_info("lens", TensorProto.INT64, [2])
    y = h.make_tensor_value_info("y", TensorProto.FLOAT, ["T", 2, 3])
    node = h.make_node("ReverseSequence", ["x", "lens"], ["y"], time_axis=0, batch_axis=1)
    graph = h.make_graph([node], "g", [x, lens], [y])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"input_shapes": {"x": (5.5, 2, 3)}}, "input_shapes['x'][0] is 5.5"),
        ({"input_shapes": {"x": "abc"}}, "input_shapes['x'] is 'abc'"),
        ({"input_shapes": [1, 2]}, "input_shapes= takes a mapping"),
        ({"input_shapes": {"x": (True, 2, 3)}}, "input_shapes['x'][0] is True"),
        ({"unroll_inputs": {"images": "3"}}, "unroll_inputs['images'] is '3'"),
        ({"unroll_inputs": {"images": 0}}, "unroll_inputs['images'] is 0"),
        ({"optional_inputs": {"o": "absent"}}, "optional_inputs['o'] is 'absent'"),
        ({"passes": [None]}, "passes[0] is None"),
        ({"passes": "lower-reverse-sequence"}, "passes=['lower-reverse-sequence']"),
        ({"target": 3}, "target= takes"),
    ],
)
def test_an_argument_of_the_wrong_form_is_refused_by_name(
    arguments: dict[str, Any], named: str
) -> None:
    for call in (seqlower.lower, seqlower.lower_with_report):
        with pytest.raises(BadArgumentError) as caught:
            call(_model(), check=False, **arguments)
        assert named in str(caught.value), (call, str(caught.value))
        assert caught.value.exit_code == ExitCode.BAD_INPUT


def test_arguments_in_the_forms_taken_still_lower() -> None:
    """numpy's integers and any sequence of sizes are sizes."""
    import numpy as np

    lowered = seqlower.lower(
        _model(),
        ["lower-reverse-sequence"],
        input_shapes={"x": np.array([4, 2, 3])},
        check=False,
    )
    assert lowered.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 4
    lowered = seqlower.lower(_model(), input_shapes={"x": [np.int64(4), 2, 3]}, check=False)
    assert lowered.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 4


TWICE = ["--overwrite-input-shape", "x=5,2,3", "--overwrite-input-shape", "x=6,2,3"]


@pytest.mark.parametrize(
    ("command", "flags", "flag"),
    [
        ("lower", TWICE, "--overwrite-input-shape"),
        ("inspect", TWICE, "--overwrite-input-shape"),
        ("lower", [*TWICE[:3], "x:6,2,3"], "--overwrite-input-shape"),  # onnxsim's spelling
        ("lower", ["--dim", "T=3", "--dim", "T=4"], "--dim"),
        ("lower", ["--input-shape", "x:3,2,3", "--input-shape", "x:4,2,3"], "--input-shape"),
    ],
)
def test_one_input_given_two_values_by_a_flag_is_exit_2(
    tmp_path: Path, command: str, flags: list[str], flag: str
) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    out = tmp_path / "out.onnx"
    args = [command, source, *flags] + (["-o", out] if command == "lower" else [])
    result = run_cli(*args)
    assert_one_line_error(result, flag, "given twice", code=2)
    assert not out.exists()


def test_the_same_value_given_twice_is_one(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    flags = ["--overwrite-input-shape", "x=5,2,3"] * 2
    result = run_cli("lower", source, "-o", tmp_path / "out.onnx", "--no-check", *flags)
    assert result.exit_code == 0, result.stderr
