"""The ``seqlower`` commands: parse flags, call the library, print the result.

The work lives in :func:`seqlower.job.lower_file` and :func:`seqlower.verify`; everything that
can fail for a user's reason raises :class:`seqlower.SeqlowerError`, which this module turns into
one line on stderr and an exit code from :class:`seqlower.errors.ExitCode`.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import os
import re
import shlex
import sys
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TypeVar

import click

import seqlower
from seqlower._fs import write_file_atomically
from seqlower.cli.options import (
    check_options,
    checking,
    choose_passes,
    inspect_planning_options,
    planning,
    planning_options,
    repro_flags,
    save_options,
    saving,
    verify_check_options,
)
from seqlower.cli.output import Printer
from seqlower.errors import ExitCode, SeqlowerError, first_line
from seqlower.passes import PASSES, pass_doc

if TYPE_CHECKING:
    from seqlower.job import LowerOptions, LowerResult, check_paths, lower_file, verify_files
else:  # onnx and onnx_ir load when a command runs: --help and --version need neither
    from seqlower._lazy import lazy

    LowerOptions = lazy("seqlower.job", "LowerOptions")
    check_paths = lazy("seqlower.job", "check_paths")
    lower_file = lazy("seqlower.job", "lower_file")
    verify_files = lazy("seqlower.job", "verify_files")

if TYPE_CHECKING:
    from seqlower.verification import CheckOptions, Tolerances

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


USAGE = """\
Usage: seqlower MODEL -o OUT [OPTIONS]
       seqlower MODEL... -o OUTDIR/ [-j N] [OPTIONS]
       seqlower verify REFERENCE CANDIDATE [OPTIONS]
       seqlower inspect MODEL
       seqlower example [-o FILE]
       seqlower help [COMMAND]"""


def _extra_argument_hint(error: click.ClickException) -> str | None:
    """``seqlower m.onnx out.onnx``: the second path was meant as the output."""
    ctx = getattr(error, "ctx", None)
    match = re.fullmatch(r"Got unexpected extra argument \((.+)\)", error.format_message())
    if match is None or ctx is None or ctx.command.name != "lower":
        return None
    extra = match.group(1)
    return f"unexpected extra argument {extra}; to write the model there, give -o {extra}"


class _Group(click.Group):
    """``seqlower MODEL -o OUT`` runs ``lower``; ``seqlower help [COMMAND]`` shows help;
    usage errors are one line, like every other error."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        group_flags = {"--help", "-h", "--version", "--list-passes", "--list-targets"}
        if args and args[0] not in self.commands and args[0] not in group_flags:
            args = ["lower", *args]
        ctx.meta["seqlower.args"] = list(args)  # batch mode passes the flags on to each run
        return super().parse_args(ctx, args)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().main(*args, standalone_mode=False, **kwargs)  # type: ignore[call-overload]
        except click.exceptions.NoArgsIsHelpError:
            # No arguments is a mistake (a script that lost its variables), not a help request.
            click.echo(USAGE, err=True)
            click.echo("seqlower: error: no model given (see seqlower --help)", err=True)
            sys.exit(ExitCode.BAD_INPUT)
        except click.ClickException as e:
            # click's own form is three lines (usage, hint, error); the promise is one.
            message = _extra_argument_hint(e) or e.format_message().rstrip(".")
            click.echo(f"seqlower: error: {message} (see seqlower --help)", err=True)
            sys.exit(ExitCode.BAD_INPUT)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except click.exceptions.Abort as e:
            # click turns a KeyboardInterrupt (SIGTERM and SIGHUP too, as Interrupted) raised
            # while it parses into Abort; the signal's own exit code is on the cause.
            click.echo("seqlower: interrupted; nothing was written", err=True)
            sys.exit(getattr(e.__cause__ or e.__context__, "exit_code", ExitCode.INTERRUPTED))


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

    with _user_errors(verbose, show):
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


