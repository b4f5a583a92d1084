"""The command line's flags: declared once, parsed into the library's option values.

Every bad value is a :class:`click.BadParameter` (one line, exit 2) naming the flag; names that
must exist in the model (``--dim``, ``--input-shape``, per-output tolerances) are checked
against it by :func:`seqlower.job.lower_file` and ``seqlower verify`` once it is read.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from seqlower.passes import PASSES

if TYPE_CHECKING:
    from seqlower.job import SaveOptions
    from seqlower.verification.check import CheckOptions
    from seqlower.verification.compare import Tolerances

__all__ = [
    "CONSTANT_INPUT",
    "OPTIONAL_INPUT",
    "OVERWRITE_INPUT_SHAPE",
    "UNROLL_INPUT",
    "NamedValue",
    "SizeType",
    "ToleranceType",
    "check_options",
    "checking",
    "choose_passes",
    "repro_flags",
    "unroll_inputs",
    "verify_check_options",
]

SEED_MAX = 2**32 - 1  # numpy's seeds


class SizeType(click.ParamType):
    """``512M``, ``4G``, ``1.5G`` or a number of bytes, as an int."""

    name = "SIZE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value)
        number, unit = text.strip().upper().rstrip("B"), ""
        if number and number[-1] in _UNITS:
            number, unit = number[:-1], number[-1]
        try:
            size = float(number) * _UNITS[unit]
        except ValueError:
            self.fail(f"{text}: expected a size such as 512M or 4G", param, ctx)
        if not math.isfinite(size) or size <= 0:
            self.fail(f"{text}: must be a positive size", param, ctx)
        return int(size)


class NamedValue(click.ParamType):
    """``NAME<separator>VALUE``, as a ``(name, value)`` pair (``value`` read by ``read``)."""

    def __init__(self, separator: str, read: Callable[[str], Any], metavar: str) -> None:
        self.separator, self.read, self.name = separator, read, metavar

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, Any]:
        if isinstance(value, tuple):
            return value
        name, sep, text = str(value).rpartition(self.separator)
        if not sep or not name:
            self.fail(f"{value}: expected NAME{self.separator}VALUE", param, ctx)
        try:
            return name, self.read(text)
        except ValueError:
            self.fail(f"{value}: cannot read '{text}'", param, ctx)


class ToleranceType(click.ParamType):
    """``TOL`` or ``OUTPUT:TOL``, as ``(None, tol)`` or ``(output, tol)``."""

    name = "[OUTPUT:]TOL"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str | None, float]:
        if isinstance(value, tuple):
            return value
        if ":" in str(value):
            return NamedValue(":", _tolerance, self.name).convert(value, param, ctx)
        try:
            return None, _tolerance(str(value))
        except ValueError:
            self.fail(f"{value}: not a non-negative number", param, ctx)


def _size(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def _shape(text: str) -> tuple[int, ...]:
    return tuple(_size(d) for d in text.split(",") if d.strip())


def _tolerance(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(text)
    return value


def _check_targets(
    _ctx: click.Context, _param: click.Parameter, names: tuple[str, ...]
) -> tuple[str, ...]:
    """Unknown targets fail before the model is read; whether each is installed is asked once
    ``--no-check`` is known (``lower_file``, ``verify_files``)."""
    if not names:  # nothing to import: click calls this for every run
        return names
    from seqlower.errors import SeqlowerError
    from seqlower.plan import target_rows

    try:
        target_rows(names)
    except SeqlowerError as e:
        raise click.UsageError(str(e)) from None
    return tuple(dict.fromkeys(names))


#: ``--unroll-input NAME=K``.
UNROLL_INPUT = NamedValue("=", _size, "NAME=K")


class InputShape(NamedValue):
    """``NAME=D0,D1,...`` or ``NAME:D0,D1,...`` (``--input-shape``'s and onnxsim's spelling),
    split at the last ``=`` or ``:`` (TensorFlow's input names hold a ``:``)."""

    def __init__(self) -> None:
        super().__init__("=", _shape, "NAME=D0,D1,...")

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, Any]:
        text = str(value)
        self.separator = ":" if text.rfind(":") > text.rfind("=") else "="
        return super().convert(value, param, ctx)


