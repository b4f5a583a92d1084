"""What a command leaves for later: the JSON report (``--report``) and the line that reruns a
failed check on its saved inputs."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import seqlower
from seqlower._fs import write_file_atomically
from seqlower.cli.options import repro_flags
from seqlower.cli.output import Printer

if TYPE_CHECKING:
    from seqlower.verification import CheckOptions, Tolerances

__all__ = ["tell_repro", "write_report"]


def tell_repro(show: Printer, folder: Path, command: list[str], options: CheckOptions) -> None:
    """The line that reruns the failed check on the saved inputs with every flag that took
    part; with ``--expected``, the framework's outputs for those inputs are saved beside them."""
    expected = None if options.expected is None else folder
    command = [*command, "--inputs", str(folder), *repro_flags(options, expected=expected)]
    show.error(f"failing inputs saved in {folder}; reproduce with:")
    show.line(f"  {shlex.join(command)}", err=True, always=True)


def write_report(path: Path | None, data: dict[str, Any], tolerances: Tolerances) -> None:
    """The JSON report: what ran (arguments, tolerances) and what came of it; paths absolute."""
    if path is None:
        return
    for key in ("input", "output", "failing_inputs"):
        if data.get(key):
            data[key] = str(Path(data[key]).resolve())
    data = {
        "seqlower": seqlower.__version__,
        "arguments": sys.argv[1:] if _is_console() else None,
        "cwd": os.getcwd(),
        "tolerances": dict(zip(("rtol", "atol"), tolerances.to_options(), strict=True)),
        **data,
    }
    text = json.dumps(data, indent=2, default=str) + "\n"
    write_file_atomically(path, text.encode(), "--report")


def _is_console() -> bool:
    return Path(sys.argv[0]).name in ("seqlower", "__main__.py")
