"""Replacing files the way a careful tool must: never through a link, never half, never a mix.

Every file seqlower writes is first written in full under a private name in the target's own
folder, then renamed over the target. A rename replaces a symlink itself rather than the file it
points to, is atomic for readers, and cannot leave half a file. Targets that are not regular
files (a device such as ``/dev/null``, a FIFO, a socket, a folder) are refused up front.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import errno
import fcntl
import functools
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from seqlower.errors import OutputError

__all__ = [
    "check_external_data_name",
    "check_failing_inputs_folder",
    "check_target",
    "deferred_signals",
    "failing_inputs_folder",
    "folder_lock",
    "foreign_entry",
    "give_default_folder_mode",
    "give_default_mode",
    "note_written",
    "owned_paths",
    "put_folder_in_place",
    "recording_writes",
    "replace_own_folder",
    "same_file",
    "write_file_atomically",
]

#: Signals that would kill the process mid-commit; held back while a commit runs.
COMMIT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


#: The files put in place so far by the run that is recording them (see recording_writes).
_WRITTEN: contextvars.ContextVar[list[Path] | None] = contextvars.ContextVar(
    "seqlower_written", default=None
)


@contextlib.contextmanager
def recording_writes() -> Iterator[list[Path]]:
    """The files the body puts in place (OUT, its weights), listed as each commit ends.

    An interrupt can come at any point after the renames (while the staging folder is removed,
    while the summary is made), long before the caller hears of the write; the CLI's line
    must still say what was replaced, so the commit records it here the moment it is done.
    """
    written: list[Path] = []
    token = _WRITTEN.set(written)
    try:
        yield written
    finally:
        _WRITTEN.reset(token)


def note_written(*paths: Path) -> None:
    """Record ``paths`` as put in place, for the :func:`recording_writes` around this run."""
    written = _WRITTEN.get()
    if written is not None:
        written.extend(path for path in paths if path not in written)


def read_only(folder: Path) -> bool:
    """Whether ``folder`` is on a file system mounted read-only (permissions cannot help)."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def check_target(path: Path, flag: str) -> None:
    """Raise OutputError unless ``path`` can be replaced by a new regular file.

    Absent, a regular file, or a symlink (the link itself is replaced, its target untouched);
    its folder must exist and take a new file: one is created there and removed, as the write
    will (``/proc`` and ``/sys`` pass a permission test and refuse only that). ``-`` is refused:
    a model on stdout is binary on a terminal, and the weights file could not follow it.
    """
    text = os.fspath(path)
    if not text:
        raise OutputError(f"{flag}: an empty path")
    if text == "-":
        raise OutputError(
            f"{flag} -: seqlower writes files, not standard output; give a file name "
            "(./- for a file named '-')"
        )
    if text.endswith(os.sep) or path.name in ("", ".", ".."):
        raise OutputError(f"{flag} {text}: is a directory, not a file name")
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as e:
        raise OutputError(f"{flag} {text}: cannot use this path ({e.strerror})") from None
    if info is not None and not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise OutputError(f"{flag} {text}: is {kind}; seqlower only replaces regular files")
    folder = path.parent
    if not folder.is_dir():
        raise OutputError(f"{flag} {text}: the directory {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        if read_only(folder):
            raise OutputError(f"{flag} {text}: cannot write {text}: read-only file system")
        raise OutputError(f"{flag} {text}: cannot write in {folder} (permission denied)")
    _probe(folder, path.name, flag, text)


def check_external_data_name(name: str, out: Path, *, inputs: Sequence[Path] = ()) -> None:
    """Raise OutputError unless ``name`` (``--external-data``) is a safe weights file for ``out``.

    A plain file name beside OUT that is not OUT itself nor any file the run reads (``inputs``:
    the input model and its weight files), and that is absent, a regular file or a link.
    """
    flag = "--external-data"
    if name in ("", ".", "..") or "/" in name or os.sep in name or Path(name).is_absolute():
        raise OutputError(f"{flag} {name!r}: give a file name (no folder), e.g. weights.bin")
    target = out.parent / name
    if name == out.name:
        raise OutputError(f"{flag} {name}: that is the output model itself")
    for path in inputs:
        if same_file(target, path):
            raise OutputError(f"{flag} {name}: that is {path}, which this run reads")
    check_target(target, flag)


def same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _probe(folder: Path, name: str, flag: str, text: str) -> None:
    """Create and remove a file in ``folder``: the one test every file system answers truly."""
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{name}.", suffix=".probe", dir=folder)
    except OSError as e:
        if read_only(folder):
            raise OutputError(
                f"{flag} {text}: cannot write {text}: read-only file system"
            ) from None
        raise OutputError(
            f"{flag} {text}: cannot create files in {folder} ({e.strerror or e})"
        ) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``folder`` itself (no lock file to leave behind).

    Serializes seqlower runs that write into one folder, so two runs writing the same OUT at once
    finish one after the other, each leaving a matching model and weights file.
    """
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold back SIGINT, SIGTERM and SIGHUP for the body; they are delivered after it.

    A commit is a few renames and unlinks; finishing it is always better than stopping halfway.
    Blocking them in this thread is not enough: the kernel hands a process signal to any thread
    that does not block it (onnxruntime's pool threads), and Python then runs the handler in the
    main thread at once. So the handlers only record them for the body's length; the first is
    re-raised after it (only when the body succeeded: an exception of its own wins).
    """
    held: list[int] = []
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        previous = {s: signal.signal(s, lambda n, _f: held.append(n)) for s in COMMIT_SIGNALS}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, COMMIT_SIGNALS)
    try:
        yield
    finally:
        while pending := signal.sigpending() & set(COMMIT_SIGNALS):
            caught = signal.sigtimedwait(pending, 0)
            if caught is None:
                break
            held.append(caught.si_signo)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        for number, handler in previous.items():
            signal.signal(number, handler)
    if held:
        signal.raise_signal(held[0])  # the caller's handler runs now: KeyboardInterrupt, ...


