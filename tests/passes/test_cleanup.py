"""seqlower's dead-node removal makes exactly the changes onnx_ir's RemoveUnusedNodesPass makes.

It is a faster copy (one schema lookup per op and opset), so the test is the comparison: both
run on copies of the same models, the written protos must be byte-identical.
"""

from __future__ import annotations

import onnx
import onnx.parser
import onnx_ir as ir
import pytest
from onnx_ir.passes.common import RemoveUnusedNodesPass

import seqlower
from seqlower._cleanup import RemoveUnusedNodes
from tests import loop_cases, sequence_free_cases, sequence_map_cases

#: Dead nodes in the main graph, an If branch and a function; unused optional outputs (Dropout's
#: mask, BatchNormalization's running stats in training and inference mode, a Loop's outputs:
#: variadic, kept), trailing omitted inputs, an unused initializer, a node of another domain.
DEAD = onnx.parser.parse_model(
    """<ir_version: 8, opset_import: ["" : 15, "local" : 1, "other" : 1]>
g (float[2, 3, 4, 5] x, bool c) => (float[2, 3, 4, 5] y, float[2, 3, 4, 5] z, float[] w)
    <float[3] unused = {1.0, 2.0, 3.0}> {
    s = Constant<value = float[3] {1.0, 1.0, 1.0}>()
    b = Constant<value = float[3] {0.0, 0.0, 0.0}>()
    dead = Relu(x)
    deader = Neg(dead)
    d, mask = Dropout(x)
    clipped = Clip(d, , )
    y, mean_out, var_out = BatchNormalization<training_mode = 1>(clipped, s, b, b, s)
    z, mean2, var2 = BatchNormalization<training_mode = 0>(x, s, b, b, s)
    w = If(c) <then_branch = t () => (float[] tw) {
        tdead = Sigmoid(x)
        tw = Identity(x)
    }, else_branch = e () => (float[] ew) {
        ew = local.f(x)
    }>
    o = other.Thing(x)
}
<domain: "local", opset_import: ["" : 15]>
f (a) => (r) {
    fdead = Abs(a)
    r, fmask = Dropout(a)
}
"""
)


def corpus() -> list[tuple[str, onnx.ModelProto]]:
    models = [("dead", DEAD)]
    for module in (sequence_map_cases, sequence_free_cases, loop_cases):
        for name, make in module.CASES.items():
            made = make() if callable(make) else make
            models.append((f"{module.__name__.rsplit('.', 1)[-1]}/{name}", made[0]))
    return models


def _removed(model: ir.Model, pass_: ir.passes.PassBase) -> tuple[bytes, bool]:
    copy = model.clone()
    result = pass_(copy)
    return ir.serde.serialize_model(copy).SerializeToString(), result.modified


@pytest.mark.parametrize("name, proto", corpus(), ids=[name for name, _ in corpus()])
def test_same_as_onnx_ir(name: str, proto: onnx.ModelProto) -> None:
    """On the model as written and lowered without cleanup (where the lowerings leave dead
    nodes)."""
    models = [ir.serde.deserialize_model(proto)]
    try:
        lowered = seqlower.lower(proto, cleanup=False)
    except seqlower.SeqlowerError:
        lowered = None
    if lowered is not None:
        models.append(ir.serde.deserialize_model(lowered))
    for model in models:
        assert _removed(model, RemoveUnusedNodes()) == _removed(model, RemoveUnusedNodesPass())


def test_dead_model_changes() -> None:
    """The comparison above compares something: the hand-made model does lose nodes."""
    model = ir.serde.deserialize_model(DEAD)
    RemoveUnusedNodes()(model)
    ops = [node.op_type for node in model.graph]
    assert "Relu" not in ops and "Neg" not in ops and "unused" not in model.graph.initializers
    dropout = next(node for node in model.graph if node.op_type == "Dropout")
    assert len(dropout.outputs) == 1
