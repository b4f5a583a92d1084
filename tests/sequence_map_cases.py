"""SequenceMap models for every situation the lowering promises to handle.

Each builder returns ``(model, feeds)``. ``CASES`` is run through the Python API and the CLI alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnx.parser
from onnx import TensorProto as T
from onnx import helper as h

from tests.helpers import make_model, parse, seq_info, seq_type, tensor_info

F = T.FLOAT
Case = tuple[onnx.ModelProto, dict[str, Any]]


def floats(*shapes: tuple[int, ...], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for shape in shapes]


def body(
    nodes: list[onnx.NodeProto],
    inputs: list[str],
    outputs: list[str],
    *,
    dtype: int = F,
    initializers: list[onnx.TensorProto] | None = None,
    name: str = "body",
) -> onnx.GraphProto:
    return h.make_graph(
        nodes,
        name,
        [tensor_info(i, dtype) for i in inputs],
        [tensor_info(o, dtype) for o in outputs],
        initializers or [],
    )


def multi_io() -> Case:
    model = parse(
        """
        test (seq(float[]) s1, seq(float[]) s2, float[1] t)
            => (seq(float[]) o1, seq(float[]) o2, seq(int64[]) o3) {
            o1, o2, o3 = SequenceMap (s1, s2, t) <
                body: graph = body (float[] a, float[] b, float[] t)
                    => (float[] sum, float[] scaled, int64[] shape) {
                    sum = Add (a, b)
                    scaled = Mul (a, t)
                    shape = Shape (b)
                }>
        }
        """
    )
    return model, {
        "s1": floats((2, 3), (4,)),
        "s2": floats((2, 3), (4,), seed=1),
        "t": np.array([2.5], np.float32),
    }


def sequence_additional_input_of_other_type() -> Case:
    model = parse(
        """
        test (seq(float[]) s, seq(int64[]) ints) => (seq(float[]) out) {
            out = SequenceMap (s, ints) <body: graph = body (float[] x, int64[] i) => (float[] y) {
                i_f = Cast <to: int = 1> (i)
                y = Add (x, i_f)
            }>
        }
        """
    )
    ints = [np.array([1, 2, 3], np.int64), np.array([7], np.int64)]
    return model, {"s": floats((3,), (1,)), "ints": ints}


def same_value_twice() -> Case:
    model = parse(
        """
        test (seq(float[]) s, float t) => (seq(float[]) out) {
            out = SequenceMap (s, s, t, t) <
                body: graph = body (float[] a, float[] b, float[] c, float[] d) => (float[] y) {
                    ab = Add (a, b)
                    cd = Sub (c, d)
                    y = Mul (ab, cd)
                }>
        }
        """
    )
    return model, {"s": floats((2,), (3, 1)), "t": np.array(1.5, np.float32)}


def output_is_body_input() -> Case:
    model = parse(
        """
        test (seq(float[]) s, float[2] t)
            => (seq(float[]) same, seq(float[]) tensors, seq(float[]) negs) {
            same, tensors, negs = SequenceMap (s, t) <
                body: graph = body (float[] x, float[] t) => (float[] x, float[] t, float[] neg) {
                    neg = Neg (x)
                }>
        }
        """
    )
    return model, {"s": floats((2,), (5,)), "t": np.array([1, 2], np.float32)}


def output_is_body_initializer() -> Case:
    model = parse(
        """
        test (seq(float[]) s) => (seq(float[]) ys, seq(float[]) cs) {
            ys, cs = SequenceMap (s) <body: graph = body (float[] x) => (float[] y, float[] c)
                <float[2] c = {4, 5}>
            {
                y = Identity (x)
            }>
        }
        """
    )
    return model, {"s": floats((1,), (2,), (3,))}


def output_is_constant() -> Case:
    model = parse(
        """
        test (seq(float[]) s) => (seq(int32[]) ks) {
            ks = SequenceMap (s) <body: graph = body (float[] x) => (int32[] k) {
                k = Constant <value: tensor = int32[3] kv {1,2,3}> ()
            }>
        }
        """
    )
    return model, {"s": floats((1,), (2,))}


def outer_scope_read() -> Case:
    # The body reads 'w' (a graph input) and 'bias' (an initializer) without listing them.
    model = parse(
        """
        test (seq(float[]) s, float[1] w) => (seq(float[]) out)
            <float[1] bias = {0.25}>
        {
            out = SequenceMap (s) <body: graph = body (float[] x) => (float[] y) {
                xw = Mul (x, w)
                y = Add (xw, bias)
            }>
        }
        """
    )
    return model, {"s": floats((3,), (2, 2)), "w": np.array([3.0], np.float32)}


def body_with_if() -> Case:
    model = parse(
        """
        test (seq(float[]) s) => (seq(float[]) out) {
            out = SequenceMap (s) <body: graph = body (float[] x) => (float[] y) {
                total = ReduceSum <keepdims: int = 0> (x)
                zero = Constant <value: tensor = float z {0}> ()
                positive = Greater (total, zero)
                y = If (positive) <else_branch: graph = else () => (float[] r2) {
                    r2 = Abs (x)
                }, then_branch: graph = then () => (float[] r1) {
                    r1 = Neg (x)
                }>
            }>
        }
        """
    )
    return model, {"s": [np.array([1, 2], np.float32), np.array([-3, 1], np.float32)]}


def body_with_loop() -> Case:
    # Doubles x, n times, inside the SequenceMap body.
    model = parse(
        """
        test (seq(float[]) s, int64 n) => (seq(float[]) out) {
            out = SequenceMap (s) <body: graph = body (float[] x) => (float[] y) {
                y = Loop (n, "", x) <
                    body: graph = doubling (int64 i, bool c, float[] acc)
                        => (bool c_out, float[] acc_out) {
                        c_out = Identity (c)
                        acc_out = Add (acc, acc)
                    }>
            }>
        }
        """
    )
    return model, {"s": floats((2,), (3,)), "n": np.array(3, np.int64)}


def body_with_scan() -> Case:
    # Running sum over the rows of each element.
    model = parse(
        """
        test (seq(float[?,2]) s) => (seq(float[]) finals, seq(float[]) cumsums) {
            finals, cumsums = SequenceMap (s) <
                body: graph = body (float[?,2] x) => (float[] final, float[] rows) {
                    init = Constant <value: tensor = float[2] iv {0,0}> ()
                    final, rows = Scan (init, x) <
                        body: graph = cumsum (float[2] state, float[2] row)
                            => (float[2] state_out, float[2] row_out) {
                        state_out = Add (state, row)
                        row_out = Identity (state_out)
                    }, num_scan_inputs: int = 1>
                }>
        }
        """
    )
    return model, {"s": floats((3, 2), (1, 2), (4, 2))}


def nested_sequence_map() -> Case:
    # The outer body splits each element into rows and maps a row sum over them.
    model = parse(
        """
        test (seq(float[?,?]) s) => (seq(float[]) out) {
            [outer] out = SequenceMap (s) <body: graph = outer_body (float[?,?] x) => (float[] y) {
                rows = SplitToSequence <axis: int = 0, keepdims: int = 0> (x)
                [inner] sums = SequenceMap (rows) <
                    body: graph = inner_body (float[] row) => (float[] row_sum) {
                        row_sum = ReduceSum <keepdims: int = 1> (row)
                    }>
                y = ConcatFromSequence <axis: int = 0> (sums)
            }>
        }
        """
    )
    return model, {"s": floats((3, 2), (2, 5))}


def function_op_in_body() -> Case:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 18]>
        test (seq(float[?,?,3]) images) => (seq(float[]) out) {
            out = SequenceMap (images) <
                body: graph = body (float[?,?,3] x) => (float[4,4,3] y) <int64[2] size = {4, 4}> {
                    y = CenterCropPad <axes: ints = [0, 1]> (x, size)
                }>
        }
        """
    )
    return model, {"images": floats((6, 2, 3), (4, 4, 3), (3, 7, 3))}


