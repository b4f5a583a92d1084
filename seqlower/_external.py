"""Checking a model's external-data references before anything reads or copies them.

ONNX stores each external tensor's file, offset and length as plain fields, and a model can say
anything there. Copying weights trusts those fields (a short length made a broken OUT, a huge
sparse file filled the disk), and tensors held in node attributes (a ``Constant``'s ``value``)
were resolved against the working directory instead of the model's folder. So every external
tensor, wherever it sits, is checked against its own dtype and shape and against the file on
disk, and attribute tensors are read in: onnx_ir only moves initializers to OUT's weights file,
so an attribute left external would point at a file beside the input, not beside OUT.
"""

from __future__ import annotations

import math
import mmap
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import onnx
import onnx_ir as ir

from seqlower._graphs import all_graphs
from seqlower.errors import InvalidModelError

__all__ = [
    "check_external_data",
    "check_external_fields",
    "external_locations",
    "mentions_external_fields",
]


def _initializer_tensors(
    model: ir.Model, graphs: list[ir.Graph | ir.Function] | None = None
) -> Iterator[tuple[str, ir.Value]]:
    for graph in all_graphs(model) if graphs is None else graphs:
        if isinstance(graph, ir.Graph):
            for value in graph.initializers.values():
                yield "initializer", value


def _attribute_slots(
    model: ir.Model, graphs: list[ir.Graph | ir.Function] | None = None
) -> Iterator[tuple[ir.Node, ir.Attr]]:
    for graph in all_graphs(model) if graphs is None else graphs:
        for node in graph:
            attributes = node.attributes.data
            if not attributes:
                continue
            for attr in attributes.values():
                if not attr.is_ref() and attr.type in (
                    ir.AttributeType.TENSOR,
                    ir.AttributeType.TENSORS,
                ):
                    yield node, attr


def external_locations(
    model: ir.Model, graphs: list[ir.Graph | ir.Function] | None = None
) -> set[str]:
    """The external-data files (paths as the tensors resolve them) the model's weights use
    (``graphs``: every scope of the model, when the caller has them)."""
    found: set[str] = set()
    for _, value in _initializer_tensors(model, graphs):
        if isinstance(value.const_value, ir.ExternalTensor):
            found.add(os.path.normpath(value.const_value.path))
    return found


def check_external_data(
    model: ir.Model, model_path: Path, graphs: list[ir.Graph | ir.Function] | None = None
) -> None:
    """Raise InvalidModelError unless every external tensor is sound; read attribute ones in.

    Sound: a relative location inside the model's folder (links resolved), a regular file, and
    ``offset + length`` inside it with ``length`` the tensor's own byte size. Every external
    tensor's ``base_dir`` is set to the model's folder first (what ``onnx_ir.load`` does, with
    a walk of its own). ``graphs``: every scope of the model, when the caller has them.
    """
    folder = model_path.parent
    if graphs is None:
        graphs = all_graphs(model)
    initializers = [value for _, value in _initializer_tensors(model, graphs)]
    for value in initializers:
        if isinstance(value.const_value, ir.ExternalTensor):
            value.const_value.base_dir = folder
    for value in initializers:
        tensor = value.const_value
        if isinstance(tensor, ir.ExternalTensor):
            _check_tensor(tensor, folder, f"initializer '{value.name}'")
    for node, attr in _attribute_slots(model, graphs):
        single = attr.type == ir.AttributeType.TENSOR
        tensors = [attr.value] if single else list(attr.value)
        if not any(isinstance(t, ir.ExternalTensor) for t in tensors):
            continue
        where = f"attribute '{attr.name}' of {node.op_type} node '{node.name or '?'}'"
        loaded = []
        for tensor in tensors:
            if isinstance(tensor, ir.ExternalTensor):
                tensor.base_dir = folder
                _check_tensor(tensor, folder, where)
                tensor = ir.Tensor(tensor.numpy(), dtype=tensor.dtype, name=tensor.name)
            loaded.append(tensor)
        if single:
            node.attributes[attr.name] = ir.AttrTensor(attr.name, loaded[0])
        else:
            node.attributes[attr.name] = ir.AttrTensors(attr.name, loaded)


