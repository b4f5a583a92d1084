"""The command line's flags: declared once, parsed into the library's option values.

Every bad value is a :class:`click.BadParameter` (one line, exit 2) naming the flag; names that
must exist in the model (``--dim``, ``--input-shape``, per-output tolerances) are checked
against it by :func:`seqlower.job.lower_file` and ``seqlower verify`` once it is read.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from seqlower.passes import DEFAULT_PASSES, PASSES, SEQUENCE_FREE_PASSES

__all__ = ["check_options", "choose_passes", "unroll_inputs", "verify_options"]

SEED_MAX = 2**32 - 1  # numpy's seeds


def check_options(command: Callable[..., Any]) -> Callable[..., Any]:
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
            type=click.IntRange(0, SEED_MAX),
            default=0,
            show_default=True,
            help="Seed for generated inputs (runs are reproducible).",
        ),
        click.option(
            "--rtol",
            "rtols",
            multiple=True,
            metavar="[OUTPUT:]TOL",
            help="Relative tolerance, for all outputs or one (repeatable; per-output values "
            "override the global one).",
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
            help="Shape of one input, e.g. --input-shape x:1,3,224,224 (repeatable); it may "
            "not change a dimension the model declares unless --force-input-shape.",
        ),
        click.option(
            "--force-input-shape",
            is_flag=True,
            help="Let --input-shape override dimensions the model declares.",
        ),
        click.option(
            "--seq-len",
            type=click.IntRange(0),
            default=None,
            help="Length of every sequence input (default 3, plus one empty run).",
        ),
        click.option(
            "--check-memory",
            "memory_budget",
            metavar="SIZE",
            callback=_parse_size,
            help="Largest total size of generated inputs, e.g. 512M or 4G (default: a quarter "
            "of physical memory); larger checks are refused with exit 3.",
        ),
        click.option(
            "--check-timeout",
            "timeout",
            type=click.FloatRange(0, min_open=True),
            metavar="SECONDS",
            help="Stop the check after this long in all (default 600); exit 3.",
        ),
        click.option(
            "--inputs",
            "inputs_path",
            type=click.Path(path_type=Path),
            help="Inputs to use instead: an .npz file or ONNX test-data directory.",
        ),
        click.option(
            "--expected",
            "expected_path",
            type=click.Path(path_type=Path),
            help="The framework's outputs to compare the lowered model with: an .npz "
            "(output.NAME keys, __outputs__, or output names) or test-data folder (output_K.pb); "
            "may be the --inputs file, which it also supplies when --inputs is not given.",
        ),
        click.option(
            "--target",
            "targets",
            multiple=True,
            metavar="NAME",
            callback=_check_targets,
            help="Lower for this runtime and prove the result on it (repeatable; see "
            "--list-targets): openvino, tract (tract-symbolic: with its declared facts), "
            "onnxruntime; onnx2tf, onnx2torch, tvm, tensorrt are lowered for, not run.",
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


def verify_options(
    check_n: int,
    seed: int,
    rtols: tuple[str, ...],
    atols: tuple[str, ...],
    dim_specs: tuple[str, ...],
    shape_specs: tuple[str, ...],
    force_input_shape: bool,
    seq_len: int | None,
    inputs_path: Path | None,
    report_path: Path | None,
    memory_budget: int | None,
    timeout: float | None,
    expected_path: Path | None = None,
    targets: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The keyword options of :func:`seqlower.verify` the flags ask for."""
    del report_path, force_input_shape  # used by the caller, not by verify()
    return {
        "targets": tuple(targets),
        "expected": expected_path,
        "memory_budget": memory_budget,
        "timeout": timeout,
        "n": check_n,
        "seed": seed,
        "seq_len": seq_len,
        "inputs": inputs_path,
        "rtol": _parse_tolerances(rtols, "--rtol"),
        "atol": _parse_tolerances(atols, "--atol"),
        "dims": dict(_parse_pair(spec, "=", "--dim", _size) for spec in dim_specs),
        "input_shapes": dict(
            _parse_pair(spec, ":", "--input-shape", _parse_shape) for spec in shape_specs
        ),
    }


