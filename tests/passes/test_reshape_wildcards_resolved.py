"""reshape-wildcards-resolved (target iree): a Reshape to a run-time shape holding a -1 gets the
-1 (and its 0s) computed before it, which IREE 3.13.0 runs (it fails on the -1:
tests/targets/test_iree.py). Exact against onnxruntime for any sizes, 0s included."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import seqlower
from tests.helpers import ort_run


def _model(parts: str, allowzero: int = 0) -> onnx.ModelProto:
    """``x`` flattened to ``[-1, C]``, then back by ``Concat(PARTS)`` (``t``: ``x``'s axis 1)."""
    dims = ", ".join(f"d{k}" for k in range(len(parts.split(","))))
    model = onnx.parser.parse_model(f"""
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[B, T, C] x) => (float[{dims}] y) {{
            s = Shape(x)
            st = Constant<value = int64[1] {{1}}>()
            en = Constant<value = int64[1] {{2}}>()
            t = Slice(s, st, en)
            c = Slice(s, en, en)
            cl = Constant<value = int64[1] {{3}}>()
            cc = Slice(s, en, cl)
            m1 = Constant<value = int64[1] {{-1}}>()
            z = Constant<value = int64[1] {{0}}>()
            back = Concat<axis = 0>({parts})
            flat = Concat<axis = 0>(m1, cc)
            r = Reshape(x, flat)
            y = Reshape<allowzero = {allowzero}>(r, back)
        }}""")
    onnx.checker.check_model(model, full_check=True)
    return model


PARTS = ["m1, t, cc", "t, m1, cc", "z, m1", "m1, z", "m1"]


@settings(deadline=None, max_examples=30)
@given(
    parts=st.sampled_from(PARTS),
    b=st.integers(1, 4),
    t=st.integers(1, 5),
    c=st.integers(1, 3),
)
def test_exact_for_any_sizes(parts: str, b: int, t: int, c: int) -> None:
    model = _model(parts)
    lowered = seqlower.lower(model, ["reshape-wildcards-resolved"])
    assert isinstance(lowered, onnx.ModelProto)
    x = np.arange(b * t * c, dtype=np.float32).reshape(b, t, c)
    want, have = ort_run(model, {"x": x}), ort_run(lowered, {"x": x})
    assert want[0].shape == have[0].shape
    np.testing.assert_array_equal(want[0], have[0])


@pytest.mark.parametrize("parts", PARTS)
def test_the_shape_is_computed_by_where(parts: str) -> None:
    """The last Reshape's shape is the Where that puts the computed -1 in (IREE runs that)."""
    lowered = seqlower.lower(_model(parts), ["reshape-wildcards-resolved"])
    assert isinstance(lowered, onnx.ModelProto)
    producers = {o: n for n in lowered.graph.node for o in n.output}
    reshape = [n for n in lowered.graph.node if n.op_type == "Reshape"][-1]
    assert producers[reshape.input[1]].op_type == "Where"


def test_a_shape_with_no_constant_minus_one_stays() -> None:
    lowered = seqlower.lower(_model("t, cc, t"), ["reshape-wildcards-resolved"])
    assert isinstance(lowered, onnx.ModelProto)
    reshape = [n for n in lowered.graph.node if n.op_type == "Reshape"][-1]
    assert reshape.input[1] == "back"
