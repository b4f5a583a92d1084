"""Batch mode: ``seqlower a.onnx b.onnx models/ -o outdir/ [-j N]``.

Each model is lowered by its own ``seqlower MODEL -o OUTDIR/NAME`` process with the same flags,
so every model is exactly as safe as a single run (its own staging, locks, signal handling and
memory; a crash or an out-of-memory ends that model only), and ``-j N`` runs N of them at once.
One line per model as it finishes (a failure's whole reason: every blocker and the flag hint; a
success's warnings), then a table in the order given, where a model copied as read is
``unchanged`` and one that succeeded with warnings is ``warnings``; the exit code is the worst
model's (0 when all succeeded). Each run writes its JSON report into a private folder; with
``--report FILE`` they are joined into one, with each model's exit code, culprit, blockers and
timings.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from seqlower._fs import owned_paths, write_file_atomically
from seqlower._signals import spawn
from seqlower.cli.output import Printer
from seqlower.errors import BadOptionError, ExitCode, OutputError
from seqlower.summary import seconds

__all__ = ["CHILD", "BatchItem", "child_flags", "plan_batch", "run_batch", "shared_memory"]

#: Set in each model's run: a run started by a batch never starts one itself.
CHILD = "SEQLOWER_BATCH_CHILD"

#: In each model's run: the file descriptor on which it tells the batch what it put in place
#: (:func:`tell_batch`): a run interrupted after its renames exits 130 having written its OUT.
STATUS = "SEQLOWER_BATCH_STATUS"

#: Flags that name one file or folder: several models would write it in turn.
_ONE_MODEL_FLAGS = (
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
    reason: str = ""  # a failure's whole message (its blockers and hint on the next lines)
    warnings: list[str] = field(default_factory=list)
    #: The run's own JSON report (what ``seqlower MODEL -o OUT --report`` writes), when written.
    report: dict[str, Any] | None = None
    written: list[str] = field(default_factory=list)  # what its run put in place, as it said

    @property
    def unchanged(self) -> bool:
        """Nothing was lowered: OUT is the model as read."""
        return self.code == ExitCode.OK and bool(self.report and self.report.get("unchanged"))

    @property
    def word(self) -> str:
        if self.code is None:
            return "not run"
        if self.code > 128:  # stopped; after its renames, OUT is the new one all the same
            return "written" if self.wrote_output else "interrupted"
        if self.code == ExitCode.OK and self.warnings:
            return "warnings"
        if self.unchanged:
            return "unchanged"
        return _WORDS.get(self.code, f"exit {self.code}")

    @property
    def wrote_output(self) -> bool:
        """Whether its run said it put OUT in place (OUT and its weights, in full)."""
        return self.output is not None and os.path.abspath(self.output) in self.written

    @property
    def blockers(self) -> list[str]:
        return [line[4:] for line in self.reason.splitlines()[1:] if line.startswith("  - ")]

    def to_dict(self) -> dict[str, Any]:
        """The batch report's entry for this model."""
        verification = (self.report or {}).get("verification") or {}
        return {
            "model": str(self.model),
            "output": None if self.output is None else str(self.output),
            "exit_code": self.code,
            "status": self.word,
            "culprit": verification.get("culprit") or None,
            "reason": self.reason or None,
            "blockers": self.blockers,
            "warnings": self.warnings,
            "seconds": round(self.seconds, 3),
            "passes": (self.report or {}).get("passes"),
            "report": self.report,
        }


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
        if given.is_dir() and folder is not None and _within(given, folder):
            why = (
                "is the input folder: each output would replace its model"
                if _within(folder, given)
                else f"holds the input folder {given}, and no model under OUTDIR is read (it "
                "may be an earlier batch's output)"
            )
            raise OutputError(f"-o {output}: the output folder {why}; lower into another folder")
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