def check_external_fields(proto: onnx.ModelProto, where: str) -> None:
    """InvalidModelError naming the tensor when an external one's offset or length is not a
    whole number of at least 0, before onnx_ir reads the fields: its own error about a
    negative offset was lost in its error wrapper ("<lambda>() missing 1 required positional
    argument: 'base_path'", issue 42)."""
    for owner, tensor in _proto_tensors(proto):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        fields = {entry.key: entry.value for entry in tensor.external_data}
        for key in ("offset", "length"):
            text = fields.get(key)
            if text is None:
                continue
            try:
                number = int(text)
            except ValueError:
                number = -1
            if number < 0:
                location = fields.get("location", "")
                raise InvalidModelError(
                    f"{where}: {owner} '{tensor.name}' (external data '{location}'): "
                    f"{key} {text!r} is not a byte count (a whole number of at least 0)"
                )


#: The keys :func:`check_external_fields` checks as protobuf writes an entry's key (field 1,
#: six bytes): a file without them has no such entry.
_KEYS = (b"\n\x06offset", b"\n\x06length")


def mentions_external_fields(path: Path) -> bool:
    """Whether the file at ``path`` holds an entry keyed ``offset`` or ``length``: a model
    without (most) is not walked tensor by tensor (0.25 s at 120k nodes)."""
    try:
        with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return any(data.find(key) >= 0 for key in _KEYS)
    except (OSError, ValueError):  # unreadable now, or emptied: the walk decides
        return True


def _proto_tensors(proto: onnx.ModelProto) -> Iterator[tuple[str, onnx.TensorProto]]:
    """Every tensor of ``proto`` (initializers and attributes, in every graph and function),
    with what holds it."""
    graphs: list[onnx.GraphProto] = [proto.graph]
    nodes: list[onnx.NodeProto] = [n for f in proto.functions for n in f.node]
    while graphs or nodes:
        if graphs:
            graph = graphs.pop()
            for tensor in graph.initializer:
                yield "initializer", tensor
            for sparse in graph.sparse_initializer:
                yield "initializer", sparse.values
                yield "initializer", sparse.indices
            nodes.extend(graph.node)
            continue
        node = nodes.pop()
        for attr in node.attribute:
            for tensor in [attr.t] if attr.HasField("t") else list(attr.tensors):
                yield f"attribute '{attr.name}' of {node.op_type} node", tensor
            if attr.HasField("g"):
                graphs.append(attr.g)
            graphs.extend(attr.graphs)


def _check_tensor(tensor: ir.ExternalTensor, folder: Path, where: str) -> None:
    location = os.fspath(tensor.location)
    name = f"{where} (external data '{location}')"
    if not location or os.path.isabs(location):
        raise InvalidModelError(f"{name}: the location must be a path relative to the model")
    root = os.path.realpath(folder)
    target = os.path.realpath(os.path.join(folder, location))
    if os.path.commonpath([root, target]) != root:
        raise InvalidModelError(f"{name}: the file is outside the model's folder")
    try:
        info = os.stat(target)
    except OSError as e:
        raise InvalidModelError(f"{name}: cannot read the file ({e.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise InvalidModelError(f"{name}: not a regular file")
    expected = _nbytes(tensor)
    offset = tensor.offset or 0
    if offset < 0:
        raise InvalidModelError(f"{name}: negative offset {offset}")
    if tensor.length is not None and tensor.length < 0:
        raise InvalidModelError(f"{name}: negative length {tensor.length}")
    if offset > info.st_size:
        # Not "negative length": with no length given, the bytes to the end are none at all.
        raise InvalidModelError(
            f"{name}: offset {offset} is past the end of the file ({info.st_size} bytes)"
        )
    length = tensor.length if tensor.length is not None else info.st_size - offset
    if expected is not None and length != expected:
        raise InvalidModelError(
            f"{name}: length {length} bytes, but a {tensor.dtype.name.lower()} tensor of shape "
            f"{list(tensor.shape)} holds {expected}"
        )
    if offset + length > info.st_size:
        raise InvalidModelError(
            f"{name}: bytes {offset}..{offset + length} are past the end of the file "
            f"({info.st_size} bytes)"
        )


def _nbytes(tensor: ir.ExternalTensor) -> int | None:
    """The byte size the tensor's dtype and shape call for (None when it cannot be told)."""
    dims = [d for d in tensor.shape.dims if isinstance(d, int)]
    if len(dims) != len(tensor.shape):
        return None
    count = math.prod(dims)
    bits = tensor.dtype.bitwidth if tensor.dtype != ir.DataType.STRING else None
    if bits is None:
        return None
    return (count * bits + 7) // 8
