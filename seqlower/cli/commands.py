"""The ``seqlower`` command: a thin click front end over the library.

Everything that can fail for a user's reason raises :class:`seqlower.SeqlowerError`; this module
only turns those into one line on stderr and an exit code.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import shlex
import shutil
import sys
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
import onnx
import onnx_ir as ir

import seqlower
import seqlower.io
from seqlower._fs import check_target, write_file_atomically
from seqlower._graphs import all_graphs
from seqlower._signals import signals_as_interrupts as _signals_as_interrupts
from seqlower.errors import CannotVerifyError, OutputError, SeqlowerError
from seqlower.inputs import save_inputs
from seqlower.io import check_model, load_model, save_model
from seqlower.passes import PASSES
from seqlower.pipeline import TimedPass, build_pipeline, pass_name, run_pipeline

if TYPE_CHECKING:
    from seqlower.verification import VerifyReport

EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_BAD_INPUT = 2
EXIT_CANNOT_VERIFY = 3
EXIT_INTERNAL = 70  # EX_SOFTWARE from sysexits.h: a bug in seqlower, not in the input
EXIT_INTERRUPTED = 130

EPILOG = """\b
Examples:
  seqlower model.onnx -o lowered.onnx
  seqlower model.onnx -o lowered.onnx --no-check
  seqlower model.onnx -o lowered.onnx --dim batch=4 --seq-len 5 --report check.json
  seqlower model.onnx -o lowered.onnx --passes lower-sequence-map
  seqlower verify model.onnx lowered.onnx --inputs test_data_set_0
  seqlower --list-passes

\b
Exit codes:
  0   success (and, unless --no-check, outputs proven equal)
  1   numerical mismatch (OUT not written unless --keep-on-failure)
  2   bad input or usage: unreadable or invalid model, malformed node,
      unwritable output (one line on stderr, no output file)
  3   cannot verify: no runtime runs the original model
  70  internal error in seqlower (please report it; -v shows the traceback)
  130 interrupted
