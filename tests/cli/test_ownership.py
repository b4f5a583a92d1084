"""What a run may replace: only what it wrote itself, or the OUT the user named (with its own
``OUT.data`` and an ``OUT.failing-inputs`` folder holding nothing but what seqlower writes
there). Anything else in the way is exit 2 before any work, naming the path (issue 42)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest

from seqlower import passes as seqlower_passes
from tests.cli.test_files import output_of, save_external, weighted_model
from tests.helpers import assert_one_line_error, run_cli

NEG = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 3] x) => (float[N, 3] y) { y = Neg(x) }
    """
)
ABS = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 3] x) => (float[N, 3] y) { y = Abs(x) }
    """
)


def save(model: onnx.ModelProto, folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    onnx.save(model, path)
    return path


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` (links not followed), with a file's bytes."""
    found: dict[str, bytes | None] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            found[name] = os.readlink(path).encode()
        elif path.is_file():
            found[name] = path.read_bytes()
        else:
            found[name] = None
    return found


@pytest.fixture
def buggy(monkeypatch: pytest.MonkeyPatch) -> Iterator[onnx.ModelProto]:
    """A pass that lowers wrongly (``--passes buggy``), and a model it lowers: a mismatch."""
    from tests.sequence_map_cases import CASES
    from tests.verification.test_verify import Buggy

    monkeypatch.setitem(seqlower_passes.PASSES, "buggy", Buggy)
    yield CASES["multi_io"]()[0]


# ----------------------------------------------- 1. OUT.failing-inputs holding someone's files


@pytest.mark.parametrize("where", ["top", "inside a set"])
def test_a_user_folder_at_out_failing_inputs_is_refused_before_any_work(
    tmp_path: Path, buggy: onnx.ModelProto, where: str
) -> None:
    source = save(buggy, tmp_path, "m.onnx")
    out = tmp_path / "lowered.onnx"
    folder = tmp_path / "lowered.onnx.failing-inputs"
    mine = folder / ("notes.txt" if where == "top" else "test_data_set_0/notes.txt")
    mine.parent.mkdir(parents=True)
    mine.write_text("mine")
    before = tree(tmp_path)
    assert_one_line_error(run_cli(source, "-o", out, "--passes", "buggy"), str(folder))
    assert tree(tmp_path) == before
    # Told where else the failing inputs may go (or that none are wanted), the run goes ahead.
    result = run_cli(source, "-o", out, "--passes", "buggy", "--no-save-failing-inputs")
    assert result.exit_code == 1, result.stderr
    assert tree(tmp_path) == before


def test_verify_leaves_a_user_folder_at_candidate_failing_inputs(tmp_path: Path) -> None:
    """verify saves no failing inputs unless asked (issue 43): the folder is not its business."""
    a, b = save(NEG, tmp_path, "a.onnx"), save(ABS, tmp_path, "b.onnx")
    mine = tmp_path / "b.onnx.failing-inputs" / "x.onnx"
    mine.parent.mkdir()
    mine.write_bytes(b"someone's model")
    before = tree(tmp_path)
    assert run_cli("verify", a, b).exit_code == 1
    assert tree(tmp_path) == before


def test_failing_inputs_of_a_previous_run_are_replaced(
    tmp_path: Path, buggy: onnx.ModelProto
) -> None:
    source = save(buggy, tmp_path, "m.onnx")
    out = tmp_path / "out.onnx"
    for _ in range(2):  # the folder the first run wrote is seqlower's: the second replaces it
        assert run_cli(source, "-o", out, "--passes", "buggy").exit_code == 1
    names = sorted(tree(tmp_path / "out.onnx.failing-inputs"))
    assert names[0] == "test_data_set_0" and all(n.endswith(".pb") for n in names[1:]), names


def test_batch_refuses_a_model_inside_another_s_failing_inputs(tmp_path: Path) -> None:
    """``zoo/m.onnx.failing-inputs/x.onnx`` would be written into the folder ``m.onnx``'s
    mismatch replaces: refused before any model is run."""
    zoo = tmp_path / "zoo"
    save(NEG, zoo, "m.onnx")
    save(NEG, zoo / "m.onnx.failing-inputs", "x.onnx")
    out = tmp_path / "out"
    line = assert_one_line_error(run_cli(zoo, "-o", f"{out}/"), "m.onnx.failing-inputs")
    assert "x.onnx" in line
    assert not out.exists()


