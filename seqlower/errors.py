"""The exceptions seqlower raises on purpose.

Every error a user can cause derives from :class:`SeqlowerError` and carries the exit code the CLI
should use, so the front end maps errors to exit codes without knowing each kind.
"""

from __future__ import annotations

from enum import IntEnum

TYPE_CHECKING = False  # not typing's: the CLI's launcher imports this module first (see __init__)
if TYPE_CHECKING:  # onnx_ir is slow to import
    import onnx_ir as ir

__all__ = [
    "BadArgumentError",
    "BadOptionError",
    "CannotVerifyError",
    "CheckLimitError",
    "ExitCode",
    "InvalidModelError",
    "InvalidNodeError",
    "ModelLoadError",
    "ModelTypeError",
    "OutputError",
    "ProofFailedError",
    "SeqlowerError",
    "SequenceFreeError",
    "TargetError",
    "describe_node",
    "first_line",
]


class ExitCode(IntEnum):
    """The command line's exit codes: the one table both the library and the CLI use."""

    OK = 0  # success; unless --no-check, outputs proven equal
    MISMATCH = 1  # the check found different outputs
    BAD_INPUT = 2  # bad input or usage: one line on stderr, nothing written
    CANNOT_VERIFY = 3  # the check cannot run (no oracle, over a resource bound)
    INTERNAL = 70  # EX_SOFTWARE from sysexits.h: a bug in seqlower, not in the input
    INTERRUPTED = 130  # Ctrl-C; SIGTERM and SIGHUP give 143 and 129 (128 + signal)


class SeqlowerError(Exception):
    """Base of all errors seqlower raises on purpose; never a bug in seqlower."""

    exit_code: int = ExitCode.BAD_INPUT


class ModelLoadError(SeqlowerError):
    """The input could not be read as an ONNX model (missing, not ONNX, truncated)."""


class InvalidModelError(SeqlowerError):
    """The model was read but is not a valid ONNX model."""


class InvalidNodeError(InvalidModelError):
    """One node cannot be lowered as it stands: malformed, or its types cannot be known."""

    def __init__(self, node: ir.Node, problem: str) -> None:
        self.node_description = describe_node(node)
        self.problem = problem
        super().__init__(f"{self.node_description}: {problem}")


class SequenceFreeError(InvalidModelError):
    """The model cannot be made sequence-free; ``blockers`` says what stops it, one entry each.

    The message lists them one per line: a model can have dozens, each a sentence long.
    """

    def __init__(self, blockers: list[str]) -> None:
        self.blockers = blockers
        super().__init__(_listed("cannot make the model sequence-free", blockers))


class TargetError(InvalidModelError):
    """The model cannot be made to run on a target runtime; ``blockers`` names each node and why."""

    def __init__(self, target: str, blockers: list[str], hint: str = "") -> None:
        self.target = target
        self.blockers = blockers
        self.hint = hint
        super().__init__(_listed(f"cannot lower the model for {target}", blockers, hint))


def _listed(what: str, blockers: list[str], hint: str = "") -> str:
    plural = "s" if len(blockers) != 1 else ""
    hint = f"; {hint}" if hint else ""
    return f"{what} ({len(blockers)} blocker{plural}{hint}):" + "".join(
        f"\n  - {blocker}" for blocker in blockers
    )


class BadOptionError(SeqlowerError):
    """An option does not fit the model (a dimension, input or output it does not have)."""


class BadArgumentError(BadOptionError, ValueError):
    """A Python caller's argument the library does not take (an unknown target, pass or
    pipeline name, arguments that exclude each other); also a ValueError, which the API raised
    for these before, so callers catching that still do."""


class ModelTypeError(SeqlowerError, TypeError):
    """A model given as something the library does not read (bytes, a number); also a TypeError.

    The message names the type only: a model's repr can be megabytes long.
    """

    def __init__(
        self, function: str, model: object, takes: str = "a ModelProto, an onnx_ir.Model or a path"
    ) -> None:
        hint = ""
        if isinstance(model, (bytes, bytearray, memoryview)):
            hint = " (parse bytes with onnx.load_model_from_string first)"
        super().__init__(f"{function}() takes {takes}, not {type(model).__name__}{hint}")


class OutputError(SeqlowerError):
    """The result could not be written where it was asked to go."""


class CannotVerifyError(SeqlowerError):
    """The numerical check cannot be run for this model at all."""

    exit_code = ExitCode.CANNOT_VERIFY


class CheckLimitError(CannotVerifyError):
    """The check would exceed, or did exceed, its memory or time bound."""


class ProofFailedError(SeqlowerError):
    """``seqlower.lower(model, target=...)``: the lowered model does not run, or does not match
    the original, on the target (or on the reference's oracle); ``report`` says how, ``culprit``
    whose fault it is: "lowering", "runtime" (the target gets the original wrong too: raised
    all the same, the model is wrong there) or "export" (``strict_expected``)."""

    exit_code = ExitCode.MISMATCH

    def __init__(self, message: str, report: object, culprit: str = "lowering") -> None:
        self.report = report
        self.culprit = culprit
        super().__init__(message)


def describe_node(node: ir.Node) -> str:
    """Name a node so a user can find it in Netron: op type, name, and the graph holding it."""
    import onnx_ir as ir

    label = f"{node.op_type} node"
    label += f" '{node.name}'" if node.name else f" producing {_output_names(node)}"
    owner = node.graph
    if isinstance(owner, ir.Function):
        label += f" in function '{owner.domain}::{owner.name}'"
    elif owner is not None and owner.name:
        label += f" in graph '{owner.name}'"
    return label


def _output_names(node: ir.Node) -> str:
    names = [repr(v.name) for v in node.outputs if v.name]
    return ", ".join(names) if names else "no named output"


def first_line(error: BaseException) -> str:
    """An exception as one line: its message's first line, or its type when it has none."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
