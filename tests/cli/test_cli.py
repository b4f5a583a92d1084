"""The command line: the same promises as the API, plus exit codes, one-line errors, no debris."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import helper as h

import seqlower
from tests.helpers import (
    assert_equivalent,
    assert_lowered_ok,
    assert_one_line_error,
    make_model,
    run_cli,
    tensor_info,
)
from tests.malformed_cases import MALFORMED
from tests.sequence_map_cases import CASES


@pytest.mark.parametrize("name", list(CASES))
def test_case_through_cli(name: str, tmp_path: Path) -> None:
    model, feeds = CASES[name]()
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    code, out, err = run_cli(source, "-o", target)
    assert code == 0, err
    assert re.search(r"^lower-sequence-map +\d+ ", out, re.M) and f"wrote {target}" in out
    lowered = onnx.load(target)
    assert_lowered_ok(model, lowered)
    assert_equivalent(model, lowered, feeds)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx", "out.onnx"]


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_node_through_cli(name: str, tmp_path: Path) -> None:
    build, words = MALFORMED[name]
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(build(), source)
    assert_one_line_error(run_cli(source, "-o", target), *words)
    assert not target.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["in.onnx"]


def _valid_model_bytes() -> bytes:
    model, _ = CASES["multi_io"]()
    return model.SerializeToString()


@pytest.mark.parametrize(
    ("label", "content", "words"),
    [
        ("empty", b"", ["empty"]),
        ("not_onnx", b"this is not a model\x00\xff" * 10, ["not"]),
        ("truncated", _valid_model_bytes()[: len(_valid_model_bytes()) // 2], []),
        (
            "checker_rejects",
            make_model(
                [h.make_node("Neg", ["nowhere"], ["y"])], [], [tensor_info("y", 1, [1])]
            ).SerializeToString(),
            ["not valid ONNX", "nowhere"],
        ),
    ],
)
def test_bad_input_files(label: str, content: bytes, words: list[str], tmp_path: Path) -> None:
    source, target = tmp_path / f"{label}.onnx", tmp_path / "out.onnx"
    source.write_bytes(content)
    assert_one_line_error(run_cli(source, "-o", target), str(source), *words)
    assert not target.exists()


def _out_of_order(in_branch: bool) -> onnx.ModelProto:
    """A Relu reading 'a' before the Neg that writes it (paddle2onnx's list-appending ``for``
    writes its nodes so), in the main graph or in an If's then-branch."""
    nodes = [
        h.make_node("Relu", ["a"], ["b"], name="late_reader"),
        h.make_node("Neg", ["x"], ["a"], name="writer"),
    ]
    if not in_branch:
        return make_model(nodes, [tensor_info("x", 1, [2])], [tensor_info("b", 1, [2])])
    then = h.make_graph(nodes, "then", [], [tensor_info("b", 1, [2])])
    other = h.make_graph([h.make_node("Neg", ["x"], ["c"])], "else", [], [tensor_info("c", 1, [2])])
    branch = h.make_node("If", ["p"], ["y"], then_branch=then, else_branch=other, name="the_if")
    return make_model(
        [branch], [tensor_info("x", 1, [2]), tensor_info("p", 9, [])], [tensor_info("y", 1, [2])]
    )


@pytest.mark.parametrize("in_branch", [False, True])
def test_nodes_out_of_order_named_whole(in_branch: bool, tmp_path: Path) -> None:
    """onnx.checker's complaint spans lines, and one line of it read "however input 'a' of
    node:" and stopped: the line now names the reader, the value, its writer, and whose fault
    it is."""
    source = tmp_path / "in.onnx"
    onnx.save(_out_of_order(in_branch), source)
    line = assert_one_line_error(
        run_cli(source, "-o", tmp_path / "out.onnx"),
        "Relu node 'late_reader'",
        "reads 'a' before Neg node 'writer' writes it",
        "exporter wrote the nodes out of topological order",
    )
    assert line.rstrip().endswith(")") and "of node:" not in line
    assert ("If node 'the_if'" in line) == in_branch


def test_value_nothing_writes_is_not_called_out_of_order(tmp_path: Path) -> None:
    source = tmp_path / "in.onnx"
    onnx.save(
        make_model([h.make_node("Neg", ["nowhere"], ["y"])], [], [tensor_info("y", 1, [1])]),
        source,
    )
    line = assert_one_line_error(run_cli(source, "-o", tmp_path / "out.onnx"), "'nowhere'")
    assert "no node before it writes" in line and "out of topological order" not in line


def test_missing_file_and_directory(tmp_path: Path) -> None:
    assert_one_line_error(
        run_cli(tmp_path / "absent.onnx", "-o", tmp_path / "out.onnx"), "no such file"
    )
    assert_one_line_error(run_cli(tmp_path, "-o", tmp_path / "out.onnx"), "directory")
    assert not (tmp_path / "out.onnx").exists()