def test_batch_refuses_a_model_given_inside_another_s_owned_paths(tmp_path: Path) -> None:
    a = save(NEG, tmp_path, "a.onnx")
    out = tmp_path / "out"
    inside = save(NEG, out / "a.onnx.failing-inputs", "b.onnx")
    before = tree(tmp_path)
    assert_one_line_error(run_cli(a, inside, "-o", f"{out}/"), str(inside))
    assert tree(tmp_path) == before


def test_batch_refuses_an_output_inside_another_s_weights_path(tmp_path: Path) -> None:
    zoo = tmp_path / "zoo"
    save(NEG, zoo, "a.onnx")
    save(NEG, zoo / "a.onnx.data", "b.onnx")
    out = tmp_path / "out"
    assert_one_line_error(run_cli(zoo, "-o", f"{out}/"), "a.onnx.data")
    assert not out.exists()


# -------------------------------------------------- 2. --save-inputs/--save-outputs DIR


@pytest.mark.parametrize("flags", [["--save-inputs"], ["--save-outputs"], ["both"]])
@pytest.mark.parametrize("k", [0, 1, 2])
def test_save_data_refuses_any_existing_set(tmp_path: Path, flags: list[str], k: int) -> None:
    source = save(NEG, tmp_path, "m.onnx")
    kept = tmp_path / "kept"
    mine = kept / f"test_data_set_{k}" / "input_0.pb"
    mine.parent.mkdir(parents=True)
    mine.write_bytes(b"my own data")
    given = []
    for flag in ["--save-inputs", "--save-outputs"] if flags == ["both"] else flags:
        given += [flag, kept]
    before = tree(tmp_path)
    for args in ([source, "-o", tmp_path / "o.onnx"], ["verify", source, source]):
        line = assert_one_line_error(run_cli(*args, "--check-n", "3", *given), str(mine.parent))
        assert given[0] in line
        assert tree(tmp_path) == before


def test_save_data_folder_given_again_is_refused(tmp_path: Path) -> None:
    source = save(NEG, tmp_path, "m.onnx")
    kept = tmp_path / "kept"
    first = run_cli("verify", source, source, "--save-inputs", kept, "--save-outputs", kept)
    assert first.exit_code == 0, first.stderr
    before = tree(tmp_path)
    again = run_cli("verify", source, source, "--save-inputs", kept, "--save-outputs", kept)
    assert_one_line_error(again, "--save-inputs", "test_data_set_0")
    assert tree(tmp_path) == before


def test_save_failing_inputs_never_replaces_a_file_named_like_a_set(tmp_path: Path) -> None:
    a, b = save(NEG, tmp_path, "a.onnx"), save(ABS, tmp_path, "b.onnx")
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    (chosen / "test_data_set_0").write_text("not a set: a file of mine")
    before = tree(tmp_path)
    result = run_cli("verify", a, b, "--save-failing-inputs", chosen)
    assert_one_line_error(result, "--save-failing-inputs", str(chosen / "test_data_set_0"))
    assert tree(tmp_path) == before


def test_one_folder_for_failing_inputs_and_every_run_is_refused(tmp_path: Path) -> None:
    """Both would write ``test_data_set_0``: one would replace the other."""
    a, b = save(NEG, tmp_path, "a.onnx"), save(ABS, tmp_path, "b.onnx")
    kept = tmp_path / "kept"
    result = run_cli("verify", a, b, "--save-failing-inputs", kept, "--save-inputs", kept)
    assert_one_line_error(result, "--save-failing-inputs", "--save-inputs")
    assert not kept.exists()


