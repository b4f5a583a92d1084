"""Building the replacement nodes of one rewrite, named and versioned for where they go, with
names unused anywhere in the model (:class:`NameGenerator`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from seqlower.passes._ir import constant_array

__all__ = ["MAX_CONSTANT_ELEMENTS", "Emitter", "NameGenerator", "fits_constant"]

_POOLED_SIZE = 16  # constants up to this many elements are shared within a graph

#: The most elements a constant a pass builds from a size may hold (512 KiB of int64). A size is
#: the user's: a static ``T = 2e7`` made a 158-byte model a 320 MB file, and ``T = 1e9`` ran
#: seqlower out of memory (issue 42). Every pass that builds a constant from a size asks
#: :func:`fits_constant`; past the bound it writes the run-time form it has for an unknown size
#: (``Range``, ``ConstantOfShape``, a computed index), a few nodes rather than the memory.
MAX_CONSTANT_ELEMENTS = 1 << 16


def fits_constant(*sizes: int) -> bool:
    """Whether a constant of shape ``sizes`` stays within :data:`MAX_CONSTANT_ELEMENTS`
    (Python integers: a product of huge sizes does not wrap around as numpy's would)."""
    count = 1
    for size in sizes:
        count *= max(int(size), 0)
    return count <= MAX_CONSTANT_ELEMENTS


_INT64_MAX = np.iinfo(np.int64).max  # a Slice end meaning "to the last element"


class NameGenerator:
    """Hands out names unused anywhere in a model: every scope, values, nodes and graphs."""

    def __init__(self, taken: Counter[str]) -> None:
        self._taken = taken
        self._next_suffix: dict[str, int] = {}

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is in use (in the model, or handed out)."""
        return name in self._taken

    def fresh(self, base: str) -> str:
        """``base`` itself when free, else ``base_N`` for the smallest free N."""
        base = base or "seqlower"
        if base not in self._taken:
            self._taken[base] += 1
            return base
        suffix = self._next_suffix.get(base, 1)
        while f"{base}_{suffix}" in self._taken:
            suffix += 1
        self._next_suffix[base] = suffix + 1
        name = f"{base}_{suffix}"
        self._taken[name] += 1
        return name

    def take_over(self, name: str | None, fallback: str) -> str:
        """A name for a value that replaces the (only) definition of ``name``.

        The old name is reused when nothing else in the model defines it, so a lowered body keeps
        the names its author gave; otherwise a fresh name is made from it.
        """
        if name and self._taken.get(name) == 1:
            return name
        return self.fresh(name or fallback)


class Emitter(ir.tape.Tape):
    """Records the new nodes of one rewrite, for the caller to insert where they belong.

    A rewrite reads like the ONNX it builds, as onnxscript's rules do:
    ``op.Where(op.Less(lens, zero, _hint="short"), rev, steps, _hint="index")``; attributes are
    keywords (``axis=-1``, ``body=graph``). Keywords with a leading underscore are about naming:
    ``_hint`` names the new output, ``_node`` the node (both default to the op type), ``_dtype``
    types the output; ``_output`` is an existing value to produce instead, ``_outputs`` all of a
    multi-output or control-flow node's values (the call returns the first), with ``_name``,
    ``_doc_string`` and ``_metadata`` carried over from the node it replaces.

    Every value and node gets a name unique in the whole model, derived from ``prefix``, and the
    helpers pick the form of an op that exists at ``opset`` (attribute or input ``axes``; ``Range``
    or a ``NonZero`` stand-in before opset 11). The nodes are recorded on onnx_ir's tape.
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
        super().__init__()
        self._names = names
        #: What the names of the nodes and values it builds start with.
        self.prefix = prefix
        self.opset = opset
        self._constants = constants

    def __getattr__(self, op_type: str) -> _Op:
        # Only ONNX ops: a typo (``op.Slcie``) fails here, not later in the checker.
        if not op_type[:1].isupper() or not onnx.defs.has(op_type):
            raise AttributeError(f"{type(self).__name__} has no attribute or ONNX op {op_type!r}")
        # Installed on the class, so the next lookup is a plain attribute read (a failed
        # lookup costs a microsecond, and rewrites make hundreds of thousands of them).
        setattr(Emitter, op_type, _OpType(op_type))
        return _Op(self, op_type)

    def build(
        self,
        op_type: str,
        inputs: Sequence[ir.Value | None],
        attributes: Mapping[str, Any],
        *,
        hint: str | None = None,
        node: str | None = None,
        dtype: ir.DataType | None = None,
        outputs: Sequence[ir.Value] | None = None,
        name: str | None = None,
        doc_string: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> ir.Value:
        """One node on the tape (what ``op.X(...)`` calls); see the class docstring."""
        if outputs is None:
            # Without a hint the output is named for the op: ``<prefix>_relu``.
            output = ir.Value(name=self._names.fresh(f"{self.prefix}_{hint or op_type.lower()}"))
            if dtype is not None:
                output.dtype = dtype
            outputs = [output]
        if name is None:
            name = self._names.fresh(f"{self.prefix}_{node or op_type}")
        # ir.Node directly rather than Tape.op_multi_out: its general attribute conversion
        # costs a few microseconds a node, which adds up over 100k-node models.
        built = ir.Node(
            "",
            op_type,
            inputs,
            [_attribute(key, value) for key, value in attributes.items()],
            outputs=outputs,
            name=name,
            doc_string=doc_string,
            metadata_props=dict(metadata) if metadata else None,
        )
        self._nodes.append(built)
        return built.outputs[0]

    def constant(self, array: np.ndarray, *, hint: str) -> ir.Value:
        array = np.asarray(array)
        key = None
        if self._constants is not None and array.size <= _POOLED_SIZE:
            key = (array.dtype.str, array.shape, array.tobytes())
            if key in self._constants:
                return self._constants[key]
        value = self.Constant(value=ir.Tensor(array), _hint=hint)
        value.dtype = ir.DataType.from_numpy(array.dtype)
        value.shape = ir.Shape(array.shape)
        if key is not None:
            self._constants[key] = value  # type: ignore[index]
        return value

    def int64s(self, values: Sequence[int] | int, *, hint: str) -> ir.Value:
        return self.constant(np.array(values, dtype=np.int64), hint=hint)

    def unsqueeze(
        self, x: ir.Value, axes: Sequence[int], *, hint: str, output: ir.Value | None = None
    ) -> ir.Value:
        """``output``: the value to produce (a new one when None)."""
        if self.opset >= 13:
            axes_value = self.int64s(list(axes), hint=f"{hint}_axes")
            return self.Unsqueeze(x, axes_value, _hint=hint, _output=output)
        return self.Unsqueeze(x, axes=list(axes), _hint=hint, _output=output)

    def squeeze(self, x: ir.Value, axes: Sequence[int], *, hint: str) -> ir.Value:
        if self.opset >= 13:
            return self.Squeeze(x, self.int64s(list(axes), hint=f"{hint}_axes"), _hint=hint)
        return self.Squeeze(x, axes=list(axes), _hint=hint)

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
        return self.Slice(x, starts, ends, axes, _hint=hint)

    def split(self, x: ir.Value, sizes: Sequence[int], axis: int, *, hint: str) -> list[ir.Value]:
        """``x`` in pieces of ``sizes`` along ``axis`` (the sizes an attribute before opset 13,
        an input from 13)."""
        pieces = [
            ir.Value(name=self._names.fresh(f"{self.prefix}_{hint}_{k}")) for k in range(len(sizes))
        ]
        if self.opset >= 13:
            sizes_value = self.int64s(list(sizes), hint=f"{hint}_sizes")
            self.Split(x, sizes_value, axis=axis, _outputs=pieces)
        else:
            self.Split(x, axis=axis, split=list(sizes), _outputs=pieces)
        return pieces

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
            attributes: dict[str, Any] = {"start": start}
            if end is not None:
                attributes["end"] = end
            return self.Shape(x, **attributes, _hint=hint)
        if shape is None:
            shape = self.Shape(x, _hint=f"{hint}_shape")
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
        holding a real 0 is misread there; see the callers for what that leaves. A constant
        target without zeros (``[]``, a scalar) needs no ``allowzero``, which onnx2torch
        refuses ("allowzero=1 is not implemented").
        """
        attributes: dict[str, Any] = {"allowzero": 1} if self.opset >= 14 else {}
        target = constant_array(shape)
        if target is not None and not (target == 0).any():
            attributes = {}
        return self.Reshape(x, shape, **attributes, _hint=hint, _output=output, _node=node_name)

    def arange(self, n: ir.Value, *, hint: str) -> ir.Value:
        """``[0, 1, ..., n-1]`` as int64 for a scalar int64 ``n``."""
        if self.opset >= 11:
            zero = self.int64s(0, hint=f"{hint}_start")
            one = self.int64s(1, hint=f"{hint}_step")
            return self.Range(zero, n, one, _hint=hint, _dtype=ir.DataType.INT64)
        # Opset 10 has no Range: the positions of n ones are 0..n-1.
        ones = self.ConstantOfShape(
            self.unsqueeze(n, [0], hint=f"{hint}_n"),
            value=ir.Tensor(np.array([1], dtype=np.int64)),
            _hint=f"{hint}_ones",
        )
        positions = self.NonZero(ones, _hint=f"{hint}_positions")
        return self.Reshape(positions, self.int64s([-1], hint=f"{hint}_flat"), _hint=hint)


class _OpType:
    """``Emitter.Concat`` once used: gives each emitter its ``_Op``."""

    __slots__ = ("_op_type",)

    def __init__(self, op_type: str) -> None:
        self._op_type = op_type

    def __get__(self, emit: Emitter, owner: type | None = None) -> _Op:
        return _Op(emit, self._op_type)


class _Op:
    """``emit.Concat``: calling it builds a ``Concat`` node on the emitter's tape."""

    __slots__ = ("_emit", "_op_type")

    def __init__(self, emit: Emitter, op_type: str) -> None:
        self._emit = emit
        self._op_type = op_type

    def __call__(
        self,
        *inputs: ir.Value | None,
        _hint: str | None = None,
        _node: str | None = None,
        _dtype: ir.DataType | None = None,
        _output: ir.Value | None = None,
        _outputs: Sequence[ir.Value] | None = None,
        _name: str | None = None,
        _doc_string: str | None = None,
        _metadata: Mapping[str, str] | None = None,
        **attributes: Any,
    ) -> ir.Value:
        return self._emit.build(
            self._op_type,
            inputs,
            attributes,
            hint=_hint,
            node=_node,
            dtype=_dtype,
            outputs=[_output] if _output is not None else _outputs,
            name=_name,
            doc_string=_doc_string,
            metadata=_metadata,
        )


def _attribute(name: str, value: Any) -> ir.Attr:
    """The few attribute kinds rewrites use, built directly (onnx_ir's general conversion checks
    protocols with isinstance, which is slow over tens of thousands of nodes)."""
    if isinstance(value, ir.Attr):
        return value
    if isinstance(value, bool | int):
        return ir.AttrInt64(name, int(value))
    if isinstance(value, float):
        return ir.AttrFloat32(name, value)
    if isinstance(value, str):
        return ir.AttrString(name, value)
    if isinstance(value, ir.Tensor):
        return ir.AttrTensor(name, value)
    if isinstance(value, ir.Graph):
        return ir.AttrGraph(name, value)
    if isinstance(value, list | tuple) and all(isinstance(v, int | np.integer) for v in value):
        return ir.AttrInt64s(name, [int(v) for v in value])
    if isinstance(value, ir.TensorProtocol):  # external or proto-backed tensors (slow check)
        return ir.AttrTensor(name, value)
    raise TypeError(f"attribute {name}: unsupported value {value!r}")