def _presence(text: str) -> bool:
    if text not in ("present", "absent"):
        raise ValueError(text)
    return text == "present"


#: ``--optional-input NAME=present|absent``.
OPTIONAL_INPUT = NamedValue("=", _presence, "NAME=present|absent")


#: ``--overwrite-input-shape NAME=D0,D1,...``.
OVERWRITE_INPUT_SHAPE = InputShape()


class ConstantInput(NamedValue):
    """``NAME=VALUE``, split at the first ``=`` (a string value may hold one); VALUE is kept as
    text, read once the input's type is known
    (:func:`~seqlower.passes.inputs.fix_input_shapes.resolve_constant_inputs`)."""

    def __init__(self) -> None:
        super().__init__("=", str, "NAME=VALUE")

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, Any]:
        if isinstance(value, tuple):
            return value
        name, sep, text = str(value).partition("=")
        if not sep or not name or not text:
            self.fail(f"{value}: expected NAME=VALUE, e.g. mode=1", param, ctx)
        return name, text


#: ``--constant-input NAME=VALUE``.
CONSTANT_INPUT = ConstantInput()

_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


_Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def _repeated(flag: str, dest: str, type_: click.ParamType, help_: str) -> _Decorator:
    """A repeatable flag read by ``type_``."""
    return click.option(flag, dest, type=type_, multiple=True, help=help_)