"""


def _check_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The numerical-check flags shared by `lower` and `verify`."""
    options = [
        click.option(
            "--check-n",
            type=click.IntRange(1),
            default=3,
            show_default=True,
            help="Runs of generated inputs.",
        ),
        click.option(
            "--seed",
            type=int,
            default=0,
            show_default=True,
            help="Seed for generated inputs (runs are reproducible).",
        ),
        click.option(
            "--rtol",
            "rtols",
            multiple=True,
            metavar="[OUTPUT:]TOL",
            help="Relative tolerance, for all outputs or one (repeatable).",
        ),
        click.option(
            "--atol",
            "atols",
            multiple=True,
            metavar="[OUTPUT:]TOL",
            help="Absolute tolerance, for all outputs or one (repeatable).",
        ),
        click.option(
            "--dim",
            "dim_specs",
            multiple=True,
            metavar="NAME=SIZE",
            help="Size of a symbolic dimension, e.g. --dim batch=4 (repeatable).",
        ),
        click.option(
            "--input-shape",
            "shape_specs",
            multiple=True,
            metavar="INPUT:D0,D1,...",
            help="Shape of one input, e.g. --input-shape x:1,3,224,224 (repeatable).",
        ),
        click.option(
            "--seq-len",
            type=click.IntRange(0),
            default=None,
            help="Length of every sequence input (default 3, plus one empty run).",
        ),
        click.option(
            "--inputs",
            "inputs_path",
            type=click.Path(path_type=Path),
            help="Inputs to use instead: an .npz file or ONNX test-data directory.",
        ),
        click.option(
            "--report",
            "report_path",
            type=click.Path(path_type=Path),
            help="Write the full report as JSON to this file.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


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
@click.option("--dry-run", is_flag=True, help="Run everything, write no model (-o optional).")
@click.option(
    "--no-cleanup",
    is_flag=True,
    help="Keep nodes nothing reads and the original node order (skip dead-node removal/sort).",
)
@click.option("--no-check", is_flag=True, help="Skip the numerical check after lowering.")
@click.option(
    "--keep-on-failure",
    is_flag=True,
    help="Write OUT even when the check finds a mismatch or cannot run.",
)
@_check_options
@click.option("-v", "--verbose", count=True, help="Say more; -v also shows tracebacks.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on success.")
def lower(
    model: Path,
    output: Path | None,
    pass_names: str | None,
    skip_names: tuple[str, ...],
    external_data: str | None,
    dry_run: bool,
    no_cleanup: bool,
    no_check: bool,
    keep_on_failure: bool,
    verbose: int,
    quiet: bool,
    **check: Any,
) -> None:
    """Lower MODEL, check it against the original, and write the result to OUT."""
    _configure_logging(verbose)
    if output is None and not dry_run:
        raise click.UsageError("Missing option '-o' / '--output' (or give --dry-run).")
    show = _Printer(quiet)
    with _user_errors(verbose), _signals_as_interrupts():
        passes = _choose_passes(pass_names, skip_names)
        verify_options = _verify_options(**check)
        # Every path is checked before any work: a bad one fails in a second, not after lowering.
        _check_paths(model, None if dry_run else output, external_data, check["report_path"])
        with show.step(f"reading {model}"):
            ir_model = load_model(model)
        # The files this run reads: never overwritten, never removed as stale weights (unless
        # OUT replaces the input itself: then its weights are OUT's old ones).
        reads = [model, *(Path(p) for p in seqlower.io.external_locations(ir_model))]
        in_place = output is not None and os.path.realpath(output) == os.path.realpath(model)
        keep = [model] if in_place else reads
        if external_data is not None and output is not None and not dry_run:
            seqlower.io.check_external_data_name(external_data, output, inputs=reads)
        # Op counts are for the summary and the report only (a walk of the model each).
        counting = not quiet or check["report_path"] is not None
        before = _op_counts(ir_model) if counting else Counter()
        original = None if no_check else _in_memory_proto(ir_model)
        pipeline = build_pipeline(passes, cleanup=not no_cleanup, timed=True)
        with show.step("lowering"):
            run_pipeline(ir_model, pipeline)
            # Without the numerical check the written file is checked before it replaces
            # anything (cheaper); with it, the proto made for the runtimes is checked.
            lowered = None if original is None else _in_memory_proto(ir_model)
            if lowered is not None or dry_run:
                check_model(ir_model if lowered is None else lowered, what="lowered model")
        after = _op_counts(ir_model) if counting else Counter()
        show.summary(pipeline.passes, before, after, verbose)
        report = None
        code = EXIT_OK
        if original is not None and lowered is not None:
            with show.step("checking"):
                from seqlower.verification import verify  # imports onnxruntime: only when checking

                report = verify(original, lowered, **verify_options)
            code = _exit_code(report)
            show.verdict(report, verbose)
            if code == EXIT_MISMATCH and not dry_run:
                _save_failing_inputs(report, original, model, output, check)
        written, data_name = False, None
        if dry_run:
            show.line("dry run: nothing written")
        elif code == EXIT_OK or keep_on_failure:
            assert output is not None
            with show.step(f"writing {output}"):
                data_name = save_model(
                    ir_model,
                    output,
                    external_data=external_data,
                    check=original is None,
                    keep=keep,
                )
            written = True
            show.line(f"wrote {output}" + (f" (weights in {data_name})" if data_name else ""))
            if external_data is not None and data_name is None:
                show.line(f"no weight is big enough for {external_data}: all are inline")
        else:
            show.error(f"{output} not written (--keep-on-failure writes it anyway)")
        _write_report(
            check["report_path"],
            {
                "input": str(model),
                "output": None if output is None else str(output),
                "written": written,
                "external_data": data_name,
                "passes": _pass_rows(pipeline.passes),
                "ops": {"before": dict(before), "after": dict(after)},
                "verification": None if report is None else report.to_dict(),
            },
        )
    sys.exit(code)


@cli.command("verify", epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("reference", type=click.Path(path_type=Path))
@click.argument("candidate", type=click.Path(path_type=Path))
@_check_options
@click.option("-v", "--verbose", count=True, help="Say more; -v also shows tracebacks.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on success.")
def verify_command(
    reference: Path, candidate: Path, verbose: int, quiet: bool, **check: Any
) -> None:
    """Compare REFERENCE and CANDIDATE numerically on the same inputs."""
    _configure_logging(verbose)
    with _user_errors(verbose), _signals_as_interrupts():
        options = _verify_options(**check)
        _check_paths(None, None, None, check["report_path"])
        protos = []
        for path in (reference, candidate):
            ir_model = load_model(path)
            protos.append(_in_memory_proto(ir_model))
        show = _Printer(quiet)
        with show.step("checking"):
            from seqlower.verification import verify

            report = verify(protos[0], protos[1], **options)
        _write_report(check["report_path"], {"verification": report.to_dict()})
        code = _exit_code(report)
        show.verdict(report, verbose)
    sys.exit(code)


def _in_memory_proto(model: ir.Model) -> onnx.ModelProto:
    """A self-contained proto of ``model`` (external weights read in) for the runtimes."""
    if seqlower.io.weights_nbytes(model) > seqlower.io.INLINE_LIMIT:
        raise CannotVerifyError(
            "the model's weights are over 2 GB, which the check cannot load yet; "
            "rerun with --no-check to lower it without the check"
        )
    return seqlower.io.self_contained_proto(model)


def _verify_options(
    check_n: int,
    seed: int,
    rtols: tuple[str, ...],
    atols: tuple[str, ...],
    dim_specs: tuple[str, ...],
    shape_specs: tuple[str, ...],
    seq_len: int | None,
    inputs_path: Path | None,
    report_path: Path | None,
) -> dict[str, Any]:
    del report_path  # used by the caller, not by verify()
    return {
        "n": check_n,
        "seed": seed,
        "seq_len": seq_len,
        "inputs": inputs_path,
        "rtol": _parse_tolerances(rtols, "--rtol"),
        "atol": _parse_tolerances(atols, "--atol"),
        "dims": dict(_parse_pair(spec, "=", "--dim", int) for spec in dim_specs),
        "input_shapes": dict(
            _parse_pair(spec, ":", "--input-shape", _parse_shape) for spec in shape_specs
        ),
    }


def _parse_pair(
    spec: str, separator: str, flag: str, convert: Callable[[str], Any]
) -> tuple[str, Any]:
    name, sep, value = spec.rpartition(separator)
    if not sep or not name:
        raise click.UsageError(f"{flag} {spec}: expected NAME{separator}VALUE")
    try:
        return name, convert(value)
    except ValueError:
        raise click.UsageError(f"{flag} {spec}: cannot read '{value}'") from None


def _parse_shape(text: str) -> tuple[int, ...]:
    dims = tuple(int(d) for d in text.split(",") if d.strip())
    if any(d < 0 for d in dims):
        raise ValueError(text)
    return dims


def _parse_tolerances(specs: tuple[str, ...], flag: str) -> float | dict[str, float] | None:
    if not specs:
        return None
    overall: float | None = None
    per_output: dict[str, float] = {}
    for spec in specs:
        if ":" in spec:
            name, value = _parse_pair(spec, ":", flag, float)
            per_output[name] = value
        else:
            try:
                overall = float(spec)
            except ValueError:
                raise click.UsageError(f"{flag} {spec}: not a number") from None
    if per_output and overall is not None:
        raise click.UsageError(f"{flag}: give one tolerance for all outputs, or per output")
    return per_output or overall


def _exit_code(report: VerifyReport) -> int:
    codes = {"equivalent": EXIT_OK, "mismatch": EXIT_MISMATCH, "cannot_verify": EXIT_CANNOT_VERIFY}
    return codes[report.status]


def _write_report(path: Path | None, data: dict[str, Any]) -> None:
    if path is not None:
        text = json.dumps(data, indent=2, default=str) + "\n"
        write_file_atomically(path, text.encode(), "--report")


def _check_paths(
    model: Path | None, output: Path | None, external_data: str | None, report: Path | None
) -> None:
    """Refuse, before any work, paths that would fail or do harm once the work is done."""
    if output is not None:
        check_target(output, "-o")
        if model is not None and external_data is not None:
            seqlower.io.check_external_data_name(external_data, output, inputs=[model])
    if report is not None:
        check_target(report, "--report")
        taken = [p for p in (model, output) if p is not None]
        if external_data is not None and output is not None:
            taken.append(output.parent / external_data)
        for path in taken:
            if os.path.realpath(report) == os.path.realpath(path):
                raise OutputError(f"--report {report}: that is {path}, which this run uses")


def _pass_rows(passes: Any) -> list[dict[str, Any]]:
    rows = []
    for timed in passes:
        inner = timed.inner if isinstance(timed, TimedPass) else timed
        rows.append(
            {
                "name": pass_name(timed),
                "op_type": getattr(inner, "op_type", None),
                "rewritten": getattr(inner, "rewritten", None),
                "seconds": getattr(timed, "seconds", None),
            }
        )
    return rows


class _Printer:
    """What the command prints: nothing on success with -q, colour only where it belongs."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        # NO_COLOR (https://no-color.org) switches colour off; click strips it off-terminal.
        self.color = False if os.environ.get("NO_COLOR") else None
        self.progress = not quiet and sys.stderr.isatty()

    def line(self, text: str, *, err: bool = False, always: bool = False) -> None:
        if always or not self.quiet:
            click.echo(text, err=err, color=self.color)

    def error(self, text: str) -> None:
        self.line(f"seqlower: {text}", err=True, always=True)

    @contextlib.contextmanager
    def step(self, what: str) -> Iterator[None]:
        """Say what a long step is doing, on a terminal only, and clear it afterwards."""
        if self.progress:
            click.echo(f"seqlower: {what}...", err=True, nl=False)
        try:
            yield
        finally:
            if self.progress:
                click.echo("\r\033[K", err=True, nl=False)

    def summary(self, passes: Any, before: Counter[str], after: Counter[str], verbose: int) -> None:
        if self.quiet:
            return
        click.echo(f"{'pass':26} {'rewritten':>9} {'time':>10}")
        for row in _pass_rows(passes):
            rewritten = "" if row["rewritten"] is None else str(row["rewritten"])
            click.echo(f"{row['name']:26} {rewritten:>9} {row['seconds'] * 1e3:>8.1f}ms")
        ops = sorted(set(before) | set(after))
        shown = [op for op in ops if verbose or before[op] != after[op]]
        if shown:
            click.echo(f"{'op':26} {'before':>9} {'after':>10}")
            for op in shown:
                click.echo(f"{op:26} {before[op]:>9} {after[op]:>10}")

    def verdict(self, report: VerifyReport, verbose: int) -> None:
        err = not report.ok
        if report.ok and self.quiet:
            return
        label = {"equivalent": ("outputs match", "green"), "mismatch": ("MISMATCH", "red")}.get(
            report.status, ("cannot verify", "yellow")
        )
        oracles = ", ".join(f"{k}: {v}" for k, v in report.oracles.items())
        text = f"check: {click.style(label[0], fg=label[1], bold=True)}: {report.reason}"
        self.line(text + (f" ({oracles})" if oracles else ""), err=err, always=True)
        rows: dict[str, list[float]] = {}
        for run in report.runs:
            if run.error:
                self.line(f"  run {run.index}: {run.error}", err=err, always=True)
            for o in run.outputs:
                row = rows.setdefault(o.name, [0.0, 0.0, 0, 0])
                row[0], row[1] = max(row[0], o.max_abs), max(row[1], o.max_rel)
                row[2] += o.mismatches
                row[3] += o.elements
        if rows and (verbose or not report.ok):
            header = f"  {'output':24} {'max abs':>12} {'max rel':>12} {'mismatches':>14}"
            self.line(header, err=err, always=True)
            for name, (max_abs, max_rel, bad, total) in rows.items():
                count = f"{bad}/{total}"
                self.line(
                    f"  {name:24} {max_abs:>12.4g} {max_rel:>12.4g} {count:>14}",
                    err=err,
                    always=True,
                )
        if verbose:
            for problem in report.input_problems:
                self.line(f"  note: {problem}", err=err, always=True)


def _save_failing_inputs(
    report: VerifyReport,
    original: onnx.ModelProto,
    model: Path,
    output: Path,
    check: dict[str, Any],
) -> None:
    if report.failing_inputs is None:
        return
    folder = output.with_name(f"{output.name}.failing-inputs")
    if os.path.lexists(folder) and (folder.is_symlink() or not folder.is_dir()):
        click.echo(f"seqlower: failing inputs not saved: {folder} is not a folder", err=True)
        return
    # Staged and renamed into place like every other write: never into a planted link.
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        save_inputs(staging / "test_data_set_0", report.failing_inputs, original)
        if folder.is_dir():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    command = ["seqlower", str(model), "-o", str(output), "--inputs", str(folder)]
    command += [f"--rtol={t}" for t in check["rtols"]] + [f"--atol={t}" for t in check["atols"]]
    click.echo(f"seqlower: failing inputs saved in {folder}; reproduce with:", err=True)
    click.echo(f"  {shlex.join(command)}", err=True)


def _configure_logging(verbose: int) -> None:
    # Libraries (onnx_ir) warn through logging; without this, Python prints their warnings as
    # bare extra lines on stderr, and a failed run would no longer end in exactly one line.
    level = logging.ERROR if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="seqlower: %(name)s: %(message)s", force=True)


def _choose_passes(text: str | None, skip: tuple[str, ...]) -> list[str]:
    names = list(PASSES) if text is None else [n.strip() for n in text.split(",") if n.strip()]
    skipped = [n.strip() for spec in skip for n in spec.split(",") if n.strip()]
    unknown = [name for name in (*names, *skipped) if name not in PASSES]
    if unknown:
        known = ", ".join(PASSES)
        raise click.UsageError(f"unknown pass {', '.join(unknown)}; known: {known}")
    chosen = [name for name in names if name not in skipped]
    if not chosen:
        raise click.UsageError("no passes left to run")
    return chosen


def _op_counts(model: ir.Model) -> Counter[str]:
    counts: Counter[str] = Counter()
    for graph in all_graphs(model):
        for node in graph:
            counts[
                node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
            ] += 1
    return counts


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
            code = getattr(exc, "exit_code", EXIT_INTERRUPTED)
            what = f"stopped by {exc}" if code != EXIT_INTERRUPTED else "interrupted"
            self._fail(f"{what}; nothing was written", code, None)
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
    """Console-script entry point.

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
