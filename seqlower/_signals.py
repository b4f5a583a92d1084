"""SIGTERM and SIGHUP handled like Ctrl-C: unwind, remove temporary files, exit cleanly; and
child processes that die with seqlower, however seqlower ends.

Python's default for both is to die on the spot, leaving temporary files and folders behind; as
exceptions, they run every ``finally`` on the way out, as KeyboardInterrupt already does.

A runtime worker that hangs (tract on some models) or a batch's run must not outlive the process
that started it: a CI time-out or ``subprocess.run(timeout=)`` kills seqlower with SIGKILL, which
runs no ``finally`` and no ``atexit``. Two ways, both set up by :func:`spawn` and kept by the
child calling :func:`die_with_parent` first thing:

* a lifeline: a pipe whose write end only seqlower holds (close-on-exec, so no other child has
  it); the kernel closes it when seqlower ends for any reason, and a thread of the child reading
  the other end then stops the child;
* on Linux, ``prctl(PR_SET_PDEATHSIG)``: the kernel signals the child when the *thread* that
  started it ends, so children are started from one thread that lives as long as the process.

This module imports only the standard library: the workers load it by path, without the package.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

TYPE_CHECKING = False
if TYPE_CHECKING:  # imported at start-up: no typing, no subprocess
    import subprocess
    from collections.abc import Sequence
    from typing import Any

__all__ = ["PARENT", "Interrupted", "die_with_parent", "signals_as_interrupts", "spawn"]


class Interrupted(KeyboardInterrupt):
    """A terminating signal arrived; ``exit_code`` is the shell's 128 + signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum


def _raise(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def signals_as_interrupts() -> Iterator[None]:
    """Within the body, SIGTERM and SIGHUP raise :class:`Interrupted` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _raise) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


#: ``"PID FD SIGNAL"`` in a child's environment: its parent, the lifeline's read end, and the
#: signal its parent's death sends it (see :func:`die_with_parent`).
PARENT = "SEQLOWER_PARENT"

_lock = threading.Lock()
_lifeline: tuple[int, int, int] | None = None  # (pid that made it, read end, write end)
_spawner: Any = None  # the executor whose one thread starts every child (see spawn)


def _read_end() -> int:
    """This process's lifeline read end (a new pipe after a fork: the old one is the parent's)."""
    global _lifeline
    with _lock:
        if _lifeline is None or _lifeline[0] != os.getpid():
            read, write = os.pipe()  # both close-on-exec; the read end is passed by pass_fds
            _lifeline = (os.getpid(), read, write)
        return _lifeline[1]


def spawn(
    argv: Sequence[str], *, death_signal: int = signal.SIGKILL, **kwargs: Any
) -> subprocess.Popen[Any]:
    """``subprocess.Popen(argv, **kwargs)`` of a child that dies with this process: on losing
    its lifeline, and (Linux) by ``death_signal`` when this process ends. The child must call
    :func:`die_with_parent` (seqlower's command line and its workers do)."""
    global _spawner
    import subprocess

    read = _read_end()
    env = dict(os.environ if kwargs.get("env") is None else kwargs["env"])
    env[PARENT] = f"{os.getpid()} {read} {int(death_signal)}"
    kwargs = {**kwargs, "env": env, "pass_fds": (*kwargs.get("pass_fds", ()), read)}
    with _lock:
        if _spawner is None:
            from concurrent.futures import ThreadPoolExecutor

            _spawner = ThreadPoolExecutor(1, thread_name_prefix="seqlower-spawn")
        spawner = _spawner
    # PR_SET_PDEATHSIG fires when the thread that forked the child ends: a run's thread ends
    # long before the worker it started, the spawner's lives as long as the process.
    process: subprocess.Popen[Any] = spawner.submit(subprocess.Popen, list(argv), **kwargs).result()
    return process


def die_with_parent(*, grace: float | None = None) -> None:
    """End this process when the one that :func:`spawn`-ed it ends.

    ``grace`` None: at once (``os._exit``). Otherwise SIGTERM first (seqlower unwinds, removing
    its temporary files), then ``os._exit`` after ``grace`` seconds if still running. Does
    nothing in a process not started by :func:`spawn`; its children get a lifeline of their own.
    """
    value = os.environ.pop(PARENT, None)
    if not value:
        return
    try:
        pid, fd, death = (int(part) for part in value.split())
    except ValueError:
        return
    # A worker started from a thread that blocks the stop signals inherits that mask.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
    if death and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, death, 0, 0, 0)  # PR_SET_PDEATHSIG
    os.set_inheritable(fd, False)

    def orphaned() -> None:
        if grace is not None:
            with contextlib.suppress(OSError):
                os.kill(os.getpid(), signal.SIGTERM)
            threading.Event().wait(grace)
        os._exit(128 + signal.SIGTERM)

    def watch() -> None:
        with contextlib.suppress(OSError):
            while os.read(fd, 1):  # nothing is ever written: b"" when the writer is gone
                pass
        orphaned()

    if os.getppid() != pid:  # the parent died before this process could watch it
        orphaned()
    threading.Thread(target=watch, name="seqlower-lifeline", daemon=True).start()
