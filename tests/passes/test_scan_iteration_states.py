"""``scan-iteration-states`` (tract's row): a ``Scan`` over a ``Range`` reads its numbers as
``Max(i, counter)``, a counter state stepping as the ``Range`` does: the same numbers, which
tract 0.23.9 cannot move out of the loop."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnx.printer
import onnx_ir as ir
import pytest

import seqlower
from seqlower.passes import ScanIterationStates
from tests.helpers import all_op_types
from tests.runtimes import RuntimeFailure, assert_same, run

# The smallest model that shows it: a Scan over a Range known at load, two ops on each number.
CONSTANT_RANGE = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2] x) => (double[3] y) {
        zero = Constant<value = int64 {0}>()
        three = Constant<value = int64 {3}>()
        one = Constant<value = int64 {1}>()
        r = Range(zero, three, one)
        y = Scan<num_scan_inputs = 1, body = b (int64 i) => (double o) {
            onef = Constant<value = double {1}>()
            c = Cast<to = 11>(i)
            o = Add(c, onef)
        }>(r)
    }
    """
)
X = {"x": np.array([1.0, 2.0], np.float32)}


def test_tract_fails_on_two_ops_over_a_range_known_at_load() -> None:
    """The runtime bug the pass stands for (tract 0.23.9); when a tract runs it, it can go."""
    with pytest.raises(RuntimeFailure, match="substitute"):
        run("tract", CONSTANT_RANGE, X)


# tract 0.23.9 fails the same way when the first op on the numbers is ``Add(i, 1)``, which the
# pass leaves (it takes numbers a one-input op reads): a Loop after peel-first-iteration's peeled
# iteration, or an original Loop reading ``i + 1``. A state, as tract aborts on a Scan of none.
PLUS_ONE_TEXT = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float x) => (float s, float[3] y) {
        zero = Constant<value = int64 {0}>()
        three = Constant<value = int64 {3}>()
        one = Constant<value = int64 {1}>()
        r = Range(zero, three, one)
        s, y = Scan<num_scan_inputs = 1, body = b (float a, int64 i) => (float a2, float o) {
            k = Constant<value = int64 {1}>()
            n = Add(i, k)
            o = Cast<to = 1>(n)
            a2 = Add(a, x)
        }>(x, r)
    }
    """
PLUS_ONE = onnx.parser.parse_model(PLUS_ONE_TEXT)
# The same numbers read as ``Max(i, c)``, the pass's form: tract loads it.
PLUS_ONE_COUNTED = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float x) => (float s, int64 t, float[3] y) {
        zero = Constant<value = int64 {0}>()
        three = Constant<value = int64 {3}>()
        one = Constant<value = int64 {1}>()
        r = Range(zero, three, one)
        s, t, y = Scan<num_scan_inputs = 1, body = b (float a, int64 c, int64 i)
                => (float a2, int64 c2, float o) {
            k = Constant<value = int64 {1}>()
            m = Max(i, c)
            c2 = Add(c, k)
            n = Add(m, k)
            o = Cast<to = 1>(n)
            a2 = Add(a, x)
        }>(x, zero, r)
    }
    """
)


def test_tract_fails_on_a_cast_of_the_number_plus_one() -> None:
    """tract 0.23.9: 'Trying to substitute a 1,F32 by 3,F32', either facts, where onnxruntime
    runs it; casting first then adding 1.0 fails the same; the Max(i, counter) form loads and
    gives the same numbers. When a tract runs it, this fails."""
    feeds = {"x": np.array(0.5, np.float32)}
    expected = run("onnxruntime", PLUS_ONE, feeds)
    np.testing.assert_array_equal(expected[1], [1, 2, 3])
    cast_first = onnx.parser.parse_model(
        PLUS_ONE_TEXT.replace("n = Add(i, k)", "f = Cast<to = 1>(i)")
        .replace("k = Constant<value = int64 {1}>()", "k = Constant<value = float {1}>()")
        .replace("o = Cast<to = 1>(n)", "o = Add(f, k)")
    )
    for model in (PLUS_ONE, cast_first):
        onnx.checker.check_model(model, full_check=True)
        for runtime in ("tract", "tract-symbolic"):
            with pytest.raises(RuntimeFailure, match="substitute a 1,F32 by 3,F32"):
                run(runtime, model, feeds)
    for runtime in ("tract", "tract-symbolic"):
        assert_same(expected, run(runtime, PLUS_ONE_COUNTED, feeds)[::2])


