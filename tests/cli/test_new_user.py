"""What a new user meets (issue 22): the Python API, messages, help, the summary, ``inspect``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import click.testing
import numpy as np
import onnx
import pytest

import seqlower
from seqlower.job import LowerOptions, SaveOptions, lower_file, verify_files
from seqlower.verification import CheckOptions, Tolerances
from tests.helpers import ROOT, assert_one_line_error, run_cli
from tests.runtimes import run

NEG = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 3] x) => (float[N, 3] y) { y = Neg(x) }
    """
)

#: PyTorch's ``atleast_2d(int_tensor, float_tensor)``: one SequenceConstruct of two dtypes.
MIXED_DTYPES = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (int64[2] a, float[3] b) => (int64[1, 2] ya, float[1, 3] yb) {
        s = SequenceConstruct(a, b)
        m = SequenceMap<body = f (x) => (r) {
            axes = Constant<value = int64[1] {0}>()
            r = Unsqueeze(x, axes)
        }>(s)
        zero = Constant<value = int64 {0}>()
        one = Constant<value = int64 {1}>()
        ya = SequenceAt(m, zero)
        yb = SequenceAt(m, one)
    }
    """
)

#: A SequenceMap over a sequence input: the default output keeps sequence ops.
MAP_INPUT = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (seq(float[3]) s) => (float[N, 3] y) {
        m = SequenceMap<body = f (float[3] x) => (float[3] r) { r = Neg(x) }>(s)
        y = ConcatFromSequence<axis = 0>(m)
    }
    """
)