def in_if_branch() -> Case:
    model = parse(
        """
        test (seq(float[]) s, bool flag) => (seq(float[]) out) {
            out = If (flag) <else_branch: graph = else () => (seq(float[]) same) {
                same = Identity (s)
            }, then_branch: graph = then () => (seq(float[]) mapped) {
                [in_then] mapped = SequenceMap (s) <
                    body: graph = in_then_body (float[] row) => (float[] row_sum) {
                        row_sum = ReduceSum <keepdims: int = 1> (row)
                    }>
            }>
        }
        """
    )
    return model, {"s": floats((3,), (2,)), "flag": np.array(True)}


def in_loop_body() -> Case:
    # Each iteration maps a row sum over the sequence and inserts the concatenated sums.
    model = parse(
        """
        test (seq(float[]) s, int64 n) => (seq(float[]) out) {
            empty = SequenceEmpty <dtype: int = 1> ()
            out = Loop (n, "", empty) <
                body: graph = loop_body (int64 i, bool c, seq(float[]) acc)
                    => (bool c_out, seq(float[]) acc_out) {
                    [in_loop] sums = SequenceMap (s) <
                        body: graph = in_loop_body (float[] row) => (float[] row_sum) {
                            row_sum = ReduceSum <keepdims: int = 1> (row)
                        }>
                    flat = ConcatFromSequence <axis: int = 0> (sums)
                    acc_out = SequenceInsert (acc, flat)
                    c_out = Identity (c)
                }>
        }
        """
    )
    return model, {"s": floats((3,), (2,)), "n": np.array(2, np.int64)}


def in_scan_body() -> Case:
    model = parse(
        """
        test (float[2,3] x) => (float[2,3] y) {
            y = Scan (x) <body: graph = scan_body (float[3] row) => (float[3] row_out) {
                parts = SplitToSequence <axis: int = 0, keepdims: int = 1> (row)
                [in_scan] sums = SequenceMap (parts) <
                    body: graph = in_scan_body (float[] row) => (float[] row_sum) {
                        row_sum = ReduceSum <keepdims: int = 1> (row)
                    }>
                row_out = ConcatFromSequence <axis: int = 0> (sums)
            }, num_scan_inputs: int = 1>
        }
        """
    )
    return model, {"x": floats((2, 3))[0]}


