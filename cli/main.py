"""The ``seqlower`` command: a thin click front end over the library.

Everything that can fail for a user's reason raises :class:`seqlower.SeqlowerError`; this module
only turns those into one line on stderr and an exit code.
"""

from __future__ import annotations

import collections
import logging
import sys
import traceback
from pathlib import Path
from typing import Any, NoReturn

import click
import onnx_ir as ir

import seqlower
from seqlower.errors import SeqlowerError
from seqlower.io import check_model, load_model, save_model
from seqlower.passes import PASSES, NodeLoweringPass
from seqlower.pipeline import build_pipeline, run_pipeline

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 70  # EX_SOFTWARE from sysexits.h: a bug in seqlower, not in the input
EXIT_INTERRUPTED = 130

EPILOG = """\b
Examples:
  seqlower model.onnx -o lowered.onnx
  seqlower model.onnx -o lowered.onnx --passes lower-sequence-map
  seqlower --list-passes

\b
Exit codes:
  0   success
  2   bad input or usage: unreadable or invalid model, malformed node,
      unwritable output (one line on stderr, no output file)
  70  internal error in seqlower (please report it; -v shows the traceback)
  130 interrupted
"""


class _DefaultToLower(click.Group):
    """``seqlower MODEL -o OUT`` runs the ``lower`` command; named subcommands run as usual."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        group_flags = {"--help", "-h", "--version", "--list-passes"}
        if args and args[0] not in self.commands and args[0] not in group_flags:
            args = ["lower", *args]
        return super().parse_args(ctx, args)


def _list_passes(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    for name, cls in PASSES.items():
        summary = (cls.__doc__ or "").strip().splitlines()[0]
        click.echo(f"{name:24} {summary}")
    ctx.exit(EXIT_OK)


@click.group(
    cls=_DefaultToLower,
    invoke_without_command=False,
    epilog=EPILOG,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(seqlower.__version__, "--version", prog_name="seqlower")
@click.option(
    "--list-passes",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_list_passes,
    help="List the lowering passes and exit.",
)
def cli() -> None:
    """Lower ONNX SequenceMap into Loop + Sequence ops that every runtime supports.

    Run `seqlower MODEL -o OUT` (the `lower` command) for the main job.
    """


@cli.command(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("model", type=click.Path(dir_okay=True, path_type=Path))
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    type=click.Path(path_type=Path),
    help="Where to write the lowered model (written atomically; may equal MODEL).",
)
@click.option(
    "--passes",
    "pass_names",
    metavar="A,B",
    help="Comma-separated lowering passes to run, in order (default: all; see --list-passes).",
)
@click.option(
    "--no-cleanup",
    is_flag=True,
    help="Keep nodes nothing reads and the original node order (skip dead-node removal/sort).",
)
@click.option(
    "--no-check",
    is_flag=True,
    help="Skip the numerical check. (This release has no numerical check yet; accepted so "
    "scripts keep working when it arrives.)",
)
@click.option("-v", "--verbose", count=True, help="Say more; -v also shows tracebacks.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on success.")
def lower(
    model: Path,
    output: Path,
    pass_names: str | None,
    no_cleanup: bool,
    no_check: bool,
    verbose: int,
    quiet: bool,
) -> None:
    """Lower MODEL and write the result to OUT."""
    del no_check  # No numerical check exists yet; the flag is accepted for forward compatibility.
    _configure_logging(verbose)
    with _user_errors(verbose):
        passes = _parse_pass_names(pass_names)
        ir_model = load_model(model)
        check_model(ir_model, what=f"input model {model}")
        before = _op_counts(ir_model)
        pipeline = build_pipeline(passes, cleanup=not no_cleanup)
        run_pipeline(ir_model, pipeline)
        check_model(ir_model, what="lowered model")
        save_model(ir_model, output)
        if not quiet:
            _summary(pipeline.passes, before, _op_counts(ir_model), output, verbose)


def _configure_logging(verbose: int) -> None:
    # Libraries (onnx_ir) warn through logging; without this, Python prints their warnings as
    # bare extra lines on stderr, and a failed run would no longer end in exactly one line.
    level = logging.ERROR if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="seqlower: %(name)s: %(message)s", force=True)


def _parse_pass_names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in PASSES]
    if unknown or not names:
        known = ", ".join(PASSES)
        raise click.UsageError(
            f"unknown pass {', '.join(unknown) or '(none given)'}; known: {known}"
        )
    return names


def _op_counts(model: ir.Model) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for graph_like in (model.graph, *model.functions.values()):
        for node in ir.traversal.RecursiveGraphIterator(graph_like):
            counts[
                node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
            ] += 1
    return counts


def _summary(
    passes: Any,
    before: collections.Counter[str],
    after: collections.Counter[str],
    output: Path,
    verbose: int,
) -> None:
    for pass_ in passes:
        if isinstance(pass_, NodeLoweringPass):
            click.echo(f"{pass_.op_type}: {pass_.rewritten} node(s) lowered")
    if verbose:
        click.echo(f"{'op':24} {'before':>8} {'after':>8}")
        for op in sorted(set(before) | set(after)):
            if before[op] != after[op] or verbose > 1:
                click.echo(f"{op:24} {before[op]:>8} {after[op]:>8}")
    click.echo(f"wrote {output}")


class _user_errors:
    """Map exceptions to one line on stderr and an exit code; tracebacks only with -v."""

    def __init__(self, verbose: int) -> None:
        self.verbose = verbose

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> bool:
        if exc is None or isinstance(exc, (click.exceptions.Exit, click.ClickException)):
            return False
        if isinstance(exc, SeqlowerError):
            self._fail(f"error: {exc}", exc.exit_code, exc)
        if isinstance(exc, KeyboardInterrupt):
            self._fail("interrupted; nothing was written", EXIT_INTERRUPTED, None)
        if isinstance(exc, Exception):
            self._fail(
                f"internal error: {type(exc).__name__}: {_first_line(exc)}\n"
                "This is a bug in seqlower; please report it with the model if you can"
                + ("" if self.verbose else " (rerun with -v for the traceback)."),
                EXIT_INTERNAL,
                exc,
                always_trace=False,
            )
        return False

    def _fail(
        self, message: str, code: int, exc: BaseException | None, always_trace: bool = False
    ) -> NoReturn:
        if exc is not None and (self.verbose or always_trace):
            traceback.print_exception(exc, file=sys.stderr)
        click.echo(f"seqlower: {message}", err=True)
        sys.exit(code)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else "(no message)"


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="seqlower")
