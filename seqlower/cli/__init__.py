"""The seqlower command line (installed as ``seqlower.cli``).

:func:`main` is the console script. It sets up signal handling before importing anything heavy
(onnx, onnx_ir and click take most of a second), so that Ctrl-C, SIGTERM or SIGHUP during
start-up end the run with one line and the usual exit code, never a traceback.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    from seqlower._signals import Interrupted, signals_as_interrupts

    try:
        with signals_as_interrupts():
            from seqlower.cli.commands import main as run

            run(argv)
    except KeyboardInterrupt as e:  # the commands report their own; this is start-up or exit
        code = e.exit_code if isinstance(e, Interrupted) else 130
        sys.stderr.write("seqlower: interrupted; nothing was written\n")
        sys.exit(code)
