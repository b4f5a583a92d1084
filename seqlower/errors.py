"""The exceptions seqlower raises on purpose.

Every error a user can cause derives from :class:`SeqlowerError` and carries the exit code the CLI
should use, so the front end maps errors to exit codes without knowing each kind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # onnx_ir is slow to import; the CLI's launcher imports this module first
    import onnx_ir as ir

__all__ = [
    "CannotVerifyError",
    "InvalidModelError",
    "InvalidNodeError",
    "ModelLoadError",
    "OutputError",
    "SeqlowerError",
    "describe_node",
]


class SeqlowerError(Exception):
    """Base of all errors seqlower raises on purpose; never a bug in seqlower."""

    exit_code: int = 2


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


class OutputError(SeqlowerError):
    """The result could not be written where it was asked to go."""


class CannotVerifyError(SeqlowerError):
    """The numerical check cannot be run for this model at all."""

    exit_code = 3


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