def test_unwritable_output(tmp_path: Path) -> None:
    model, _ = CASES["multi_io"]()
    onnx.save(model, tmp_path / "in.onnx")
    assert_one_line_error(
        run_cli(tmp_path / "in.onnx", "-o", tmp_path / "no" / "such" / "dir.onnx"), "does not exist"
    )


def test_output_may_overwrite_input(tmp_path: Path) -> None:
    model, feeds = CASES["body_with_if"]()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    code, _, err = run_cli(path, "-o", path)
    assert code == 0, err
    assert_equivalent(model, onnx.load(path), feeds)
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]


def test_quiet_verbose_and_no_check(tmp_path: Path) -> None:
    model, _ = CASES["nested_sequence_map"]()
    onnx.save(model, tmp_path / "in.onnx")
    code, out, err = run_cli(tmp_path / "in.onnx", "-o", tmp_path / "q.onnx", "-q", "--no-check")
    assert (code, out, err) == (0, "", "")
    code, out, _ = run_cli(tmp_path / "in.onnx", "-o", tmp_path / "v.onnx", "-v")
    assert code == 0
    assert re.search(r"^lower-sequence-map +2 ", out, re.M)
    assert "Loop" in out and "before" in out


def test_pass_selection(tmp_path: Path) -> None:
    model, _ = CASES["multi_io"]()
    onnx.save(model, tmp_path / "in.onnx")
    code, _, _ = run_cli(
        tmp_path / "in.onnx", "-o", tmp_path / "o.onnx", "--passes", "lower-sequence-map"
    )
    assert code == 0
    code, _, err = run_cli(tmp_path / "in.onnx", "-o", tmp_path / "x.onnx", "--passes", "nope")
    assert code == 2 and "unknown pass nope" in err
    assert not (tmp_path / "x.onnx").exists()
    code, out, _ = run_cli("--list-passes")
    assert code == 0 and out.startswith("lower-sequence-map")


def test_help_and_version() -> None:
    code, out, _ = run_cli("--help")
    assert code == 0 and "Examples:" in out and "Exit codes:" in out
    code, out, _ = run_cli("lower", "--help")
    assert code == 0 and "-o, --output" in out and "--no-check" in out
    code, out, _ = run_cli("--version")
    assert code == 0 and out.startswith(f"seqlower {seqlower.__version__}\n")


def test_version_names_every_library_and_installed_runtime() -> None:
    """Bug reports need what ran: each dependency with its installed version, as pip sees it."""
    code, out, _ = run_cli("--version")
    assert code == 0
    listed = dict(line.split() for line in out.splitlines()[1:])
    for name in ("onnx", "onnx-ir", "onnxscript", "onnxruntime", "numpy"):
        assert listed[name] == importlib.metadata.version(name)
    for runtime in ("openvino", "tract"):
        try:
            installed = importlib.metadata.version(runtime)
        except importlib.metadata.PackageNotFoundError:
            assert runtime not in listed
        else:
            assert listed[runtime] == installed


def test_versions_read_from_metadata_files_match_importlib_metadata() -> None:
    """--version reads the metadata headers itself (importlib.metadata is slow to import): the
    same answer for every distribution it names, installed or not."""
    from seqlower._version import _OPTIONAL, _REQUIRED, dependency_versions

    listed = dependency_versions()
    for name in (*_REQUIRED, *_OPTIONAL):
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = "not installed"
        assert listed.get(name, "not installed") == installed, name


def test_versions_first_on_the_path_and_zip_entries_asked_of_importlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seqlower import _version

    first, second = tmp_path / "first", tmp_path / "second"
    (first / "Onnx_IR-9.9.dist-info").mkdir(parents=True)
    (first / "Onnx_IR-9.9.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: onnx-ir\nVersion: 9.9rc1\n\nVersion: body\n"
    )
    (second / "onnx_ir-1.0.dist-info").mkdir(parents=True)
    (second / "onnx_ir-1.0.dist-info" / "METADATA").write_text("Name: onnx-ir\nVersion: 1.0\n")
    (second / "tract.egg-info").write_text("Metadata-Version: 1.0\nName: tract\nVersion: 7\n")
    monkeypatch.setattr(sys, "path", [str(first), str(second)])
    found, complete = _version._scan_path({"onnx_ir": "onnx-ir", "tract": "tract"})
    assert found == {"onnx-ir": "9.9rc1", "tract": "7"} and complete
    zipped = tmp_path / "lib.zip"
    zipped.write_bytes(b"PK")
    monkeypatch.setattr(sys, "path", [str(zipped), str(second)])
    assert _version._scan_path({"onnx_ir": "onnx-ir"}) == ({"onnx-ir": "1.0"}, False)


def test_console_script_exit_code_and_no_traceback(tmp_path: Path) -> None:
    """The installed entry point, in a real process: exit status and stderr as a shell sees them."""
    target = tmp_path / "out.onnx"
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"garbage")
    proc = subprocess.run(
        [sys.executable, "-m", "seqlower", str(bad), "-o", str(target)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert not target.exists()
