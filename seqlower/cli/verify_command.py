"""``seqlower verify REFERENCE CANDIDATE``: the check alone, on two models given."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from seqlower.cli.options import checking, save_options, saving, verify_check_options
from seqlower.cli.output import Printer
from seqlower.cli.reports import tell_repro, write_report
from seqlower.cli.user_errors import configure_logging, user_errors

if TYPE_CHECKING:
    from seqlower.job import check_paths, verify_files
else:  # onnx and onnx_ir load when a command runs: --help and --version need neither
    from seqlower._lazy import lazy

    check_paths = lazy("seqlower.job", "check_paths")
    verify_files = lazy("seqlower.job", "verify_files")

__all__ = ["verify_command"]

VERIFY_EXIT_CODES = """\b
Exit codes:
  0   the outputs match on every run and --target (a difference from
      --expected that REFERENCE shares is a warning, not CANDIDATE's fault,
      unless --strict-expected)
  1   CANDIDATE is worse than REFERENCE (a numerical mismatch, also
      against --expected), or fails or differs on a --target whoever is
      to blame (the culprit is named)
  2   bad input or usage: unreadable or invalid model, models with
      different inputs or outputs, --inputs that do not fit, bad flag
      (one line on stderr)
  3   cannot verify: no runtime runs REFERENCE, or the check would exceed
      its memory or time bound
  70  internal error in seqlower (please report it; -v shows the traceback)
  130 interrupted (143 on SIGTERM, 129 on SIGHUP)
"""


VERIFY_EPILOG = (
    """\b
Examples:
  seqlower verify model.onnx lowered.onnx
  seqlower verify model.onnx lowered.onnx --inputs test_data_set_0
  seqlower verify model.onnx lowered.onnx --expected test_data.npz --target openvino
  seqlower verify model.onnx lowered.onnx --rtol 1e-4 --rtol logits:1e-3 --report r.json

"""
    + VERIFY_EXIT_CODES
)


@click.command(
    "verify", epilog=VERIFY_EPILOG, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.argument("reference", type=click.Path(path_type=Path))
@click.argument("candidate", type=click.Path(path_type=Path))
@verify_check_options
@save_options
@click.option("-v", "--verbose", count=True, help="Say more; -v also shows tracebacks.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on success.")
def verify_command(
    reference: Path, candidate: Path, verbose: int, quiet: bool, **check: Any
) -> None:
    """Compare REFERENCE and CANDIDATE numerically on the same inputs."""
    configure_logging(verbose)
    show = Printer(quiet)
    with user_errors(verbose, show):
        report_path = check.pop("report_path")
        save = saving(check)
        options = checking(**check)
        check_paths(reference, None, None, report_path)
        result = verify_files(
            reference, candidate, options, progress=show.step, on_run=show.run_progress, save=save
        )
        show.verdict(result.verification, verbose)
        for warning in result.warnings:
            show.error(f"warning: {warning}")
        if result.failing_inputs is not None:
            repro = ["seqlower", "verify", str(reference), str(candidate)]
            tell_repro(show, result.failing_inputs, repro, options)
        write_report(report_path, result.to_dict(), options.tolerances)
    sys.exit(result.exit_code)