#: A full-length reversal (one Slice) and one with lengths given at run time (GatherND).
REVERSALS = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[4, 2, 3] x, int64[2] lens) => (float[4, 2, 3] y) {
        r = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
        y = Neg(r)
    }
    """
)


def save(model: onnx.ModelProto, folder: Path, name: str = "in.onnx") -> Path:
    path = folder / name
    onnx.save(model, path)
    return path


one_line_error = assert_one_line_error


# ------------------------------------------------------------------ 6. the Python API


def test_lower_file_takes_str_paths(tmp_path: Path) -> None:
    source = save(MAP_INPUT, tmp_path)
    out = tmp_path / "out.onnx"
    result = lower_file(str(source), str(out), LowerOptions())
    assert result.exit_code == 0 and result.written and out.exists()
    assert result.input == source and result.output == out


def test_verify_files_is_what_the_verify_command_does(tmp_path: Path) -> None:
    source = save(MAP_INPUT, tmp_path)
    lowered = tmp_path / "out.onnx"
    onnx.save(seqlower.lower(MAP_INPUT), lowered)
    options = CheckOptions(n=2, seed=3, tolerances=Tolerances(rtol=1e-4))
    result = verify_files(str(source), str(lowered), options)
    assert result.exit_code == 0 and result.verification.ok and result.failing_inputs is None
    data = result.to_dict()
    assert data["reference"] == str(source.resolve()) and data["exit_code"] == 0
    cli_run = run_cli(
        "verify", source, lowered, "--check-n", "2", "--seed", "3", "--rtol", "1e-4", "-v"
    )
    assert cli_run.exit_code == 0
    for line in str(result).splitlines():
        assert line in cli_run.stdout, line


def test_lower_options_hold_check_options_alone() -> None:
    """The check is said once, in ``check_options`` (dropped after 0.1.0: ``verify=`` and
    ``force_input_shape=``: CHANGELOG.md); the targets it lowers for are ``targets`` (issue 45:
    the check's options name the runtimes that prove them, ``runtimes``)."""
    typed = LowerOptions(targets="tract", check_options=CheckOptions(n=5, dims={"N": 2}))
    assert typed.check_options.n == 5 and typed.check_options.dims == {"N": 2}
    assert typed.targets == ("tract",) and typed.check_options.runtimes == ()
    assert CheckOptions(runtimes="tract").runtimes == ("tract",)
    with pytest.raises(TypeError):
        CheckOptions(targets=("tract",))  # type: ignore[call-arg]
    for older in ({"verify": {"n": 4}}, {"force_input_shape": True}):
        with pytest.raises(TypeError):
            LowerOptions(**older)  # type: ignore[arg-type]
    saving = LowerOptions(save=SaveOptions(inputs=Path("runs")))
    assert saving.check_options.keep_runs


def test_check_flags_become_one_typed_check_options() -> None:
    from seqlower.cli.options import check_options, checking

    seen: dict[str, Any] = {}

    @click.command()
    @check_options
    def command(report_path: Path | None, **flags: Any) -> None:
        seen["options"] = checking(**flags)

    flags = ["--rtol", "1e-3", "--rtol", "y:1e-2", "--atol", "y:0", "--dim", "N=4"]
    flags += ["--input-shape", "x:2,3", "--check-memory", "1.5K", "--seq-len", "0"]
    result = click.testing.CliRunner().invoke(command, flags, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    options = seen["options"]
    assert options.tolerances == Tolerances(1e-3, None, {"y": (1e-2, 0.0)})
    assert options.dims == {"N": 4} and options.input_shapes == {"x": (2, 3)}
    assert options.memory_budget == 1536 and options.seq_len == 0


def test_str_of_reports_is_what_the_cli_prints(tmp_path: Path) -> None:
    source = save(MAP_INPUT, tmp_path)
    result = lower_file(source, tmp_path / "out.onnx", LowerOptions())
    assert result.verification is not None
    report = str(result.verification)
    assert report.startswith("check: outputs match") and "max abs" in report
    assert "VerifyReport(" not in report
    cli_run = run_cli(source, "-o", tmp_path / "out2.onnx", "-v")
    for line in report.splitlines():
        assert line in cli_run.stdout, line
    text = str(result)
    assert "lower-sequence-map" in text and "SequenceMap" in text and "total time" in text
    assert report in text


# --------------------------------------------------------------------- 5. the summary


def test_summary_shows_versions_interface_size_and_time(tmp_path: Path) -> None:
    source = save(MAP_INPUT, tmp_path)
    report = tmp_path / "r.json"
    result = run_cli(source, "-o", tmp_path / "out.onnx", "--ir-version", "9", "--report", report)
    assert result.exit_code == 0, result.stderr
    data = json.loads(report.read_text())
    assert data["model"]["before"]["ir_version"] == 8 and data["model"]["after"]["ir_version"] == 9
    assert data["model"]["after"]["nbytes"] == (tmp_path / "out.onnx").stat().st_size
    assert data["seconds"] > 0
    lines = result.stdout.splitlines()

    def row(key: str) -> str:  # the summary's second column starts at 27
        return next(line for line in lines if line.startswith(key + " "))[27:]

    assert row("opset") == "17" and row("IR version") == "8 -> 9"
    assert row("input s") == "seq(float)" and row("output y") == "float[N,3]"
    assert " -> " in row("size") and "B" in row("size")
    assert lines[-1].startswith("total time")
    assert "max abs" not in result.stdout  # the per-output table is for -v
    assert "max abs" in run_cli(source, "-o", tmp_path / "out.onnx", "-v").stdout


def test_summary_says_which_sequence_ops_remain(tmp_path: Path) -> None:
    source = save(MAP_INPUT, tmp_path)
    result = run_cli(source, "-o", tmp_path / "out.onnx")
    note = next(line for line in result.stdout.splitlines() if "still has sequence ops" in line)
    assert "ConcatFromSequence" in note and "--sequence-free" in note and "--target tract" in note
    assert "SequenceMap" not in note  # that one was lowered
    plain = run_cli(save(NEG, tmp_path, "neg.onnx"), "-o", tmp_path / "neg_out.onnx")
    assert "sequence ops" not in plain.stdout


def test_pass_table_says_forms_in_words(tmp_path: Path) -> None:
    source = save(REVERSALS, tmp_path)
    result = run_cli(source, "-o", tmp_path / "out.onnx", "--no-check")
    assert result.exit_code == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("lower-reverse-sequence"))
    assert "1 as a Gather of whole slices with its index computed at run time" in line, line
    mapped = run_cli(save(MAP_INPUT, tmp_path, "map.onnx"), "-o", tmp_path / "m.onnx", "--no-check")
    assert "(1 as its elementwise body run once on the stacked elements (no Loop))" in mapped.stdout
    # A body that is not elementwise (a Flatten) keeps the loop.
    flat = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (seq(float[3]) s) => (float[N, 3] y) {
            m = SequenceMap<body = f (float[3] x) => (float[1, 3] r) {
                r = Flatten<axis = 0>(x)
            }>(s)
            y = ConcatFromSequence<axis = 0>(m)
        }
        """
    )
    mapped = run_cli(save(flat, tmp_path, "m2.onnx"), "-o", tmp_path / "m2_out.onnx", "--no-check")
    assert "(1 as a Loop stacking scan outputs)" in mapped.stdout, mapped.stdout


# -------------------------------------------------------------------- 3. the messages


def torch_atleast_2d_mixed() -> onnx.ModelProto:
    """``torch.atleast_2d(int64_tensor, float_tensor)`` with torch_lib's real map body."""
    from onnx import TensorProto, helper

    from tests.torch_lib_cases import body

    nodes = [
        helper.make_node("SequenceConstruct", ["a", "b"], ["seq"]),
        helper.make_node("SequenceMap", ["seq"], ["mapped"], body=body(2)),
    ]
    for k in range(2):
        position = helper.make_tensor(f"i{k}", TensorProto.INT64, [], [k])
        nodes.append(helper.make_node("Constant", [], [f"i{k}"], value=position))
        nodes.append(helper.make_node("SequenceAt", ["mapped", f"i{k}"], [f"y{k}"]))
    graph = helper.make_graph(
        nodes,
        "atleast_2d",
        [
            helper.make_tensor_value_info("a", TensorProto.INT64, [3]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 2]),
        ],
        [
            helper.make_tensor_value_info("y0", TensorProto.INT64, [1, 3]),
            helper.make_tensor_value_info("y1", TensorProto.FLOAT, [2, 2]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


@pytest.mark.parametrize("build", [lambda: MIXED_DTYPES, torch_atleast_2d_mixed])
def test_mixed_element_types_name_the_cause(tmp_path: Path, build: Any) -> None:
    source = save(build(), tmp_path)
    line = one_line_error(
        run_cli(source, "-o", tmp_path / "out.onnx"),
        "SequenceConstruct",
        "mixes element types int64 and float",
        "--sequence-free",
    )
    assert "annotate" not in line
    assert not (tmp_path / "out.onnx").exists()
    result = run_cli(source, "-o", tmp_path / "out.onnx", "--sequence-free")
    assert result.exit_code == 0 and "outputs match" in result.stdout, result.stderr


def test_lower_with_report_gives_pass_rows_and_op_counts() -> None:
    report = seqlower.lower_with_report(REVERSALS)
    assert isinstance(report.model, onnx.ModelProto)
    rows = {row.name: row for row in report.passes}
    assert rows["lower-reverse-sequence"].rewritten == 1
    assert rows["lower-reverse-sequence"].forms == {"row_gather": 1}
    assert report.ops_before["ReverseSequence"] == 1 and report.ops_after["ReverseSequence"] == 0
    assert report.rewritten == 1
    assert str(report).splitlines()[0].split() == ["pass", "rewritten", "time"]
    same = seqlower.lower(REVERSALS)
    assert same.SerializeToString() == report.model.SerializeToString()
    import onnx_ir as ir

    ir_model = ir.serde.deserialize_model(MIXED_DTYPES)
    freed = seqlower.lower_with_report(ir_model, sequence_free=True)
    assert freed.model is ir_model and freed.ops_after["SequenceConstruct"] == 0
    assert "require-sequence-free" in [row.name for row in freed.passes]


def test_every_public_name_is_listed_and_importable() -> None:
    import seqlower.errors

    exceptions = [
        name
        for name in seqlower.errors.__all__
        if isinstance(getattr(seqlower.errors, name), type)
        and issubclass(getattr(seqlower.errors, name), Exception)
    ]
    assert "SequenceFreeError" in exceptions and "CheckLimitError" in exceptions
    for name in [*exceptions, "lower", "verify", "lower_with_report", "lower_file"]:
        assert name in seqlower.__all__ and name in dir(seqlower), name
    for name in seqlower.__all__:
        assert getattr(seqlower, name) is not None, name


def test_docstrings_point_to_sections_that_exist() -> None:
    import re

    readme = (ROOT / "README.md").read_text()
    headings = {line.lstrip("#").strip() for line in readme.splitlines() if line.startswith("#")}
    for function in (seqlower.lower, seqlower.lower_with_report):
        cited = re.findall(r'README: "([^"]+)"', " ".join((function.__doc__ or "").split()))
        assert cited, function
        for section in cited:
            assert section in headings, section


# ------------------------------------------------------------------------ inspect


def test_inspect_says_what_each_mode_would_do(tmp_path: Path) -> None:
    source = save(MAP_INPUT, tmp_path)
    result = run_cli("inspect", source)
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert "SequenceMap" in text and "1 as its elementwise body run once" in text
    default, free = text.split("sequence-free (--sequence-free)")
    assert "leaves 2 ConcatFromSequence" in default and "runtimes without sequence" in default
    assert "- graph input 's' is a sequence" in free
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx"]  # nothing written
    mixed = run_cli("inspect", save(MIXED_DTYPES, tmp_path, "mixed.onnx")).stdout
    default, free = mixed.split("sequence-free (--sequence-free)")
    assert "fails: " in default and "mixes element types" in default
    assert "leaves no sequence op" in free


def test_inspect_of_a_missing_file_is_one_line(tmp_path: Path) -> None:
    one_line_error(run_cli("inspect", tmp_path / "nope.onnx"), "no such file")


def test_read_only_file_system_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    import seqlower._fs

    class ReadOnly:
        f_flag = os.ST_RDONLY

    source = save(NEG, tmp_path)
    out = tmp_path / "out.onnx"
    real_access = os.access
    monkeypatch.setattr(
        seqlower._fs.os, "access", lambda p, mode, **kw: not mode & os.W_OK and real_access(p, mode)
    )
    monkeypatch.setattr(seqlower._fs.os, "statvfs", lambda _: ReadOnly())
    line = one_line_error(run_cli(source, "-o", out), f"cannot write {out}: read-only file system")
    assert "permission denied" not in line
    assert not out.exists()


def test_opset_the_converter_cannot_reach_is_one_clear_line(tmp_path: Path) -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 18]>
        g (float[N, 3] x) => (float[A, 3] y, float[B, 3] z) {
            y, z = Split<axis = 0, num_outputs = 2>(x)
        }
        """
    )
    source, out = save(model, tmp_path), tmp_path / "out.onnx"
    line = one_line_error(
        run_cli(source, "-o", out, "--opset", "17"),
        "--opset 17",
        "Split below opset 18",
        "--opset 18",
    )
    assert "Adapter" not in line and "Assertion" not in line and ".h:" not in line
    one_line_error(run_cli(source, "-o", out, "--opset", "99"), "--opset 99", "knows opsets 1 to")
    assert not out.exists()


def test_no_arguments_is_a_usage_error() -> None:
    result = run_cli()
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("Usage: seqlower MODEL -o OUT")
    assert result.stderr.strip().splitlines()[-1].startswith("seqlower: error: no model given")


def test_a_second_path_suggests_o(tmp_path: Path) -> None:
    source = save(NEG, tmp_path)
    one_line_error(run_cli(source, "out.onnx"), "-o out.onnx")
    assert not (tmp_path / "out.onnx").exists()


# ------------------------------------------------------------------------ 4. help


def test_verify_help_lists_only_its_exit_codes() -> None:
    text = run_cli("help", "verify").stdout
    assert "Exit codes:" in text and "0   the outputs match" in text
    for lower_only in ("--keep-on-failure", "--sequence-free", "unwritable output"):
        assert lower_only not in text.split("Exit codes:")[1], lower_only
    assert "--keep-on-failure" in run_cli("help", "lower").stdout.split("Exit codes:")[1]


def test_list_passes_says_which_pipelines_run_each() -> None:
    lines = run_cli("--list-passes").stdout.splitlines()
    rows = {line.split()[0]: line for line in lines if line.startswith(tuple("lfusr"))}
    assert "default, sequence-free" in rows["lower-reverse-sequence"]
    assert rows["lower-sequence-map"].split()[1:3] == ["default", "Replace"]
    assert "sequence-free (twice)" in rows["fold-sequence-ops"]
    assert "sequence-free" in rows["require-sequence-free"]
    # Passes only a target runs name it (they ran "only with --passes" before).
    assert "--target tract" in rows["loop-to-scan-fixed-states"]
    assert "--target onnx2torch" in rows["split-as-slices"]
    assert "only with --passes" in rows["loop-to-scan-rows"]
    assert not any("docstring" in line for line in lines)
    assert any("remove-unused-nodes" in line for line in lines)


# ------------------------------------------------- 2. what the checker alone refuses


def without_shape(text: str, output: int = 0) -> onnx.ModelProto:
    """A model whose output ``output`` has a tensor type with no ``shape`` field, as tf2onnx
    writes some (the parser cannot say "no shape": ``float`` is a scalar there)."""
    model = onnx.parser.parse_model(text)
    model.graph.output[output].type.tensor_type.ClearField("shape")
    return model


TF_REVERSE_NO_SHAPE = """
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[4, 2, 3] x, int64[2] lens) => (float "Identity:0") {
        r = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
        "Identity:0" = Identity(r)
    }
"""

RANK_UNKNOWN = """
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[6] x, int64[K] shape) => (float "Identity:0") {
        r = Reshape(x, shape)
        "Identity:0" = Identity(r)
    }
