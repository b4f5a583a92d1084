"""The ``seqlower`` command group: ``lower`` (the default), ``verify``, ``inspect``,
``example`` and ``help``, and the flags that print and exit (``--list-passes``, ...).

The work lives in :func:`seqlower.job.lower_file` and :func:`seqlower.verify`; everything that
can fail for a user's reason raises :class:`seqlower.SeqlowerError`, which every command turns into
one line on stderr and an exit code (:mod:`seqlower.cli.user_errors`).
"""

from __future__ import annotations

import gc
import json
import os
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from seqlower._fs import write_file_atomically
from seqlower.cli.lower_command import LOWER_EPILOG, lower
from seqlower.cli.options import inspect_planning_options, planning
from seqlower.cli.output import Printer
from seqlower.cli.user_errors import user_errors
from seqlower.cli.verify_command import verify_command
from seqlower.errors import ExitCode
from seqlower.passes import PASSES, pass_doc

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


cli.add_command(lower)
cli.add_command(verify_command)


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
    with user_errors(0, show):
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
    with user_errors(0, show):
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
