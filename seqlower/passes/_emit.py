"""Building the replacement nodes of one rewrite, named and versioned for where they go."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NameGenerator

__all__ = ["Emitter"]

_POOLED_SIZE = 16  # constants up to this many elements are shared within a graph
_INT64_MAX = np.iinfo(np.int64).max  # a Slice end meaning "to the last element"


class Emitter:
    """Records the new nodes of one rewrite, for the caller to insert where they belong.

    Every value and node gets a name unique in the whole model, derived from ``prefix``, and the
    helpers pick the form of an op that exists at ``opset`` (attribute or input ``axes``; ``Range``
    or a ``NonZero`` stand-in before opset 11).
    """

    def __init__(
        self,
        names: NameGenerator,
        prefix: str,
        opset: int,
        constants: dict[tuple[Any, ...], ir.Value] | None = None,
    ) -> None:
        """``constants``: small constants already emitted earlier in the same graph, to reuse
        (a pool per graph, shared by all rewrites in it, keeps lowered models small)."""
        self._names = names
        self._prefix = prefix
        self.opset = opset
        self._constants = constants
        self._nodes: list[ir.Node] = []

    @property
    def nodes(self) -> Sequence[ir.Node]:
        return self._nodes

    def op(
        self,
        op_type: str,
        inputs: Sequence[ir.Value | None],
        attributes: Mapping[str, Any] | None = None,
        *,
        hint: str,
        dtype: ir.DataType | None = None,
        output: ir.Value | None = None,
        node_name: str | None = None,
    ) -> ir.Value:
        """Add one node; ``node_name`` (default: the op type) is what runtimes name in errors."""
        if output is None:
            output = ir.Value(name=self._names.fresh(f"{self._prefix}_{hint}"))
            if dtype is not None:
                output.dtype = dtype
        node = ir.Node(
            "",
            op_type,
            inputs,
            [_attribute(name, value) for name, value in (attributes or {}).items()],
            outputs=[output],
            name=self._names.fresh(f"{self._prefix}_{node_name or op_type}"),
        )
        self._nodes.append(node)
        return output

    def constant(self, array: np.ndarray, *, hint: str) -> ir.Value:
        array = np.asarray(array)
        key = None
        if self._constants is not None and array.size <= _POOLED_SIZE:
            key = (array.dtype.str, array.shape, array.tobytes())
            if key in self._constants:
                return self._constants[key]
        value = self.op("Constant", [], {"value": ir.Tensor(array)}, hint=hint)
        value.dtype = ir.DataType.from_numpy(array.dtype)
        value.shape = ir.Shape(array.shape)
        if key is not None:
            self._constants[key] = value  # type: ignore[index]
        return value

    def int64s(self, values: Sequence[int] | int, *, hint: str) -> ir.Value:
        return self.constant(np.array(values, dtype=np.int64), hint=hint)

    def unsqueeze(self, x: ir.Value, axes: Sequence[int], *, hint: str) -> ir.Value:
        if self.opset >= 13:
            return self.op(
                "Unsqueeze", [x, self.int64s(list(axes), hint=f"{hint}_axes")], hint=hint
            )
        return self.op("Unsqueeze", [x], {"axes": list(axes)}, hint=hint)

    def squeeze(self, x: ir.Value, axes: Sequence[int], *, hint: str) -> ir.Value:
        if self.opset >= 13:
            return self.op("Squeeze", [x, self.int64s(list(axes), hint=f"{hint}_axes")], hint=hint)
        return self.op("Squeeze", [x], {"axes": list(axes)}, hint=hint)

    def slice(
        self,
        x: ir.Value,
        start: int | ir.Value,
        end: int | ir.Value | None,
        axis: int,
        *,
        hint: str,
    ) -> ir.Value:
        """``x`` from ``start`` to ``end`` (None: the last element) along ``axis`` (Slice with
        inputs: opset 10 on)."""
        starts = (
            start if isinstance(start, ir.Value) else self.int64s([start], hint=f"{hint}_start")
        )
        if end is None:
            end = _INT64_MAX
        ends = end if isinstance(end, ir.Value) else self.int64s([end], hint=f"{hint}_end")
        axes = self.int64s([axis], hint=f"{hint}_axis")
        return self.op("Slice", [x, starts, ends, axes], hint=hint)

    def dims(
        self,
        x: ir.Value,
        start: int,
        end: int | None = None,
        *,
        hint: str,
        shape: ir.Value | None = None,
    ) -> ir.Value:
        """Dimensions ``start`` to ``end`` of ``x`` as a 1-D tensor: ``Shape(start, end)`` from
        opset 15, a ``Slice`` of ``Shape(x)`` before (of ``shape``, when the caller has it)."""
        if self.opset >= 15:
            attributes = {"start": start} if end is None else {"start": start, "end": end}
            return self.op("Shape", [x], attributes, hint=hint)
        if shape is None:
            shape = self.op("Shape", [x], hint=f"{hint}_shape")
        return self.slice(shape, start, end, 0, hint=hint)

    def reshape(
        self,
        x: ir.Value,
        shape: ir.Value,
        *,
        hint: str,
        output: ir.Value | None = None,
        node_name: str | None = None,
    ) -> ir.Value:
        """Reshape to a computed shape whose zeros mean zero (allowzero, from opset 14).

        Before opset 14 a 0 in the target copies the input's dimension, so a computed shape
        holding a real 0 is misread there; see the callers for what that leaves.
        """
        attributes = {"allowzero": 1} if self.opset >= 14 else None
        return self.op(
            "Reshape", [x, shape], attributes, hint=hint, output=output, node_name=node_name
        )

    def arange(self, n: ir.Value, *, hint: str) -> ir.Value:
        """``[0, 1, ..., n-1]`` as int64 for a scalar int64 ``n``."""
        if self.opset >= 11:
            zero = self.int64s(0, hint=f"{hint}_start")
            one = self.int64s(1, hint=f"{hint}_step")
            return self.op("Range", [zero, n, one], hint=hint, dtype=ir.DataType.INT64)
        # Opset 10 has no Range: the positions of n ones are 0..n-1.
        ones = self.op(
            "ConstantOfShape",
            [self.unsqueeze(n, [0], hint=f"{hint}_n")],
            {"value": ir.Tensor(np.array([1], dtype=np.int64))},
            hint=f"{hint}_ones",
        )
        positions = self.op("NonZero", [ones], hint=f"{hint}_positions")
        return self.op("Reshape", [positions, self.int64s([-1], hint=f"{hint}_flat")], hint=hint)

    def reduce_prod(self, x: ir.Value, *, hint: str) -> ir.Value:
        """The product of all elements of ``x``, as a 1-element tensor (1 for an empty ``x``)."""
        return self.op("ReduceProd", [x], {"keepdims": 1}, hint=hint)


def _attribute(name: str, value: Any) -> ir.Attr:
    """The few attribute kinds rewrites use, built directly (onnx_ir's general conversion checks
    protocols with isinstance, which is slow over tens of thousands of nodes)."""
    if isinstance(value, bool | int):
        return ir.AttrInt64(name, int(value))
    if isinstance(value, float):
        return ir.AttrFloat32(name, value)
    if isinstance(value, str):
        return ir.AttrString(name, value)
    if isinstance(value, ir.Tensor):
        return ir.AttrTensor(name, value)
    if isinstance(value, list | tuple) and all(isinstance(v, int) for v in value):
        return ir.AttrInt64s(name, [int(v) for v in value])
    raise TypeError(f"attribute {name}: unsupported value {value!r}")
