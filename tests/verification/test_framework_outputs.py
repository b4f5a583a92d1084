"""--inputs reads test data as exporters write it (framework outputs included); --expected
compares the lowered model with what the framework computed; inputs that lack any input are
exit 2 naming it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.parser
import pytest
from click.testing import CliRunner
from onnx import numpy_helper

import seqlower
from seqlower.cli.commands import cli
from seqlower.targets import TARGETS
from seqlower.verification import CheckOptions, verify
from seqlower.verification.input_files import save_inputs
from tests.helpers import REALWORLD

SAMPLES = REALWORLD
NAMES = [
    "tf_map_fn_reverse_op13",  # __inputs__/__outputs__, output 'Identity:0'
    "v1_bidir_dynamic_rnn_lens_input_op17",  # the same, int32 lengths through Cast
    "hstack_1d_dyn",  # input.NAME / output.NAME, torch dynamo exporter
    "legacy_hstack_1d_dyn",  # the same, TorchScript exporter
]

REVERSE = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T, 2] x, int64[2] lens) => (float[T, 2] y) {
        y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
    }
    """
)


@pytest.mark.parametrize("name", NAMES)
def test_real_exports_match_their_frameworks_outputs(tmp_path: Path, name: str) -> None:
    model, data, out = SAMPLES / f"{name}.onnx", SAMPLES / f"{name}.npz", tmp_path / "out.onnx"
    flags = ["--sequence-free"] if "hstack" in name else []
    result = CliRunner().invoke(
        cli, [str(model), "-o", str(out), "--inputs", str(data), "--expected", str(data), *flags]
    )
    assert result.exit_code == 0, result.output
    assert "check: matches the framework's outputs: max abs " in result.output
    assert out.exists()


def test_expected_alone_supplies_the_inputs_too(tmp_path: Path) -> None:
    data = SAMPLES / "tf_map_fn_reverse_op13.npz"
    model = SAMPLES / "tf_map_fn_reverse_op13.onnx"
    result = CliRunner().invoke(cli, ["verify", str(model), str(model), "--expected", str(data)])
    assert result.exit_code == 0, result.output
    assert "outputs match in 1 run" in result.output
    assert "check: matches the framework's outputs: max abs 0" in result.output


def test_inputs_file_holding_outputs_is_accepted(tmp_path: Path) -> None:
    """'Identity:0' names a graph output: not an input, and not an error."""
    model, data = SAMPLES / "tf_map_fn_reverse_op13.onnx", SAMPLES / "tf_map_fn_reverse_op13.npz"
    result = CliRunner().invoke(cli, [str(model), "--dry-run", "--inputs", str(data)])
    assert result.exit_code == 0, result.output
    assert "framework" not in result.output  # compared only when asked


def test_framework_difference_the_export_shares_is_a_warning(tmp_path: Path) -> None:
    """The framework's outputs edited: the original misses them as much as the lowered model
    does, so it is the export's fault (tests/verification/test_culprit.py), OUT written with a
    warning."""
    source = SAMPLES / "v1_bidir_dynamic_rnn_lens_input_op17.npz"
    with np.load(source) as archive:
        arrays = {key: archive[key] for key in archive.files}
    arrays["Identity:0"] = arrays["Identity:0"] + np.float32(0.01)
    wrong, out = tmp_path / "wrong.npz", tmp_path / "out.onnx"
    np.savez(wrong, **arrays)
    model = SAMPLES / "v1_bidir_dynamic_rnn_lens_input_op17.onnx"
    result = CliRunner().invoke(cli, [str(model), "-o", str(out), "--expected", str(wrong)])
    assert result.exit_code == 0, result.output
    assert (
        "warning: the original export already differs from the framework's outputs: output "
        "'Identity:0' max abs 0.01 (the lowered model: the same)"
    ) in result.stderr
    assert out.exists()
    out.unlink()
    # A CI gate makes it fatal: exit 1, the export named, OUT not written; the same in the API.
    result = CliRunner().invoke(
        cli, [str(model), "-o", str(out), "--expected", str(wrong), "--strict-expected"]
    )
    assert result.exit_code == 1, result.output
    assert (
        "check: MISMATCH: the original export already differs from the framework's outputs"
    ) in result.stderr
    assert "(--strict-expected)" in result.stderr and not out.exists()
    lowered = seqlower.lower(model)
    report = verify(model, lowered, CheckOptions(expected=wrong, strict_expected=True))
    assert report.status == "mismatch" and report.culprit == "export"
    assert verify(model, lowered, CheckOptions(expected=wrong)).ok


def test_strict_expected_needs_expected(tmp_path: Path) -> None:
    model = SAMPLES / "v1_bidir_dynamic_rnn_lens_input_op17.onnx"
    result = CliRunner().invoke(cli, [str(model), "--dry-run", "--strict-expected"])
    assert result.exit_code == 2 and "--strict-expected: give" in result.output


