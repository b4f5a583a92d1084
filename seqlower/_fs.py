"""Replacing files the way a careful tool must: never through a link, never half, never a mix.

Every file seqlower writes is first written in full under a private name in the target's own
folder, then renamed over the target. A rename replaces a symlink itself rather than the file it
points to, is atomic for readers, and cannot leave half a file. Targets that are not regular
files (a device such as ``/dev/null``, a FIFO, a socket, a folder) are refused up front.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import os
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from seqlower.errors import OutputError

__all__ = [
    "check_target",
    "deferred_signals",
    "folder_lock",
    "give_default_mode",
    "note_written",
    "recording_writes",
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


def give_default_mode(path: Path, like: Path) -> None:
    """Give a new file the mode a plain write would: ``like``'s if it exists as a regular file,
    else 0666 less the umask (temporary files are created readable by their owner only)."""
    with contextlib.suppress(OSError):
        if stat.S_ISREG(os.lstat(like).st_mode):
            shutil.copymode(like, path)
            return
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


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