def _check_targets(
    _ctx: click.Context, _param: click.Parameter, names: tuple[str, ...]
) -> tuple[str, ...]:
    """Unknown or not installed targets fail before the model is read (with the pip command)."""
    if not names:  # nothing to import: click calls this for every run
        return names
    from seqlower.errors import SeqlowerError
    from seqlower.targets import deployment
    from seqlower.verification.oracles import load_target

    try:
        for name in deployment(names).proofs:
            load_target(name)
    except SeqlowerError as e:
        raise click.UsageError(str(e)) from None
    return tuple(dict.fromkeys(names))


_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _parse_size(_ctx: click.Context, _param: click.Parameter, text: str | None) -> int | None:
    """``512M``, ``4G``, ``1.5G`` or a number of bytes."""
    if text is None:
        return None
    number, unit = text.strip().upper().rstrip("B"), ""
    if number and number[-1] in _UNITS:
        number, unit = number[:-1], number[-1]
    try:
        value = float(number) * _UNITS[unit]
    except ValueError:
        raise click.BadParameter(f"{text}: expected a size such as 512M or 4G") from None
    if not math.isfinite(value) or value <= 0:
        raise click.BadParameter(f"{text}: must be a positive size")
    return int(value)


def _size(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def _parse_pair(
    spec: str, separator: str, flag: str, convert: Callable[[str], Any]
) -> tuple[str, Any]:
    name, sep, value = spec.rpartition(separator)
    if not sep or not name:
        raise click.BadParameter(f"{spec}: expected NAME{separator}VALUE", param_hint=flag)
    try:
        return name, convert(value)
    except ValueError:
        raise click.BadParameter(f"{spec}: cannot read '{value}'", param_hint=flag) from None


def _parse_shape(text: str) -> tuple[int, ...]:
    return tuple(_size(d) for d in text.split(",") if d.strip())


def _tolerance(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(text)
    return value


def _parse_tolerances(specs: tuple[str, ...], flag: str) -> float | dict[str, float] | None:
    """One global value and per-output values; per-output ones win for their output. Returned
    as verify() takes them: a number, or a dict where the key ``"*"`` holds the global one."""
    if not specs:
        return None
    overall: float | None = None
    per_output: dict[str, float] = {}
    for spec in specs:
        if ":" in spec:
            name, value = _parse_pair(spec, ":", flag, _tolerance)
            per_output[name] = value
        else:
            try:
                overall = _tolerance(spec)
            except ValueError:
                raise click.BadParameter(
                    f"{spec}: not a non-negative number", param_hint=flag
                ) from None
    if not per_output:
        return overall
    if overall is not None:
        per_output = {"*": overall, **per_output}
    return per_output


def unroll_inputs(specs: tuple[str, ...]) -> dict[str, int]:
    """``--unroll-input NAME=K`` flags as a dict; K at least 1."""
    counts = dict(_parse_pair(spec, "=", "--unroll-input", _size) for spec in specs)
    for name, count in counts.items():
        if count < 1:
            raise click.BadParameter(
                f"{name}={count}: K must be at least 1", param_hint="--unroll-input"
            )
    return counts


def choose_passes(
    text: str | None, skip: tuple[str, ...], *, sequence_free: bool = False
) -> list[str]:
    default = SEQUENCE_FREE_PASSES if sequence_free else DEFAULT_PASSES
    names = list(default) if text is None else [n.strip() for n in text.split(",") if n.strip()]
    skipped = [n.strip() for spec in skip for n in spec.split(",") if n.strip()]
    unknown = [name for name in (*names, *skipped) if name not in PASSES]
    if unknown:
        known = ", ".join(PASSES)
        raise click.UsageError(f"unknown pass {', '.join(unknown)}; known: {known}")
    chosen = [name for name in names if name not in skipped]
    if not chosen:
        raise click.UsageError("no passes left to run")
    return chosen
