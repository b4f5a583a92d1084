"""Models whose ``If``s choose by the value of a graph input (issue 44, item 5).

Built after a real audio model: an int64 scalar ``mode`` picks a 1-D convolution (rank 3) or a
2-D one over an added axis (rank 4), and a second ``If`` on the same condition reads that
output, squeezing it back in one branch. The first ``If``'s output has no rank both branches
agree on, so OpenVINO refuses the ``Conv`` reading it (``rank().is_static()`` failed) and tract
the ``If`` (``Impossible to unify``), at every value of ``mode``; onnxruntime runs both.
``in_loop`` puts the two ``If``s in a ``Loop`` body stepping a state twice.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper
from onnx import helper as h

__all__ = ["CHANNELS", "audio_like", "feeds"]

CHANNELS = 4


def _weights() -> list[onnx.TensorProto]:
    rng = np.random.default_rng(0)

    def weight(name: str, shape: list[int]) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    return [
        weight("w1d", [8, CHANNELS, 3]),
        weight("w2d", [8, 1, CHANNELS, 3]),
        weight("w_head", [CHANNELS, 8, 1]),
        numpy_helper.from_array(np.array(1, np.int64), "one"),
        numpy_helper.from_array(np.array([1], np.int64), "axis_1"),
        numpy_helper.from_array(np.array([2], np.int64), "axis_2"),
    ]


def _choices(signal: str, out: str) -> list[onnx.NodeProto]:
    """``mode == 1``: a 1-D convolution of ``signal``, else a 2-D one (rank 4); then the head
    convolution, through a squeeze where the rank is 4."""
    untyped = None  # the branches disagree on the rank: nothing to declare
    conv1d = h.make_graph(
        [h.make_node("Conv", [signal, "w1d"], ["c3"], pads=[1, 1], name="conv_1d")],
        "conv_1d_branch",
        [],
        [h.make_tensor_value_info("c3", TensorProto.FLOAT, untyped)],
    )
    conv2d = h.make_graph(
        [
            h.make_node("Unsqueeze", [signal, "axis_1"], ["as_image"], name="as_image"),
            h.make_node("Conv", ["as_image", "w2d"], ["c4"], pads=[0, 1, 0, 1], name="conv_2d"),
        ],
        "conv_2d_branch",
        [],
        [h.make_tensor_value_info("c4", TensorProto.FLOAT, untyped)],
    )
    head = h.make_graph(
        [h.make_node("Conv", ["features", "w_head"], ["head"], name="head_conv")],
        "head_branch",
        [],
        [h.make_tensor_value_info("head", TensorProto.FLOAT, untyped)],
    )
    squeezed_head = h.make_graph(
        [
            h.make_node("Squeeze", ["features", "axis_2"], ["flat"]),
            h.make_node("Relu", ["flat"], ["flat_relu"]),
            h.make_node("Conv", ["flat_relu", "w_head"], ["head_2d"]),
        ],
        "squeezed_head_branch",
        [],
        [h.make_tensor_value_info("head_2d", TensorProto.FLOAT, untyped)],
    )
    return [
        h.make_node("Equal", ["mode", "one"], ["streaming"], name="is_streaming"),
        h.make_node(
            "If",
            ["streaming"],
            ["features"],
            then_branch=conv1d,
            else_branch=conv2d,
            name="choose_conv",
        ),
        h.make_node(
            "If",
            ["streaming"],
            [out],
            then_branch=head,
            else_branch=squeezed_head,
            name="choose_head",
        ),
    ]


def audio_like(*, in_loop: bool = False) -> onnx.ModelProto:
    """The model (module docstring): ``x`` float [1, 4, T] and ``mode`` int64 [] in, ``y``
    float [1, 4, T] out."""
    if in_loop:
        body = h.make_graph(
            [*_choices("state", "next_state")],
            "steps",
            [
                h.make_tensor_value_info("i", TensorProto.INT64, []),
                h.make_tensor_value_info("go", TensorProto.BOOL, []),
                h.make_tensor_value_info("state", TensorProto.FLOAT, [1, CHANNELS, None]),
            ],
            [
                h.make_tensor_value_info("go", TensorProto.BOOL, []),
                h.make_tensor_value_info("next_state", TensorProto.FLOAT, [1, CHANNELS, None]),
            ],
        )
        nodes = [
            h.make_node("Constant", [], ["steps"], value_int=2),
            h.make_node("Loop", ["steps", "", "x"], ["y"], body=body, name="step_twice"),
        ]
    else:
        nodes = _choices("x", "y")
    graph = h.make_graph(
        nodes,
        "audio_like",
        [
            h.make_tensor_value_info("x", TensorProto.FLOAT, [1, CHANNELS, "T"]),
            h.make_tensor_value_info("mode", TensorProto.INT64, []),
        ],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [1, CHANNELS, "T"])],
        initializer=_weights(),
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


def feeds(mode: int | None, length: int = 16) -> dict[str, np.ndarray]:
    """Inputs for ``audio_like``: ``x`` of ``length`` steps, and ``mode`` unless None (a model
    that dropped it)."""
    x = np.random.default_rng(1).standard_normal((1, CHANNELS, length)).astype(np.float32)
    return {"x": x} if mode is None else {"x": x, "mode": np.array(mode, np.int64)}
