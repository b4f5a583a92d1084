"""What a run leaves on disk besides OUT, and the paths it must not harm: the up-front path
check, the check's saved test-data sets (``--save-inputs``/``--save-outputs``) and a mismatch's
failing inputs. Split from :mod:`seqlower.job` so the run reads as lowering, not bookkeeping.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import onnx

from seqlower._fs import (
    check_external_data_name,
    check_failing_inputs_folder,
    check_target,
    data_sets,
    failing_inputs_folder,
    folder_lock,
    give_default_folder_mode,
    put_folder_in_place,
    replace_own_folder,
)
from seqlower.errors import ModelLoadError, OutputError

if TYPE_CHECKING:
    from seqlower.verification import VerifyReport

__all__ = [
    "SaveOptions",
    "check_paths",
    "keeps_runs",
    "save_failing",
    "save_failing_inputs",
    "save_runs",
]


@dataclass(frozen=True)
class SaveOptions:
    """What the check leaves on disk, as ONNX test-data sets (``test_data_set_K/input_J.pb``,
    ``output_J.pb``: what ``--inputs``/``--expected`` read back).

    ``failing_inputs``: the folder for a mismatch's first failing run (default: beside OUT or
    CANDIDATE, ``OUT.failing-inputs``); ``no_failing_inputs`` saves none. ``inputs`` and
    ``outputs``: folders for every compared run's inputs and the original's outputs on them,
    whatever the verdict (polygraphy's ``--save-inputs``/``--save-outputs``); one folder for
    both holds complete sets.
    """

    failing_inputs: Path | None = None
    no_failing_inputs: bool = False
    inputs: Path | None = None
    outputs: Path | None = None

    @property
    def default_failing_inputs(self) -> bool:
        """Whether a mismatch's failing inputs go to ``OUT.failing-inputs`` (or CANDIDATE's)."""
        return self.failing_inputs is None and not self.no_failing_inputs

    def folders(self) -> list[tuple[Path, str]]:
        """The folders given, with their flags, for the up-front path check."""
        flags = (
            (self.failing_inputs, "--save-failing-inputs"),
            (self.inputs, "--save-inputs"),
            (self.outputs, "--save-outputs"),
        )
        return [(Path(path), flag) for path, flag in flags if path is not None]


def keeps_runs(save: SaveOptions) -> bool:
    return save.inputs is not None or save.outputs is not None


def check_paths(
    model: Path | None,
    output: Path | None,
    external_data: str | None,
    report: Path | None,
    inputs: Path | None = None,
    save: SaveOptions | None = None,
    *,
    failing_beside: Path | None = None,
) -> None:
    """Refuse, before any work, paths that would fail or do harm once the work is done.

    ``failing_beside``: the model beside which a mismatch's failing inputs go by default
    (OUT, or verify's CANDIDATE), when they may be saved there.
    """
    if save is not None:
        _check_save_folders(save)
    if failing_beside is not None and save is not None and save.default_failing_inputs:
        failing = failing_inputs_folder(failing_beside)
        for folder, flag in save.folders():
            if _same_folder(folder, failing):  # a mismatch replaces that folder whole
                raise OutputError(
                    f"{flag} {folder}: that is where a mismatch's failing inputs go; give "
                    "another folder, or --save-failing-inputs DIR"
                )
        check_failing_inputs_folder(
            failing, "--save-failing-inputs DIR or --no-save-failing-inputs"
        )
    if model is not None and not model.exists():
        raise ModelLoadError(f"{model}: no such file")
    if inputs is not None and not inputs.exists():
        raise ModelLoadError(f"--inputs {inputs}: no such file or folder")
    if output is not None:
        check_target(output, "-o")
        if model is not None and external_data is not None:
            check_external_data_name(external_data, output, inputs=[model])
    if report is not None:
        check_target(report, "--report")
        taken = [p for p in (model, output, inputs) if p is not None]
        if external_data is not None and output is not None:
            taken.append(output.parent / external_data)
        for path in taken:
            if os.path.realpath(report) == os.path.realpath(path):
                raise OutputError(f"--report {report}: that is {path}, which this run uses")


def _check_save_folders(save: SaveOptions) -> None:
    """The folders the check's data goes into: each a folder or absent, in a folder that takes
    files, holding no test-data set this run would write (seqlower adds sets, never replaces
    one: a set is somebody's data, even one an earlier run saved)."""
    given = save.folders()
    for folder, flag in given:
        if os.path.lexists(folder) and (folder.is_symlink() or not folder.is_dir()):
            raise OutputError(f"{flag} {folder}: not a folder")
        # The sets go in under a private name first, then are renamed in: the same test as a file.
        if not folder.is_dir():
            check_target(folder, flag)
            continue
        taken = data_sets(folder)
        if flag == "--save-failing-inputs":  # only set 0 goes there
            taken = [p for p in taken if p.name == "test_data_set_0"]
        if taken:
            raise OutputError(
                f"{flag} {folder}: {taken[0]} exists, and seqlower never replaces a saved "
                "test-data set; give a new or empty folder"
            )
        check_target(folder / "test_data_set_0", flag)
    failing = [folder for folder, flag in given if flag == "--save-failing-inputs"]
    for folder, flag in given:
        if failing and flag != "--save-failing-inputs" and _same_folder(folder, failing[0]):
            raise OutputError(
                f"--save-failing-inputs {failing[0]} and {flag} {folder}: both would write "
                "test_data_set_0 there; give them different folders"
            )


def _same_folder(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def save_failing(
    report: VerifyReport, original: onnx.ModelProto, beside: Path, save: SaveOptions
) -> tuple[Path | None, list[str]]:
    """A mismatch's first failing inputs where ``save`` says (default: beside ``beside``)."""
    if save.no_failing_inputs or report.failing_inputs is None:
        return None, []
    folder = save.failing_inputs or failing_inputs_folder(beside)
    saved = save_failing_inputs(report, original, beside, folder=folder)
    if saved is None:
        if save.failing_inputs is not None:
            why = f"{folder / 'test_data_set_0'} is already there (a set is never replaced)"
        else:
            why = f"{folder} is a link, a file, or holds files seqlower did not write"
        return None, [f"failing inputs not saved: {why}"]
    return saved, []


def save_runs(report: VerifyReport, original: onnx.ModelProto, save: SaveOptions) -> list[str]:
    """Every compared run's inputs (``save.inputs``) and the original's outputs on them
    (``save.outputs``), run K (from 0) as ``test_data_set_K``, each set staged and renamed in
    (never over a set already there: the warnings say which were not saved)."""
    from seqlower.verification.input_files import save_inputs, save_outputs

    folders: dict[str, tuple[Path, set[str]]] = {}
    for path, kind in ((save.inputs, "inputs"), (save.outputs, "outputs")):
        if path is not None:
            folders.setdefault(os.path.realpath(path), (path, set()))[1].add(kind)
    warnings = []
    for k, (feeds, outputs) in enumerate(report.kept_runs):
        for folder, kinds in folders.values():
            folder.mkdir(exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".test_data_set.", dir=folder))
            try:
                if "inputs" in kinds:
                    save_inputs(staging, feeds, original)
                if "outputs" in kinds:
                    names = [o.name for o in original.graph.output]
                    save_outputs(staging, dict(zip(names, outputs, strict=True)), original)
                give_default_folder_mode(staging)
                target = folder / f"test_data_set_{k}"
                if not put_folder_in_place(staging, target):
                    warnings.append(f"{target} not saved: something else is there now")
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return warnings


def save_failing_inputs(
    report: VerifyReport,
    original: onnx.ModelProto,
    output: Path,
    *,
    folder: Path | None = None,
) -> Path | None:
    """Save the inputs of the first failing run beside OUT (``OUT.failing-inputs``), or as
    ``test_data_set_0`` in ``folder`` when given, with the framework's outputs for them when
    the check had some (so ``--expected`` can read the same folder), staged and renamed into
    place like every other write; None when there are none or no room: ``OUT.failing-inputs``
    is replaced only when it holds nothing but a previous run's failing inputs, and a set in
    ``folder`` never."""
    from seqlower.verification.input_files import save_inputs, save_outputs

    if report.failing_inputs is None:
        return None
    default = failing_inputs_folder(output)
    folder = default if folder is None else folder
    if os.path.lexists(folder) and (folder.is_symlink() or not folder.is_dir()):
        return None
    if folder != default:
        folder.mkdir(exist_ok=True)
    parent = folder.parent if folder == default else folder
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=parent))
    try:
        save_inputs(staging / "test_data_set_0", report.failing_inputs, original)
        if report.failing_outputs is not None:
            save_outputs(staging / "test_data_set_0", report.failing_outputs, original)
        give_default_folder_mode(staging / "test_data_set_0")
        if folder == default:
            give_default_folder_mode(staging)
            with folder_lock(folder.parent):  # two runs failing on one OUT take turns
                placed = replace_own_folder(staging, folder)
        else:
            placed = put_folder_in_place(staging / "test_data_set_0", folder / "test_data_set_0")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder if placed else None