def _list_passes(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    printer = Printer(quiet=False)
    runs = {name: _pipelines_of(name) for name in PASSES}
    # The columns as wide as their longest entry (a long pass name broke them at 24).
    width = max(len(name) for name in runs)
    where = max(len(pipelines) for pipelines in runs.values())
    for name in PASSES:
        printer.line(f"{name:{width}} {runs[name]:{where}} {_plain_summary(pass_doc(name))}")
    printer.line(
        "Every pipeline then runs remove-unused-nodes and topological-sort (--no-cleanup skips "
        "the sort, and the default pipeline's remove-unused-nodes); --passes and --skip change "
        "the default and sequence-free pipelines."
    )
    ctx.exit(ExitCode.OK)


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """seqlower's version, then every library and runtime that decides what a run does."""
    if not value or ctx.resilient_parsing:
        return
    from seqlower._version import version_text

    click.echo(version_text(), nl=False)
    ctx.exit(ExitCode.OK)


def _pipelines_of(name: str) -> str:
    """Which pipelines run a pass: ``default``, ``sequence-free`` (twice, last), the targets
    whose pipeline lists it, or none (``--passes`` only)."""
    from seqlower.plan import pipeline_rows, target_rows

    runs = []
    if name in pipeline_rows()["default"].pass_names:
        runs.append("default")
    sequence_free = pipeline_rows()["sequence-free"]
    count = sequence_free.pass_names.count(name)
    if count or name in sequence_free.requires:
        runs.append("sequence-free" + (" (twice)" if count > 1 else ""))
    if not runs:  # the sequence-free passes are in most targets' pipelines: said once above
        targets = [
            row.name
            for row in target_rows()
            if name in (*row.pass_names, *row.requires)
            or (name == "expand-function-ops" and row.expand_ops)
        ]
        if targets:
            runs.append("--target " + ", ".join(targets))
    return ", ".join(runs) or "only with --passes"


def _list_targets(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from seqlower.cli.output import describe_targets

    printer = Printer(quiet=False)
    for line in describe_targets().splitlines():
        printer.line(line)
    ctx.exit(ExitCode.OK)


def _plain_summary(doc: str | None) -> str:
    """A docstring's first sentence without reStructuredText markup or pointers elsewhere."""
    text = " ".join((doc or "").strip().split("\n\n")[0].split())
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text).replace("``", "")
    text = re.sub(r" \((see the )?module docstring\)", "", text)
    return text.split(";")[0].rstrip(".") + "."


_F = TypeVar("_F", bound=Callable[..., Any])


def _action_flag(name: str, action: Callable[..., None], help: str) -> Callable[[_F], _F]:
    """A flag that does its job while the command line is parsed and exits (``--version``)."""
    return click.option(
        name, is_flag=True, expose_value=False, is_eager=True, callback=action, help=help
    )


@click.group(
    cls=_Group,
    epilog=LOWER_EPILOG,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@_action_flag(
    "--version",
    _show_version,
    "Show seqlower's version and those of the libraries and runtimes it uses, and exit.",
)
@_action_flag("--list-passes", _list_passes, "List the lowering passes and exit.")
@_action_flag(
    "--list-targets",
    _list_targets,
    "List the deploy targets (what each runtime's pipeline does, versions measured) and exit.",
)
def cli() -> None:
    """Lower ONNX SequenceMap and ReverseSequence into ops every runtime has, and prove it.

    Run `seqlower MODEL -o OUT` (the `lower` command) for the main job: every SequenceMap
    becomes a Loop, every ReverseSequence primitive ops; the result is checked numerically
    against MODEL and written only if it matches.

    The default output may still hold sequence ops (SequenceAt, SequenceInsert, ...), which
    onnxruntime runs. For another runtime, name it: `--target tract` or `--target openvino`
    runs what that runtime needs (sequence-free; Loops as Scans for tract, repaired for
    OpenVINO; ...) and proves the result on it (`seqlower --list-targets`); `--sequence-free`
    alone removes every sequence op. `seqlower inspect MODEL` says what each mode and target
    would do, running nothing.
    """


@cli.command("help")
@click.argument("command", required=False)
@click.pass_context
def help_command(ctx: click.Context, command: str | None) -> None:
    """Show help for seqlower or one of its commands."""
    group = ctx.parent.command if ctx.parent else cli
    assert isinstance(group, click.Group)
    if command is None:
        click.echo(group.get_help(ctx.parent or ctx))
        return
    sub = group.get_command(ctx, command)
    if sub is None:
        raise click.UsageError(f"no command '{command}'; commands: {', '.join(group.commands)}")
    with click.Context(sub, info_name=command, parent=ctx.parent) as sub_ctx:
        click.echo(sub.get_help(sub_ctx))


@cli.command(epilog=LOWER_EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
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
    _configure_logging(verbose)
    _check_models(models, output, dry_run)
    if len(models) > 1 or models[0].is_dir() or (output or "").endswith(os.sep):
        _batch(ctx, models, output, jobs, verbose, Printer(quiet), check.get("report_path"))
    model = models[0]
    show = Printer(quiet)
    with _user_errors(verbose, show) as errors:
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
        _write_report(report_path, result.to_dict(), options.check_options.tolerances)
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
        _tell_repro(show, result.failing_inputs, repro, proven)
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


@cli.command(
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
    _configure_logging(verbose)
    show = Printer(quiet)
    with _user_errors(verbose, show):
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
            _tell_repro(show, result.failing_inputs, repro, options)
        _write_report(report_path, result.to_dict(), options.tolerances)
    sys.exit(result.exit_code)


@cli.command("example", context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=None,
    help="Where to write the example model (default: ./preprocess.onnx, not replaced when it "
    "exists unless -o names it).",
)
def example_command(output: Path | None) -> None:
    """Write the bundled example to try seqlower on: an image-preprocessing model (a SequenceMap
    over images of different sizes) that onnxruntime cannot run as written."""
    show = Printer(quiet=False)
    with _user_errors(0, show):
        from importlib.resources import files

        if output is None:
            output = Path(_EXAMPLE)
            if os.path.lexists(output):
                from seqlower.errors import OutputError

                raise OutputError(
                    f"{output} exists and was not named: give -o {output} to replace it, or "
                    "-o another path"
                )

        data = (files("seqlower") / "examples" / "preprocess.onnx").read_bytes()
        write_file_atomically(output, data, "-o")
        show.line(f"wrote {output}; try:")
        lowered = output.with_name(f"{output.stem}.lowered.onnx")
        show.line(f"  seqlower {shlex.quote(str(output))} -o {shlex.quote(str(lowered))}")


@cli.command("inspect", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("model", type=click.Path(path_type=Path))
@click.option(
    "--target",
    "targets",
    multiple=True,
    metavar="NAME",
    help="Say what lowering for this target would do and what would still block it "
    "(repeatable; default: the default and sequence-free modes, openvino and tract).",
)
@inspect_planning_options
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON, for scripts.")
def inspect_command(model: Path, targets: tuple[str, ...], as_json: bool, **flags: Any) -> None:
    """Say what each mode and target would lower in MODEL, leave, or be blocked by.

    Each pipeline is the one lowering runs, with the flags below, run in memory on a copy of
    MODEL: inspect writes nothing and runs nothing on a runtime.
    """
    show = Printer(quiet=False)
    with _user_errors(0, show):
        from seqlower.inspect import inspect_model
        from seqlower.job import LowerOptions

        planned = LowerOptions(**planning(flags))

        from seqlower.plan import target_rows

        rows = [row for name in targets for row in target_rows([name])]
        names = [row.name for row in rows] or [
            "default",
            "sequence-free",
            "openvino",
            "tract",
        ]
        inspection = inspect_model(model, list(dict.fromkeys(names)), planned)
        if as_json:
            show.line(json.dumps(inspection.to_dict(), indent=2))
        else:
            show.line(str(inspection))
    sys.exit(ExitCode.OK)


#: Where ``seqlower example`` writes by default.
_EXAMPLE = "preprocess.onnx"


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


def _tell_repro(show: Printer, folder: Path, command: list[str], options: CheckOptions) -> None:
    """The line that reruns the failed check on the saved inputs with every flag that took
    part; with ``--expected``, the framework's outputs for those inputs are saved beside them."""
    expected = None if options.expected is None else folder
    command = [*command, "--inputs", str(folder), *repro_flags(options, expected=expected)]
    show.error(f"failing inputs saved in {folder}; reproduce with:")
    show.line(f"  {shlex.join(command)}", err=True, always=True)


def _write_report(path: Path | None, data: dict[str, Any], tolerances: Tolerances) -> None:
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


def _configure_logging(verbose: int) -> None:
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


class _user_errors:
    """Map exceptions to one line on stderr and an exit code; tracebacks only with -v."""

    def __init__(self, verbose: int, show: Printer) -> None:
        self.verbose = verbose
        self.show = show
        self._signals: Any = None
        self._recording: Any = None
        self.written: list[Path] = []  # files this run has put in place (for an interrupt)

    def __enter__(self) -> _user_errors:
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


def main(argv: list[str] | None = None) -> None:
    """Run the command line (the console script goes through :func:`seqlower.cli.main`).

    A run holds one model (a dozen Python objects per node) from start to end, so Python's
    cyclic collector would only walk those objects over and over; it stays off for the process.
    At exit the model's objects are frozen rather than collected: collecting the few million
    objects of a 100k-node model, only for the process to end, took two seconds.
    """
    gc.disable()
    try:
        cli.main(args=argv, prog_name="seqlower")
    finally:
        gc.freeze()
