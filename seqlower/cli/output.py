"""What the command line prints, and how: colour and progress on terminals only, one line per
error, and a closed pipe (``seqlower ... | head``) never stops the work."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from seqlower.job import LowerResult, PassRow
    from seqlower.verification import VerifyReport

__all__ = ["Printer", "seconds"]


def seconds(value: float) -> str:
    """A duration as people read it: milliseconds below a second, seconds above."""
    return f"{value * 1e3:.1f}ms" if value < 1 else f"{value:.1f}s"


class Printer:
    """Everything the command prints goes through here."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        # NO_COLOR (https://no-color.org) switches colour off; click strips it off-terminal.
        self.color = False if os.environ.get("NO_COLOR") else None
        self.progress = not quiet and _isatty(sys.stderr)
        self._closed: set[bool] = set()  # which streams (err or not) hit a closed pipe
        self._detail = ""  # where the current step is (``run 2/4``), shown after its name

    def line(self, text: str, *, err: bool = False, always: bool = False) -> None:
        if not (always or not self.quiet) or err in self._closed:
            return
        try:
            click.echo(text, err=err, color=self.color)
        except BrokenPipeError:
            # The reader went away (`| head`): stop printing to it, keep working. Python would
            # otherwise complain again when it flushes the stream at exit.
            self._closed.add(err)
            with contextlib.suppress(OSError):
                stream = sys.stderr if err else sys.stdout
                os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())

    def error(self, text: str) -> None:
        self.line(f"seqlower: {text}", err=True, always=True)

    @contextlib.contextmanager
    def step(self, what: str) -> Iterator[None]:
        """On a terminal: what a long step is doing and for how long, updated in place."""
        if not self.progress:
            yield
            return
        start = time.monotonic()
        done = threading.Event()
        self._detail = ""

        def show() -> None:
            while True:
                elapsed = time.monotonic() - start
                label = f"{what} {self._detail}" if self._detail else what
                with contextlib.suppress(OSError):
                    click.echo(f"\r\033[Kseqlower: {label}... {elapsed:.0f}s", err=True, nl=False)
                if done.wait(0.5):
                    return

        ticker = threading.Thread(target=show, daemon=True)
        ticker.start()
        try:
            yield
        finally:
            done.set()
            ticker.join()
            with contextlib.suppress(OSError):
                click.echo("\r\033[K", err=True, nl=False)

    def run_progress(self, run: int, total: int) -> None:
        """The check's hook (``CheckOptions.on_run``): which run the current step is on."""
        self._detail = f"run {run}/{total}"

    def summary(self, result: LowerResult, verbose: int) -> None:
        if self.quiet:
            return
        for note in result.notes:
            self.line(f"note: {note}")
        if not result.lowered_anything and not verbose:
            ops = ", ".join(sorted({row.op_type for row in result.passes if row.op_type}))
            self.line(f"nothing to lower: no {ops.replace(', ', ' or ')} in the model")
            return
        self.line(f"{'pass':26} {'rewritten':>9} {'time':>10}")
        for row in result.passes:
            self.line(_pass_line(row))
        before, after = result.ops_before, result.ops_after
        ops = sorted(set(before) | set(after))
        shown = [op for op in ops if verbose or before[op] != after[op]]
        if shown:
            self.line(f"{'op':26} {'before':>9} {'after':>10}")
            for op in shown:
                self.line(f"{op:26} {before[op]:>9} {after[op]:>10}")

    def verdict(self, report: VerifyReport, verbose: int) -> None:
        err = not report.ok
        if report.ok and self.quiet:
            return
        label, colour = {
            "equivalent": ("outputs match", "green"),
            "mismatch": ("MISMATCH", "red"),
        }.get(report.status, ("cannot verify", "yellow"))
        oracles = ", ".join(f"{k}: {v}" for k, v in report.oracles.items())
        styled = click.style(label, fg=colour, bold=True)
        reason = report.reason
        if report.ok and reason.startswith("all outputs match"):
            reason = reason[len("all outputs match") :].strip()
        text = f"check: {styled}" + (f"{' ' if report.ok else ': '}{reason}" if reason else "")
        self.line(text + (f" ({oracles})" if oracles else ""), err=err, always=True)
        for extra in [*report.targets.values(), report.expected]:
            if extra and extra not in reason:  # --target and --expected, one line each
                self.line(f"check: {extra}", err=err, always=True)
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


def _pass_line(row: PassRow) -> str:
    rewritten = "" if row.rewritten is None else str(row.rewritten)
    line = f"{row.name:26} {rewritten:>9} {seconds(row.seconds):>10}"
    if row.forms:
        line += "   (" + ", ".join(f"{n} {form}" for form, n in sorted(row.forms.items())) + ")"
    return line


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