# LoopToScan's form of PyTorch's embedding_bag: the number through an Identity, Reshape(i, [-1]).
RESHAPED = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2] x) => (double[3, 1] y) {
        zero = Constant<value = int64 {0}>()
        three = Constant<value = int64 {3}>()
        one = Constant<value = int64 {1}>()
        r = Range(zero, three, one)
        y = Scan<num_scan_inputs = 1, body = b (int64 i) => (double[1] o) {
            flat = Constant<value = int64[1] {-1}>()
            k = Identity(i)
            s = Reshape(k, flat)
            e = Add(s, one)
            o = Cast<to = 11>(e)
        }>(r)
    }
    """
)


@pytest.mark.parametrize("model", [CONSTANT_RANGE, RESHAPED], ids=["cast", "reshape"])
def test_read_through_a_counter_it_runs_on_tract(model: onnx.ModelProto) -> None:
    lowered = seqlower.lower(model, target="tract")  # proven on tract
    assert "Max" in all_op_types(lowered)
    assert_same(run("onnxruntime", model, X), run("tract", lowered, X))


# A state of its own, a Range of another start and step read as a scan output too, a
# second scanned input: the counter goes after the states, the numbers stay exact.
STEPPED = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N] w) => (float total, int64[M] seen, float[M] rows) {
        zero = Constant<value = float {0}>()
        start = Constant<value = int64 {START}>()
        step = Constant<value = int64 {STEP}>()
        stop = Constant<value = int64 {40}>()
        r = Range(start, stop, step)
        total, seen, rows = Scan<num_scan_inputs = 2, body = b (float acc, int64 i, float v)
            => (float next, int64 s, float row) {
            two = Constant<value = float {2}>()
            j = Cast<to = 1>(i)
            f = Mul(j, two)
            g = Add(f, v)
            next = Add(acc, g)
            s = Identity(i)
            row = Identity(g)
        }>(zero, r, w)
    }
"""


@pytest.mark.parametrize(("start", "step"), [(0, 1), (5, 3), (70, -4), (-7, 2)])
def test_numbers_and_states_are_the_same(start: int, step: int) -> None:
    count = len(range(start, 40, step))
    feeds = {"w": np.linspace(-1, 1, count, dtype=np.float32)}
    text = STEPPED.replace("START", str(start)).replace("STEP", str(step))
    model = onnx.parser.parse_model(text)
    lowered = seqlower.lower(model, passes=["scan-iteration-states"], check=False)
    assert "Max" in all_op_types(lowered)
    want = run("onnxruntime", model, feeds)
    assert_same(want, run("onnxruntime", lowered, feeds))
    assert_same(want, run("tract", lowered, feeds))


def test_integer_scaling_is_left() -> None:
    """tract 0.23.9 runs ``Cast(Mul(i, 2))`` over a Range as written, and fails once the Mul
    reads the counter's Max (it moves the scaling into the state)."""
    text = STEPPED.replace("START", "0").replace("STEP", "1")
    text = text.replace(
        "two = Constant<value = float {2}>()", "two = Constant<value = int64 {2}>()"
    )
    text = text.replace(
        "j = Cast<to = 1>(i)\n            f = Mul(j, two)",
        "j = Mul(i, two)\n            f = Cast<to = 1>(j)",
    )
    model = onnx.parser.parse_model(text)
    step = ScanIterationStates()
    step(ir.serde.deserialize_model(model))
    assert step.rewritten == 0
    feeds = {"w": np.linspace(-1, 1, 40, dtype=np.float32)}
    assert_same(run("onnxruntime", model, feeds), run("tract", model, feeds))


def test_reverse_scans_and_other_inputs_are_left() -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (int64[N] its, int64 n) => (int64[N] y, int64[M] z) {
            zero = Constant<value = int64 {0}>()
            one = Constant<value = int64 {1}>()
            r = Range(zero, n, one)
            y = Scan<num_scan_inputs = 1,
                     body = b (int64 i) => (int64 o) { o = Cast<to = 7>(i) }>(its)
            z = Scan<num_scan_inputs = 1, scan_input_directions = [1],
                     body = b2 (int64 k) => (int64 o2) { o2 = Cast<to = 7>(k) }>(r)
        }
        """
    )
    step = ScanIterationStates()
    step(ir.serde.deserialize_model(model))
    assert step.rewritten == 0


def test_before_opset_12_the_number_is_a_where() -> None:
    """Max takes no integers before opset 12: Where(Less(i, c), c, i) there."""
    text = onnx.printer.to_text(CONSTANT_RANGE).replace('"" : 17', '"" : 11')
    model = onnx.parser.parse_model(text)
    lowered = seqlower.lower(model, target="tract")  # proven on tract
    assert "Max" not in all_op_types(lowered) and "Where" in all_op_types(lowered)
    assert_same(run("onnxruntime", model, X), run("onnxruntime", lowered, X))


def test_scans_inside_loop_bodies_are_left() -> None:
    """tract 0.23.9 carries a nested Scan's states across the outer iterations: a counter
    there would be wrong from the second outer iteration on (``loop_cases``' ``nested``)."""
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2] x) => (double[3, 2] y) {
            zero = Constant<value = int64 {0}>()
            three = Constant<value = int64 {3}>()
            two = Constant<value = int64 {2}>()
            one = Constant<value = int64 {1}>()
            r = Range(zero, three, one)
            y = Scan<num_scan_inputs = 1, body = outer (int64 i) => (double[2] o) {
                q = Range(zero, two, one)
                o = Scan<num_scan_inputs = 1, body = inner (int64 j) => (double p) {
                    c = Cast<to = 11>(j)
                    p = Neg(c)
                }>(q)
            }>(r)
        }
        """
    )
    step = ScanIterationStates()
    step(ir.serde.deserialize_model(model))
    assert step.rewritten == 0
