"""Batch mode: ``seqlower a.onnx b.onnx models/ -o outdir/ [-j N]``.

Each model is lowered by its own ``seqlower MODEL -o OUTDIR/NAME`` process with the same flags,
so every model is exactly as safe as a single run (its own staging, locks, signal handling and
memory; a crash or an out-of-memory ends that model only), and ``-j N`` runs N of them at once.
One line per model as it finishes, then a table in the order given; the exit code is the worst
model's (0 when all succeeded).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import click

from seqlower._fs import owned_paths
from seqlower._signals import spawn
from seqlower.cli.output import Printer
from seqlower.errors import BadOptionError, ExitCode, OutputError
from seqlower.summary import seconds

__all__ = ["CHILD", "BatchItem", "child_flags", "plan_batch", "run_batch", "shared_memory"]

#: Set in each model's run: a run started by a batch never starts one itself.
CHILD = "SEQLOWER_BATCH_CHILD"

#: Flags that name one file or folder: several models would write it in turn.
_ONE_MODEL_FLAGS = (
    "--report",
    "--external-data",
    "--save-inputs",
    "--save-outputs",
    "--save-failing-inputs",
    "--inputs",
    "--expected",
)

_WORDS: dict[int, str] = {
    ExitCode.OK: "ok",
    ExitCode.MISMATCH: "mismatch",
    ExitCode.BAD_INPUT: "error",
    ExitCode.CANNOT_VERIFY: "unverified",
    ExitCode.INTERNAL: "internal error",
}


@dataclass
class BatchItem:
    """One model of the batch, where it goes, and (once run) how it ended."""

    model: Path
    output: Path | None
    code: int | None = None
    seconds: float = 0.0
    reason: str = ""

    @property
    def word(self) -> str:
        if self.code is None:
            return "not run"
        if self.code > 128:
            return "interrupted"
        return _WORDS.get(self.code, f"exit {self.code}")


def plan_batch(models: Sequence[Path], output: str | None) -> list[BatchItem]:
    """The models (folders: every ``*.onnx`` under them, kept at their relative path) and their
    outputs in the folder ``output``; refused before any work when two would write one file."""
    folder = None if output is None else Path(output)
    if folder is not None:
        if not folder.is_dir() and not str(output).endswith(os.sep):
            raise OutputError(
                f"-o {output}: a batch (several models, or a directory of them) is written to a "
                f"directory: give -o {output}{os.sep} (created if absent)"
            )
        if folder.exists() and not folder.is_dir():
            raise OutputError(f"-o {output}: not a directory")
        if not folder.parent.is_dir():
            raise OutputError(f"-o {output}: the directory {folder.parent} does not exist")
    items: list[BatchItem] = []
    for given in models:
        if given.is_dir():
            found = sorted(
                p
                for p in given.rglob("*.onnx")
                if p.is_file()
                and (folder is None or not p.resolve().is_relative_to(folder.resolve()))
            )
            if not found:
                raise BadOptionError(f"{given}: a directory with no .onnx file under it")
            pairs = [(p, p.relative_to(given)) for p in found]
        else:
            pairs = [(given, Path(given.name))]
        for model, relative in pairs:
            out = None if folder is None else folder / relative
            if out is not None and folder is not None:
                _no_link_between(folder, out)
            items.append(BatchItem(model, out))
    _no_shared_paths(items)
    return items


def _no_link_between(folder: Path, out: Path) -> None:
    """Refuse a link among the folders between OUTDIR and ``out``: a run writing there would
    write wherever it points (and two outputs could be one file)."""
    for parent in reversed(out.relative_to(folder).parents[:-1]):
        if (folder / parent).is_symlink():
            raise OutputError(
                f"-o {folder}{os.sep}: {folder / parent} is a symbolic link; a batch writes "
                "only into real folders under OUTDIR, never through a link (remove it, or "
                "lower into another folder)"
            )


def _resolved(path: Path) -> Path:
    """``path`` with its folders' links resolved, not its own name: a write replaces a link
    at OUT itself, never what it points to."""
    return Path(os.path.realpath(path.parent)) / path.name


def _no_shared_paths(items: list[BatchItem]) -> None:
    """Refuse, before any work, two models whose runs would write the same path: OUT and what
    OUT owns (``OUT.data``, ``OUT.failing-inputs``), or one inside the other's (a model lowered
    into another's failing inputs, which that model's mismatch would replace); likewise a model
    read from inside another's owned paths. Paths are compared with their folders resolved."""
    owners: dict[Path, tuple[BatchItem, Path]] = {}
    for item in items:
        for path in () if item.output is None else owned_paths(item.output):
            other, _ = owners.setdefault(_resolved(path), (item, path))
            if other is not item:
                raise BadOptionError(
                    f"{other.model} and {item.model} would both be written to {path}; lower "
                    "them into different folders"
                )
    for item in items:
        uses = [(item.model, Path(os.path.realpath(item.model)), "read from")]
        if item.output is not None:
            uses += [(path, _resolved(path), "written to") for path in owned_paths(item.output)]
        for path, resolved, role in uses:
            for place in (resolved, *resolved.parents):
                owner, owned = owners.get(place, (item, path))
                if owner is not item:
                    raise BadOptionError(
                        f"{item.model} would be {role} {path}, inside {owned}, which "
                        f"{owner.model}'s run writes or replaces; lower them into different "
                        "folders"
                    )