def _within(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or under it, links resolved."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))


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


def child_flags(raw: Sequence[str], command: click.Command, ctx: click.Context) -> list[str]:
    """The flags of ``raw`` (this command's arguments) for each model's own run: without the
    models, ``-o``, ``-j`` and ``--report``; refused when one names a single file every run
    would write. Read by click's own parser (``-vo out/`` is ``-v -o out/``) and passed on in
    their long form, each value a separate argument, in the order given."""
    args = list(raw[1:] if raw and raw[0] == "lower" else raw)
    values, _, order = command.make_parser(ctx).parse_args(args)
    params = {param.name: param for param in command.params if isinstance(param, click.Option)}
    flags: list[str] = []
    for name in dict.fromkeys(param.name for param in order):
        param = params.get(name or "")
        if param is None or name not in values:
            continue  # the models
        option = next((o for o in param.opts if o.startswith("--")), param.opts[0])
        if option in _ONE_MODEL_FLAGS:
            raise BadOptionError(
                f"{option} names one file or folder: give it for one model, not a batch"
            )
        if option in ("--output", "--jobs", "--report"):  # the batch's own
            continue
        value = values[name]
        if param.count:
            flags += [option] * int(value)
        elif param.is_flag:
            bool_flag = getattr(param, "is_bool_flag", False)
            if value is True if bool_flag else value == param.flag_value:
                flags.append(option)
            elif param.secondary_opts:
                flags.append(param.secondary_opts[0])
        else:
            for one in value if param.multiple else [value]:
                flags += [option, *(one if isinstance(one, (list, tuple)) else [one])]
    return flags


def shared_memory(flags: list[str], jobs: int) -> list[str]:
    """``flags`` with each run's check given 1/``jobs`` of the default memory budget (a quarter
    of physical memory) when several run at once and ``--check-memory`` does not say."""
    if jobs == 1 or any(f.split("=", 1)[0] == "--check-memory" for f in flags):
        return flags
    from seqlower.verification.check import default_memory_budget

    return [*flags, "--check-memory", str(default_memory_budget() // jobs)]


def run_batch(
    items: list[BatchItem],
    flags: list[str],
    jobs: int,
    show: Printer,
    report: Path | None = None,
) -> int:
    """Run every item (``jobs`` at a time); one line each as it ends, then the table, and the
    batch's JSON ``report`` when asked. Ctrl-C stops the runs under way (each leaves its OUT as
    it was) and starts no more."""
    folder = Path(tempfile.mkdtemp(prefix="seqlower-batch-"))  # each run's own report
    try:
        code = _run_all(items, flags, jobs, show, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if report is not None:
        data = {
            "seqlower": _version(),
            "arguments": sys.argv[1:],
            "cwd": os.getcwd(),
            "exit_code": int(code),
            "models": [item.to_dict() for item in items],
        }
        text = json.dumps(data, indent=2, default=str) + "\n"
        write_file_atomically(report, text.encode(), "--report")
    return code


def tell_batch(paths: Sequence[Path]) -> None:
    """In a batch's run: tell the batch which files the run put in place (absolute paths,
    NUL-separated), whatever ended it."""
    fd = os.environ.get(STATUS)
    if not fd:
        return
    data = "".join(f"{os.path.abspath(path)}\0" for path in paths).encode()
    with contextlib.suppress(OSError, ValueError):
        os.write(int(fd), data)
        os.close(int(fd))


def _told(fd: int) -> list[str]:
    """What a run told the batch it put in place (read once the run has ended)."""
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    return [path for path in data.decode(errors="surrogateescape").split("\0") if path]


def _what_was_written(items: list[BatchItem]) -> str:
    """The files the runs put in place, every one, for the line that ends a stopped batch."""
    written = [path for item in items for path in item.written]
    if not written:
        return "nothing was written"
    verb = "were" if len(written) > 1 else "was"
    return f"{', '.join(written)} {verb} written in full; nothing else was written"


def _version() -> str:
    from seqlower._version import __version__

    return __version__


def _run_all(
    items: list[BatchItem], flags: list[str], jobs: int, show: Printer, reports: Path
) -> int:
    live = _Live()
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = [
            pool.submit(_run_one, k, item, flags, reports, live) for k, item in enumerate(items)
        ]
        for future in as_completed(futures):
            item = future.result()
            if item.code is not None:
                for line in _lines(item):
                    show.line(line)
    except KeyboardInterrupt as e:
        live.stopping.set()
        signum = getattr(e, "signum", signal.SIGINT)  # SIGTERM and SIGHUP: Interrupted
        with live.lock:
            for process in live.processes:
                with contextlib.suppress(OSError):
                    process.send_signal(signum)  # the run cleans up, leaving OUT as it was
        pool.shutdown(wait=True, cancel_futures=True)
        _table(items, show)
        code = getattr(e, "exit_code", ExitCode.INTERRUPTED)
        what = "interrupted" if code == ExitCode.INTERRUPTED else f"stopped by {e}"
        show.error(f"{what}; {_what_was_written(items)}")
        return code
    pool.shutdown(wait=True)
    _table(items, show)
    return max((item.code or 0 for item in items), default=0)


class _Live:
    """The runs in progress, which a Ctrl-C passes its signal on to, and whether the batch is
    stopping (no run starts then)."""

    def __init__(self) -> None:
        self.processes: set[subprocess.Popen[str]] = set()
        self.lock = threading.Lock()
        self.stopping = threading.Event()


def _run_one(
    index: int, item: BatchItem, flags: list[str], reports: Path, live: _Live
) -> BatchItem:
    """One model's ``seqlower lower`` process, its exit code, time, failure and report read
    into ``item``."""
    if live.stopping.is_set():
        return item
    own_report = reports / f"{index}.json"
    command = [sys.executable, "-m", "seqlower", "lower", *flags]
    command += ["--report", str(own_report)]
    if item.output is not None:
        item.output.parent.mkdir(parents=True, exist_ok=True)
        command += ["-o", str(item.output)]
    command += ["--", str(item.model)]  # a model named -m.onnx is not an option
    start = time.perf_counter()
    code, stderr, item.written = _child_run(command, live)
    item.code, item.seconds = code, time.perf_counter() - start
    if item.code < 0:  # killed by a signal it could not handle (SIGKILL: out of memory)
        item.code = 128 - item.code
    item.reason, item.warnings = _reason_and_warnings(stderr)
    try:
        item.report = json.loads(own_report.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        item.report = None  # a run that failed before its report (exit 2) has none
    return item


def _child_run(command: list[str], live: _Live) -> tuple[int, str, list[str]]:
    """Run ``command`` as a child that dies with the batch: its exit code, its stderr, and the
    paths it told (through a pipe) it wrote."""
    status, told = os.pipe()
    try:
        with spawn(
            command,
            death_signal=signal.SIGTERM,  # the run unwinds, removing its temporary files
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "NO_COLOR": "1", CHILD: "1", STATUS: str(told)},
            pass_fds=(told,),
            # Its own group: a Ctrl-C at the terminal reaches the batch alone, which passes
            # it on once (a second signal would cut the run's cleanup short).
            start_new_session=True,
        ) as process:
            os.close(told)
            told = -1
            with live.lock:
                live.processes.add(process)
            _, stderr = process.communicate()
            with live.lock:
                live.processes.discard(process)
        written = _told(status)
    finally:
        os.close(status)
        if told >= 0:
            os.close(told)
    return process.returncode, stderr, written


def _reason_and_warnings(stderr: str) -> tuple[str, list[str]]:
    """A run's failure, whole (its last ``seqlower:`` line and the indented lines after it:
    the blockers, a reproduce line), and its warnings, from its stderr."""
    lines = stderr.splitlines()
    warnings = [
        line.removeprefix("seqlower: warning: ")
        for line in lines
        if line.startswith("seqlower: warning: ")
    ]
    said = [k for k, line in enumerate(lines) if line.startswith("seqlower: ")]
    errors = [k for k in said if lines[k].startswith("seqlower: error: ")]
    if not said:
        return "", warnings
    first = errors[-1] if errors else said[-1]
    reason = [lines[first].removeprefix("seqlower: ").removeprefix("error: ")]
    for line in lines[first + 1 :]:
        if not line.startswith("  "):
            break
        reason.append(line)
    return "\n".join(reason), warnings


def _lines(item: BatchItem) -> list[str]:
    """The lines a model gets as it ends: its status, then a failure's whole reason (blockers
    and the flag hint) or a success's warnings."""
    where = "" if item.output is None else f" -> {item.output}"
    reason = item.reason.splitlines() if item.code and item.reason else []
    why = f": {reason[0]}" if reason else ""
    lines = [f"{item.word}: {item.model}{where} ({seconds(item.seconds)}){why}", *reason[1:]]
    if not item.code:
        lines += [f"  warning: {warning}" for warning in item.warnings]
    return lines


def _table(items: list[BatchItem], show: Printer) -> None:
    width = max(len(str(item.model)) for item in items)
    show.line(f"{'model':{width}}  {'result':14} {'time':>8}")
    for item in items:
        show.line(f"{item.model!s:{width}}  {item.word:14} {seconds(item.seconds):>8}")
    failed = sum(1 for item in items if item.code != 0 and item.word != "written")
    unchanged = sum(1 for item in items if item.unchanged)
    warned = sum(1 for item in items if item.code == 0 and item.warnings)
    show.line(
        f"{len(items) - failed - unchanged} of {len(items)} models lowered"
        + (f"; {unchanged} unchanged (nothing to lower)" if unchanged else "")
        + (f"; {warned} with warnings" if warned else "")
        + (f"; {failed} failed" if failed else "")
    )