def _umask() -> int:
    """The process's umask, read without changing it where Linux tells it (another thread
    creating a file meanwhile would get a mode of 0666)."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/self/status") as status:
            line = next(line for line in status if line.startswith("Umask:"))
        return int(line.split()[1], 8)
    umask = os.umask(0)
    os.umask(umask)
    return umask


def give_default_mode(path: Path, like: Path) -> None:
    """Give a new file the mode a plain write would: ``like``'s if it exists as a regular file,
    else 0666 less the umask (temporary files are created readable by their owner only)."""
    with contextlib.suppress(OSError):
        if stat.S_ISREG(os.lstat(like).st_mode):
            shutil.copymode(like, path)
            return
    os.chmod(path, 0o666 & ~_umask())


def give_default_folder_mode(path: Path) -> None:
    """Give a staged folder the mode ``mkdir`` would: 0777 less the umask (``mkdtemp`` makes
    it its owner's only, and it keeps that mode once renamed into place)."""
    os.chmod(path, 0o777 & ~_umask())


# ------------------------------------------------ what a run owns besides OUT, and may replace

#: The folders and files seqlower writes in a folder of test data (``--save-*``, failing inputs).
_DATA_SET = re.compile(r"test_data_set_(0|[1-9][0-9]*)")
_DATA_FILE = re.compile(r"(input|output)_(0|[1-9][0-9]*)\.pb")


def failing_inputs_folder(output: Path) -> Path:
    """Where a mismatch's failing inputs go by default: ``OUT.failing-inputs`` beside OUT."""
    return output.with_name(f"{output.name}.failing-inputs")


def owned_paths(output: Path) -> tuple[Path, Path, Path]:
    """OUT and the paths a run writing it may replace besides it (``OUT.data``, its weights,
    and ``OUT.failing-inputs``): two models of one batch must share none of them."""
    return output, output.with_name(f"{output.name}.data"), failing_inputs_folder(output)


def data_sets(folder: Path) -> list[Path]:
    """The entries of ``folder`` named as seqlower names test-data sets (``test_data_set_K``)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(
        (folder / name for name in names if _DATA_SET.fullmatch(name)),
        key=lambda p: int(p.name.rsplit("_", 1)[1]),
    )


def foreign_entry(folder: Path) -> Path | None:
    """The first thing in ``folder`` a failing run does not write there, if any: it writes
    ``test_data_set_0``, a folder of ``input_K.pb``/``output_K.pb`` files, and nothing else
    (no link, nothing hidden). An empty folder holds nothing to lose."""
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.name != "test_data_set_0" or not entry.is_dir(follow_symlinks=False):
            return Path(entry.path)
        for inner in sorted(os.scandir(entry.path), key=lambda e: e.name):
            if not _DATA_FILE.fullmatch(inner.name) or not inner.is_file(follow_symlinks=False):
                return Path(inner.path)
    return None


def check_failing_inputs_folder(folder: Path, flags: str) -> None:
    """Raise OutputError when ``folder`` (``OUT.failing-inputs``) holds anything a failing run
    does not write there: replacing it would delete that. A link or a file there is left alone
    (the inputs are then not saved, with a warning); ``flags`` say how else to run."""
    if not folder.is_dir() or folder.is_symlink():
        return
    try:
        found = foreign_entry(folder)
    except OSError as e:
        raise OutputError(f"{folder}: cannot read this folder ({e.strerror})") from None
    if found is not None:
        raise OutputError(
            f"{folder}: a mismatch's failing inputs would replace this folder, but it holds "
            f"{found}, which seqlower did not write; move it, or give {flags}"
        )


def replace_own_folder(staging: Path, folder: Path) -> bool:
    """Put the folder ``staging`` in place of ``folder`` when that is absent or holds only what
    seqlower writes there (:func:`foreign_entry`); False, and nothing changed, otherwise.

    The old folder is first renamed aside and looked at there, so nothing added to it in the
    meantime is deleted: if it holds anything of someone else's, it is renamed back.
    """
    if not os.path.lexists(folder):
        return put_folder_in_place(staging, folder)
    if folder.is_symlink() or not folder.is_dir():
        return False
    aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".old", dir=folder.parent))
    try:
        os.replace(folder, aside)  # onto the empty folder just made: atomic
    except OSError:
        os.rmdir(aside)
        return False
    try:
        foreign = foreign_entry(aside)
    except OSError:
        foreign = aside
    if foreign is not None:
        put_folder_in_place(aside, folder)  # back (unless something took its place meanwhile)
        return False
    placed = put_folder_in_place(staging, folder)
    shutil.rmtree(aside, ignore_errors=True)
    return placed


@functools.cache
def _renameat2() -> Any:
    """libc's ``renameat2`` (Linux), looked up on first use; None where there is none."""
    import ctypes.util

    try:
        function = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    function.argtypes += [ctypes.c_uint]
    return function


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def put_folder_in_place(staging: Path, target: Path) -> bool:
    """Rename ``staging`` to ``target`` unless something is there (even an empty folder, which
    a plain rename would replace): False then, and nothing changed."""
    renameat2 = _renameat2()
    if renameat2 is not None:
        done = renameat2(
            _AT_FDCWD, os.fsencode(staging), _AT_FDCWD, os.fsencode(target), _RENAME_NOREPLACE
        )
        if done == 0:
            return True
        code = ctypes.get_errno()
        if code == errno.EEXIST:
            return False
        if code not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(code, os.strerror(code), str(target))
    if os.path.lexists(target):  # no renameat2 here: the next best thing
        return False
    os.rename(staging, target)
    return True


def write_file_atomically(path: Path, data: bytes, flag: str) -> None:
    """Write ``data`` to ``path`` by a private file renamed over it (never through a link)."""
    check_target(path, flag)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise OutputError(f"{flag} {path}: cannot write there ({e.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        give_default_mode(Path(tmp), path)
        os.replace(tmp, path)
    except OSError as e:
        raise OutputError(f"{flag} {path}: cannot write ({e.strerror or e})") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