def test_save_data_into_the_failing_inputs_folder_is_refused(tmp_path: Path) -> None:
    """A mismatch replaces ``OUT.failing-inputs`` whole: no other set goes there."""
    source = save(NEG, tmp_path, "a.onnx")
    folder = tmp_path / "out.onnx.failing-inputs"
    result = run_cli(source, "-o", tmp_path / "out.onnx", "--save-inputs", folder)
    assert_one_line_error(result, "--save-inputs")
    assert not folder.exists()


# ---------------------------------------------------------- 3. links inside the batch's OUTDIR


def test_batch_never_writes_through_a_link_inside_outdir(tmp_path: Path) -> None:
    zoo = tmp_path / "zoo"
    save(NEG, zoo / "a", "m.onnx")
    save(ABS, zoo / "b", "m.onnx")
    out = tmp_path / "out"
    out.mkdir()
    (out / "a").symlink_to("b")
    before = tree(tmp_path)
    assert_one_line_error(run_cli(zoo, "-o", f"{out}/"), str(out / "a"))
    assert tree(tmp_path) == before


# ------------------------------------------ 4. weights another model in OUT's folder reads


@pytest.mark.parametrize("copy", ["cp", "ln"])
def test_rewriting_out_keeps_weights_a_copy_of_it_reads(tmp_path: Path, copy: str) -> None:
    first = save_external(weighted_model(2.0), tmp_path / "first.onnx", "first.bin")
    second = save_external(weighted_model(7.0), tmp_path / "second.onnx", "second.bin")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out, backup = out_dir / "m.onnx", out_dir / "m_backup.onnx"
    assert run_cli(first, "-o", out).exit_code == 0
    assert (out_dir / "m.onnx.data").is_file()
    if copy == "cp":  # cp out/m.onnx out/m_backup.onnx
        backup.write_bytes(out.read_bytes())
    else:  # ln out/m.onnx out/m_backup.onnx: the old OUT itself lives on under that name
        os.link(out, backup)
    result = run_cli(second, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert output_of(out) == 7.0
    assert output_of(backup) == 2.0  # its weights are still there
    assert str(backup) in result.stderr and "m.onnx.data" in result.stderr
    data = sorted(p.name for p in out_dir.iterdir() if p.name.endswith(".data"))
    assert len(data) == 2 and "m.onnx.data" in data, data


def test_replacing_a_named_weights_file_another_model_reads_is_said(tmp_path: Path) -> None:
    first = save_external(weighted_model(2.0), tmp_path / "first.onnx", "first.bin")
    second = save_external(weighted_model(7.0), tmp_path / "second.onnx", "second.bin")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out, backup = out_dir / "m.onnx", out_dir / "m_backup.onnx"
    assert run_cli(first, "-o", out, "--external-data", "w.bin").exit_code == 0
    backup.write_bytes(out.read_bytes())
    result = run_cli(second, "-o", out, "--external-data", "w.bin")
    assert result.exit_code == 0, result.stderr
    assert output_of(out) == 7.0
    assert str(backup) in result.stderr and "w.bin" in result.stderr


# ------------------------------------------------- 9. saved test-data folders follow the umask


def test_saved_data_folders_follow_the_umask(tmp_path: Path, buggy: onnx.ModelProto) -> None:
    a, b = save(NEG, tmp_path, "a.onnx"), save(ABS, tmp_path, "b.onnx")
    source = save(buggy, tmp_path, "m.onnx")
    old = os.umask(0o022)
    try:
        assert run_cli("verify", a, b, "--save-inputs", tmp_path / "kept").exit_code == 1
        assert run_cli("verify", a, b, "--save-failing-inputs", tmp_path / "chosen").exit_code == 1
        out = tmp_path / "out.onnx"
        assert run_cli(source, "-o", out, "--passes", "buggy").exit_code == 1
    finally:
        os.umask(old)
    folders = [
        tmp_path / "out.onnx.failing-inputs",
        tmp_path / "out.onnx.failing-inputs" / "test_data_set_0",
        tmp_path / "kept",
        tmp_path / "kept" / "test_data_set_0",
        tmp_path / "chosen" / "test_data_set_0",
    ]
    for folder in folders:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755, folder
    assert np.all([stat.S_IMODE(p.stat().st_mode) == 0o644 for p in folders[1].iterdir()])
