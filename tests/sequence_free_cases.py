"""Models in the shapes real exporters give, for the sequence-free mode.

PyTorch (dynamo, onnxscript's torch_lib ``aten::atleast_*d.Sequence``, reached by ``hstack``,
``vstack``, ``dstack``, ``column_stack``): ``SequenceConstruct`` → ``SequenceMap`` with an untyped
body that branches on the element's rank with nested ``If``\\ s reading constants two or three
scopes up → ``SequenceAt(constant i)`` → ``Concat``. onnxscript-authored: ``SplitToSequence`` →
``SequenceMap`` with a tensor extra input → ``ConcatFromSequence``, length known at run time.

Each builder returns ``(model, feeds)``; the bodies are written typed (the parser needs types)
and then stripped the way the exporter leaves them: no type on the body input or on any ``If``
branch output. The body output keeps its element type only, without which onnxruntime refuses
the original ("Invalid tensor data type 0") and nothing could check the lowering.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnx.parser

from tests.helpers import parse

Case = tuple[onnx.ModelProto, dict[str, Any]]

HEADER = '<ir_version: 8, opset_import: ["" : 18]>'

# The torch_lib bodies. Constants (zero, one, two, the reshape targets) live in the main graph:
# the nested Ifs read them from two or three scopes up.
ATLEAST_1D = """
    body = reshape_to_1d (float x) => (float y) {
        shape = Shape(x)
        rank = Size(shape)
        is_scalar = Equal(rank, zero)
        y = If(is_scalar) <
            then_branch = t () => (float r) { r = Reshape(x, one_1d) },
            else_branch = e () => (float s) { s = Identity(x) }>
    }"""
ATLEAST_2D = """
    body = reshape_to_2d (float x) => (float y) {
        shape = Shape(x)
        rank = Size(shape)
        low = LessOrEqual(rank, one)
        y = If(low) <
            then_branch = t () => (float r) { r = Reshape(x, row) },
            else_branch = e () => (float s) { s = Identity(x) }>
    }"""
ATLEAST_3D = """
    body = reshape_to_3d (float x) => (float y) {
        shape = Shape(x)
        rank = Size(shape)
        is0 = Equal(rank, zero)
        y = If(is0) <
            then_branch = t0 () => (float r0) { r0 = Reshape(x, ones_3) },
            else_branch = e0 () => (float r1) {
                is1 = Equal(rank, one)
                r1 = If(is1) <
                    then_branch = t1 () => (float u) {
                        u0 = Unsqueeze(x, axis_0)
                        u = Unsqueeze(u0, axis_last)
                    },
                    else_branch = e1 () => (float w) {
                        is2 = Equal(rank, two)
                        w = If(is2) <
                            then_branch = t2 () => (float v) { v = Unsqueeze(x, axis_last) },
                            else_branch = e2 () => (float z) { z = Identity(x) }>
                    }>
            }>
    }"""

CONSTANTS = """
        zero = Constant<value = int64 {0}>()
        one = Constant<value = int64 {1}>()
        two = Constant<value = int64 {2}>()
        one_1d = Constant<value = int64[1] {1}>()
        row = Constant<value = int64[2] {1, -1}>()
        ones_3 = Constant<value = int64[3] {1, 1, 1}>()
        axis_0 = Constant<value = int64[1] {0}>()
        axis_last = Constant<value = int64[1] {-1}>()"""


def exported(text: str) -> onnx.ModelProto:
    """The model as the exporter leaves it: parsed, then the SequenceMap bodies' types
    stripped."""
    model = parse(text, check=False)
    for node in _nodes(model.graph):
        if node.op_type == "SequenceMap":
            body = node.attribute[0].g
            _untype(body)
            for output in body.output:
                output.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    return model


def _nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    found = []
    for node in graph.node:
        found.append(node)
        for attr in node.attribute:
            if attr.HasField("g"):
                found += _nodes(attr.g)
    return found


def _untype(graph: onnx.GraphProto) -> None:
    for value in [*graph.input, *graph.output]:
        value.ClearField("type")
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                _untype(attr.g)


def _type(array: np.ndarray) -> str:
    name = {"float32": "float", "int64": "int64"}[str(array.dtype)]
    return f"{name}[{','.join(str(d) for d in array.shape)}]" if array.ndim else name


def torch_stack(
    body: str, arrays: list[np.ndarray], concat_axis: int, rank: int
) -> onnx.ModelProto:
    """The dynamo export of ``torch.{h,v,d}stack(arrays)``: construct, map, SequenceAt, Concat."""
    names = [f"t{k}" for k in range(len(arrays))]
    inputs = ", ".join(f"{_type(a)} {n}" for a, n in zip(arrays, names, strict=True))
    ats = "\n".join(
        f"        i{k} = Constant<value = int64 {{{k}}}>()\n        e{k} = SequenceAt(mapped, i{k})"
        for k in range(len(arrays))
    )
    elements = ", ".join(f"e{k}" for k in range(len(arrays)))
    return exported(
        f"""{HEADER}
    torch_stack ({inputs}) => ({_float(rank)} out) {{{CONSTANTS}
        seq = SequenceConstruct({", ".join(names)})
        mapped = SequenceMap<{body}>(seq)
{ats}
        out = Concat<axis = {concat_axis}>({elements})
    }}"""
    )


def _float(rank: int) -> str:
    """A float tensor type of ``rank`` symbolic dimensions."""
    return f"float[{','.join(f'd{k}' for k in range(rank))}]"


def _floats(*shapes: tuple[int, ...], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for shape in shapes]


def _feeds(arrays: list[np.ndarray]) -> dict[str, Any]:
    return {f"t{k}": a for k, a in enumerate(arrays)}


def hstack_atleast_1d() -> Case:
    """torch.hstack of 1-D and 0-D tensors: 4 elements, two of them scalars."""
    arrays = _floats((3,), (), (2,), ())
    return torch_stack(ATLEAST_1D, arrays, 0, 1), _feeds(arrays)


def vstack_atleast_2d() -> Case:
    """torch.vstack of mixed 1-D/2-D tensors: 5 elements."""
    arrays = _floats((3,), (2, 3), (1, 3), (3,), (4, 3), seed=1)
    return torch_stack(ATLEAST_2D, arrays, 0, 2), _feeds(arrays)


def dstack_atleast_3d() -> Case:
    """torch.dstack of 2-D and 3-D tensors through the three nested rank Ifs: 6 elements."""
    arrays = _floats((2, 3), (2, 3, 4), (2, 3), (2, 3, 1), (2, 3, 2), (2, 3), seed=2)
    return torch_stack(ATLEAST_3D, arrays, 2, 3), _feeds(arrays)


def column_stack_atleast_3d_ranks() -> Case:
    """Every branch of atleast_3d taken: ranks 0, 1, 2 and 3 among 8 elements, flattened."""
    arrays = _floats((), (4,), (2, 2), (1, 1, 3), (), (5,), (3, 1), (2, 1, 1), seed=3)
    flat = "\n".join(f"        f{k} = Flatten<axis = 0>(e{k})" for k in range(len(arrays)))
    return exported(_flattened(arrays, flat)), _feeds(arrays)


def _flattened(arrays: list[np.ndarray], flat: str) -> str:
    names = [f"t{k}" for k in range(len(arrays))]
    inputs = ", ".join(f"{_type(a)} {n}" for a, n in zip(arrays, names, strict=True))
    ats = "\n".join(
        f"        i{k} = Constant<value = int64 {{{k - len(arrays)}}}>()\n"  # negative positions
        f"        e{k} = SequenceAt(mapped, i{k})"
        for k in range(len(arrays))
    )
    return f"""{HEADER}
    column_stack ({inputs}) => ({_float(2)} out) {{{CONSTANTS}
        seq = SequenceConstruct({", ".join(names)})
        mapped = SequenceMap<{ATLEAST_3D}>(seq)
{ats}
{flat}
        out = Concat<axis = 1>({", ".join(f"f{k}" for k in range(len(arrays)))})
    }}"""


def map_with_tensor_input_and_plumbing() -> Case:
    """Two outputs, a tensor extra input, then SequenceLength and ConcatFromSequence(new_axis=1)
    and SequenceAt on the results."""
    text = f"""{HEADER}
    g (float[2,3] a, float[2,3] b, float[2,3] c, float[3] t) => (float[3,2,3] stacked,
                                                                  int64 n, float[2,3] last) {{
        seq = SequenceConstruct(a, b, c)
        sums, prods = SequenceMap<body = f (float x, float u) => (float s, float p) {{
            s = Add(x, u)
            p = Mul(x, u)
        }}>(seq, t)
        stacked = ConcatFromSequence<axis = 0, new_axis = 1>(sums)
        n = SequenceLength(prods)
        minus_one = Constant<value = int64 {{-1}}>()
        last = SequenceAt(prods, minus_one)
    }}"""
    arrays = _floats((2, 3), (2, 3), (2, 3), (3,), seed=4)
    return exported(text), dict(zip("abct", arrays, strict=True))


def split_known_count() -> Case:
    """SplitToSequence with constant sizes (known count) → SequenceMap → ConcatFromSequence."""
    text = f"""{HEADER}
    g (float[6,4] x) => (float[6,4] y) {{
        sizes = Constant<value = int64[3] {{2, 1, 3}}>()
        seq = SplitToSequence<axis = 0>(x, sizes)
        mapped = SequenceMap<body = f (float e) => (float r) {{
            m = ReduceMax<keepdims = 1>(e)
            r = Sub(e, m)
        }}>(seq)
        y = ConcatFromSequence<axis = 0>(mapped)
    }}"""
    return exported(text), {"x": _floats((6, 4), seed=5)[0]}


def insert_chain() -> Case:
    """SequenceInsert from SequenceEmpty (tf2onnx-style plumbing) with a known length."""
    text = f"""{HEADER}
    g (float[3] a, float[2] b, float[4] c) => (float[9] y) {{
        empty = SequenceEmpty<dtype = 1>()
        s1 = SequenceInsert(empty, a)
        s2 = SequenceInsert(s1, c)
        zero = Constant<value = int64 {{1}}>()
        s3 = SequenceInsert(s2, b, zero)
        mapped = SequenceMap<body = f (float e) => (float r) {{ r = Neg(e) }}>(s3)
        y = ConcatFromSequence<axis = 0>(mapped)
    }}"""
    arrays = _floats((3,), (2,), (4,), seed=6)
    return exported(text), dict(zip("abc", arrays, strict=True))


def insert_erase_positions() -> Case:
    """Negative and default positions of SequenceInsert/SequenceErase on known sequences, then
    ConcatFromSequence with new_axis=1 on a negative axis and SequenceLength."""
    text = f"""{HEADER}
    g (float[2,3] a, float[2,3] b, float[2,3] c, float[2,3] d) => (float[2,3,3] y, int64 n) {{
        s = SequenceConstruct(a, b)
        minus_one = Constant<value = int64 {{-1}}>()
        s1 = SequenceInsert(s, c, minus_one)
        s2 = SequenceInsert(s1, d)
        zero = Constant<value = int64 {{0}}>()
        s3 = SequenceErase(s2, zero)
        y = ConcatFromSequence<axis = -1, new_axis = 1>(s3)
        n = SequenceLength(s3)
    }}"""
    arrays = _floats((2, 3), (2, 3), (2, 3), (2, 3), seed=16)
    return exported(text), dict(zip("abcd", arrays, strict=True))


def onnxscript_rows(keepdims: int = 0, axis: int = 0) -> Case:
    """onnxscript's pattern: rows of x (count known at run time), a tensor extra input and an
    initializer read from the body, two ConcatFromSequence readers."""
    piece = "float[N,3]" if axis == 0 else "float[3,N]"
    y, z = _float(3 if keepdims else 2), _float(2 if keepdims else 1)
    text = f"""{HEADER}
    g ({piece} x, float[3] w) => ({y} y, {z} z)
      <float[3] bias = {{0.5, -1, 2}}> {{
        seq = SplitToSequence<axis = {axis}, keepdims = {keepdims}>(x)
        mapped = SequenceMap<body = f (float e, float[3] t) => (float r) {{
            s = Mul(e, t)
            b = Add(s, bias)
            r = Relu(b)
        }}>(seq, w)
        y = ConcatFromSequence<axis = 0, new_axis = 1>(mapped)
        z = ConcatFromSequence<axis = -1, new_axis = 0>(mapped)
    }}"""
    model = onnx.parser.parse_model(text)
    # The element and result carry their element type only; their shapes come from inference.
    body = next(n for n in model.graph.node if n.op_type == "SequenceMap").attribute[0].g
    for value in [body.input[0], body.output[0]]:
        value.type.tensor_type.ClearField("shape")
    x = _floats((4, 3) if axis == 0 else (3, 4), seed=7)[0]
    return model, {"x": x, "w": np.array([1.0, -2.0, 0.5], np.float32)}


def split_rows_at_and_length() -> Case:
    """SequenceAt (run-time and negative constant positions) and SequenceLength of a
    SplitToSequence whose count is known only at run time."""
    text = f"""{HEADER}
    g (float[N,3] x, int64 i) => (float[1,3] row, float[3] last, float n_float) {{
        pieces = SplitToSequence<axis = 0>(x)
        row = SequenceAt(pieces, i)
        rows = SplitToSequence<axis = 0, keepdims = 0>(x)
        minus_one = Constant<value = int64 {{-1}}>()
        last = SequenceAt(rows, minus_one)
        n = SequenceLength(rows)
        n_float = Cast<to = 1>(n)   # tract cannot return a shape-derived int64 (TDim) at all
    }}"""
    return exported(text), {"x": _floats((5, 3), seed=8)[0], "i": np.array(-2, np.int64)}


def hstack_in_if_branch() -> Case:
    """The PyTorch pattern inside an If branch: the body's Ifs read main-graph constants four
    scopes up, and the copies land in the branch."""
    arrays = _floats((3,), (), (2,), seed=9)
    inputs = ", ".join(f"{_type(a)} t{k}" for k, a in enumerate(arrays))
    text = f"""{HEADER}
    g ({inputs}, bool flag) => (float[d] out) {{{CONSTANTS}
        out = If(flag) <
            then_branch = yes () => (float[d] stacked) {{
                seq = SequenceConstruct(t0, t1, t2)
                mapped = SequenceMap<{ATLEAST_1D}>(seq)
                i0 = Constant<value = int64 {{0}}>()
                i1 = Constant<value = int64 {{1}}>()
                i2 = Constant<value = int64 {{2}}>()
                e0 = SequenceAt(mapped, i0)
                e1 = SequenceAt(mapped, i1)
                e2 = SequenceAt(mapped, i2)
                stacked = Concat<axis = 0>(e0, e1, e2)
            }},
            else_branch = no () => (float[d] flat) {{ flat = Concat<axis = 0>(t0, t0) }}>
    }}"""
    return exported(text), {**_feeds(arrays), "flag": np.array(True)}


def tf2onnx_map_fn() -> Case:
    """tf2onnx's map_fn: a Loop appending to a sequence seeded by SequenceEmpty, then
    ConcatFromSequence(new_axis=1); every row's result has one shape."""
    text = f"""{HEADER}
    g (float[N,3] x) => (float[M,3] y) {{
        shape = Shape(x)
        zero = Constant<value = int64 {{0}}>()
        n = Gather(shape, zero)
        go = Constant<value = bool {{1}}>()
        empty = SequenceEmpty<dtype = 1>()
        s = Loop(n, go, empty) <body = step (int64 i, bool c, seq(float[3]) acc) =>
                                            (bool c_out, seq(float[3]) acc_out) {{
            row = Gather<axis = 0>(x, i)
            two = Constant<value = float {{2}}>()
            t = Mul(row, two)
            acc_out = SequenceInsert(acc, t)
            c_out = Identity(c)
        }}>
        y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    }}"""
    return exported(text), {"x": _floats((4, 3), seed=10)[0]}


