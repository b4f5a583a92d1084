"""What the tests share: model builders, oracles, the command line run in process, paths.

Fixtures live in ``conftest.py``; everything here is imported by name (``from tests.helpers
import parse``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import click.testing
import numpy as np
import onnx
import onnx.parser
import onnxruntime as ort
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import seqlower
from seqlower.cli.commands import cli as seqlower_cli

#: The checkout: its README, examples and tests/data.
ROOT = Path(__file__).resolve().parent.parent
#: Models exporters wrote (tf2onnx, PyTorch), kept as files.
REALWORLD = ROOT / "tests" / "data" / "realworld"
#: The README's quick-start example.
EXAMPLE = ROOT / "examples" / "preprocess.onnx"

#: One bag of PyTorch's embedding_bag as its unrolled Loop leaves it: an If giving an empty
#: bag's zeros, else the max of the bag's rows (the Slice empty then, in the untaken branch).
EMPTY_BAG_MAX = """
<ir_version: 8, opset_import: ["" : 18]>
g (float[4, 2] w, int64[2] bounds) => (float[2] y) {
    zero = Constant<value = int64[1] {0}>()
    one = Constant<value = int64[1] {1}>()
    two = Constant<value = int64[1] {2}>()
    start = Slice(bounds, zero, one)
    end = Slice(bounds, one, two)
    empty = Equal(start, end)
    y = If(empty) <
        then_branch = t () => (float[2] a) { a = Constant<value = float[2] {0, 0}>() },
        else_branch = e () => (float[2] b) {
            rows = Slice(w, start, end, zero)
            b = ReduceMax<keepdims = 0>(rows, zero)
        }
    >
}
"""

#: Element types onnxruntime's CPU kernels take for sequences and ReverseSequence.
ORT_DTYPES = [
    TensorProto.FLOAT,
    TensorProto.DOUBLE,
    TensorProto.FLOAT16,
    TensorProto.INT8,
    TensorProto.INT16,
    TensorProto.INT32,
    TensorProto.INT64,
    TensorProto.UINT8,
    TensorProto.UINT16,
    TensorProto.UINT32,
    TensorProto.UINT64,
    TensorProto.BOOL,
    TensorProto.STRING,
]
IR_VERSION = 8  # onnxruntime 1.31 reads up to IR 13; onnx 1.23 would write 14 by default.
OPSET = 17


#: The body of :data:`RAGGED_MAP`'s map (tests swap it for others).
RAGGED_BODY = """
        zero = Constant<value_ints = [0]>()
        mean = ReduceMean<keepdims = 1>(chunk, zero)
        centred = Sub(chunk, mean)
        scaled = Mul(centred, w)
        both = Constant<value_ints = [0, 1]>()
        weighted = Mul(chunk, w)
        sum = ReduceSum<keepdims = 0>(weighted, both)
        one = Constant<value_ints = [1]>()
        total = Reshape(sum, one)
"""
# onnxscript's map over the pieces of a split by run-time sizes, shaped as the hidden set's
# export (realworld-samples' seqmap_in_local_function, whose total sums centred values: float
# noise, here a weighted sum): the map in a model-local function, sizes a graph input.
RAGGED_MAP = """
<ir_version: 10, opset_import: ["this" : 1, "" : 18]>
ragged (float[N,D] X, int64[K] lens, float[D] W) => (float[N,D] Y2, float[K,1] T2) {
    Y, T = this.center_scale(X, lens, W)
    Y2 = Tanh(Y)
    T2 = Abs(T)
}
<domain: "this", opset_import: ["" : 18]>
center_scale (X, lens, W) => (Y, T) {
    chunks = SplitToSequence<axis = 0>(X, lens)
    outs, totals = SequenceMap(chunks, W) <body = body (float[?, ?] chunk, float[?] w)
        => (float[?, ?] scaled, float[1] total) {
BODY
    }>
    Y = ConcatFromSequence<axis = 0>(outs)
    T = ConcatFromSequence<axis = 0, new_axis = 1>(totals)
}
""".replace("BODY\n", RAGGED_BODY.lstrip("\n"))


def ragged_map(text: str = RAGGED_MAP) -> onnx.ModelProto:
    """``text`` parsed with its functions' map bodies untyped, as onnxscript leaves them."""
    model = onnx.parser.parse_model(text)
    for function in model.functions:
        for node in function.node:
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    for value in [*attribute.g.input, *attribute.g.output]:
                        value.ClearField("type")
    return model