def test_test_data_folder_with_output_pb(tmp_path: Path) -> None:
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(REVERSE, source)
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    lens = np.array([4, 2], dtype=np.int64)
    folder = save_inputs(tmp_path / "data" / "test_data_set_0", {"x": x, "lens": lens}, REVERSE)
    y = x.copy()
    y[:4, 0] = x[:4, 0][::-1]
    y[:2, 1] = x[:2, 1][::-1]
    (folder / "output_0.pb").write_bytes(numpy_helper.from_array(y, "y").SerializeToString())
    result = _run(source, out, "--expected", str(tmp_path / "data"))
    assert result.exit_code == 0, result.output
    assert "check: matches the framework's outputs: max abs 0" in result.output
    (folder / "output_0.pb").write_bytes(numpy_helper.from_array(-y, "y").SerializeToString())
    result = _run(source, out, "--expected", str(tmp_path / "data"))
    assert result.exit_code == 0, result.output  # read, and missed by the original too
    assert "the original export already differs from the framework's outputs" in result.stderr


def _run(source: Path, out: Path, *flags: str) -> Any:
    return CliRunner().invoke(cli, [str(source), "-o", str(out), *flags])


def test_expected_without_outputs_is_exit_2(tmp_path: Path) -> None:
    source, out, data = tmp_path / "m.onnx", tmp_path / "out.onnx", tmp_path / "in.npz"
    onnx.save(REVERSE, source)
    np.savez(data, x=np.zeros((3, 2), np.float32), lens=np.array([1, 2]))
    result = _run(source, out, "--expected", str(data))
    assert result.exit_code == 2
    assert "no output of the model in it (outputs: y)" in result.stderr
    assert not out.exists()


def test_empty_npz_is_exit_2_naming_the_input(tmp_path: Path) -> None:
    source, out, data = tmp_path / "m.onnx", tmp_path / "out.onnx", tmp_path / "empty.npz"
    onnx.save(REVERSE, source)
    np.savez(data)
    result = _run(source, out, "--inputs", str(data))
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"seqlower: error: --inputs {data}: no value for the input 'x'"
    ]
    assert not out.exists()


def test_empty_npz_for_a_sequence_input_is_exit_2(tmp_path: Path) -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (seq(float[N]) s) => (float[M] y) { y = ConcatFromSequence<axis = 0>(s) }
        """
    )
    source, out, data = tmp_path / "m.onnx", tmp_path / "out.onnx", tmp_path / "empty.npz"
    onnx.save(model, source)
    np.savez(data)
    result = _run(source, out, "--inputs", str(data))
    assert result.exit_code == 2, result.output
    assert "no value for the sequence input 's'" in result.stderr
    np.savez(data, **{"s/0": np.ones(2, np.float32), "s/1": np.ones(3, np.float32)})
    assert _run(source, out, "--inputs", str(data), "--dry-run").exit_code == 0


def test_prefixed_keys_missing_an_input_is_exit_2(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(REVERSE, source)
    shutil.copy(SAMPLES / "hstack_1d_dyn.npz", tmp_path / "other.npz")
    result = _run(source, tmp_path / "out.onnx", "--inputs", str(tmp_path / "other.npz"))
    assert result.exit_code == 2
    assert "'input.a' names no input or output of the model" in result.stderr


@pytest.mark.parametrize("command", ["lower", "verify"])
def test_missing_expected_file_names_the_flag(tmp_path: Path, command: str) -> None:
    """A missing --expected file is exit 2 naming --expected (not --inputs), in both commands."""
    source = tmp_path / "m.onnx"
    onnx.save(
        onnx.parser.parse_model(
            """
            <ir_version: 8, opset_import: ["" : 17]>
            g (float[2] x) => (float[2] y) { y = Neg(x) }
            """
        ),
        source,
    )
    missing = tmp_path / "missing.npz"
    args = (
        [str(source), "-o", str(tmp_path / "o.onnx")]
        if command == "lower"
        else ["verify", str(source), str(source)]
    )
    result = CliRunner().invoke(cli, [*args, "--expected", str(missing)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--expected {missing}: no such file" in lines[0], lines


@pytest.mark.parametrize(
    ("name", "target"),
    [
        # torch.while_loop (dynamo exporter): the limit recomputed inside the body.
        ("while_ssm", "tract"),
        ("while_ssm", "openvino"),
        # embedding_bag with offsets: a Loop appending rows that come out of untyped nested Ifs.
        ("embedding_bag_mean", "openvino"),
        # tf2onnx while_loops: a masked Bidirectional GRU, a masked LSTM with return_state,
        # and map_fn; each runs on neither runtime as exported.
        *(
            (name, target)
            for target in ("tract", "openvino")
            for name in (
                "k2_bigru_mask_sum_op17",
                "k2_lstm_mask_state_op17",
                "tf_map_fn_cumsum_op17",
            )
        ),
    ],
)
def test_real_exports_run_on_their_target(tmp_path: Path, name: str, target: str) -> None:
    from tests.runtimes import require

    require(target)
    model, data, out = SAMPLES / f"{name}.onnx", SAMPLES / f"{name}.npz", tmp_path / "out.onnx"
    args = [str(model), "-o", str(out), "--target", target]
    result = CliRunner().invoke(cli, [*args, "--inputs", str(data), "--expected", str(data)])
    assert result.exit_code == 0, result.output
    assert "check: runs and matches on " in result.output
    assert "check: matches the framework's outputs" in result.output
    ops = {node.op_type for node in onnx.load(out).graph.node}
    assert not ops & {"SequenceEmpty", "SequenceInsert", "ConcatFromSequence"}, ops
    # tract gets Scans; OpenVINO keeps the Loops, made strict (its import refuses them as written).
    assert ("Loop" in ops) == (TARGETS[target].loops in ("kept", "counted")), ops
