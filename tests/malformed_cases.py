"""SequenceMap nodes that cannot be lowered, each with the words its error must contain."""

from __future__ import annotations

from collections.abc import Callable

import onnx
from onnx import TensorProto as T
from onnx import helper as h

from tests.helpers import make_model, seq_info, tensor_info
from tests.sequence_map_cases import body


def body_input_count() -> onnx.ModelProto:
    b = body([h.make_node("Add", ["x", "y"], ["z"])], ["x", "y"], ["z"])
    return make_model(
        [h.make_node("SequenceMap", ["s"], ["out"], body=b, name="bad_inputs")],
        [seq_info("s")],
        [seq_info("out")],
    )


def body_output_count() -> onnx.ModelProto:
    b = body([h.make_node("Neg", ["x"], ["z"])], ["x"], ["z", "x"])
    return make_model(
        [h.make_node("SequenceMap", ["s"], ["out"], body=b, name="bad_outputs")],
        [seq_info("s")],
        [seq_info("out")],
    )


def first_input_is_tensor() -> onnx.ModelProto:
    b = body([h.make_node("Neg", ["x"], ["z"])], ["x"], ["z"])
    return make_model(
        [h.make_node("SequenceMap", ["t"], ["out"], body=b, name="tensor_first")],
        [tensor_info("t", T.FLOAT, [2])],
        [seq_info("out")],
    )


def no_body() -> onnx.ModelProto:
    return make_model(
        [h.make_node("SequenceMap", ["s"], ["out"], name="bodyless")],
        [seq_info("s")],
        [seq_info("out")],
    )


def unknown_input_kind() -> onnx.ModelProto:
    # 'mystery' comes from a custom op nothing can infer: sequence or tensor?
    b = body([h.make_node("Add", ["x", "m"], ["z"])], ["x", "m"], ["z"])
    return make_model(
        [
            h.make_node("Opaque", ["s"], ["mystery"], domain="vendor"),
            h.make_node("SequenceMap", ["s", "mystery"], ["out"], body=b, name="unknown_kind"),
        ],
        [seq_info("s")],
        [seq_info("out")],
        extra_opsets=[h.make_opsetid("vendor", 1)],
    )


def unknown_output_type() -> onnx.ModelProto:
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