def parse(
    text: str,
    *,
    opset: int = OPSET,
    domains: Mapping[str, int] | None = None,
    check: bool = True,
) -> onnx.ModelProto:
    """A model from ONNX's text format, checked (``full_check``) unless ``check`` is False.

    Text without its own ``<ir_version: ..., opset_import: ...>`` header gets one: IR 8 (what
    onnxruntime and the runtimes read), ``opset`` and the extra ``domains``. Mind the types:
    ``float[] x`` is a tensor of unknown rank, ``float x`` a scalar, ``seq(float[])`` a sequence
    of tensors of unknown rank.
    """
    if not text.lstrip().startswith("<"):
        imports = ", ".join(f'"{d}" : {v}' for d, v in {"": opset, **(domains or {})}.items())
        text = f"<ir_version: {IR_VERSION}, opset_import: [{imports}]>\n{text}"
    model = onnx.parser.parse_model(text)
    if check:
        onnx.checker.check_model(model, full_check=True)
    return model


def seq_type(dtype: int = TensorProto.FLOAT, shape: Sequence[Any] | None = None) -> onnx.TypeProto:
    return helper.make_sequence_type_proto(helper.make_tensor_type_proto(dtype, shape))


def seq_info(name: str, dtype: int = TensorProto.FLOAT, shape: Any = None) -> onnx.ValueInfoProto:
    return helper.make_value_info(name, seq_type(dtype, shape))


def tensor_info(
    name: str, dtype: int = TensorProto.FLOAT, shape: Any = None
) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    *,
    opset: int = OPSET,
    initializers: Sequence[onnx.TensorProto] = (),
    functions: Sequence[onnx.FunctionProto] = (),
    extra_opsets: Sequence[onnx.OperatorSetIdProto] = (),
    name: str = "test",
) -> onnx.ModelProto:
    graph = helper.make_graph(list(nodes), name, list(inputs), list(outputs), list(initializers))
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset), *extra_opsets],
        ir_version=IR_VERSION,
        functions=list(functions),
    )


def onnx_node_cases() -> list[Any]:
    """ONNX's backend node test cases, in onnx's order (the case generators' warnings, numpy
    overflow among them, silenced)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(collect_testcases(None))


def all_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """Every node in the model: all graphs, subgraphs at any depth, and functions."""
    found: list[onnx.NodeProto] = []

    def walk(nodes: Sequence[onnx.NodeProto]) -> None:
        for node in nodes:
            found.append(node)
            for attr in node.attribute:
                if attr.HasField("g"):
                    walk(attr.g.node)
                for graph in attr.graphs:
                    walk(graph.node)

    walk(model.graph.node)
    for function in model.functions:
        walk(function.node)
    return found


def all_op_types(model: onnx.ModelProto) -> list[str]:
    """Every op type in the model: all graphs, subgraphs at any depth, and functions."""
    return [node.op_type for node in all_nodes(model)]


def every_graph(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every graph nested in its nodes' attributes, depth first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from every_graph(attr.g)
            for sub in attr.graphs:
                yield from every_graph(sub)


def defined_names(model: onnx.ModelProto) -> list[str]:
    """Every name a graph defines (inputs, initializers, node outputs), in every scope."""
    names: list[str] = []
    for graph in every_graph(model.graph):
        names.extend(i.name for i in graph.input)
        names.extend(i.name for i in graph.initializer)
        names.extend(o for node in graph.node for o in node.output if o)
    return names


def repeated(names: list[str]) -> set[str]:
    seen: set[str] = set()
    return {n for n in names if n in seen or seen.add(n)}  # type: ignore[func-returns-value]


def ort_run(model: onnx.ModelProto, feeds: dict[str, Any]) -> list[Any]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def reference_run(model: onnx.ModelProto, feeds: dict[str, Any]) -> list[Any]:
    return list(ReferenceEvaluator(with_explicit_loop_conditions(model)).run(None, feeds))


def run_any(model: onnx.ModelProto, feeds: dict[str, Any]) -> tuple[list[Any], str]:
    """onnxruntime when it can run the model, else onnx.reference; says which one ran."""
    try:
        return ort_run(model, feeds), "onnxruntime"
    except Exception:
        return reference_run(model, feeds), "reference"


def assert_same(actual: Any, expected: Any, *, exact: bool = True, where: str = "output") -> None:
    """Sequences by length then element; bit-exact unless ``exact`` is False (floats only)."""
    if isinstance(expected, list):
        assert isinstance(actual, list), f"{where}: expected a sequence, got {type(actual)}"
        assert len(actual) == len(expected), f"{where}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_same(a, e, exact=exact, where=f"{where}[{i}]")
        return
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{where}: shape {actual.shape} != {expected.shape}"
    if expected.dtype.kind in "OSU":
        assert actual.tolist() == expected.tolist(), where
    elif exact or expected.dtype.kind in "biu":
        assert actual.dtype == expected.dtype, f"{where}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.tobytes() == expected.tobytes(), f"{where}: values differ"
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6, err_msg=where)


def assert_lowered_ok(
    original: onnx.ModelProto, lowered: onnx.ModelProto, *, full_check: bool = True
) -> None:
    """The structural promises: valid, no SequenceMap left, opsets and IR version unchanged."""
    if full_check:
        onnx.checker.check_model(lowered, full_check=True)
    assert "SequenceMap" not in all_op_types(lowered)
    assert lowered.ir_version == original.ir_version
    assert {(o.domain, o.version) for o in lowered.opset_import} == {
        (o.domain, o.version) for o in original.opset_import
    }


def assert_equivalent(
    original: onnx.ModelProto, lowered: onnx.ModelProto, feeds: dict[str, Any]
) -> str:
    """Lowered outputs equal the original's; returns the oracle used for the original."""
    expected, oracle = run_any(original, feeds)
    try:
        actual = ort_run(lowered, feeds)
    except Exception:
        if oracle == "onnxruntime":
            raise  # onnxruntime ran the original; it must run the lowered model too
        actual = reference_run(lowered, feeds)
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
        assert_same(a, e, exact=oracle == "onnxruntime", where=f"output {i}")
    return oracle


