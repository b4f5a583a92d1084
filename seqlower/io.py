"""Reading models with one-line errors, their weights asked about, and the checker's messages
made one line (writing them: :mod:`seqlower.writing`)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import onnx
import onnx_ir as ir
from onnx_ir.passes.common import CheckerPass

from seqlower._external import (
    check_external_data,
    check_external_fields,
    external_locations,
    mentions_external_fields,
)
from seqlower._graphs import all_graphs, is_onnx, proto_graphs
from seqlower.errors import InvalidModelError, ModelLoadError, first_line

__all__ = [
    "INLINE_LIMIT",
    "all_proto_tensors",
    "check_model",
    "check_names_and_dims",
    "checker_message",
    "external_locations",
    "has_external_data",
    "load_model",
    "proto_has_external_data",
    "self_contained_proto",
    "weights_nbytes",
]


def load_model(path: str | os.PathLike[str], *, check: bool = True) -> ir.Model:
    """Read an ONNX file; external weights stay on disk until something needs them.

    With ``check``, ONNX's checker reads the file first (by path, so external data and models
    over 2 GB are fine), so that an invalid model is reported in the checker's words rather than
    as whatever trips first while converting it.
    """
    path = Path(path)
    if not path.exists():
        raise ModelLoadError(f"{path}: no such file")
    if path.is_dir():
        raise ModelLoadError(f"{path}: is a directory, not an ONNX file")
    if not path.is_file():
        raise ModelLoadError(f"{path}: not a regular file")
    if path.stat().st_size == 0:
        raise ModelLoadError(f"{path}: the file is empty")
    try:
        proto = onnx.load(path, load_external_data=False)
    except Exception as e:
        if "MaxDepth" in str(e):
            raise ModelLoadError(f"{path}: {TOO_DEEP}") from e
        raise ModelLoadError(f"{path}: not a readable ONNX model ({first_line(e)})") from e
    if not proto.HasField("graph"):
        raise ModelLoadError(f"{path}: not an ONNX model (it holds no graph)")
    notes: list[str] = []
    if check:
        try:
            onnx.checker.check_model(str(path))
        except Exception as e:
            if _MISSING_SHAPE not in str(e):
                raise InvalidModelError(
                    f"{path} is not valid ONNX: {checker_message(e, proto)}"
                ) from e
            notes = repair_missing_shapes(proto, str(path))
            try:
                onnx.checker.check_model(_without_external_initializers(proto))
            except Exception as again:
                message = checker_message(again, proto)
                raise InvalidModelError(f"{path} is not valid ONNX: {message}") from again
    if mentions_external_fields(path):
        check_external_fields(proto, str(path))
    try:
        model = ir.serde.deserialize_model(proto)
    except Exception as e:
        raise InvalidModelError(f"{path}: not a valid ONNX model ({_root_message(e)})") from e
    graphs = all_graphs(model)  # one walk for both checks
    check_names_and_dims(model, str(path), graphs)
    model.meta[LOAD_NOTES] = notes
    # Relative external-data locations are relative to the model file, as onnx_ir.load does:
    # check_external_data sets every external tensor's folder so.
    check_external_data(model, path, graphs)
    model.meta[WEIGHTS_READ] = external_locations(model, graphs)
    return model


#: ``model.meta`` key: what :func:`load_model` repaired, for the run's notes.
LOAD_NOTES = "seqlower.load_notes"
#: ``model.meta`` key: the external-data files of the model as :func:`load_model` read it (its
#: walk of every scope, which the run's list of files it reads would walk again).
WEIGHTS_READ = "seqlower.weights_read"

_MISSING_SHAPE = "Field 'shape' of 'type' is required but missing"


def model_from_proto(proto: onnx.ModelProto) -> ir.Model:
    """An ``onnx_ir.Model`` of a copy of ``proto``, checked as a loaded file is: onnx_ir's
    tensors wrap the proto's own TensorProtos, so a pass renaming a body's initializer would
    otherwise rename the caller's."""
    own = onnx.ModelProto()
    own.CopyFrom(proto)
    check_external_fields(own, "the model")
    try:
        model = ir.serde.deserialize_model(own)
    except Exception as e:
        raise InvalidModelError(f"not a valid ONNX model: {e}") from e
    check_names_and_dims(model)
    return model


def load_notes(model: ir.Model) -> list[str]:
    """What :func:`load_model` repaired in ``model`` (empty when nothing)."""
    return list(model.meta.get(LOAD_NOTES) or [])


