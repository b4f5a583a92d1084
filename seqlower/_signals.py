"""SIGTERM and SIGHUP handled like Ctrl-C: unwind, remove temporary files, exit cleanly.

Python's default for both is to die on the spot, leaving temporary files and folders behind; as
exceptions, they run every ``finally`` on the way out, as KeyboardInterrupt already does.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["Interrupted", "signals_as_interrupts"]


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
