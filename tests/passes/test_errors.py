"""Nodes that cannot be lowered fail with an error naming the node, and change nothing."""

from __future__ import annotations

import contextlib
import gc

import onnx_ir as ir
import pytest
from onnx import helper as h

import seqlower
from seqlower.errors import InvalidNodeError
from seqlower.passes import LowerSequenceMap
from tests.helpers import seq_info
from tests.malformed_cases import MALFORMED
from tests.sequence_map_cases import body, multi_io


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_node_error_names_the_node(name: str) -> None:
    build, words = MALFORMED[name]
    with pytest.raises(InvalidNodeError) as info:
        seqlower.lower(build())
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)


@pytest.mark.parametrize("name", list(MALFORMED))
def test_failed_pass_leaves_ir_model_untouched(name: str) -> None:
    model = MALFORMED[name][0]()
    # A valid SequenceMap before the bad one must not be lowered either: all or nothing.
    good_body = body([h.make_node("Neg", ["gx"], ["gy"])], ["gx"], ["gy"])
    model.graph.node.insert(0, h.make_node("SequenceMap", ["good_s"], ["good_out"], body=good_body))
    model.graph.input.append(seq_info("good_s"))
    model.graph.output.append(seq_info("good_out"))
    ir_model = ir.serde.deserialize_model(model)
    before = ir.serde.serialize_model(ir_model).SerializeToString()
    with pytest.raises(InvalidNodeError):
        LowerSequenceMap()(ir_model)
    assert ir.serde.serialize_model(ir_model).SerializeToString() == before


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("fails", [True, False])
def test_lower_restores_the_garbage_collector(enabled: bool, fails: bool) -> None:
    """lower() pauses Python's cyclic collector while it works; the caller's setting comes
    back afterwards, also when lowering fails."""
    model = MALFORMED[next(iter(MALFORMED))][0]() if fails else multi_io()[0]
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        with pytest.raises(InvalidNodeError) if fails else contextlib.nullcontext():
            seqlower.lower(model)
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()