def tf2onnx_ragged() -> Case:
    """A ragged map_fn: each iteration appends a prefix of x of its own length; the pieces are
    concatenated along their only axis (ConcatFromSequence new_axis=0)."""
    text = f"""{HEADER}
    g (float[N] x, int64[K] lengths) => (float[M] y) {{
        shape = Shape(lengths)
        zero = Constant<value = int64 {{0}}>()
        k = Gather(shape, zero)
        go = Constant<value = bool {{1}}>()
        empty = SequenceEmpty<dtype = 1>()
        s = Loop(k, go, empty) <body = step (int64 i, bool c, seq(float[L]) acc) =>
                                            (bool c_out, seq(float[L]) acc_out) {{
            length = Gather(lengths, i)
            end = Unsqueeze(length, zero_1d)
            start = Constant<value = int64[1] {{0}}>()
            piece = Slice(x, start, end)
            acc_out = SequenceInsert(acc, piece)
            c_out = Identity(c)
        }}>
        zero_1d = Constant<value = int64[1] {{0}}>()
        y = ConcatFromSequence<axis = 0>(s)
    }}"""
    model = exported(text)
    # zero_1d is read by the body, so it must come before the Loop.
    nodes = list(model.graph.node)
    late = next(n for n in nodes if n.output[0] == "zero_1d")
    nodes.remove(late)
    nodes.insert(0, late)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model, {
        "x": _floats((6,), seed=11)[0],
        "lengths": np.array([2, 0, 6, 3], np.int64),
    }


