"""``--overwrite-input-shape NAME=D0,D1,...`` / ``lower(input_shapes=)``: inputs fixed to static
shapes, shape arithmetic folded, loop counts constant (so the converter targets unroll them),
the check run at those shapes; a shape contradicting the model is one line, exit 2, no file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import pytest

import seqlower
from seqlower.errors import BadOptionError, TargetError
from tests.helpers import REALWORLD, all_op_types, assert_one_line_error, parse, run_cli
from tests.runtimes import assert_same, run

_RNG = np.random.default_rng(32)

# tf2onnx's while-loop over the time axis of a dynamic input: `counter + 1 < T`, T read from
# Shape(x), no trip count (M empty). Fixed, T is a constant and the loop unrolls.
DYNAMIC_RNN = """
<ir_version: 8, opset_import: ["" : 17]>
rnn (float[T, B, 3] x) => (float[T2, B2, 3] ys, float[B3, 3] last) {
    shape = Shape(x)
    zero = Constant<value = int64[1] {0}>()
    t64 = Gather<axis = 0>(shape, zero)
    t1 = Cast<to = 6>(t64)
    limit = Squeeze(t1, zero)
    izero = Constant<value = int32 {0}>()
    cond0 = Less(izero, limit)
    start = Constant<value = int32 {0}>()
    one1 = Constant<value = int64[1] {1}>()
    three = Constant<value = int64[1] {3}>()
    b = Gather<axis = 0>(shape, one1)
    hshape = Concat<axis = 0>(b, three)
    h0 = ConstantOfShape<value = float[1] {0}>(hshape)
    count, h, lim_final, ys = Loop(, cond0, start, h0, limit) <body = rnn_body (
        int64 i, bool cond_in, int32 counter, float[B, 3] state, int32 lim
    ) => (bool cond_out, int32 next, float[B, 3] new_state, int32 lim_out, float[B, 3] y) {
        one = Constant<value = int32 {1}>()
        next = Add(counter, one)
        step = Gather<axis = 0>(x, counter)
        sum = Add(step, state)
        new_state = Tanh(sum)
        y = Identity(new_state)
        cond_out = Less(next, lim)
        lim_out = Identity(lim)
    }>
    last = Identity(h)
}
"""


def _model() -> onnx.ModelProto:
    return onnx.parser.parse_model(DYNAMIC_RNN)


def _feeds(t: int = 5, b: int = 2) -> dict[str, np.ndarray]:
    return {"x": _RNG.standard_normal((t, b, 3)).astype(np.float32)}


def test_fixed_shapes_fold_the_count_and_the_loop_unrolls_for_onnx2torch() -> None:
    model = _model()
    lowered = seqlower.lower(model, target="onnx2torch", check=False, input_shapes={"x": (5, 2, 3)})
    onnx.checker.check_model(lowered, full_check=True)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True, data_prop=True)
    ops = set(all_op_types(lowered))
    assert not ops & {"Loop", "Scan", "Shape"}, ops
    dims = [d.dim_value for d in lowered.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [5, 2, 3]
    feeds = _feeds()
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


def test_the_default_pipeline_folds_the_shape_arithmetic_too() -> None:
    model = _model()
    lowered = seqlower.lower(model, input_shapes={"x": (4, 3, 3)})
    assert "Shape" not in all_op_types(lowered)
    feeds = _feeds(4, 3)
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


def test_without_them_the_target_names_the_flag() -> None:
    with pytest.raises(TargetError) as caught:
        seqlower.lower(_model(), target="onnx2torch", check=False)
    first = str(caught.value).splitlines()[0]
    assert "--overwrite-input-shape x=?,?,3" in first and "onnx2torch" in first, first


def test_a_shared_symbolic_name_takes_the_size_in_every_input() -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 3] a, float[N, 3] b) => (float[N, 3] c) {
            c = Add(a, b)
        }
        """
    )
    lowered = seqlower.lower(model, passes=[], input_shapes={"a": (4, 3)})
    shapes = [[d.dim_value for d in i.type.tensor_type.shape.dim] for i in lowered.graph.input]
    assert shapes == [[4, 3], [4, 3]]


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("x=5,2", ["x=5,2", "2 dimensions given, the input has 3"]),
        ("x=5,2,4", ["x=5,2,4", "axis 2 is declared 3, not 4"]),
        ("y=5,2,3", ["y=5,2,3", "no input of that name", "inputs: x"]),
        ("x=5,2,3,", ["x=5,2,3"]),  # accepted: a trailing comma
    ],
)
def test_a_contradicting_shape_is_one_line_and_exit_2(
    tmp_path: Path, spec: str, words: list[str]
) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    out = tmp_path / "out.onnx"
    result = run_cli(source, "-o", out, "--overwrite-input-shape", spec)
    if spec.endswith(","):
        assert result.exit_code == 0, result.output
        return
    assert_one_line_error(result, "--overwrite-input-shape", *words)
    assert not out.exists()