"""


def test_missing_shape_of_known_rank_is_repaired_with_a_note(tmp_path: Path) -> None:
    model = without_shape(TF_REVERSE_NO_SHAPE)
    with pytest.raises(onnx.checker.ValidationError, match="'shape' of 'type' is required"):
        onnx.checker.check_model(model)
    source, out = save(model, tmp_path), tmp_path / "out.onnx"
    for flags in ([], ["--sequence-free"]):
        result = run_cli(source, "-o", out, *flags)
        assert result.exit_code == 0, result.stderr
        assert "note: graph output 'Identity:0' declared no shape" in result.stdout
        assert "rank 3" in result.stdout and "outputs match" in result.stdout
        written = onnx.load(out)
        onnx.checker.check_model(written, full_check=True)
        dims = written.graph.output[0].type.tensor_type.shape.dim
        assert len(dims) == 3 and not any(d.HasField("dim_value") for d in dims)
    assert seqlower.lower(source).graph.output[0].type.tensor_type.HasField("shape")


# tf2onnx's einsum (tf_causal_mask_op13): a Reshape to a shape computed from Shapes, whose
# length is static; ONNX's inference gives its output a rank only for a shape known as data.
RESHAPE_BY_SHAPES = """
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 4] x) => (float "Identity:0") {
        s = Shape(x)
        zero = Constant<value = int64[1] {0}>()
        one = Constant<value = int64[1] {1}>()
        n = Slice(s, zero, one)
        two = Constant<value = int64[2] {2, 2}>()
        target = Concat<axis = 0>(n, two)
        r = Reshape(x, target)
        "Identity:0" = Neg(r)
    }
"""


def test_missing_shape_of_a_reshape_gets_the_shape_length_as_rank(tmp_path: Path) -> None:
    source, out = save(without_shape(RESHAPE_BY_SHAPES), tmp_path), tmp_path / "out.onnx"
    result = run_cli(source, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert "graph output 'Identity:0' declared no shape (ONNX requires one): given rank 3" in (
        result.stdout
    )
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)
    assert len(written.graph.output[0].type.tensor_type.shape.dim) == 3
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    (got,) = run("onnxruntime", written, {"x": x})
    np.testing.assert_array_equal(got, -x.reshape(2, 2, 2))


def test_missing_shape_of_unknown_rank_names_the_value(tmp_path: Path) -> None:
    source = save(without_shape(RANK_UNKNOWN), tmp_path)
    line = one_line_error(
        run_cli(source, "-o", tmp_path / "out.onnx"), "graph output 'Identity:0'", "rank"
    )
    assert "required but missing" not in line
    assert not (tmp_path / "out.onnx").exists()