_INPUT_OPTIONS: list[_Decorator] = [
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
    _repeated(
        "--rtol",
        "rtols",
        ToleranceType(),
        "Relative tolerance, for all outputs or one (repeatable; per-output values "
        "override the global one).",
    ),
    _repeated(
        "--atol",
        "atols",
        ToleranceType(),
        "Absolute tolerance, for all outputs or one (repeatable).",
    ),
    _repeated(
        "--dim",
        "dims",
        NamedValue("=", _size, "NAME=SIZE"),
        "Size of a symbolic dimension, e.g. --dim batch=4 (repeatable).",
    ),
    _repeated(
        "--input-shape",
        "input_shapes",
        NamedValue(":", _shape, "INPUT:D0,D1,..."),
        "Shape of one input, e.g. --input-shape x:1,3,224,224 (repeatable); it may "
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
]

_LIMIT_AND_FILE_OPTIONS: list[_Decorator] = [
    click.option(
        "--check-memory",
        "memory_budget",
        type=SizeType(),
        help="Largest total size of generated inputs and both models' outputs on them, e.g. "
        "512M or 4G (default: a quarter of physical memory); larger checks are refused with "
        "exit 3 before anything is drawn.",
    ),
    click.option(
        "--check-timeout",
        "timeout",
        type=click.FloatRange(0, min_open=True),
        metavar="SECONDS",
        help="Stop the check after this long in all (default 600); exit 3.",
    ),
    click.option(
        "--target-timeout",
        "target_timeout",
        type=click.FloatRange(0, min_open=True),
        metavar="SECONDS",
        help="Stop one run on a --target runtime that runs in a child process (tract) after "
        "this long (default 120): the run fails, the runtime's fault when the original times "
        "out there too.",
    ),
    click.option(
        "--inputs",
        "inputs",
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


_SAVE_OPTIONS: list[_Decorator] = [
    click.option(
        "--save-inputs",
        "save_inputs",
        type=click.Path(path_type=Path),
        metavar="DIR",
        help="Keep every run's inputs, whatever the verdict, as ONNX test-data sets "
        "(DIR/test_data_set_K/input_J.pb; --inputs reads them back).",
    ),
    click.option(
        "--save-outputs",
        "save_outputs",
        type=click.Path(path_type=Path),
        metavar="DIR",
        help="Keep the original model's outputs of every run (output_J.pb; --expected "
        "reads them); with --save-inputs DIR, complete test-data sets.",
    ),
    click.option(
        "--save-failing-inputs",
        "save_failing_inputs",
        type=click.Path(path_type=Path),
        metavar="DIR",
        help="On a mismatch, save the first failing run's inputs in DIR/test_data_set_0 "
        "(default: OUT.failing-inputs; verify saves them only when given DIR).",
    ),
    click.option(
        "--no-save-failing-inputs",
        "no_save_failing_inputs",
        is_flag=True,
        help="On a mismatch, save no failing inputs.",
    ),
]


#: The runtimes ``--target`` names, for both commands' help.
_TARGET_NAMES = (
    "openvino, tract (tract-symbolic: with its declared facts), onnxruntime, tinygrad; "
    "onnx2torch, onnx2tf, tvm where installed"
)


def _target_option(help_text: str) -> _Decorator:
    return click.option(
        "--target",
        "targets",
        multiple=True,
        metavar="NAME",
        callback=_check_targets,
        help=help_text,
    )


def _expected_option(compared: str) -> _Decorator:
    return click.option(
        "--expected",
        "expected",
        type=click.Path(path_type=Path),
        help=f"The framework's outputs to compare {compared} with: an .npz (output.NAME keys, "
        "__outputs__, or output names) or test-data folder (output_K.pb); may be the --inputs "
        "file, which it also supplies when --inputs is not given.",
    )


_STRICT_EXPECTED = click.option(
    "--strict-expected",
    is_flag=True,
    help="Fail (exit 1, the export named) when the outputs differ from --expected even where "
    "the original model differs as much (by default that is the export's fault: a warning).",
)


def _with_check_options(
    command: Callable[..., Any], target: _Decorator, compared: str
) -> Callable[..., Any]:
    options = [*_INPUT_OPTIONS, *_LIMIT_AND_FILE_OPTIONS]
    # --expected and --target before --report, as the help lists them
    options[len(options) - 1 : len(options) - 1] = [
        _expected_option(compared),
        _STRICT_EXPECTED,
        target,
    ]
    for option in reversed(options):
        command = option(command)
    return command


def check_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The numerical-check flags of `lower` (``--target`` lowers for the runtime)."""
    target = _target_option(
        "Lower for this runtime and prove the result on it (repeatable; see --list-targets): "
        f"{_TARGET_NAMES}; tensorrt is lowered for, not run."
    )
    return _with_check_options(command, target, "the lowered model")


def verify_check_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The numerical-check flags of `verify`, the same as `lower`'s but for ``--target``, which
    there only runs CANDIDATE on the runtime too (nothing is lowered)."""
    target = _target_option(
        "Also run CANDIDATE on this runtime and compare its outputs with REFERENCE's "
        f"(repeatable; see --list-targets): {_TARGET_NAMES}."
    )
    return _with_check_options(command, target, "CANDIDATE")


def save_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The flags saying what the check leaves on disk, shared by `lower` and `verify` (read by
    :func:`saving`)."""
    for option in reversed(_SAVE_OPTIONS):
        command = option(command)
    return command


def saving(flags: dict[str, Any]) -> SaveOptions:
    """The :class:`~seqlower.job.SaveOptions` the save flags ask for, taken out of ``flags``."""
    from seqlower.job import SaveOptions

    folder = flags.pop("save_failing_inputs")
    if folder is not None and flags["no_save_failing_inputs"]:
        raise click.UsageError("give --save-failing-inputs or --no-save-failing-inputs, not both")
    return SaveOptions(
        failing_inputs=folder,
        no_failing_inputs=flags.pop("no_save_failing_inputs"),
        inputs=flags.pop("save_inputs"),
        outputs=flags.pop("save_outputs"),
    )


def checking(
    *,
    check_n: int,
    seed: int,
    rtols: tuple[tuple[str | None, float], ...],
    atols: tuple[tuple[str | None, float], ...],
    dims: tuple[tuple[str, int], ...],
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...],
    force_input_shape: bool,
    seq_len: int | None,
    memory_budget: int | None,
    timeout: float | None,
    target_timeout: float | None,
    inputs: Path | None,
    expected: Path | None,
    targets: tuple[str, ...],
    strict_expected: bool = False,
) -> CheckOptions:
    """The :class:`CheckOptions` the check flags ask for (``--report`` is the caller's)."""
    from seqlower.verification.check import CheckOptions

    if strict_expected and expected is None:
        from seqlower.errors import BadOptionError

        raise BadOptionError("--strict-expected: give the framework's outputs with --expected")
    return CheckOptions(
        inputs=inputs,
        n=check_n,
        seed=seed,
        tolerances=_tolerances(rtols, atols),
        dims=once(dims, "--dim"),
        input_shapes=once(input_shapes, "--input-shape"),
        seq_len=seq_len,
        memory_budget=memory_budget,
        timeout=timeout,
        target_timeout=target_timeout,
        runtimes=tuple(targets),
        expected=expected,
        force_input_shape=force_input_shape,
        strict_expected=strict_expected,
    )


def _tolerances(
    rtols: tuple[tuple[str | None, float], ...], atols: tuple[tuple[str | None, float], ...]
) -> Tolerances:
    """One global value and per-output values; per-output ones win for their output."""
    from seqlower.verification.compare import Tolerances

    overall: dict[str, float | None] = {"r": None, "a": None}  # the last global value of each
    per_output: dict[str, list[float | None]] = {}
    for which, specs in (("r", rtols), ("a", atols)):
        for name, value in specs:
            if name is None:
                overall[which] = value
            else:
                per_output.setdefault(name, [None, None])[which == "a"] = value
    named = {name: (r, a) for name, (r, a) in per_output.items()}
    return Tolerances(overall["r"], overall["a"], named)


def repro_flags(options: CheckOptions, *, expected: Path | None = None) -> list[str]:
    """Every check flag that took part, for a check rerun on saved failing inputs: tolerances,
    shapes, targets, and ``--expected`` (``expected``: where the framework's outputs for those
    inputs were saved). Drawing flags (``--seed``, ``--check-n``) play no part with inputs."""
    flags = [] if expected is None else [f"--expected={expected}"]
    flags += ["--strict-expected"] if expected is not None and options.strict_expected else []
    tolerances = options.tolerances
    for flag, index, overall in (("--rtol", 0, tolerances.rtol), ("--atol", 1, tolerances.atol)):
        if overall is not None:
            flags.append(f"{flag}={overall!r}")
        flags += [
            f"{flag}={name}:{pair[index]!r}"
            for name, pair in tolerances.per_output.items()
            if pair[index] is not None
        ]
    flags += [f"--dim={name}={size}" for name, size in options.dims.items()]
    flags += [
        f"--input-shape={name}:{','.join(map(str, shape))}"
        for name, shape in options.input_shapes.items()
    ]
    flags += ["--force-input-shape"] if options.force_input_shape else []
    flags += [] if options.seq_len is None else [f"--seq-len={options.seq_len}"]
    if options.target_timeout is not None and options.runtimes:
        flags.append(f"--target-timeout={options.target_timeout:g}")
    return flags + [f"--target={t}" for t in options.runtimes]


#: The flags that decide what a lowering plans (the interface and shapes it lowers at, the opset
#: it converts to): `lower` and `inspect` declare them once, here, and read them with
#: :func:`planning`, so inspect runs the planning lower runs.
def _planning_options(inspecting: bool) -> list[_Decorator]:
    """The planning flags; for `inspect` (``inspecting``) their help says only what they
    change in the dry run: it writes no OUT and runs no check."""
    lowered = "the lowered model" if inspecting else "OUT"
    check_shapes = "" if inspecting else "; the check runs at these shapes"
    check_value = "" if inspecting else "; the check feeds VALUE"
    return [
        click.option(
            "--opset",
            type=click.IntRange(1),
            help=f"Convert {lowered} to this default-domain opset with onnx's version converter.",
        ),
        click.option(
            "--unroll-input",
            "unroll_specs",
            type=UNROLL_INPUT,
            multiple=True,
            help="Replace the sequence input NAME by K tensor inputs NAME_0..NAME_{K-1} (a new "
            "interface; with --sequence-free, for a model that takes a sequence). Repeatable.",
        ),
        click.option(
            "--optional-input",
            "optional_specs",
            type=OPTIONAL_INPUT,
            multiple=True,
            help="Fix the presence of the optional input NAME: present (it becomes its element "
            "type) or absent (removed); the optional ops reading it fold away (a new interface; "
            "OpenVINO, tract and onnxruntime 1.32 run no optional op of opset 28). Repeatable.",
        ),
        click.option(
            "--overwrite-input-shape",
            "overwrite_specs",
            type=OVERWRITE_INPUT_SHAPE,
            multiple=True,
            help="Lower with the input NAME fixed to this shape, e.g. --overwrite-input-shape "
            "x=1,8,16 (repeatable; as onnxsim's): shape arithmetic folds, loop counts become "
            f"constants (converters unroll them){check_shapes}.",
        ),
        click.option(
            "--constant-input",
            "constant_specs",
            type=CONSTANT_INPUT,
            multiple=True,
            help="Lower with the input NAME fixed to VALUE, e.g. --constant-input mode=1 "
            "(repeatable; VALUE a number, true/false, 1,2,3 or [[1,2],[3,4]]): the Ifs it decides "
            "and all that becomes constant fold. The input stays, read by nothing: the lowered "
            f"model computes what the original computes at VALUE whatever it is fed{check_value}.",
        ),
        click.option(
            "--drop-constant-inputs",
            "drop_constant_inputs",
            is_flag=True,
            help="Remove the inputs --constant-input fixes from the lowered model's interface.",
        ),
    ]


def inspect_planning_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """:func:`planning_options` for `inspect`, their help without OUT or the check."""
    for option in reversed(_planning_options(inspecting=True)):
        command = option(command)
    return command


def planning_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The planning flags (``--opset``, ``--unroll-input``, ``--optional-input``,
    ``--overwrite-input-shape``, ``--constant-input``), shared by `lower` and `inspect` (read
    by :func:`planning`)."""
    for option in reversed(_planning_options(inspecting=False)):
        command = option(command)
    return command


def planning(flags: dict[str, Any]) -> dict[str, Any]:
    """The :class:`~seqlower.job.LowerOptions` fields the planning flags ask for, taken out of
    ``flags``."""
    return {
        "opset": flags.pop("opset"),
        "unroll_inputs": unroll_inputs(flags.pop("unroll_specs")),
        "optional_inputs": once(flags.pop("optional_specs"), "--optional-input"),
        "overwrite_input_shapes": once(flags.pop("overwrite_specs"), "--overwrite-input-shape"),
        **constant_inputs(flags.pop("constant_specs"), flags.pop("drop_constant_inputs")),
    }


_V = TypeVar("_V")


def once(pairs: tuple[tuple[str, _V], ...], flag: str) -> dict[str, _V]:
    """Repeated ``NAME=VALUE`` flags as a dict; a name given twice with two values is a usage
    error (the last one silently won: issue 42)."""
    given: dict[str, _V] = {}
    for name, value in pairs:
        if name in given and given[name] != value:
            raise click.BadParameter(
                f"{name!r} is given twice ({_spelled(given[name])} and {_spelled(value)}); "
                "give it once",
                param_hint=flag,
            )
        given[name] = value
    return given


def _spelled(value: object) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    if isinstance(value, bool):
        return "present" if value else "absent"
    return str(value)


def constant_inputs(pairs: tuple[tuple[str, str], ...], drop: bool) -> dict[str, Any]:
    """``--constant-input NAME=VALUE`` flags as LowerOptions fields; a name given two values,
    or ``--drop-constant-inputs`` alone, is a usage error."""
    if drop and not pairs:
        raise click.UsageError("--drop-constant-inputs: no --constant-input to drop")
    return {"constant_inputs": once(pairs, "--constant-input"), "drop_constant_inputs": drop}


def unroll_inputs(pairs: tuple[tuple[str, int], ...]) -> dict[str, int]:
    """``--unroll-input NAME=K`` flags as a dict; K at least 1."""
    counts = once(pairs, "--unroll-input")
    for name, count in counts.items():
        if count < 1:
            raise click.BadParameter(
                f"{name}={count}: K must be at least 1", param_hint="--unroll-input"
            )
    return counts


def choose_passes(
    text: str | None, skip: tuple[str, ...], *, sequence_free: bool = False
) -> list[str]:
    from seqlower.plan import pipeline_rows

    default = pipeline_rows()["sequence-free" if sequence_free else "default"].pass_names
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