def lower_and_compare(
    model: onnx.ModelProto, feeds: dict[str, Any], *, full_check: bool = True
) -> onnx.ModelProto:
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered, full_check=full_check)
    assert_equivalent(model, lowered, feeds)
    return lowered


def with_explicit_loop_conditions(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy where each Loop with an omitted condition gets a constant true one.

    The two mean the same in ONNX, but onnx's own ReferenceEvaluator runs a Loop whose
    condition is omitted zero times (op_loop.py: ``while cond and ...`` with cond None). seqlower's
    ``Reference`` oracle's corrected Loop needs no such copy; the tests use it for onnx's.
    """
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    counter = 0

    def patch(nodes: Any) -> None:
        nonlocal counter
        for node in list(nodes):
            for attr in node.attribute:
                if attr.HasField("g"):
                    patch(attr.g.node)
                for graph in attr.graphs:
                    patch(graph.node)
            if node.op_type == "Loop" and len(node.input) > 1 and not node.input[1]:
                counter += 1
                name = f"__seqlower_verify_true_{counter}"
                true = onnx.helper.make_node(
                    "Constant",
                    [],
                    [name],
                    value=onnx.helper.make_tensor(name, onnx.TensorProto.BOOL, [], [True]),
                )
                nodes.insert(list(nodes).index(node), true)
                node.input[1] = name

    patch(copy.graph.node)
    for function in copy.functions:
        patch(function.node)
    return copy


def neg_loop(trips: int, size: int) -> str:
    """A model (text) whose Loop negates ``x`` (``float[size]``) ``trips`` times."""
    return f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[{size}] x) => (float[{size}] y) {{
        n = Constant<value = int64 {{{trips}}}>()
        c = Constant<value = bool {{1}}>()
        y = Loop(n, c, x) <
            body = b (int64 i, bool ci, float[{size}] xi) => (bool co, float[{size}] xo) {{
                co = Identity(ci)
                xo = Neg(xi)
            }}>
    }}
    """


def nested_row_maps(reduce: str) -> str:
    """A model (text) mapping over a sequence of [R, C] matrices and, inside, over each one's
    rows with ``reduce`` (``ReduceSum``, ``ReduceMean``): onnxruntime refuses the nesting."""
    return f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g (seq(float[R, C]) s) => (seq(float[R]) out) {{
        out = SequenceMap(s) <body = outer (float[R, C] x) => (float[R] y) {{
            rows = SplitToSequence<axis = 0, keepdims = 0>(x)
            reduced = SequenceMap(rows) <body = inner (float[C] row) => (float r) {{
                r = {reduce}<keepdims = 0>(row)
            }}>
            y = ConcatFromSequence<axis = 0, new_axis = 1>(reduced)
        }}>
    }}
    """


class CliResult:
    """A run of the command: ``exit_code``, ``stdout``, ``stderr`` (and click's ``Result``'s
    other fields); unpacks as ``code, stdout, stderr``."""

    def __init__(self, result: click.testing.Result) -> None:
        self.result = result
        self.exit_code = result.exit_code
        self.stdout = result.stdout
        self.stderr = result.stderr
        self.output = result.output

    def __iter__(self) -> Iterator[Any]:
        return iter((self.exit_code, self.stdout, self.stderr))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.result, name)


def run_cli(*args: Any, **kwargs: Any) -> CliResult:
    """``seqlower ARGS...`` in this process (exceptions propagate); ``kwargs`` go to click's
    ``CliRunner.invoke`` (``input``, ``env``, ``color``, ...)."""
    kwargs.setdefault("catch_exceptions", False)
    runner = click.testing.CliRunner()
    return CliResult(runner.invoke(seqlower_cli, [str(a) for a in args], **kwargs))


def assert_one_line_error(
    result: Any, *words: str, code: int = 2, prefix: str = "seqlower: error: "
) -> str:
    """The run failed with ``code`` and said why in one line, ``seqlower: error: ...`` (or
    another ``prefix``), holding each of ``words`` and no traceback; returns that line."""
    assert result.exit_code == code, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), result.stderr
    assert "Traceback" not in result.output, result.output
    for word in words:
        assert word in lines[0], (word, lines[0])
    return str(lines[0])
