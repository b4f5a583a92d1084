"""UnrollBoundedScans (``unroll-bounded-scans``, the onnx2torch and tvm targets): a Scan over
the iteration numbers whose run-time count is proven in [1, K] becomes K copies of its body,
the copies past the count rerunning the last iteration; its rows cut to the count. Each
lowered model runs on onnxruntime against the original for every count, bit-exact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest

import seqlower
from seqlower.errors import TargetError
from seqlower.passes._bounds import lower_bound, upper_bound, value_range
from seqlower.passes._ir import NO_LOOP, blocked
from tests import loop_cases as cases
from tests.helpers import all_op_types
from tests.runtimes import assert_same, require, run

_RNG = np.random.default_rng(35)

# tf2onnx's bidirectional_dynamic_rnn direction with sequence_length, at a fixed time axis of
# 5 (v1_bidir_dynamic_rnn_lens_input): the loop runs min(T, max(1, max(lengths))) times.
LENGTHS_RNN = f"""
<ir_version: 8, opset_import: ["" : 17]>
rnn (float[5, 2, 3] x, int32[2] lengths) => (float[unk__4, 2, 3] ys, float[2, 3] h) {{
    t = Constant<value = int32 {{5}}>()
    longest = ReduceMax<keepdims = 0>(lengths)
    one = Constant<value = int32 {{1}}>()
    some = Max(one, longest)
    bound = Min(t, some)
    m = Cast<to = 7>(t)
    fzero = Constant<value = float {{0.0}}>()
    f_bound = Cast<to = 1>(bound)
    cond0 = Less(fzero, f_bound)
    time = Constant<value = int32 {{0}}>()
    h0 = Constant<value = float[2, 3] {{0, 0, 0, 0, 0, 0}}>()
    time_out, h, bound_out, ys = Loop(m, cond0, time, h0, bound) {cases.STATIC_RNN_BODY}
}}
"""

_PASSES = ["loop-to-scan-reads", "unroll-bounded-scans"]


def _feeds(lengths: tuple[int, int]) -> dict[str, np.ndarray]:
    x = _RNG.standard_normal((5, 2, 3)).astype(np.float32)
    return {"x": x, "lengths": np.array(lengths, dtype=np.int32)}


def test_a_loop_counted_by_the_longest_length_unrolls_to_its_bound() -> None:
    model = onnx.parser.parse_model(LENGTHS_RNN)
    lowered = seqlower.lower(model, passes=_PASSES)
    onnx.checker.check_model(lowered, full_check=True)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True)
    assert not set(all_op_types(lowered)) & {"Loop", "Scan"}
    # every count the loop runs (1 to 5), lengths past T and all-zero lengths included
    for a in range(8):
        for b in (0, 2, 7):
            feeds = _feeds((a, b))
            assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


def test_a_count_that_may_be_zero_stays_named() -> None:
    """dynamic_rnn runs min(T, max(lengths)) times, 0 for zero lengths: no iteration to rerun,
    so the Scan stays and the target's refusal says why."""
    model, _ = cases.dynamic_rnn()
    lowered = seqlower.lower(model, passes=_PASSES)
    assert "Scan" in all_op_types(lowered)
    with pytest.raises(TargetError, match=r"Scan node .*not proven at least 1"):
        seqlower.lower(model, target="onnx2torch", check=False, input_shapes={"x": (5, 2, 3)})


def test_a_state_changing_shape_stays() -> None:
    text = LENGTHS_RNN.replace("float[2, 3] state", "float[unk__9, 3] state").replace(
        "float[2, 3] new_state", "float[unk__8, 3] new_state"
    )
    model = onnx.parser.parse_model(text)
    ir_model = ir.serde.deserialize_model(model)
    for name in _PASSES:
        seqlower.passes.PASSES[name]()(ir_model)
    (scan,) = [n for n in ir_model.graph if n.op_type == "Scan"]
    assert "not proven one static shape" in (blocked(scan, NO_LOOP) or "")


def test_bounds_follow_constants_comparisons_and_wheres() -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (int64 n) => (int64 count, int64 free) {
            six = Constant<value = int64 {6}>()
            one = Constant<value = int64 {1}>()
            zero = Constant<value = int64 {0}>()
            some = Max(one, n)
            capped = Min(six, some)
            positive = Less(zero, capped)
            count = Where(positive, capped, zero)
            free = Sub(n, one)
        }
        """
    )
    graph = ir.serde.deserialize_model(model).graph
    count, free = graph.outputs
    assert (lower_bound(count), upper_bound(count)) == (1, 6)  # the Where's condition holds
    assert value_range(free) == (None, None)


@pytest.mark.parametrize("converter", ["onnx2torch", "tvm"])
def test_it_runs_on_the_converter(converter: str) -> None:
    require(converter)
    from seqlower.verification.runtimes import TARGET_ORACLES

    model = onnx.parser.parse_model(LENGTHS_RNN)
    lowered = seqlower.lower(model, target=converter)
    runner = TARGET_ORACLES[converter].load(lowered)
    for lengths in ((3, 4), (0, 0), (5, 7)):  # one runner, three row counts
        feeds = _feeds(lengths)
        expected = run("onnxruntime", model, feeds)
        for got, want in zip(runner.run(feeds), expected, strict=True):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def test_tinygrad_keeps_it_named() -> None:
    """tinygrad's runner reads a Slice's bounds once: the row count cannot be a Slice there."""
    model = onnx.parser.parse_model(LENGTHS_RNN)
    with pytest.raises(TargetError, match=r"Scan node"):
        seqlower.lower(model, target="tinygrad", check=False)


def test_tinygrad_still_reads_a_slices_bounds_once_per_runner(tmp_path: Path) -> None:
    """Why tinygrad's row has no ``unroll-bounded-scans``: tinygrad 0.14.0's ``OnnxRunner``
    keeps the bounds a ``Slice`` read on its first call, so a second call with another count
    gets the first call's rows (no error)."""
    require("tinygrad")
    from tinygrad import Tensor
    from tinygrad.nn.onnx import OnnxRunner

    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[6] x, int64[1] n) => (float[?] y) {
            zero = Constant<value = int64[1] {0}>()
            y = Slice(x, zero, n)
        }
        """
    )
    path = str(tmp_path / "slice.onnx")
    onnx.save(model, path)
    runner = OnnxRunner(path)
    x = np.arange(6, dtype=np.float32)
    rows = [
        runner({"x": Tensor(x), "n": Tensor(np.array([n]))})["y"].numpy().shape[0] for n in (2, 5)
    ]
    assert rows == [2, 2]  # 5 asked for the second time