def deeply_nested() -> Case:
    # main -> If -> Loop -> If -> SequenceMap
    model = parse(
        """
        test (seq(float[]) s, bool flag, int64 n) => (float[2] out)
            <float[2] zeros = {0, 0}>
        {
            out = If (flag) <else_branch: graph = outer_else () => (float[2] z) {
                z = Identity (zeros)
            }, then_branch: graph = outer_then () => (float[2] total) {
                total = Loop (n, "", zeros) <
                    body: graph = loop_body (int64 i, bool c, float[2] acc)
                        => (bool c_out, float[2] acc_out) {
                        picked = If (flag) <
                            else_branch: graph = inner_else () => (seq(float[]) m2) {
                                m2 = Identity (s)
                            }, then_branch: graph = inner_then () => (seq(float[]) m) {
                                [deep] m = SequenceMap (s) <
                                    body: graph = deep_body (float[] row) => (float[] row_sum) {
                                        row_sum = ReduceSum <keepdims: int = 1> (row)
                                    }>
                            }>
                        flat = ConcatFromSequence <axis: int = 0> (picked)
                        acc_out = Add (acc, flat)
                        c_out = Identity (c)
                    }>
            }>
        }
        """
    )
    return model, {"s": floats((3,), (2,)), "flag": np.array(True), "n": np.array(3, np.int64)}


def in_function() -> Case:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17, "custom" : 1]>
        test (seq(float[]) s) => (seq(float[]) out) {
            out = custom.SquareAll (s)
        }
        <domain: "custom", opset_import: ["" : 17]>
        SquareAll (xs) => (squared) {
            squared = SequenceMap (xs) <body: graph = body (float[] x) => (float[] y) {
                y = Mul (x, x)
            }>
        }
        """
    )
    return model, {"s": floats((2,), (3, 3))}


def empty_input_sequence() -> Case:
    model = parse(
        """
        test (seq(float[]) s, int64[1] marker) => (seq(int64[]) out, int64 count) {
            shapes = SequenceMap (s) <body: graph = body (float[] x) => (int64[] shape) {
                shape = Shape (x)
            }>
            out = SequenceInsert (shapes, marker)
            count = SequenceLength (shapes)
        }
        """
    )
    return model, {"s": [], "marker": np.array([42], np.int64)}


def clashing_names() -> Case:
    # Body and outer graph already use the names an expansion would pick, and shadow each other.
    model = parse(
        """
        test (seq(float[]) s, float[1] t) => (seq(float[]) SequenceMap_empty_0) {
            x = Identity (t)
            SequenceMap_empty_0 = SequenceMap (s, x) <
                body: graph = body (float[] x, float[] SequenceMap_length)
                    => (float[] SequenceMap_acc_out_0) {
                    SequenceMap_loop_body_cond_out = Identity (x)
                    SequenceMap_acc_out_0 = Add (SequenceMap_loop_body_cond_out, SequenceMap_length)
                }>
        }
        """
    )
    return model, {"s": floats((2,), (1,)), "t": np.array([10.0], np.float32)}


def untyped_values() -> Case:
    # Neither body outputs nor the node's outputs nor its first input carry a type: inferred.
    untyped = onnx.TypeProto()
    b = h.make_graph(
        [h.make_node("Cast", ["x"], ["y"], to=T.INT32), h.make_node("Identity", ["u"], ["u_out"])],
        "body",
        [h.make_value_info("x", untyped), h.make_value_info("u", untyped)],
        [h.make_value_info("y", untyped), h.make_value_info("u_out", untyped)],
    )
    model = make_model(
        [
            h.make_node("SplitToSequence", ["t"], ["rows"], axis=0, keepdims=0),
            h.make_node("SequenceMap", ["rows", "t"], ["cast_seq", "whole_seq"], body=b),
            h.make_node("Identity", ["cast_seq"], ["cast"]),
            h.make_node("Identity", ["whole_seq"], ["whole"]),
        ],
        [tensor_info("t", F, [3, 2])],
        [seq_info("cast", T.INT32), seq_info("whole")],
    )
    return model, {"t": floats((3, 2))[0] * 10}


CASES: dict[str, Callable[[], Case]] = {
    fn.__name__: fn
    for fn in [
        multi_io,
        sequence_additional_input_of_other_type,
        same_value_twice,
        output_is_body_input,
        output_is_body_initializer,
        output_is_constant,
        outer_scope_read,
        body_with_if,
        body_with_loop,
        body_with_scan,
        nested_sequence_map,
        function_op_in_body,
        in_if_branch,
        in_loop_body,
        in_scan_body,
        deeply_nested,
        in_function,
        empty_input_sequence,
        clashing_names,
        untyped_values,
    ]
}

__all__ = ["CASES", "Case", "body", "floats", "seq_type"]
