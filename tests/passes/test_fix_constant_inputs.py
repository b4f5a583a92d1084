"""``--constant-input NAME=VALUE`` / ``lower(constant_inputs=)``: an input fixed to one value,
what it decides folded (the ``If``s choosing by it, everything constant after), the input kept
(read by nothing) or dropped, the check fed that value; a value contradicting the model is one
line, exit 2, no file (issue 44, item 5). Runs on tract and OpenVINO: tests/targets/."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.helper as h
import onnx_ir as ir
import pytest
from onnx import TensorProto

import seqlower
from seqlower.errors import BadArgumentError, BadOptionError
from seqlower.passes.inputs.fix_input_shapes import (
    FixConstantInputs,
    constant_input_hints,
    resolve_constant_inputs,
)
from tests.constant_input_cases import audio_like, feeds
from tests.helpers import all_op_types, assert_one_line_error, make_model, run_cli, tensor_info
from tests.runtimes import assert_same, run


def _input(dtype: int, shape: Any) -> ir.Model:
    """A model taking ``v`` of ``dtype`` and ``shape``, returning it plus itself."""
    model = make_model(
        [h.make_node("Add", ["v", "v"], ["w"])],
        [tensor_info("v", dtype, shape)],
        [tensor_info("w", dtype, shape)],
    )
    return ir.serde.deserialize_model(model)


@pytest.mark.parametrize(
    ("dtype", "shape", "given", "expected"),
    [
        (TensorProto.INT64, [], "1", np.array(1, np.int64)),
        (TensorProto.INT64, [], 1, np.array(1, np.int64)),
        (TensorProto.INT64, [], np.int32(-3), np.array(-3, np.int64)),
        (TensorProto.INT64, [], "2.0", np.array(2, np.int64)),
        (TensorProto.INT64, [1], "7", np.array([7], np.int64)),  # Paddle's [1] scalars
        (TensorProto.INT64, [1, 1], 7, np.array([[7]], np.int64)),
        (TensorProto.INT32, ["n"], "1,2,3", np.array([1, 2, 3], np.int32)),
        (TensorProto.INT32, [2, 2], "[[1,2],[3,4]]", np.array([[1, 2], [3, 4]], np.int32)),
        (TensorProto.UINT8, [], "255", np.array(255, np.uint8)),
        (TensorProto.BOOL, [], "true", np.array(True)),
        (TensorProto.BOOL, [], "0", np.array(False)),
        (TensorProto.FLOAT, [], "0.5", np.array(0.5, np.float32)),
        (TensorProto.FLOAT, [], "-inf", np.array(-np.inf, np.float32)),
        (TensorProto.FLOAT16, [2], [1, 0.25], np.array([1, 0.25], np.float16)),
        (TensorProto.STRING, [], "en=US", np.array("en=US", dtype=object)),
        (TensorProto.INT64, None, "[1,2]", np.array([1, 2], np.int64)),  # shape unknown
    ],
)
def test_values_read_as_the_input_holds_them(
    dtype: int, shape: Any, given: Any, expected: np.ndarray
) -> None:
    value = resolve_constant_inputs(_input(dtype, shape), {"v": given})["v"]
    assert value.dtype == expected.dtype and value.shape == expected.shape
    assert value.tolist() == expected.tolist()


@pytest.mark.parametrize(
    ("dtype", "shape", "given", "words"),
    [
        (TensorProto.INT64, [], "1.5", "the input is int64, and 1.5 is not an integer"),
        (TensorProto.INT64, [], "true", "the input is int64, not bool"),
        (TensorProto.INT64, [], "abc", "cannot read 'abc'"),
        (TensorProto.INT64, [], "", "no value given"),
        (TensorProto.INT64, [], "99999999999999999999", "out of its range"),
        (TensorProto.UINT8, [], "256", "holds 0..255, not 256"),
        (TensorProto.INT8, [], "-1,2,3", "a value of shape [3], the input is declared []"),
        (TensorProto.INT64, [2], "1,2,3", "axis 0 holds 3, the input is declared [2]"),
        (TensorProto.INT64, [2, 2], "[[1,2],[3]]", "not a value of one shape"),
        (TensorProto.BOOL, [], "2", "give true, false, 1 or 0"),
        (TensorProto.FLOAT16, [], "1e6", "out of the range of float16"),
        (TensorProto.STRING, [], 3, "the input holds strings"),
    ],
)
def test_a_value_the_input_cannot_hold_names_the_input_and_the_flag(
    dtype: int, shape: Any, given: Any, words: str
) -> None:
    with pytest.raises(BadOptionError) as caught:
        resolve_constant_inputs(_input(dtype, shape), {"v": given})
    message = str(caught.value)
    assert message.startswith("--constant-input v=") and words in message, message


def test_an_unknown_input_or_an_initializer_or_a_sequence_is_refused() -> None:
    model = _input(TensorProto.INT64, [])
    with pytest.raises(BadOptionError, match=r"nope=1: the model has no input of that name"):
        resolve_constant_inputs(model, {"nope": 1})
    sequence = make_model(
        [h.make_node("SequenceLength", ["s"], ["n"])],
        [onnx.helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)],
        [tensor_info("n", TensorProto.INT64, [])],
    )
    with pytest.raises(BadOptionError, match=r"s=1: that input is not a tensor"):
        resolve_constant_inputs(ir.serde.deserialize_model(sequence), {"s": 1})


@pytest.mark.parametrize("mode", [1, 0])
@pytest.mark.parametrize("in_loop", [False, True])
@pytest.mark.parametrize("drop", [False, True])
def test_the_ifs_the_value_decides_fold_and_the_rest_is_the_originals(
    mode: int, in_loop: bool, drop: bool
) -> None:
    """No ``If`` is left, every node name is unique (two unnamed nodes of an inlined branch
    were both named by the folder's prefix alone, which onnxruntime refuses), and the result is
    the original's at that value: on any value fed when the input is kept."""
    original = audio_like(in_loop=in_loop)
    lowered = seqlower.lower(original, constant_inputs={"mode": mode}, drop_constant_inputs=drop)
    onnx.checker.check_model(lowered, full_check=True)
    assert "If" not in all_op_types(lowered) and "Equal" not in all_op_types(lowered)
    names = [n.name for n in lowered.graph.node if n.name]
    assert len(names) == len(set(names))
    inputs = [i.name for i in lowered.graph.input]
    assert inputs == (["x"] if drop else ["x", "mode"])
    assert [o.name for o in lowered.graph.output] == ["y"]
    expected = run("onnxruntime", original, feeds(mode))
    assert_same(expected, run("onnxruntime", lowered, feeds(None if drop else mode)))
    if not drop:  # kept, read by nothing: another value changes nothing
        assert_same(expected, run("onnxruntime", lowered, feeds(7)))


def test_a_kept_input_returned_as_an_output_stays_itself_and_a_dropped_one_its_value() -> None:
    model = make_model(
        [h.make_node("Mul", ["v", "k"], ["w"])],
        [tensor_info("v", TensorProto.INT64, [2]), tensor_info("k", TensorProto.INT64, [])],
        [tensor_info("w", TensorProto.INT64, [2]), tensor_info("k", TensorProto.INT64, [])],
    )
    v = np.array([2, 3], np.int64)
    kept = seqlower.lower(model, constant_inputs={"k": 5})
    got = run("onnxruntime", kept, {"v": v, "k": np.array(5, np.int64)})
    assert_same([np.array([10, 15]), np.array(5)], got)
    dropped = seqlower.lower(model, constant_inputs={"k": 5}, drop_constant_inputs=True)
    assert [o.name for o in dropped.graph.output] == ["w", "k"]
    assert_same([np.array([10, 15]), np.array(5)], run("onnxruntime", dropped, {"v": v}))


def test_the_api_checks_its_arguments() -> None:
    """Before any work, naming the argument: the forms Python callers may get wrong."""
    model = audio_like()
    with pytest.raises(BadArgumentError, match="drop_constant_inputs without constant_inputs"):
        seqlower.lower(model, drop_constant_inputs=True)
    with pytest.raises(BadArgumentError, match=r"constant_inputs= takes a mapping .* not list"):
        seqlower.lower(model, constant_inputs=[("mode", 1)])  # type: ignore[call-overload]
    with pytest.raises(BadArgumentError, match=r"constant_inputs\['mode'\] is None"):
        seqlower.lower(model, constant_inputs={"mode": None})
    with pytest.raises(BadArgumentError, match=r"drop_constant_inputs= is 'yes'"):
        seqlower.lower(  # type: ignore[call-overload]
            model, constant_inputs={"mode": 1}, drop_constant_inputs="yes"
        )
    for value in (np.int64(1), np.array(1), [1], "1", 1.0):
        seqlower.lower(model, constant_inputs={"mode": value})
    with pytest.raises(BadOptionError, match=r"--constant-input mode=1\.5: the input is int64"):
        seqlower.lower(audio_like(), constant_inputs={"mode": 1.5})
    with pytest.raises(BadOptionError, match=r"--constant-input mode=\[1, 2\]: a value of shape"):
        seqlower.lower(audio_like(), constant_inputs={"mode": [1, 2]})


def test_the_reference_without_folding_keeps_the_ifs() -> None:
    """The check's reference for a dropped input: the original given the value, as it is."""
    model = ir.serde.deserialize_model(audio_like())
    FixConstantInputs({"mode": 1}, drop=True, fold=False)(model)
    proto = ir.serde.serialize_model(model)
    assert all_op_types(proto).count("If") == 2 and [i.name for i in proto.graph.input] == ["x"]


# The command line: the flags, the check fed the value, the errors.


def _save(tmp_path: Path, in_loop: bool = False) -> Path:
    path = tmp_path / "audio.onnx"
    onnx.save(audio_like(in_loop=in_loop), path)
    return path


def test_the_check_feeds_the_fixed_value(tmp_path: Path) -> None:
    source = _save(tmp_path)
    saved = tmp_path / "runs"
    code, out, err = run_cli(
        source, "-o", tmp_path / "out.onnx", "--constant-input", "mode=0", "--save-inputs", saved
    )
    assert code == 0, out + err
    sets = sorted(saved.iterdir())
    assert len(sets) == 3
    for folder in sets:
        inputs = [onnx.load_tensor(p) for p in sorted(folder.glob("input_*.pb"))]
        mode = [t for t in inputs if t.name == "mode"]
        assert [onnx.numpy_helper.to_array(t).tolist() for t in mode] == [0]


def test_given_inputs_holding_another_value_are_refused(tmp_path: Path) -> None:
    source = _save(tmp_path)
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, x=feeds(1)["x"], mode=feeds(1)["mode"])
    result = run_cli(
        source, "-o", tmp_path / "out.onnx", "--constant-input", "mode=0", "--inputs", inputs
    )
    assert_one_line_error(result, "input 'mode' holds 1", "--constant-input fixes it to 0")
    assert not (tmp_path / "out.onnx").exists()
    np.savez(inputs, x=feeds(0)["x"], mode=feeds(0)["mode"])
    code, out, err = run_cli(
        source, "-o", tmp_path / "out.onnx", "--constant-input", "mode=0", "--inputs", inputs
    )
    assert code == 0, out + err


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--constant-input", "mode=1.5"], ["--constant-input mode=1.5", "not an integer"]),
        (["--constant-input", "mode=[1,2]"], ["--constant-input mode=[1,2]", "shape [2]"]),
        (["--constant-input", "x=1"], ["--constant-input x=1", "declared [1,4,T]"]),
        (["--constant-input", "nope=1"], ["nope=1", "no input of that name (inputs: x, mode)"]),
        (["--constant-input", "mode=abc"], ["--constant-input mode=abc", "cannot read 'abc'"]),
        (["--constant-input", "mode"], ["--constant-input", "expected NAME=VALUE"]),
        (
            ["--constant-input", "mode=1", "--constant-input", "mode=2"],
            ["--constant-input", "'mode' is given twice (1 and 2)"],
        ),
        (["--drop-constant-inputs"], ["--drop-constant-inputs: no --constant-input"]),
        (
            ["--constant-input", "nope=1", "--drop-constant-inputs"],
            ["--constant-input nope=1", "no input of that name"],
        ),
    ],
)
@pytest.mark.parametrize("check", [True, False])
def test_a_value_contradicting_the_model_is_exit_2_and_no_file(
    flags: list[str], words: list[str], check: bool, tmp_path: Path
) -> None:
    source = _save(tmp_path)
    more = [] if check else ["--no-check"]
    assert_one_line_error(run_cli(source, "-o", tmp_path / "out.onnx", *flags, *more), *words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audio.onnx"]


def test_inspect_takes_the_flag_and_says_what_folds(tmp_path: Path) -> None:
    source = _save(tmp_path)
    code, out, err = run_cli("inspect", source, "--target", "tract", "--constant-input", "mode=1")
    assert code == 0, out + err
    assert re.search(
        r"--constant-input mode=1: \d+ nodes fold, 0 of 2 If left \(the input kept", out
    )
    assert_one_line_error(
        run_cli("inspect", source, "--constant-input", "mode=true"), "mode=true", "not bool"
    )


def test_the_repro_line_of_a_failed_check_lowers_the_same_way() -> None:
    from seqlower.cli.lower_command import _lowering_flags
    from seqlower.job import LowerOptions

    options = LowerOptions(constant_inputs={"mode": "1"}, drop_constant_inputs=True)
    flags = _lowering_flags(options)
    assert flags[-2:] == ["--constant-input=mode=1", "--drop-constant-inputs"]


def test_the_hint_names_small_inputs_whose_value_decides_ifs() -> None:
    """A failed target run names ``mode`` (its value decides both Ifs, in a Loop body too), not
    an input whose shape alone decides one (``--overwrite-input-shape``'s), nor a large one."""
    hints = constant_input_hints(ir.serde.deserialize_model(audio_like(in_loop=True)))
    assert hints == [
        "2 If (choose_conv, choose_head) choose by the value of input 'mode': if it is always "
        "fed one value, --constant-input mode=VALUE folds them (docs/cli.md, Constant inputs)"
    ]
    branch = h.make_graph(
        [h.make_node("Neg", ["x"], ["n"])], "b", [], [tensor_info("n", TensorProto.FLOAT, [4])]
    )
    rank_test = make_model(
        [
            h.make_node("Shape", ["x"], ["s"]),
            h.make_node("ReduceSum", ["s"], ["total"], keepdims=0),
            h.make_node("ReduceSum", ["big"], ["big_total"], keepdims=0),
            h.make_node("Cast", ["big_total"], ["big_int"], to=TensorProto.INT64),
            h.make_node("Add", ["total", "big_int"], ["both"]),
            h.make_node("Cast", ["both"], ["c"], to=TensorProto.BOOL),
            h.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch),
        ],
        [tensor_info("x", TensorProto.FLOAT, [4]), tensor_info("big", TensorProto.FLOAT, [32])],
        [tensor_info("y", TensorProto.FLOAT, [4])],
    )
    assert constant_input_hints(ir.serde.deserialize_model(rank_test)) == []


def test_a_mode_declared_one_element_folds_as_paddle_writes_it() -> None:
    """Paddle declares scalars [1] and compares them to [1] constants: the If's condition is
    [1], which the folder takes as one value."""
    model = audio_like()
    mode = next(i for i in model.graph.input if i.name == "mode")
    mode.type.tensor_type.shape.dim.add().dim_value = 1
    one = next(t for t in model.graph.initializer if t.name == "one")
    one.CopyFrom(onnx.numpy_helper.from_array(np.array([1], np.int64), "one"))
    onnx.checker.check_model(model, full_check=True)
    lowered = seqlower.lower(model, constant_inputs={"mode": 0})
    assert "If" not in all_op_types(lowered)
    expected = run("onnxruntime", model, {**feeds(None), "mode": np.array([0], np.int64)})
    assert_same(expected, run("onnxruntime", lowered, {**feeds(None), "mode": np.array([0])}))