def torch_lib_hstack() -> Case:
    """torch.hstack with torch_lib's real atleast_1d body (CastLike, untyped): 5 elements."""
    from tests import torch_lib_cases

    return torch_lib_cases.stack(1, _floats((3,), (), (2,), (), (4,), seed=12), 0)


def torch_lib_vstack() -> Case:
    """torch.vstack with torch_lib's real atleast_2d body (``rank <= 1``): 4 elements."""
    from tests import torch_lib_cases

    return torch_lib_cases.stack(2, _floats((3,), (2, 3), (3,), (1, 3), seed=13), 0)


def torch_lib_dstack() -> Case:
    """torch.dstack with torch_lib's real atleast_3d body: ranks 1-3 among 7 elements."""
    from tests import torch_lib_cases

    arrays = _floats((1, 3), (1, 3, 2), (3,), (1, 3), (1, 3, 1), (3,), (1, 3, 4), seed=15)
    return torch_lib_cases.stack(3, arrays, 2)


CASES: dict[str, Callable[[], Case]] = {
    "hstack_atleast_1d": hstack_atleast_1d,
    "vstack_atleast_2d": vstack_atleast_2d,
    "dstack_atleast_3d": dstack_atleast_3d,
    "column_stack_atleast_3d_ranks": column_stack_atleast_3d_ranks,
    "map_with_tensor_input_and_plumbing": map_with_tensor_input_and_plumbing,
    "split_known_count": split_known_count,
    "insert_chain": insert_chain,
    "insert_erase_positions": insert_erase_positions,
    "onnxscript_rows": onnxscript_rows,
    "onnxscript_rows_keepdims_axis1": lambda: onnxscript_rows(keepdims=1, axis=1),
    "split_rows_at_and_length": split_rows_at_and_length,
    "hstack_in_if_branch": hstack_in_if_branch,
    "tf2onnx_map_fn": tf2onnx_map_fn,
    "tf2onnx_ragged": tf2onnx_ragged,
    "torch_lib_hstack": torch_lib_hstack,
    "torch_lib_vstack": torch_lib_vstack,
    "torch_lib_dstack": torch_lib_dstack,
}
