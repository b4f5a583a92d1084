"""The seqlower command line (installed as ``seqlower.cli``).

:func:`main` is the console script. It sets up signal handling before importing anything heavy
(onnx, onnx_ir and click take most of a second), so that Ctrl-C, SIGTERM or SIGHUP during
start-up end the run with one line and the usual exit code, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import sys

_INTERRUPTED = 128  # exit codes from here up are 128 + signal number
#: Seconds a batch's run has to unwind (remove its temporary files) once the batch is gone.
_GRACE = 10.0


def main(argv: list[str] | None = None) -> None:
    try:
        import signal

        # Ctrl-C as KeyboardInterrupt again, caught below (the package set a quiet handler
        # for its own imports: seqlower._quiet_start_up_interrupts; an ignored SIGINT stays so).
        if getattr(signal.getsignal(signal.SIGINT), "seqlower_start_up", False):
            signal.signal(signal.SIGINT, signal.default_int_handler)
        from seqlower._signals import signals_as_interrupts

        with signals_as_interrupts():
            if "SEQLOWER_PARENT" in os.environ:  # a batch's run: it ends when the batch does
                from seqlower._signals import die_with_parent

                die_with_parent(grace=_GRACE)
            if (sys.argv[1:] if argv is None else argv) == ["--version"]:
                # Alone, it needs no command line parser: click and the commands take half
                # of its time (click's own --version prints the same text, version_text).
                from seqlower._version import version_text

                sys.stdout.write(version_text())
                sys.stdout.flush()
                sys.exit(0)
            from seqlower.cli.commands import main as run

            run(argv)
    except KeyboardInterrupt as e:  # the commands report their own; this is start-up or exit
        sys.stderr.write("seqlower: interrupted; nothing was written\n")
        _leave(getattr(e, "exit_code", 130))  # Interrupted's 128 + N for SIGTERM and SIGHUP
    except SystemExit as e:
        if isinstance(e.code, int) and e.code > _INTERRUPTED:
            _leave(e.code)
        raise


def _leave(code: int) -> None:
    """Exit with ``code`` even after an interrupt.

    CPython remembers a KeyboardInterrupt that passed through ``PyRun_String`` (which C extensions
    such as onnx's call while importing) and, once caught and turned into ``sys.exit(130)``, still
    ends the process by re-sending SIGINT to itself, so the shell saw -2 instead of 130. Everything
    has been unwound by now; only the streams need flushing.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
