"""What every command runs inside: each exception as one line on stderr and its exit code
(tracebacks only with ``-v``), what an interrupted run had written, and libraries' logging and
warnings kept off a normal run's output."""

from __future__ import annotations

import logging
import os
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any, Literal, NoReturn

import click

from seqlower.cli.output import Printer
from seqlower.errors import ExitCode, SeqlowerError, first_line

__all__ = ["configure_logging", "user_errors"]


def configure_logging(verbose: int) -> None:
    # Libraries (onnx_ir) warn through logging; without this, Python prints their warnings as
    # bare extra lines on stderr, and a failed run would no longer end in exactly one line.
    level = logging.ERROR if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="seqlower: %(name)s: %(message)s", force=True)
    # Runtimes' Python warnings (numpy's "Mean of empty slice" inside onnx.reference, ...) are
    # not the user's business on a normal run: -q must print nothing. With -v they are logged.
    logging.captureWarnings(verbose > 0)
    warnings.simplefilter("ignore" if verbose == 0 else "default")
    # The pass machinery's chatter ("No more graph changes detected...") is not for users.
    logging.getLogger("onnx_ir").setLevel(logging.WARNING if verbose < 2 else logging.DEBUG)


def _caused_by(error: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``error`` is a ``kind`` or was raised while handling, or from, one."""
    cause: BaseException | None = error
    seen = 0
    while cause is not None and seen < 100:  # a chain can loop back
        if isinstance(cause, kind):
            return True
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return False


class user_errors:
    """Map exceptions to one line on stderr and an exit code; tracebacks only with -v."""

    def __init__(self, verbose: int, show: Printer) -> None:
        self.verbose = verbose
        self.show = show
        self._signals: Any = None
        self._recording: Any = None
        self.written: list[Path] = []  # files this run has put in place (for an interrupt)

    def __enter__(self) -> user_errors:
        from seqlower._fs import recording_writes
        from seqlower._signals import signals_as_interrupts

        self._signals = signals_as_interrupts()
        self._signals.__enter__()
        self._recording = recording_writes()
        self.written = self._recording.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> Literal[False]:
        self._recording.__exit__(exc_type, exc, tb)
        self._signals.__exit__(exc_type, exc, tb)
        if os.environ.get("SEQLOWER_BATCH_STATUS"):  # a batch's run (batch.STATUS)
            from seqlower.cli.batch import tell_batch

            tell_batch(getattr(exc, "written", None) or self.written)
        if exc is None or isinstance(exc, (click.exceptions.Exit, click.ClickException)):
            return False
        if isinstance(exc, SeqlowerError):
            self._fail(f"error: {exc}", exc.exit_code, exc)
        if isinstance(exc, KeyboardInterrupt):
            code = getattr(exc, "exit_code", ExitCode.INTERRUPTED)
            what = f"stopped by {exc}" if code != ExitCode.INTERRUPTED else "interrupted"
            written = [str(p) for p in getattr(exc, "written", None) or self.written]
            done = (
                f"{' and '.join(written)} {'were' if len(written) > 1 else 'was'} written in full"
                if written
                else "nothing was written"
            )
            self._fail(f"{what}; {done}", code, None)
        if _caused_by(exc, MemoryError):
            # Anywhere in a run (lowering, drawing inputs, a runtime), however wrapped (the pass
            # machinery's PassError): what the README promises.
            self._fail(
                "error: seqlower ran out of memory; for the check, give smaller sizes with "
                "--dim/--input-shape or a smaller --check-memory (nothing written)",
                ExitCode.CANNOT_VERIFY,
                exc,
            )
        if isinstance(exc, Exception):
            self._fail(
                f"internal error: {type(exc).__name__}: {first_line(exc)}\n"
                "This is a bug in seqlower; please report it with the model if you can"
                + ("" if self.verbose else " (rerun with -v for the traceback)."),
                ExitCode.INTERNAL,
                exc,
            )
        return False

    def _fail(self, message: str, code: int, exc: BaseException | None) -> NoReturn:
        if exc is not None and self.verbose:
            traceback.print_exception(exc, file=sys.stderr)
        self.show.error(message)
        sys.exit(code)
