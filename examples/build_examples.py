"""Build the bundled example models (run from anywhere: ``python examples/build_examples.py``).

``preprocess.onnx`` is an image-preprocessing model of the kind ONNX exporters write: it maps over a
sequence of differently sized HWC uint8 images, centre-crops or pads each to 64x64 with
``CenterCropPad`` (a function op), scales to [0, 1], makes it CHW, and stacks the batch.
onnxruntime 1.31 cannot run it as written (onnxruntime issue #22100); the lowered model runs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = Path(__file__).resolve().parent
SIZE = 64


def preprocess_model() -> onnx.ModelProto:
    image = helper.make_tensor_value_info("image", TensorProto.UINT8, ["height", "width", 3])
    chw = helper.make_tensor_value_info("chw", TensorProto.FLOAT, [3, SIZE, SIZE])
    body = helper.make_graph(
        [
            helper.make_node("CenterCropPad", ["image", "crop_shape"], ["cropped"], axes=[0, 1]),
            helper.make_node("Cast", ["cropped"], ["as_float"], to=TensorProto.FLOAT),
            helper.make_node("Div", ["as_float", "scale"], ["scaled"]),
            helper.make_node("Transpose", ["scaled"], ["chw"], perm=[2, 0, 1]),
        ],
        "preprocess_one",
        [image],
        [chw],
        initializer=[
            helper.make_tensor("crop_shape", TensorProto.INT64, [2], [SIZE, SIZE]),
            helper.make_tensor("scale", TensorProto.FLOAT, [], [255.0]),
        ],
    )
    images_type = helper.make_sequence_type_proto(
        helper.make_tensor_type_proto(TensorProto.UINT8, ["height", "width", 3])
    )
    graph = helper.make_graph(
        [
            helper.make_node("SequenceMap", ["images"], ["tensors"], body=body),
            helper.make_node("ConcatFromSequence", ["tensors"], ["batch"], axis=0, new_axis=1),
        ],
        "image_preprocessing",
        [helper.make_value_info("images", images_type)],
        [helper.make_tensor_value_info("batch", TensorProto.FLOAT, ["n", 3, SIZE, SIZE])],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 18)],
        ir_version=8,
        producer_name="seqlower-examples",
        doc_string="Centre-crop/pad, scale and stack a batch of differently sized images.",
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def sample_images(seed: int = 0) -> list[np.ndarray]:
    """Three images, smaller and larger than the crop, for trying the model by hand."""
    rng = np.random.default_rng(seed)
    return [
        rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in [(48, 80), (64, 64), (90, 30)]
    ]


def main() -> None:
    # The second copy is package data: `seqlower example` writes it from an installed wheel.
    for path in (
        HERE / "preprocess.onnx",
        HERE.parent / "seqlower" / "examples" / "preprocess.onnx",
    ):
        onnx.save(preprocess_model(), path)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