def test_a_name_fixed_twice_differently_is_refused() -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 3] a, float[N, 3] b) => (float[N, 3] c) {
            c = Add(a, b)
        }
        """
    )
    with pytest.raises(BadOptionError, match=r"b=5,3: axis 0 is 'N', which a fixes to 4"):
        seqlower.lower(model, passes=[], input_shapes={"a": (4, 3), "b": (5, 3)})


def test_a_shape_the_model_cannot_take_is_refused(tmp_path: Path) -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[N] x) => (float[N] y) {
            w = Constant<value = float[3] {1, 2, 3}>()
            y = Add(x, w)
        }
        """
    )
    source = tmp_path / "m.onnx"
    onnx.save(model, source)
    out = tmp_path / "out.onnx"
    result = run_cli(source, "-o", out, "--overwrite-input-shape", "x=7")
    assert_one_line_error(result, "--overwrite-input-shape x=7", "cannot take these shapes")
    assert not out.exists()


def test_it_must_agree_with_the_checks_input_shape(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    out = tmp_path / "out.onnx"
    result = run_cli(
        source, "-o", out, "--overwrite-input-shape", "x=5,2,3", "--input-shape", "x:6,2,3"
    )
    assert_one_line_error(result, "--overwrite-input-shape x=5,2,3", "--input-shape gives 6,2,3")
    assert not out.exists()


def test_the_check_runs_at_the_fixed_shapes(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    out, kept = tmp_path / "out.onnx", tmp_path / "kept"
    result = run_cli(source, "-o", out, "--overwrite-input-shape", "x:6,1,3", "--save-inputs", kept)
    assert result.exit_code == 0, result.output
    for saved in kept.glob("test_data_set_*/input_0.pb"):
        tensor = onnx.TensorProto()
        tensor.ParseFromString(saved.read_bytes())
        assert list(tensor.dims) == [6, 1, 3]
    assert list(kept.glob("test_data_set_*"))


# tf2onnx's map_fn loop: the limit is read from outside and compared as a float
# (Less(Cast<float>(counter), Cast<float>(limit))); fixed, the folder makes Cast(limit) a float
# constant in the body, which still fixes the count.
FLOAT_LIMIT = """
<ir_version: 8, opset_import: ["" : 17]>
m (float[T, 3] x) => (float[T2, 3] ys) {
    shape = Shape(x)
    zero = Constant<value = int64[1] {0}>()
    t64 = Gather<axis = 0>(shape, zero)
    t1 = Cast<to = 6>(t64)
    limit = Squeeze(t1, zero)
    start = Constant<value = int32 {0}>()
    go = Constant<value = bool {1}>()
    count, ys = Loop(, go, start) <body = b (int64 i, bool c, int32 counter)
        => (bool c_out, int32 next, float[3] y) {
        one = Constant<value = int32 {1}>()
        next = Add(counter, one)
        row = Gather<axis = 0>(x, counter)
        y = Neg(row)
        f_next = Cast<to = 1>(next)
        f_lim = Cast<to = 1>(limit)
        c_out = Less(f_next, f_lim)
    }>
}
"""


def test_a_float_limit_folded_to_a_constant_still_fixes_the_count() -> None:
    model = parse(FLOAT_LIMIT)
    lowered = seqlower.lower(model, target="onnx2torch", check=False, input_shapes={"x": (4, 3)})
    assert not set(all_op_types(lowered)) & {"Loop", "Scan"}
    feeds = {"x": _RNG.standard_normal((4, 3)).astype(np.float32)}
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


def test_an_output_the_folder_replaces_keeps_its_name() -> None:
    """TorchScript's hstack: an If on the inputs' ranks, folded at fixed shapes, whose branch's
    value becomes the graph output."""
    model = onnx.load(REALWORLD / "legacy_hstack_1d_dyn.onnx")
    lowered = seqlower.lower(model, input_shapes={"a": (5,), "b": (4,)})
    assert [o.name for o in lowered.graph.output] == [o.name for o in model.graph.output]


def test_a_split_the_folder_cannot_fold_is_left_unfolded() -> None:
    """onnxscript 0.7's folder fails on a SplitToSequence of a scalar split given as an input
    (ONNX's test_split_to_sequence_1)."""
    model = parse(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[3, 6] data, int64 split) => (float[3, N] first) {
            s = SplitToSequence<axis = 1>(data, split)
            zero = Constant<value = int64 {0}>()
            first = SequenceAt(s, zero)
        }
        """
    )
    lowered = seqlower.lower(model, input_shapes={"data": (3, 6)})
    onnx.checker.check_model(lowered, full_check=True)
    feeds = {
        "data": np.arange(18, dtype=np.float32).reshape(3, 6),
        "split": np.array(2, dtype=np.int64),
    }
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


@pytest.mark.parametrize("position", [-2, 0, 4, -5])
def test_a_run_time_position_in_a_split_of_fixed_count_is_gathered(position: int) -> None:
    """At a fixed N the SplitToSequence's count is known and its pieces folded; SequenceAt at a
    run-time position then gathers from the stacked pieces (it was refused: not a constant)."""
    from tests import sequence_free_cases

    model, feeds = sequence_free_cases.CASES["split_rows_at_and_length"]()
    feeds = {**feeds, "i": np.array(position, dtype=np.int64)}
    lowered = seqlower.lower(
        model, target="onnx2torch", check=False, input_shapes={"x": (5, 3), "i": ()}
    )
    onnx.checker.check_model(lowered, full_check=True)
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))
