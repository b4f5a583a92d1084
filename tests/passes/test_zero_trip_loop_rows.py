"""``zero-trip-loop-rows`` (target ``openvino``): OpenVINO 2026.4.1 returns, for a compiled
``Loop`` that runs no iteration, the scan outputs of the inference before; cut to the rows the
Loop ran (a count carried as one more state), every inference of one compiled model is exact
against onnxruntime, for counts from 0 up, in any order."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnx.parser
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seqlower
from tests.helpers import all_op_types
from tests.passes.test_freeze_bounded_loops import DECODE
from tests.runtimes import assert_close, require, run


def _compiled(model: onnx.ModelProto):  # type: ignore[no-untyped-def]
    import openvino as ov

    core = ov.Core()
    read = core.read_model(model.SerializeToString(), b"")
    return core.compile_model(read, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})


def _outputs(compiled, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:  # type: ignore[no-untyped-def]
    result = compiled(feeds)
    return [np.asarray(result[o]) for o in compiled.outputs]


H0 = np.array([0.5, -0.25, 1.0, 0.75], np.float32)


def test_openvino_returns_the_rows_of_the_inference_before() -> None:
    """The bug the pass is for, on the Loop as written: max_len 3, then 0, gives 3 tokens."""
    require("openvino")
    compiled = _compiled(onnx.parser.parse_model(DECODE))
    assert _outputs(compiled, {"h0": H0, "max_len": np.array(3)})[1].shape[0] > 0
    assert _outputs(compiled, {"h0": H0, "max_len": np.array(0)})[1].shape != (0,)


@pytest.fixture(scope="module")
def lowered() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    model = onnx.parser.parse_model(DECODE)
    result = seqlower.lower(model, target="openvino")  # proven on OpenVINO
    onnx.checker.check_model(result, full_check=True)
    assert "Loop" in all_op_types(result) and "Slice" in all_op_types(result)
    return model, result


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(lengths=st.lists(st.integers(-1, 6), min_size=2, max_size=6))
def test_every_inference_is_exact(
    lowered: tuple[onnx.ModelProto, onnx.ModelProto], lengths: list[int]
) -> None:
    """One compiled model, inferences of any lengths in any order (0 and -1: no iteration)."""
    require("openvino")
    model, result = lowered
    compiled = _compiled(result)
    for max_len in lengths:
        feeds = {"h0": H0, "max_len": np.array(max_len)}
        assert_close(run("onnxruntime", model, feeds), _outputs(compiled, feeds), atol=1e-5)


def test_a_loop_that_runs_once_at_least_is_left() -> None:
    """M a constant 4 and the condition a constant true: it runs, nothing to cut."""
    text = DECODE.replace('Loop ("", go0,', "Loop (four, true,").replace(
        "    go0 = Less(zero, max_len)",
        "    four = Constant <value = int64 {4}> ()\n    true = Constant <value = bool {1}> ()",
    )
    model = onnx.parser.parse_model(text)
    assert "Slice" not in all_op_types(seqlower.lower(model, target="openvino", check=False))


def test_rows_of_no_static_shape_are_left() -> None:
    """ONNX's test_loop11 (rows sliced at run-time bounds: their size forgotten, ``[?]``): with
    no iteration onnxruntime gives the original's rows ``[0, 1]``, a cut copy's ``[0, 0]``
    (the check then failed the lowering, exit 1): left as it is."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases

        case = next(c for c in collect_testcases(None) if c.name == "test_loop11")
    lowered = seqlower.lower(case.model, target="openvino", check=False)
    assert "Slice" not in {n.op_type for n in lowered.graph.node}