def repair_missing_shapes(proto: onnx.ModelProto, path: str) -> list[str]:
    """Give a tensor type without a ``shape`` an unknown-dims shape of its known rank.

    ONNX's checker requires the field on the main graph's inputs, outputs and value_info
    (tf2onnx omits it on some outputs); runtimes take the value as of unknown shape. Only the
    rank is filled in, from an initializer of the same name or from ONNX's shape inference, so
    nothing is guessed. Raises InvalidModelError naming the value when its rank is unknown.
    Returns one note per repaired value.
    """
    graph = proto.graph
    kinds = [("graph input", graph.input), ("graph output", graph.output)]
    kinds.append(("value_info", graph.value_info))
    missing = [
        (kind, value)
        for kind, values in kinds
        for value in values
        if value.type.HasField("tensor_type") and not value.type.tensor_type.HasField("shape")
    ]
    ranks = {t.name: len(t.dims) for t in graph.initializer}
    if any(value.name not in ranks for _, value in missing):
        ranks.update({k: v for k, v in _inferred_ranks(proto).items() if k not in ranks})
    notes = []
    for kind, value in missing:
        rank = ranks.get(value.name)
        if rank is None:
            raise InvalidModelError(
                f"{path} is not valid ONNX: {kind} '{value.name}' has a tensor type without a "
                "shape (ONNX requires one in the main graph), and its rank cannot be told; "
                "declare its shape (dimensions may be unknown)"
            )
        shape = value.type.tensor_type.shape
        for _ in range(rank):
            shape.dim.add()
        notes.append(
            f"{kind} '{value.name}' declared no shape (ONNX requires one): given rank {rank} "
            "with unknown dimensions, as shape inference (or the tensors its sequence is built "
            "of) found"
        )
    return notes


