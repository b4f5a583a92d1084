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

from seqlower.summary import (
    facts_lines,
    nothing_to_lower_line,
    pass_lines,
    remaining_sequence_lines,
    seconds,
)

if TYPE_CHECKING:
    from seqlower.job import LowerResult
    from seqlower.verification import VerifyReport

__all__ = ["Printer", "describe_targets", "seconds"]


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
        remaining = remaining_sequence_lines(result.ops_after)
        if not result.lowered_anything and not verbose:
            if result.refused is None:  # else its warning says why nothing was lowered
                self.line(nothing_to_lower_line(result.passes, result.ops_before))
            for line in remaining:
                self.line(line)
            return
        lines = pass_lines(result.passes, result.ops_before, result.ops_after, verbose=verbose)
        if result.before is not None:
            lines += facts_lines(result.before, result.after, verbose=verbose)
        for line in lines + remaining:
            self.line(line)

    def total(self, result: LowerResult) -> None:
        """The whole run's time, last (onnxslim prints it so too)."""
        if not self.quiet and result.seconds:
            self.line(f"{'total time':26} {seconds(result.seconds)}")

    def verdict(self, report: VerifyReport, verbose: int) -> None:
        if report.ok and self.quiet:
            return

        def style(label: str, colour: str) -> str:
            return click.style(label, fg=colour, bold=True)

        from seqlower.verification.report import verdict_lines

        # Failures that are not the lowering's are the run's warnings, said on stderr.
        for line in verdict_lines(report, verbose=verbose, style=style, warnings=False):
            self.line(line, err=not report.ok, always=True)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def describe_targets() -> str:
    """The target table as text, one block per target (what ``seqlower --list-targets``
    prints), each proof runtime's version here or why it cannot run here."""
    from seqlower.plan import target_rows

    lines = []
    for target in target_rows():
        lines.append(f"{target.name}  [{target.measured}: {target.versions}]")
        lines.append(f"  passes:           {', '.join(target.pass_names)}")
        if target.expand_ops:
            lines.append(
                f"  expanded:         {', '.join(target.expand_ops)} (ONNX function bodies)"
            )
        if target.op_versions:
            newest = ", ".join(f"{op}-{v}" for op, v in target.op_versions)
            lines.append(f"  op versions:      {newest} (newer: re-stamped if only types changed)")
        if target.attribute_defaults:
            written = ", ".join(f"{op}.{name}={v}" for op, name, v in target.attribute_defaults)
            lines.append(f"  defaults written: {written} (the converter misreads them)")
        lines.append(f"  checks:           {', '.join(target.requires) or 'none'}")
        lines.append(
            f"  Loop: {target.loops}; ReverseSequence: {target.reverse_sequence}; "
            f"opset: {target.max_opset or 'any'}; symbolic names dropped: "
            f"{'yes' if target.strip_symbolic_dims else 'no'}"
        )
        lines.append(f"  still blocks:     {target.still_blocks}")
        if target.static_shapes:
            lines.append(
                f"  static shapes:    {target.static_shapes}: --overwrite-input-shape NAME=D0,..."
            )
        proofs = "; ".join(_proof_here(name) for name in target.proofs)
        lines.append(
            f"  proven on:        {proofs or 'nothing seqlower runs (--no-check lowers for it)'}"
        )
    return "\n".join(lines)


def _proof_here(name: str) -> str:
    """The oracle ``name`` proves with, and its version here or why it cannot run here."""
    from seqlower.errors import SeqlowerError
    from seqlower.verification.runtimes import TARGET_ORACLES, load_target

    oracle = TARGET_ORACLES.get(name)
    if oracle is None:
        return name
    try:
        load_target(name, lowering=False)
    except SeqlowerError as e:
        reason = str(e).split(": ", 1)[-1].split(", so ")[0]
        return f"{name} ({reason} here: pip install 'seqlower[{oracle.extra or name}]')"
    return f"{name} ({oracle.label()} here)"
