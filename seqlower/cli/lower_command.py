"""``seqlower MODEL -o OUT`` (the ``lower`` command, the default): flags parsed into
:class:`seqlower.job.LowerOptions`, the file job run, its result told; several models a batch."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from seqlower.cli.options import (
    check_options,
    checking,
    choose_passes,
    planning,
    planning_options,
    save_options,
    saving,
)
from seqlower.cli.output import Printer
from seqlower.cli.reports import tell_repro, write_report
from seqlower.cli.user_errors import configure_logging, user_errors

if TYPE_CHECKING:
    from seqlower.job import LowerOptions, LowerResult, check_paths, lower_file
else:  # onnx and onnx_ir load when a command runs: --help and --version need neither
    from seqlower._lazy import lazy

    LowerOptions = lazy("seqlower.job", "LowerOptions")
    check_paths = lazy("seqlower.job", "check_paths")
    lower_file = lazy("seqlower.job", "lower_file")

__all__ = ["LOWER_EPILOG", "lower"]

EXIT_CODES = """\b
Exit codes:
  0   success (and, unless --no-check, outputs proven equal, on every
      --target too; a difference from --expected that the original shares
      is the export's: a warning, unless --strict-expected)
  1   the lowered model is wrong: a numerical mismatch, or it does not
      load, fails or differs on a --target, even when the runtime gets
      the original wrong too (the culprit is named; OUT not written
      unless --keep-on-failure)
  2   bad input or usage: unreadable or invalid model, malformed node,
      not sequence-free (--sequence-free), unwritable output, bad flag
      (one line on stderr, nothing written)
  3   cannot verify: no runtime runs the original model, or the check
      would exceed its memory or time bound; out of memory anywhere
  70  internal error in seqlower (please report it; -v shows the traceback)
  130 interrupted (143 on SIGTERM, 129 on SIGHUP); nothing written
"""


LOWER_EPILOG = (
    """\b
Examples:
  seqlower model.onnx -o lowered.onnx
  seqlower model.onnx -o model.onnx                 # in place, safely
  seqlower model.onnx -o lowered.onnx --no-check
  seqlower model.onnx -o lowered.onnx --dim batch=4 --seq-len 5 --report check.json
  seqlower model.onnx -o lowered.onnx --skip lower-reverse-sequence
  seqlower model.onnx -o lowered.onnx --ir-version 10 --opset 18
  seqlower model.onnx -o lowered.onnx --target tract   # lowered for tract, proven on it
  seqlower model.onnx -o lowered.onnx --target openvino --inputs data.npz --expected data.npz
  seqlower model.onnx -o lowered.onnx --sequence-free   # no sequence op left (TensorRT, ...)
  seqlower model.onnx -o lowered.onnx --expected test_data.npz   # the framework's outputs
  seqlower --list-passes
  seqlower --list-targets

"""
    + EXIT_CODES
)


def _batch(
    ctx: click.Context,
    models: tuple[Path, ...],
    output: str | None,
    jobs: int,
    verbose: int,
    show: Printer,
    report: Path | None = None,
) -> NoReturn:
    """Several models: each lowered by its own run into the folder ``output``; ``report``,
    one JSON for the batch."""
    from seqlower.cli.batch import CHILD, child_flags, plan_batch, run_batch, shared_memory

    with user_errors(verbose, show):
        if os.environ.get(CHILD):
            raise click.UsageError("a run of a batch was given several models")
        raw = ctx.find_root().meta.get("seqlower.args", [])
        flags = shared_memory(child_flags(raw, ctx.command, ctx), jobs)
        items = plan_batch(models, output)
        if report is not None:
            check_paths(None, None, None, report)
        if output is not None:
            Path(output).mkdir(exist_ok=True)
        code = run_batch(items, flags, jobs, show, report)
    sys.exit(code)


@click.command(epilog=LOWER_EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("models", nargs=-1, metavar="MODEL...", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    "output",
    type=str,  # not click.Path: it turns '' into '.', which hides the mistake
    help="Where to write the lowered model (written atomically; may equal MODEL).",
)
@click.option(
    "--passes",
    "pass_names",
    metavar="A,B",
    help="Comma-separated lowering passes to run, in order (default: the default pipeline, or "
    "the sequence-free one; see --list-passes).",
)
@click.option(
    "--skip",
    "skip_names",
    multiple=True,
    metavar="NAME",
    help="Leave out a pass (repeatable; see --list-passes).",
)
@click.option(
    "--external-data",
    metavar="NAME",
    help="Write the weights to this file beside OUT (default: OUT.data when the model had "
    "external weights or is over 2 GB, else inline).",
)
@click.option(
    "--ir-version",
    type=click.IntRange(3),
    help="Re-stamp OUT with this IR version (for older runtimes; no lower than its opset needs).",
)
@click.option(
    "--sequence-free",
    is_flag=True,
    help="Leave no sequence op or sequence value (for OpenVINO, tract, TensorRT, ...): unroll "
    "maps over known sequences, fold the plumbing; exit 2 naming what blocks it otherwise.",
)
@planning_options
@click.option("--dry-run", is_flag=True, help="Run everything, write no model (-o optional).")
@click.option(
    "--no-cleanup",
    is_flag=True,
    help="Keep the original node order (skip the sort) and, in the default pipeline, nodes "
    "nothing reads (--sequence-free and --target remove them before their checks).",
)
@click.option("--no-check", is_flag=True, help="Skip the numerical check after lowering.")
@click.option(
    "--keep-on-failure",
    is_flag=True,
    help="Write OUT even when the check finds a mismatch or cannot run.",
)
@check_options
@save_options
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="With several models (or a folder), lower this many at once, each in its own process.",
)
@click.option("-v", "--verbose", count=True, help="Say more; -v also shows tracebacks.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on success.")
@click.pass_context
def lower(
    ctx: click.Context,
    models: tuple[Path, ...],
    output: str | None,
    pass_names: str | None,
    skip_names: tuple[str, ...],
    external_data: str | None,
    ir_version: int | None,
    sequence_free: bool,
    dry_run: bool,
    no_cleanup: bool,
    no_check: bool,
    keep_on_failure: bool,
    jobs: int,
    verbose: int,
    quiet: bool,
    **check: Any,
) -> None:
    """Lower MODEL, check it against MODEL, write OUT.

    Sequence ops other than SequenceMap stay unless --sequence-free (for runtimes without
    sequence support); the summary names any that remain. Several models, or a folder (every
    .onnx under it), go to the folder -o OUTDIR/, each as its own run (-j N at once).
    """
    configure_logging(verbose)
    _check_models(models, output, dry_run)
    if len(models) > 1 or models[0].is_dir() or (output or "").endswith(os.sep):
        _batch(ctx, models, output, jobs, verbose, Printer(quiet), check.get("report_path"))
    model = models[0]
    show = Printer(quiet)
    with user_errors(verbose, show) as errors:
        out = None if output is None else Path(output)
        if output == "":
            raise click.BadParameter("an empty path", param_hint="-o")
        report_path = check.pop("report_path")
        options = _lower_options(
            check,
            passes=None
            if pass_names is None and not skip_names
            else choose_passes(pass_names, skip_names, sequence_free=sequence_free),
            cleanup=not no_cleanup,
            check=not no_check,
            external_data=external_data,
            keep_on_failure=keep_on_failure,
            dry_run=dry_run,
            # Op counts are for the summary and the report only (a walk of the model each).
            count_ops=not quiet or report_path is not None,
            ir_version=ir_version,
            sequence_free=sequence_free,
        )
        check_paths(model, None if dry_run else out, external_data, report_path)
        result = lower_file(model, out, options, progress=show.step, on_run=show.run_progress)
        if result.written and out is not None:
            data = result.external_data
            errors.written = [out] + ([out.parent / data] if data else [])
        _tell_lowered(show, result, options, (model, out, output), verbose)
        write_report(report_path, result.to_dict(), options.check_options.tolerances)
    sys.exit(result.exit_code)


def _lower_options(keywords: dict[str, Any], /, **fields: Any) -> LowerOptions:
    """The lowering's options: ``fields`` as given, and the saving, plan and check flags parsed
    from ``keywords`` (the command's other keywords)."""
    save = saving(keywords)
    planned = planning(keywords)
    checked = checking(**keywords)  # its runtimes: the --target names, the plan's to resolve
    return LowerOptions(
        targets=checked.runtimes,
        check_options=dataclasses.replace(checked, runtimes=()),
        save=save,
        **planned,
        **fields,
    )


def _check_models(models: tuple[Path, ...], output: str | None, dry_run: bool) -> None:
    """The usage errors of the models and -o given."""
    if not models:
        raise click.UsageError("no model given")
    if len(models) == 2 and output is None and not dry_run and not models[1].is_dir():
        raise click.UsageError(
            f"unexpected extra argument {models[1]}; to write the model there, give "
            f"-o {models[1]} (several models go to a folder: -o OUTDIR/)"
        )
    if output is None and not dry_run:
        raise click.UsageError("missing option '-o' / '--output' (or give --dry-run)")


def _tell_lowered(
    show: Printer,
    result: LowerResult,
    options: LowerOptions,
    paths: tuple[Path, Path | None, str | None],
    verbose: int,
) -> None:
    """What one model's lowering printed: its summary, verdict, repro, what was written
    (``paths``: the model, and OUT as a path and as given)."""
    model, out, output = paths
    show.summary(result, verbose)
    if result.verification is not None:
        show.verdict(result.verification, verbose)
    if result.failing_inputs is not None:
        repro = ["seqlower", str(model), "-o", str(out), *_lowering_flags(options)]
        proven = dataclasses.replace(options.check_options, runtimes=options.targets)
        tell_repro(show, result.failing_inputs, repro, proven)
    if options.dry_run:
        show.line("dry run: nothing written")
    elif result.written:
        data = result.external_data
        show.line(f"wrote {output}" + (f" (weights in {data})" if data else ""))
        if options.external_data is not None and data is None:
            show.line(f"no weight is big enough for {options.external_data}: all are inline")
    else:
        show.error(f"{output} not written (--keep-on-failure writes it anyway)")
    for warning in result.warnings:
        show.error(f"warning: {warning}")
    show.total(result)


def _lowering_flags(options: LowerOptions) -> list[str]:
    """The flags that make the same lowered model again (the check's are added after)."""
    flags = [] if options.passes is None else [f"--passes={','.join(options.passes)}"]
    flags += ["--sequence-free"] if options.sequence_free else []
    flags += [f"--unroll-input={n}={k}" for n, k in options.unroll_inputs.items()]
    flags += [
        f"--optional-input={n}={'present' if p else 'absent'}"
        for n, p in options.optional_inputs.items()
    ]
    flags += [
        f"--overwrite-input-shape={n}={','.join(map(str, s))}"
        for n, s in options.overwrite_input_shapes.items()
    ]
    flags += [f"--constant-input={n}={v}" for n, v in options.constant_inputs.items()]
    flags += ["--drop-constant-inputs"] if options.drop_constant_inputs else []
    flags += [] if options.cleanup else ["--no-cleanup"]
    flags += [] if options.opset is None else [f"--opset={options.opset}"]
    return flags + ([] if options.ir_version is None else [f"--ir-version={options.ir_version}"])
