"""What each converter target runs stays run: every model listed for a converter is lowered with
``--target`` (its proof on the converter included; the real exports at their ``.npz`` shapes
through ``--overwrite-input-shape``), then run on the converter against the framework's (or
onnxruntime's) outputs. Skipped where the converter is not installed (CI has only tinygrad);
where it is, a regression on any listed model fails here. The lists are what
``benchmarks/target_samples.py --converters NAME --static-shapes`` measured running (README,
"Measured on the converters")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from benchmarks.target_samples import feeds_and_expected
from tests.helpers import REALWORLD
from tests.runtimes import require

#: converter -> the models that run and match on it after ``--target`` (kept short: each costs
#: a lowering, a proof and a run).
REACH: dict[str, tuple[str, ...]] = {
    "onnx2torch": (
        "realworld/hstack_1d_dyn",
        "realworld/legacy_hstack_1d_dyn",
        "realworld/tf_map_fn_reverse_op13",
        "realworld/tf_map_fn_cumsum_op17",
        "realworld/k2_bigru_mask_sum_op17",
        "realworld/k2_stacked_bisimple_op13",
        "sequence_free/hstack_atleast_1d",
        "sequence_free/insert_chain",
        "sequence_map/in_scan_body",
        "onnx/test_reversesequence_time",
        "onnx/test_scan9_sum",
        # LSTM/GRU/RNN written as primitive ops (unroll-recurrent-ops)
        "realworld/k2_bilstm_sum_op17",
        "realworld/k2_bigru_concat_op13",
        "onnx/test_gru_seq_length",
        "onnx/test_lstm_with_peepholes",
        "onnx/test_simple_rnn_batchwise",
    ),
    "tvm": (
        "realworld/hstack_1d_dyn",
        # unrolled after the fold at fixed shapes: its second layer's count is constant only then
        "realworld/k2_stacked_bisimple_op13",
        # a scalar input (the oracle once fed it 1-D)
        "realworld/atleast_1d_tuple",
        "realworld/legacy_hstack_1d_dyn",
        "realworld/tf_map_fn_reverse_op13",
        "sequence_free/vstack_atleast_2d",
        "sequence_free/split_known_count",
        "onnx/test_reversesequence_time",
        "onnx/test_reversesequence_batch",
        "realworld/k2_bilstm_sum_op17",
        "realworld/k2_bigru_concat_op13",
        "onnx/test_gru_seq_length",
        "onnx/test_lstm_with_peepholes",
        "onnx/test_simple_rnn_batchwise",
    ),
    "tinygrad": ("realworld/k2_stacked_bisimple_op13",),
}


def _case(label: str) -> tuple[onnx.ModelProto, dict[str, Any], list[Any] | None, bool]:
    """The model, its inputs, the expected outputs (None: onnxruntime's on the original) and
    whether it is lowered at the inputs' shapes."""
    kind, name = label.split("/", 1)
    if kind == "realworld":
        feeds, expected = feeds_and_expected(REALWORLD / f"{name}.npz")
        return onnx.load(REALWORLD / f"{name}.onnx"), feeds, expected, True
    if kind == "onnx":
        from onnx.backend.test.case.node import collect_testcases

        case = next(c for c in collect_testcases() if c.name == name)
        inputs, outputs = case.data_sets[0]
        names = [i.name for i in case.model.graph.input]
        return case.model, dict(zip(names, inputs, strict=False)), list(outputs), False
    from tests import loop_cases, sequence_free_cases, sequence_map_cases

    table = {
        "loop": loop_cases.CASES,
        "sequence_free": sequence_free_cases.CASES,
        "sequence_map": sequence_map_cases.CASES,
    }[kind]
    model, feeds = table[name]()
    return model, dict(feeds), None, False


@pytest.mark.parametrize(
    ("converter", "label"), [(c, label) for c, labels in REACH.items() for label in labels]
)
def test_the_converter_still_runs_it(converter: str, label: str, tmp_path: Path) -> None:
    require(converter)
    from seqlower.job import LowerOptions, lower_file
    from seqlower.verification.runtimes import TARGET_ORACLES

    model, feeds, expected, static = _case(label)
    if expected is None:
        from tests.runtimes import run

        expected = run("onnxruntime", model, feeds)
    source, out = tmp_path / "model.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    shapes = {n: tuple(np.asarray(v).shape) for n, v in feeds.items()} if static else {}
    options = LowerOptions(targets=(converter,), overwrite_input_shapes=shapes)
    result = lower_file(source, out, options)
    assert result.exit_code == 0 and out.exists(), str(result)
    got = TARGET_ORACLES[converter].load(onnx.load(out)).run(feeds)
    assert len(got) == len(expected)
    for have, want in zip(got, expected, strict=True):
        have, want = np.asarray(have), np.asarray(want)
        assert have.shape == want.shape, (have.shape, want.shape)
        if want.dtype.kind in "fc":
            np.testing.assert_allclose(have, want, rtol=1e-4, atol=1e-5)
        else:
            np.testing.assert_array_equal(have, want)
