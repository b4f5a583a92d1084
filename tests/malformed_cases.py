"""SequenceMap nodes that cannot be lowered, each with the words its error must contain."""

from __future__ import annotations

from collections.abc import Callable

import onnx
from onnx import TensorProto as T
from onnx import helper as h

from tests.helpers import make_model, parse, seq_info, tensor_info


def body_input_count() -> onnx.ModelProto:
    return parse(
        """
        test (seq(float[]) s) => (seq(float[]) out) {
            [bad_inputs] out = SequenceMap (s) <
                body: graph = body (float[] x, float[] y) => (float[] z) {
                    z = Add (x, y)
                }>
        }
        """,
        check=False,
    )


def body_output_count() -> onnx.ModelProto:
    return parse(
        """
        test (seq(float[]) s) => (seq(float[]) out) {
            [bad_outputs] out = SequenceMap (s) <
                body: graph = body (float[] x) => (float[] z, float[] x) {
                    z = Neg (x)
                }>
        }
        """,
        check=False,
    )


def first_input_is_tensor() -> onnx.ModelProto:
    return parse(
        """
        test (float[2] t) => (seq(float[]) out) {
            [tensor_first] out = SequenceMap (t) <body: graph = body (float[] x) => (float[] z) {
                z = Neg (x)
            }>
        }
        """,
        check=False,
    )


def no_body() -> onnx.ModelProto:
    return parse(
        """
        test (seq(float[]) s) => (seq(float[]) out) {
            [bodyless] out = SequenceMap (s)
        }
        """,
        check=False,
    )


def unknown_input_kind() -> onnx.ModelProto:
    # 'mystery' comes from a custom op nothing can infer: sequence or tensor?
    return onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17, "vendor" : 1]>
        test (seq(float[]) s) => (seq(float[]) out) {
            mystery = vendor.Opaque (s)
            [unknown_kind] out = SequenceMap (s, mystery) <
                body: graph = body (float[] x, float[] m) => (float[] z) {
                    z = Add (x, m)
                }>
        }
        """
    )


def unknown_output_type() -> onnx.ModelProto:
    # onnx.helper, not text: ONNX's text format cannot write a value with no type at all.
    untyped = onnx.TypeProto()
    b = h.make_graph(
        [h.make_node("Opaque", ["x"], ["z"], domain="vendor")],
        "body",
        [tensor_info("x", T.FLOAT)],
        [h.make_value_info("z", untyped)],
    )
    return make_model(
        [
            h.make_node("SequenceMap", ["s"], ["mapped"], body=b, name="unknown_type"),
            h.make_node("Identity", ["mapped"], ["out"]),
        ],
        [seq_info("s")],
        [seq_info("out")],
        extra_opsets=[h.make_opsetid("vendor", 1)],
    )


#: name -> (builder, words the one-line error must contain)
MALFORMED: dict[str, tuple[Callable[[], onnx.ModelProto], list[str]]] = {
    "body_input_count": (body_input_count, ["bad_inputs", "2 input(s)", "1"]),
    "body_output_count": (body_output_count, ["bad_outputs", "2 output(s)"]),
    "first_input_is_tensor": (first_input_is_tensor, ["tensor_first", "must be a sequence"]),
    "no_body": (no_body, ["bodyless", "'body'"]),
    "unknown_input_kind": (unknown_input_kind, ["unknown_kind", "sequence or a tensor"]),
    "unknown_output_type": (unknown_output_type, ["unknown_type", "element type", "unknown"]),
}
