"""Property-based tests: random SequenceMap models, lowered, must give the original's outputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h

import seqlower
from seqlower.passes import LowerSequenceMap
from tests.helpers import (
    all_op_types,
    assert_equivalent,
    assert_lowered_ok,
    make_model,
    seq_info,
    tensor_info,
)

SIGNED = (["Neg", "Abs", "Identity"], ["Add", "Sub", "Mul"])
# dtype -> (unary ops, binary ops), restricted to what onnxruntime's CPU kernels have.
OPS: dict[int, tuple[list[str], list[str]]] = {
    T.FLOAT: (["Neg", "Abs", "Identity", "Relu"], ["Add", "Sub", "Mul", "Max", "Min"]),
    T.DOUBLE: (["Neg", "Abs", "Identity"], ["Add", "Sub", "Mul", "Max", "Min"]),
    T.FLOAT16: (["Neg", "Abs", "Identity"], ["Add", "Sub", "Mul", "Max", "Min"]),
    T.INT8: (["Neg", "Abs", "Identity"], ["Add", "Sub", "Mul", "Max", "Min"]),
    T.INT16: SIGNED,
    T.INT32: (["Neg", "Abs", "Identity"], ["Add", "Sub", "Mul", "Max", "Min"]),
    T.INT64: (["Neg", "Abs", "Identity"], ["Add", "Sub", "Mul", "Max", "Min"]),
    T.UINT8: (["Abs", "Identity"], ["Add", "Sub", "Mul", "Max", "Min"]),
    T.UINT16: (["Abs", "Identity"], ["Add", "Sub", "Mul"]),
    T.UINT32: (["Abs", "Identity"], ["Add", "Sub", "Mul", "Max", "Min"]),
    T.UINT64: (["Abs", "Identity"], ["Add", "Sub", "Mul", "Max", "Min"]),
    T.BOOL: (["Not", "Identity"], ["And", "Or", "Xor"]),
    T.STRING: (["Identity"], []),
}


def random_array(rng: np.random.Generator, dtype: int, shape: tuple[int, ...]) -> np.ndarray:
    # np.asarray: numpy draws of shape () are scalars, which onnxruntime does not take as tensors.
    return np.asarray(_draw(rng, dtype, shape))


def _draw(rng: np.random.Generator, dtype: int, shape: tuple[int, ...]) -> Any:
    if dtype == T.STRING:
        words = np.array(["", "a", "bb", "ccc", "éé"], dtype=object)
        return np.asarray(rng.choice(words, size=shape), dtype=object)
    if dtype == T.BOOL:
        return rng.integers(0, 2, size=shape).astype(bool)
    np_dtype = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    if np.issubdtype(np_dtype, np.integer):
        info = np.iinfo(np_dtype)
        return rng.integers(max(info.min, -100), min(info.max, 100), size=shape, dtype=np_dtype)
    return (rng.standard_normal(shape) * 10).astype(np_dtype)


@st.composite
def sequence_map_models(draw: st.DrawFn) -> tuple[onnx.ModelProto, dict[str, Any]]:
    dtype = draw(st.sampled_from(sorted(OPS)))
    unary, binary = OPS[dtype]
    n_seq = draw(st.integers(1, 3))
    n_tensor = draw(st.integers(0, 2))
    length = draw(st.integers(0, 4))
    reads_outer = draw(st.booleans())
    wrap_in_if = draw(st.booleans())
    # Uniform element shapes, declared in the body, take the scan-output form of the lowering.
    uniform = draw(st.booleans())

    element_shape = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    params = [f"e{i}" for i in range(n_seq)] + [f"p{i}" for i in range(n_tensor)]
    pool = list(params) + (["outer_w"] if reads_outer else [])
    shapes: dict[str, tuple[int, ...]] = {p: element_shape for p in params if p.startswith("e")}
    shapes.update({p: (1,) for p in params if p.startswith("p")})
    shapes["outer_w"] = ()
    nodes = []
    for i in range(draw(st.integers(0, 4))):
        if binary and draw(st.booleans()):
            op, arity = draw(st.sampled_from(binary)), 2
        else:
            op, arity = draw(st.sampled_from(unary)), 1
        operands = [draw(st.sampled_from(pool)) for _ in range(arity)]
        nodes.append(h.make_node(op, operands, [f"v{i}"]))
        shapes[f"v{i}"] = np.broadcast_shapes(*(shapes[o] for o in operands))
        pool.append(f"v{i}")
    # Body outputs: any value the body defines, body inputs included. (An outer-scope value
    # returned directly has no oracle: onnxruntime and onnx.reference both refuse it; it has its
    # own test in test_sequence_map.py.)
    defined = [name for name in pool if name != "outer_w"]
    outputs = draw(st.lists(st.sampled_from(defined), min_size=1, max_size=3, unique=True))
    body = h.make_graph(
        nodes,
        "random_body",
        [tensor_info(p, dtype) for p in params],
        [tensor_info(o, dtype) for o in outputs],
    )
    node_inputs = [f"s{i}" for i in range(n_seq)] + [f"t{i}" for i in range(n_tensor)]
    node_outputs = [f"out{j}" for j in range(len(outputs))]
    mapping = h.make_node("SequenceMap", node_inputs, node_outputs, body=body, name="random_map")
    graph_inputs = [seq_info(f"s{i}", dtype) for i in range(n_seq)]
    graph_inputs += [tensor_info(f"t{i}", dtype, [1]) for i in range(n_tensor)]
    graph_inputs += [tensor_info("outer_w", dtype, [])] if reads_outer else []
    graph_outputs = [seq_info(o, dtype) for o in node_outputs]
    if wrap_in_if:
        then_g = h.make_graph([mapping], "then", [], graph_outputs)
        else_g = h.make_graph(
            [h.make_node("Identity", ["s0"], [f"else_{o}"]) for o in node_outputs],
            "else",
            [],
            [seq_info(f"else_{o}", dtype) for o in node_outputs],
        )
        main = [
            h.make_node("Constant", [], ["flag"], value=h.make_tensor("fv", T.BOOL, [], [True])),
            h.make_node("If", ["flag"], node_outputs, then_branch=then_g, else_branch=else_g),
        ]
    else:
        main = [mapping]
    model = make_model(main, graph_inputs, graph_outputs)

    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    element_shapes = [
        element_shape
        if uniform
        else tuple(int(d) for d in rng.integers(1, 4, size=rng.integers(0, 3)))
        for _ in range(length)
    ]
    feeds: dict[str, Any] = {
        f"s{i}": [random_array(rng, dtype, shape) for shape in element_shapes] for i in range(n_seq)
    }
    feeds.update({f"t{i}": random_array(rng, dtype, (1,)) for i in range(n_tensor)})
    if reads_outer:
        feeds["outer_w"] = random_array(rng, dtype, ())
    return model, feeds


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequence_map_models())
def test_random_sequence_maps_lower_exactly(case: tuple[onnx.ModelProto, dict[str, Any]]) -> None:
    model, feeds = case
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    assert_equivalent(model, lowered, feeds)
    carried = seqlower.lower(model, passes=[LowerSequenceMap(stack_static=False)])
    assert "SplitToSequence" not in all_op_types(carried)
    assert_equivalent(model, carried, feeds)