def _without_external_initializers(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy to check in memory: the checker cannot find external files without the model's
    path, so external initializers become inputs of their type (their files are checked by
    :func:`seqlower._external.check_external_data` anyway)."""
    if not any(t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer):
        return proto
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    graph = copy.graph
    inputs = {value.name for value in graph.input}
    kept = []
    for tensor in graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            kept.append(tensor)
        elif tensor.name not in inputs:
            graph.input.append(
                onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims)
            )
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return copy


def _inferred_ranks(proto: onnx.ModelProto) -> dict[str, int]:
    """The rank ONNX's shape inference finds for each main-graph value (where it finds one),
    a ``Reshape``'s taken from its shape input's length where inference leaves it out."""
    inferred = proto
    for _ in range(_RESHAPE_ROUNDS):
        try:
            inferred = onnx.shape_inference.infer_shapes(inferred, strict_mode=False)
        except Exception:
            return {}
        if not _reshape_ranks(inferred.graph):
            break
    graph = inferred.graph
    ranks = _declared_ranks(graph)
    return {**_sequence_concat_ranks(graph, ranks), **ranks}


_RESHAPE_ROUNDS = 8  # inference runs, each after the Reshape ranks the one before told


def _reshape_ranks(graph: onnx.GraphProto) -> bool:
    """Give each main-graph ``Reshape`` output inference left rankless the rank its shape input's
    length says (ONNX's inference does so only for a shape known as data: tf2onnx's einsum
    computes it from ``Shape``s, which left ``tf_causal_mask``'s output rankless); whether any
    was given, for inference to carry on from."""
    values = {v.name: v for v in [*graph.input, *graph.value_info, *graph.output]}
    lengths = {t.name: list(t.dims) for t in graph.initializer}
    for name, value in values.items():
        tensor = value.type.tensor_type
        if value.type.HasField("tensor_type") and tensor.HasField("shape"):
            dims = tensor.shape.dim
            lengths[name] = [d.dim_value if d.HasField("dim_value") else -1 for d in dims]
    given = False
    for node in graph.node:
        if not is_onnx(node, "Reshape") or len(node.input) < 2:
            continue
        out, shape = node.output[0], lengths.get(node.input[1])
        data = values.get(node.input[0])
        if out in lengths or shape is None or len(shape) != 1 or shape[0] < 0:
            continue
        if data is None or not data.type.tensor_type.elem_type:
            continue
        target = values.get(out)
        if target is None:
            target = graph.value_info.add()
            target.name = out
        target.type.tensor_type.elem_type = data.type.tensor_type.elem_type
        for _ in range(shape[0]):
            target.type.tensor_type.shape.dim.add()
        given = True
    return given


def _declared_ranks(graph: onnx.GraphProto) -> dict[str, int]:
    ranks = {t.name: len(t.dims) for t in graph.initializer}
    ranks.update(
        {
            value.name: len(value.type.tensor_type.shape.dim)
            for value in [*graph.value_info, *graph.output, *graph.input]
            if value.type.HasField("tensor_type") and value.type.tensor_type.HasField("shape")
        }
    )
    return ranks


def _sequence_concat_ranks(graph: onnx.GraphProto, ranks: Mapping[str, int]) -> dict[str, int]:
    """The rank of each ``ConcatFromSequence`` output from the tensors its sequence is built
    of, where shape inference loses it: tf2onnx's ragged ``map_fn`` appends to a sequence
    seeded by ``SequenceEmpty`` in a ``Loop`` (ONNX types the carried sequence without a shape),
    so its output has no rank; its elements, in the body, have one (all the same: the concat
    requires it)."""
    found = {}
    producers = {out: node for node in graph.node for out in node.output}
    for node in graph.node:
        if is_onnx(node, "ConcatFromSequence"):
            new_axis = next((a.i for a in node.attribute if a.name == "new_axis"), 0)
            rank = _element_rank(node.input[0], producers, ranks, depth=0)
            if rank is not None:
                found[node.output[0]] = rank + (1 if new_axis else 0)
    return found


def _element_rank(
    sequence: str, producers: Mapping[str, onnx.NodeProto], ranks: Mapping[str, int], depth: int
) -> int | None:
    """The rank of the tensors in ``sequence`` as built by SequenceConstruct/SequenceInsert,
    through a Loop's carried state into its body; None when not told."""
    node = producers.get(sequence)
    if node is None or depth > 20 or not is_onnx(node):
        return None
    if node.op_type == "SequenceConstruct":
        return next((ranks[name] for name in node.input if name in ranks), None)
    if node.op_type == "SequenceInsert":
        if node.input[1] in ranks:
            return ranks[node.input[1]]
        return _element_rank(node.input[0], producers, ranks, depth + 1)
    if node.op_type == "Loop":
        index = list(node.output).index(sequence)
        states = len(node.input) - 2
        body = next((a.g for a in node.attribute if a.name == "body"), None)
        if body is None or index >= states or index + 1 >= len(body.output):
            return None
        inner = {out: n for n in body.node for out in n.output}
        rank = _element_rank(body.output[index + 1].name, inner, _declared_ranks(body), depth + 1)
        if rank is None and node.input[index + 2]:
            rank = _element_rank(node.input[index + 2], producers, ranks, depth + 1)
        return rank
    return None


#: Protobuf reads at most 100 levels of nested messages; each subgraph takes three or more.
TOO_DEEP = (
    "subgraphs are nested deeper than protobuf can read (at most about 30 levels of "
    "If/Loop/Scan/SequenceMap bodies)"
)


def check_names_and_dims(
    model: ir.Model,
    path: str = "the model",
    graphs: list[ir.Graph | ir.Function] | None = None,
) -> None:
    """Names that are not UTF-8 (protobuf hands them over as bytes, and writing them fails) and
    negative declared dimensions: reject them now, naming the culprit, rather than mid-run.
    ``graphs``: every scope of the model, when the caller has them."""
    for graph in all_graphs(model) if graphs is None else graphs:
        kind = "function" if isinstance(graph, ir.Function) else "graph"
        if isinstance(graph.name, bytes):
            raise InvalidModelError(f"{path}: a {kind} name is not valid UTF-8: {graph.name!r}")
        for node in graph:
            for text in (node.name, node.op_type, node.domain):
                if isinstance(text, bytes):
                    raise InvalidModelError(
                        f"{path}: a node name, op type or domain is not valid UTF-8: {text!r}"
                    )
            for value in node.outputs:
                if isinstance(value.name, bytes):
                    raise InvalidModelError(
                        f"{path}: the name of an output of {node.op_type} node is not valid "
                        f"UTF-8: {value.name!r}"
                    )
        if isinstance(graph, ir.Graph):
            for value in [*graph.inputs, *graph.outputs]:
                if isinstance(value.name, bytes):
                    raise InvalidModelError(
                        f"{path}: a {kind} input or output name is not valid UTF-8: {value.name!r}"
                    )
                shape = value.shape
                if shape is not None and any(isinstance(d, int) and d < 0 for d in shape.dims):
                    raise InvalidModelError(
                        f"{path}: '{value.name}' declares a negative dimension: "
                        f"{[d if isinstance(d, int) else str(d) for d in shape.dims]}"
                    )


def check_model(
    model: ir.Model | onnx.ModelProto, *, full_check: bool = False, what: str = "model"
) -> None:
    """Run ONNX's checker; raise InvalidModelError with its first line when it rejects.

    Give a ModelProto when one exists anyway: an onnx_ir model is serialized to be checked.
    """
    try:
        if isinstance(model, onnx.ModelProto):
            onnx.checker.check_model(model, full_check=full_check)
        else:
            CheckerPass(full_check=full_check)(model)
    except Exception as e:
        cause = e.__cause__ or e
        if "MaxDepth" in str(cause) or "recursion" in str(cause).lower():
            raise InvalidModelError(f"the {what}: {TOO_DEEP}") from e
        raise InvalidModelError(f"the {what} is not valid ONNX: {checker_message(cause)}") from e


# Protobuf cannot serialize 2 GiB; keep a margin for the graph itself.
INLINE_LIMIT = 1_800_000_000


def initializer_values(model: ir.Model) -> list[ir.Value]:
    """The initializers of every graph of the model, subgraphs included (one walk: callers that
    ask several questions of the weights share it)."""
    return [
        value
        for graph in all_graphs(model)
        if isinstance(graph, ir.Graph)
        for value in graph.initializers.values()
    ]


def has_external_data(model: ir.Model, initializers: list[ir.Value] | None = None) -> bool:
    """Whether any weight of the model lives in an external file (``initializers``: the
    model's, when the caller has them)."""
    if initializers is None:
        initializers = initializer_values(model)
    return any(isinstance(value.const_value, ir.ExternalTensor) for value in initializers)


def self_contained_proto(model: ir.Model, *, may_modify: bool = False) -> onnx.ModelProto:
    """``model`` as a ModelProto that holds its weights (external ones read in), as runtimes
    given bytes need. ``may_modify`` lets the weights be read into ``model`` itself."""
    if has_external_data(model):
        model = ir.external_data.load_to_model(model if may_modify else model.clone())
    return ir.serde.serialize_model(model)


def weights_nbytes(model: ir.Model, initializers: list[ir.Value] | None = None) -> int:
    if initializers is None:
        initializers = initializer_values(model)
    return sum(value.const_value.nbytes for value in initializers if value.const_value is not None)


def proto_has_external_data(proto: onnx.ModelProto) -> bool:
    """Whether any tensor of ``proto`` (initializers, node attributes) lives in another file."""
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in all_proto_tensors(proto))


def all_proto_tensors(proto: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    def graph_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
        yield from graph.initializer
        for node in graph.node:
            yield from node_tensors(node)

    def node_tensors(node: onnx.NodeProto) -> Iterator[onnx.TensorProto]:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from graph_tensors(attr.g)
            for g in attr.graphs:
                yield from graph_tensors(g)

    yield from graph_tensors(proto.graph)
    for function in proto.functions:
        for node in function.node:
            yield from node_tensors(node)


def version_converter_problem(error: BaseException, current: int | None, opset: int) -> str:
    """onnx's version converter fails with a C++ assertion naming a header; say what it means."""
    text = str(error)
    match = re.search(r"No Adapter From Version \$(\d+) for (\w+)", text)
    if match:
        since, op = match.groups()
        return (
            f"onnx's version converter cannot convert {op} below opset {since} "
            f"(try --opset {since} or newer)"
        )
    match = re.search(r"No Adapter To Version \$(\d+) for (\w+)", text)
    if match:
        version, op = match.groups()
        return f"onnx's version converter has no adapter for {op} to opset {version}"
    match = re.search(r"No Previous Version of (\w+)", text)
    if match:
        op = match.group(1)
        if current is not None and opset < current:
            return f"{op} does not exist at opset {opset} (the model uses it at opset {current})"
        return f"onnx's version converter cannot convert {op} to opset {opset}"
    match = re.search(r"must be between (\d+) and (\d+)", text)
    if match:
        return f"onnx {onnx.__version__} knows opsets {match.group(1)} to {match.group(2)}"
    match = re.search(r"Assertion `.*?` failed: (.*)", text)
    why = match.group(1) if match else first_line(error)
    return f"onnx's version converter cannot convert this model ({why})"


def strict_inference_problem(proto: onnx.ModelProto, limit: int = 400) -> str:
    """Why ONNX's strict shape inference (every subgraph, types checked, data propagated)
    rejects ``proto``, in at most ``limit`` characters: a runtime such as onnxruntime refuses
    such a model at load; '' if none."""
    try:
        onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True, data_prop=True)
    except Exception as e:
        text = " ".join(str(e).split())
        # ONNX nests each scope's errors: the innermost names the node that is wrong.
        return text[text.rfind("(op_type:") :][:limit] if "(op_type:" in text else text[:limit]
    return ""


#: onnx.checker's complaint about a node reading a value no earlier node wrote, cut at its
#: line breaks by any one-line rendering ("however input 'a' of node:").
_UNSORTED = re.compile(
    r"topologically sorted, however input '(?P<value>[^']*)' of node:\s*name: ?(?P<name>\S*) "
    r"OpType: (?P<op>\S+)"
)
_CONTEXT = re.compile(r"Context: Bad node spec for node\. Name: (\S*) OpType: (\S+)")


def checker_message(error: BaseException, model: onnx.ModelProto | None = None) -> str:
    """The checker's complaint on one line, with the node it names when it names one; for
    nodes out of order, which node reads what before it is written (``model``: the proto
    checked, where the writer is looked for)."""
    unsorted = _UNSORTED.search(str(error))
    if unsorted:
        return _unsorted_message(str(error), unsorted, model)
    if _UNTYPED in str(error) and model is not None:
        untyped = _untyped_interface(model.graph)
        if untyped:
            listed = ", ".join(untyped[:5]) + (
                f" and {len(untyped) - 5} more" if len(untyped) > 5 else ""
            )
            return (
                f"{listed} {'has' if len(untyped) == 1 else 'have'} no type, which ONNX requires "
                "of every graph input and output (onnxscript can leave them untyped); give "
                "them their types (in onnxscript, annotate the function's outputs; or copy "
                "onnx.shape_inference.infer_shapes' types onto graph.output) and rerun"
            )
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    message = lines[0]
    match = re.search(r"Name: (\S*) OpType: (\S+)", str(error))
    if match:
        name = f" '{match.group(1)}'" if match.group(1) else ""
        message += f" (in {match.group(2)} node{name})"
    return message


#: onnx.checker's words for a value_info (a graph input or output) without a type.
_UNTYPED = "Field 'type' of 'value_info' is required"


def _untyped_interface(graph: onnx.GraphProto) -> list[str]:
    """The main graph's inputs and outputs without a type, named (a body's may go untyped)."""
    return [
        f"graph {kind} '{value.name}'"
        for kind, values in (("input", graph.input), ("output", graph.output))
        for value in values
        if not value.HasField("type")
    ]


def _unsorted_message(text: str, match: re.Match[str], model: onnx.ModelProto | None) -> str:
    """One line for onnx.checker's "must be topologically sorted": the node, the value it
    reads, and the node that writes it later (the exporter wrote the nodes out of order), or
    that nothing defines it."""
    value, name, op = match.group("value"), match.group("name"), match.group("op")
    node = f"{op} node '{name}'" if name else f"an unnamed {op} node"
    context = _CONTEXT.search(text)
    if context:
        owner = f"'{context.group(1)}'" if context.group(1) else "an unnamed one"
        node += f" (in a subgraph of {context.group(2)} node {owner})"
    writer = None if model is None else _writer_of(model.graph, value)
    if writer is None:
        return (
            f"{node} reads '{value}', which no node before it writes and which is no graph "
            "input or initializer"
        )
    written_by = f"{writer.op_type} node '{writer.name}'" if writer.name else writer.op_type
    return (
        f"{node} reads '{value}' before {written_by} writes it: the exporter wrote the nodes "
        "out of topological order, which ONNX forbids (re-export the model, or sort its nodes, "
        "e.g. with onnx_ir.passes.common.TopologicalSortPass)"
    )


def _writer_of(graph: onnx.GraphProto, value: str) -> onnx.NodeProto | None:
    """The node of ``graph`` or of its subgraphs that writes ``value``, if one does."""
    for scope in proto_graphs(graph):
        for node in scope.node:
            if value in node.output:
                return node
    return None


def _root_message(error: BaseException) -> str:
    """The first line of the innermost cause: wrappers like onnx_ir's SerdeError say little,
    and an error raised while wrapping another (onnx_ir's wrapper failing to describe its
    arguments) less than the one it was handling."""
    seen = {id(error)}
    while True:
        inner = error.__cause__
        if inner is None and not error.__suppress_context__:
            inner = error.__context__
        if inner is None or id(inner) in seen:
            return first_line(error)
        seen.add(id(inner))
        error = inner