def child_flags(raw: Sequence[str], command: click.Command, models: Sequence[Path]) -> list[str]:
    """The flags of ``raw`` (this command's arguments) for each model's own run: without the
    models, ``-o`` and ``-j``; refused when one names a single file every run would write."""
    takes_value = {
        name
        for param in command.params
        if isinstance(param, click.Option) and not param.is_flag and not param.count
        for name in param.opts + param.secondary_opts
    }
    left = list(models)
    flags: list[str] = []
    args = list(raw[1:] if raw and raw[0] == "lower" else raw)
    k = 0
    while k < len(args):
        arg = args[k]
        name = arg.split("=", 1)[0]
        if name in _ONE_MODEL_FLAGS:
            raise BadOptionError(
                f"{name} names one file or folder: give it for one model, not a batch"
            )
        if name in ("-o", "--output", "-j", "--jobs"):
            k += 1 if "=" in arg else 2
            continue
        if arg[:2] in ("-o", "-j") and len(arg) > 2:  # -oOUT, -j4: the value attached
            k += 1
            continue
        if arg.startswith("-") and name in takes_value:
            flags += args[k : k + (1 if "=" in arg else 2)]
            k += 1 if "=" in arg else 2
            continue
        if not arg.startswith("-") and Path(arg) in left:
            left.remove(Path(arg))
        else:
            flags.append(arg)
        k += 1
    return flags


def shared_memory(flags: list[str], jobs: int) -> list[str]:
    """``flags`` with each run's check given 1/``jobs`` of the default memory budget (a quarter
    of physical memory) when several run at once and ``--check-memory`` does not say."""
    if jobs == 1 or any(f.split("=", 1)[0] == "--check-memory" for f in flags):
        return flags
    from seqlower.verification.check import default_memory_budget

    return [*flags, "--check-memory", str(default_memory_budget() // jobs)]


def run_batch(items: list[BatchItem], flags: list[str], jobs: int, show: Printer) -> int:
    """Run every item (``jobs`` at a time); one line each as it ends, then the table. Ctrl-C
    stops the runs under way (each leaves its OUT as it was) and starts no more."""
    live: set[subprocess.Popen[str]] = set()
    lock = threading.Lock()
    stopping = threading.Event()

    def one(item: BatchItem) -> BatchItem:
        if stopping.is_set():
            return item
        command = [sys.executable, "-m", "seqlower", str(item.model), *flags]
        if item.output is not None:
            item.output.parent.mkdir(parents=True, exist_ok=True)
            command[4:4] = ["-o", str(item.output)]
        start = time.perf_counter()
        with spawn(
            command,
            death_signal=signal.SIGTERM,  # the run unwinds, removing its temporary files
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "NO_COLOR": "1", CHILD: "1"},
        ) as process:
            with lock:
                live.add(process)
            _, stderr = process.communicate()
            with lock:
                live.discard(process)
        item.code, item.seconds = process.returncode, time.perf_counter() - start
        if item.code < 0:  # killed by a signal it could not handle (SIGKILL: out of memory)
            item.code = 128 - item.code
        lines = [line for line in stderr.splitlines() if line.startswith("seqlower: ")]
        item.reason = lines[-1].removeprefix("seqlower: ").removeprefix("error: ") if lines else ""
        return item

    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = [pool.submit(one, item) for item in items]
        for future in as_completed(futures):
            item = future.result()
            if item.code is not None:
                show.line(_line(item))
    except KeyboardInterrupt:
        stopping.set()
        with lock:
            for process in live:
                process.terminate()  # SIGTERM: the run cleans up and leaves OUT as it was
        pool.shutdown(wait=True, cancel_futures=True)
        _table(items, show)
        show.error("interrupted; the models marked ok were written in full, the others not")
        return ExitCode.INTERRUPTED
    pool.shutdown(wait=True)
    _table(items, show)
    return max((item.code or 0 for item in items), default=0)


def _line(item: BatchItem) -> str:
    where = "" if item.output is None else f" -> {item.output}"
    why = f": {item.reason}" if item.code and item.reason else ""
    return f"{item.word}: {item.model}{where} ({seconds(item.seconds)}){why}"


def _table(items: list[BatchItem], show: Printer) -> None:
    width = max(len(str(item.model)) for item in items)
    show.line(f"{'model':{width}}  {'result':14} {'time':>8}")
    for item in items:
        show.line(f"{item.model!s:{width}}  {item.word:14} {seconds(item.seconds):>8}")
    failed = sum(1 for item in items if item.code != 0)
    show.line(
        f"{len(items) - failed} of {len(items)} models lowered"
        + (f"; {failed} failed" if failed else "")
    )
