"""Lowered ReverseSequence runs, and matches onnxruntime's native kernel, on every runtime CI has.

tract has no ReverseSequence, so the lowered model is what a tract user runs; OpenVINO has a
native kernel, and the lowered model must match there too. tract is run twice: with concrete
input shapes (what deployments set) and with the model's declared, symbolic ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.parser
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx.backend.test.case.node import collect_testcases

import seqlower
from seqlower.errors import InvalidNodeError
from seqlower.passes import LowerReverseSequence
from tests.helpers import IR_VERSION, all_nodes, all_op_types, parse
from tests.runtimes import RuntimeFailure, assert_same, require, run

RUNTIMES = ["onnxruntime", "openvino", "tract", "tract-symbolic"]
# What the default forms must never contain: ops that onnx2torch gets wrong (NonZero, CumSum),
# converts only partly (Reshape with allowzero=1) or not at their latest version (1.5.15 has no
# LessOrEqual-16 or GreaterOrEqual-16), and the row Flatten tract cannot solve for symbolic
# shapes.
NOT_PORTABLE = {"NonZero", "CumSum", "Flatten", "ReverseSequence", "LessOrEqual", "GreaterOrEqual"}


def native(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return run("onnxruntime", model, feeds)


def lowered_forms(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, int]]:
    """The lowered model, and how many nodes took each form."""
    import onnx_ir as ir

    ir_model = ir.serde.deserialize_model(model)
    lowering = LowerReverseSequence()
    lowering(ir_model)
    out = seqlower.lower(model)
    onnx.checker.check_model(out, full_check=True)
    assert [(o.domain, o.version) for o in out.opset_import] == [
        (o.domain, o.version) for o in model.opset_import
    ]
    ops = all_op_types(out)
    assert not set(ops) & NOT_PORTABLE, ops
    for node in all_nodes(out):
        if node.op_type == "Reshape":
            assert all(a.name != "allowzero" or a.i == 0 for a in node.attribute), node
    return out, lowering.forms


def assert_runs_everywhere(
    model: onnx.ModelProto,
    feeds: dict[str, np.ndarray],
    runtimes: list[str] = RUNTIMES,
) -> None:
    lowered, _ = lowered_forms(model)
    want = native(model, feeds)
    for runtime in runtimes:
        try:
            got = run(runtime, lowered, feeds)
        except RuntimeFailure as e:
            pytest.fail(f"{runtime} refused the lowered model: {e}")
        assert_same(want, got)


# ------------------------------------------------------------------- what tf2onnx writes

# tf.reverse(x, [axis]) as tf2onnx converts it: Transpose the axis to the front, lengths the
# full axis for every entry of the (new) axis 1, ReverseSequence, Transpose back.
TF_REVERSE = """
g (float[N, T, C] x) => (float[N, T, C] y) {
    xt = Transpose<perm = [1, 0, 2]>(x)
    one = Constant<value = int64[1] {1}>()
    axis = Constant<value = int64[1] {1}>()
    shape_t = Shape(xt)
    batch = Gather(shape_t, one)
    shape_x = Shape(x)
    time = Gather(shape_x, axis)
    lens = Expand(time, batch)
    r = ReverseSequence<batch_axis = 1, time_axis = 0>(xt, lens)
    y = Transpose<perm = [1, 0, 2]>(r)
}
"""

# The backward half of a Keras Bidirectional layer, time-major, with int32 lengths cast back.
TF_BIDIRECTIONAL = """
g (float[T, N, C] x) => (float[T, N, C] y) {
    zero = Constant<value = int64[1] {0}>()
    one = Constant<value = int64[1] {1}>()
    shape = Shape(x)
    time = Gather(shape, zero)
    time32 = Cast<to = 6>(time)
    batch = Gather(shape, one)
    lens32 = Expand(time32, batch)
    lens = Cast<to = 7>(lens32)
    act = Neg(x)
    r = ReverseSequence<batch_axis = 1, time_axis = 0>(act, lens)
    y = Abs(r)
}
"""


@pytest.mark.parametrize("text", [TF_REVERSE, TF_BIDIRECTIONAL], ids=["reverse", "bidirectional"])
@pytest.mark.parametrize("shape", [(3, 5, 2), (1, 1, 1), (2, 0, 3), (0, 4, 2)])
def test_full_length_reversal_is_one_slice(text: str, shape: tuple[int, ...]) -> None:
    model = parse(text)
    lowered, forms = lowered_forms(model)
    assert forms == {"slice": 1}
    assert all_op_types(lowered).count("Slice") == 1
    feeds = {"x": np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    # tract cannot analyse a negative-step Slice of a symbolic axis ("Streaming dimensions
    # with strides are not supported"), nor of an empty one: with concrete shapes, as
    # deployments set them, it runs (both limits are in the README).
    time = shape[1] if text == TF_REVERSE else shape[0]
    runtimes = ["onnxruntime", "openvino", "tract"] if time else ["onnxruntime", "openvino"]
    assert_runs_everywhere(model, feeds, runtimes)


def test_full_length_slice_on_symbolic_tract_is_a_known_limit() -> None:
    """If this starts passing, tract learnt negative strides: drop the README's caveat."""
    lowered, _ = lowered_forms(parse(TF_BIDIRECTIONAL))
    with pytest.raises(RuntimeFailure, match=r"StridedSlice|Slice"):
        run("tract-symbolic", lowered, {"x": np.zeros((3, 2, 2), np.float32)})


def test_full_length_constant_lengths_with_static_dims_is_one_slice() -> None:
    model = parse(
        """
        g (float[4, 3, 2] x) => (float[4, 3, 2] y) {
            lens = Constant<value = int64[3] {4, 4, 4}>()
            y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
        }
        """
    )
    _, forms = lowered_forms(model)
    assert forms == {"slice": 1}
    assert_runs_everywhere(model, {"x": np.arange(24, dtype=np.float32).reshape(4, 3, 2)})


# The lengths look full-length but are not provably so: each must keep the general form and
# match the native kernel where the guess would be wrong.
NOT_PROVEN = {
    # the time length of another tensor
    "other_tensor": """
        g (float[T, N, C] x, float[U, N] other) => (float[T, N, C] y) {
            zero = Constant<value = int64[1] {0}>()
            one = Constant<value = int64[1] {1}>()
            other_shape = Shape(other)
            time = Gather(other_shape, zero)
            shape = Shape(x)
            batch = Gather(shape, one)
            lens = Expand(time, batch)
            y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
        }""",
    # the batch axis's size used as the length
    "wrong_axis": """
        g (float[T, N, C] x) => (float[T, N, C] y) {
            one = Constant<value = int64[1] {1}>()
            shape = Shape(x)
            n = Gather(shape, one)
            lens = Expand(n, n)
            y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
        }""",
    # full length minus one
    "shorter": """
        g (float[T, N, C] x) => (float[T, N, C] y) {
            zero = Constant<value = int64[1] {0}>()
            one = Constant<value = int64[1] {1}>()
            shape = Shape(x)
            full = Gather(shape, zero)
            time = Sub(full, one)
            batch = Gather(shape, one)
            lens = Expand(time, batch)
            y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
        }""",
}


@pytest.mark.parametrize("name", sorted(NOT_PROVEN))
def test_lengths_not_proven_full_keep_the_general_form(name: str) -> None:
    model = parse(NOT_PROVEN[name])
    _, forms = lowered_forms(model)
    assert forms == {"computed": 1}
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal((4, 4, 2)).astype(np.float32)}
    if name == "other_tensor":
        feeds["other"] = np.zeros((3, 4), np.float32)  # T = 3 here, 4 for x
    assert_runs_everywhere(model, feeds)


# ------------------------------------------------------------------ the general forms


def count_checks(model: onnx.ModelProto) -> int:
    """The lengths-count checks of a lowered model (one per lengths part that computes one)."""
    return sum("fails_unless_one_length_per_batch_entry" in n.name for n in all_nodes(model))


def general_model(
    dtype: str,
    time_axis: int,
    lens_kind: str,
    opset: int = 17,
    static: bool = False,
    static_slice: bool = False,
) -> str:
    """ReverseSequence with lengths from an input, an int32 input cast (tf.reverse_sequence),
    or a constant; ``static_slice``: time and batch symbolic, the slice size static (as
    exporters declare features: the row ``Gather`` form)."""
    inner = "2" if static_slice else "C"
    dims = "4, 3, 2" if static else f"T, N, {inner}"
    if time_axis == 1:
        dims = "3, 4, 2" if static else f"N, T, {inner}"
    lens_in = {"input": ", int64[N] lens", "int32": ", int32[N] lens32", "constant": ""}[lens_kind]
    lens_node = {
        "input": "",
        "int32": "lens = Cast<to = 7>(lens32)",
        "constant": "lens = Constant<value = int64[3] {4, 0, 2}>()",
    }[lens_kind]
    return f"""
        g ({dtype}[{dims}] x{lens_in}) => ({dtype}[{dims}] y) {{
            {lens_node}
            y = ReverseSequence<batch_axis = {1 - time_axis}, time_axis = {time_axis}>(x, lens)
        }}"""


def feeds_for(
    dtype: str, time_axis: int, lens_kind: str, lens: list[int], shape: tuple[int, int, int]
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    np_dtype = {"float": np.float32, "int64": np.int64, "bool": np.bool_, "uint8": np.uint8}[dtype]
    x = (rng.integers(0, 100, shape) if dtype != "float" else rng.standard_normal(shape)).astype(
        np_dtype
    )
    feeds = {"x": x}
    if lens_kind == "input":
        feeds["lens"] = np.array(lens, np.int64)
    elif lens_kind == "int32":
        feeds["lens32"] = np.array(lens, np.int32)
    return feeds


@pytest.mark.parametrize("dtype", ["float", "int64", "uint8"])
@pytest.mark.parametrize("time_axis", [0, 1])
@pytest.mark.parametrize("lens_kind", ["input", "int32", "constant"])
@pytest.mark.parametrize("static", [False, True])
def test_general_form_runs_everywhere(
    dtype: str, time_axis: int, lens_kind: str, static: bool
) -> None:
    model = parse(general_model(dtype, time_axis, lens_kind, static=static))
    _, forms = lowered_forms(model)
    # Constant lengths on a static time axis need no index computed at run time; a static
    # slice shape takes the row Gather, a symbolic one GatherND.
    general = "row_gather" if static else "computed"
    assert forms == {"constant" if static and lens_kind == "constant" else general: 1}
    shape = (4, 3, 2) if time_axis == 0 else (3, 4, 2)
    assert_runs_everywhere(model, feeds_for(dtype, time_axis, lens_kind, [4, 0, 2], shape))


@pytest.mark.parametrize("dtype", ["float", "int64", "uint8", "bool", "double"])
@pytest.mark.parametrize("time_axis", [0, 1])
@pytest.mark.parametrize("lens_kind", ["input", "int32", "constant"])
def test_row_gather_runs_everywhere(dtype: str, time_axis: int, lens_kind: str) -> None:
    """Time and batch symbolic, the slice size static (as exporters declare features): one
    ``Gather`` of whole slices from the input seen as [T*B, 2] rows, its index int32 behind a
    check that every row number fits (the sizes are not static); time-major, small slices, a
    ``GatherND`` of the same rows (int64 index, the same check)."""
    model = parse(general_model(dtype, time_axis, lens_kind, static_slice=True))
    lowered, forms = lowered_forms(model)
    assert forms == {"row_gather": 1}
    ops = all_op_types(lowered)
    gather = "GatherND" if time_axis == 0 else "Gather"
    assert lowered.graph.node[-1].op_type == gather, ops
    assert ops.count("GatherND") == (time_axis == 0) and "Flatten" not in ops, ops
    names = [node.name for node in lowered.graph.node]
    assert any("fails_unless_index_fits_int32" in name for name in names), names
    shape = (4, 3, 2) if time_axis == 0 else (3, 4, 2)
    np_dtype = {"bool": np.bool_, "double": np.float64}.get(dtype)
    feeds = feeds_for("float" if np_dtype else dtype, time_axis, lens_kind, [4, 0, 2], shape)
    if np_dtype is not None:
        feeds["x"] = (feeds["x"] > 0) if dtype == "bool" else feeds["x"].astype(np_dtype)
    assert_runs_everywhere(model, feeds)


@pytest.mark.parametrize("time_axis", [0, 1])
def test_a_static_empty_axis_keeps_gathernd(time_axis: int) -> None:
    """OpenVINO 2026.4.1 dies of SIGFPE compiling a Gather along a static axis of size 0 (a
    hypothesis case found it): such a node keeps GatherND, which it runs."""
    dims = "0, 2, 1, 2" if time_axis == 0 else "2, 0, 1, 2"
    model = parse(f"""
        g (float[{dims}] x, int64[2] lens) => (float[{dims}] y) {{
            y = ReverseSequence<batch_axis = {1 - time_axis}, time_axis = {time_axis}>(x, lens)
        }}""")
    _, forms = lowered_forms(model)
    assert forms == {"computed": 1}
    shape = (0, 2, 1, 2) if time_axis == 0 else (2, 0, 1, 2)
    feeds = {"x": np.zeros(shape, np.float32), "lens": np.array([0, 0], np.int64)}
    assert_runs_everywhere(model, feeds)


@pytest.mark.parametrize("time_axis", [0, 1])
def test_row_gather_refuses_row_numbers_past_int32(time_axis: int) -> None:
    """2**31 rows or more would wrap the int32 index: the check fails instead. The sizes are
    static here, so the check is made of constants alone: run it by itself (no such tensor is
    allocated), as the part of the model that computes the stride it guards."""
    dims = "65536, 32768, 2" if time_axis == 0 else "32768, 65536, 2"
    model = parse(f"""
        g (float[{dims}] x, int64[32768] lens) => (float[{dims}] y) {{
            y = ReverseSequence<batch_axis = {1 - time_axis}, time_axis = {time_axis}>(x, lens)
        }}""")
    lowered, forms = lowered_forms(model)
    assert forms == {"row_gather": 1}
    stride = next(n for n in lowered.graph.node if n.output[0].endswith("_stride"))
    producers = {out: index for index, node in enumerate(lowered.graph.node) for out in node.output}
    needed: set[int] = set()
    todo = [producers[stride.output[0]]]
    while todo:
        index = todo.pop()
        needed.add(index)
        todo += [producers[name] for name in lowered.graph.node[index].input if name in producers]
    needed_nodes = [lowered.graph.node[index] for index in sorted(needed)]
    assert {node.op_type for node in needed_nodes} <= {"Constant", "Mul", "Div", "Gather", "Add"}
    out = onnx.helper.make_tensor_value_info(stride.output[0], onnx.TensorProto.INT64, None)
    guard = onnx.helper.make_model(
        onnx.helper.make_graph(needed_nodes, "guard", [], [out]),
        opset_imports=list(lowered.opset_import),
        ir_version=IR_VERSION,
    )
    with pytest.raises(RuntimeFailure, match="fails_unless_index_fits_int32"):
        run("onnxruntime", guard, {})
    # Static sizes that fit need no check.
    lowered, _ = lowered_forms(parse(general_model("float", time_axis, "input", static=True)))
    assert not any("int32" in node.name for node in lowered.graph.node)


@pytest.mark.parametrize("opset", [11, 12, 13, 14, 15, 16, 17, 18, 21, 26])
@pytest.mark.parametrize("time_axis", [0, 1])
@pytest.mark.parametrize("static_slice", [False, True])
def test_every_opset_runs_everywhere(opset: int, time_axis: int, static_slice: bool) -> None:
    model = parse(
        general_model("float", time_axis, "input", static_slice=static_slice), opset=opset
    )
    shape = (4, 3, 2) if time_axis == 0 else (3, 4, 2)
    runtimes = RUNTIMES if opset <= 21 else ["onnxruntime"]  # OpenVINO/tract read up to ~21
    assert_runs_everywhere(
        model, feeds_for("float", time_axis, "input", [1, 4, 3], shape), runtimes
    )


@pytest.mark.parametrize("opset", [11, 14])
def test_before_opset_15_one_shape_of_the_input(opset: int) -> None:
    """Without Shape's start/end, every dimension the index reads slices one Shape of x."""
    lowered = seqlower.lower(parse(general_model("float", 0, "input"), opset=opset))
    shapes = [n for n in all_nodes(lowered) if n.op_type == "Shape" and n.input[0] == "x"]
    assert len(shapes) == 1, shapes


def test_opset_10_keeps_the_row_form() -> None:
    """Opset 10 has no GatherND or Range: the row Gather with a NonZero stand-in (documented as
    not portable to tract/onnx2torch)."""
    model = parse(general_model("float", 0, "input"), opset=10)
    import onnx_ir as ir

    lowering = LowerReverseSequence()
    lowering(ir.serde.deserialize_model(model))
    assert lowering.forms == {"rows": 1}
    lowered = seqlower.lower(model)
    feeds = feeds_for("float", 0, "input", [1, 4, 3], (4, 3, 2))
    assert_same(native(model, feeds), run("onnxruntime", lowered, feeds))


@pytest.mark.parametrize("name", ["test_reversesequence_time", "test_reversesequence_batch"])
def test_onnx_conformance_cases_run_everywhere(name: str) -> None:
    (case,) = [c for c in collect_testcases() if c.name == name]
    model = case.model
    model.ir_version = IR_VERSION
    for inputs, _ in case.data_sets:
        feeds = {i.name: np.asarray(v) for i, v in zip(model.graph.input, inputs, strict=True)}
        assert_runs_everywhere(model, feeds)


@st.composite
def cases(draw: st.DrawFn) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    time_axis = draw(st.integers(0, 1))
    time = draw(st.integers(0, 5))
    batch = draw(st.integers(1, 4))
    rest = draw(st.lists(st.integers(0, 3), min_size=1, max_size=2))
    lens_kind = draw(st.sampled_from(["input", "int32", "constant"]))
    lens = draw(st.lists(st.integers(0, time), min_size=batch, max_size=batch))
    static = draw(st.booleans())
    shape = (time, batch, *rest) if time_axis == 0 else (batch, time, *rest)
    names = ["T", "N"] if time_axis == 0 else ["N", "T"]
    decl = [str(d) for d in shape] if static else [*names, *(f"R{i}" for i in range(len(rest)))]
    lens_in = {"input": f", int64[{batch}] lens", "int32": f", int32[{batch}] lens32"}
    lens_node = {
        "int32": "lens = Cast<to = 7>(lens32)",
        "constant": f"lens = Constant<value = int64[{batch}] {{{', '.join(map(str, lens))}}}>()",
    }
    dims = ", ".join(decl)
    text = f"""
        g (float[{dims}] x{lens_in.get(lens_kind, "")}) => (float[{dims}] y) {{
            {lens_node.get(lens_kind, "")}
            y = ReverseSequence<batch_axis = {1 - time_axis}, time_axis = {time_axis}>(x, lens)
        }}"""
    model = parse(text)
    feeds = {"x": np.arange(np.prod(shape), dtype=np.float32).reshape(shape)}
    if lens_kind == "input":
        feeds["lens"] = np.array(lens, np.int64)
    elif lens_kind == "int32":
        feeds["lens32"] = np.array(lens, np.int32)
    return model, feeds


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_random_cases_run_everywhere(case: tuple[onnx.ModelProto, dict[str, np.ndarray]]) -> None:
    model, feeds = case
    runtimes = RUNTIMES
    if feeds["x"].size == 0:  # a Slice of an empty axis is beyond tract (see the README)
        runtimes = ["onnxruntime", "openvino"]
    assert_runs_everywhere(model, feeds, runtimes)


# ------------------------------------------------------------------ sharing the index


def test_nodes_with_the_same_lengths_share_one_index() -> None:
    """A bidirectional stack reverses twice per layer with the same lengths."""
    model = parse(
        """
        g (float[T, N, C] x, int64[N] lens) => (float[T, N, C] y) {
            r1 = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
            h = Neg(r1)
            r2 = ReverseSequence<batch_axis = 1, time_axis = 0>(h, lens)
            h2 = Add(r2, x)
            r3 = ReverseSequence<batch_axis = 1, time_axis = 0>(h2, lens)
            y = Add(r3, x)
        }"""
    )
    lowered, forms = lowered_forms(model)
    assert forms == {"computed": 3}
    ops = all_op_types(lowered)
    assert ops.count("GatherND") == 3
    assert ops.count("Range") == 3, ops  # one index: valid lengths, steps, batches
    feeds = {
        "x": np.random.default_rng(3).standard_normal((5, 3, 2)).astype(np.float32),
        "lens": np.array([5, 0, 3], np.int64),
    }
    assert_runs_everywhere(model, feeds)


def test_different_dims_do_not_share() -> None:
    model = parse(
        """
        g (float[T, N, C] x, float[U, N, C] z, int64[N] lens)
            => (float[T, N, C] y, float[U, N, C] w) {
            y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
            w = ReverseSequence<batch_axis = 1, time_axis = 0>(z, lens)
        }"""
    )
    lowered, _ = lowered_forms(model)
    assert all_op_types(lowered).count("Range") == 6
    rng = np.random.default_rng(4)
    feeds = {
        "x": rng.standard_normal((5, 3, 2)).astype(np.float32),
        "z": rng.standard_normal((3, 3, 2)).astype(np.float32),
        "lens": np.array([3, 0, 2], np.int64),
    }
    assert_runs_everywhere(model, feeds)


def stack_model(time_axis: int, inner: str, between: str) -> onnx.ModelProto:
    """Two reversals with the same lengths and batch axis, the second of a value whose time
    length no proof relates to the first's (as after a Loop)."""
    lead = "T, N" if time_axis == 0 else "N, T"
    attrs = f"batch_axis = {1 - time_axis}, time_axis = {time_axis}"
    return parse(
        f"""
        g (float[{lead}{inner}] x, int64[N] lens, int64[1] ends) => (float[?, ?{inner}] y) {{
            axis = Constant<value = int64[1] {{{time_axis}}}>()
            start = Constant<value = int64[1] {{0}}>()
            r1 = ReverseSequence<{attrs}>(x, lens)
            a = Add(r1, x)
            {between.format(axis=time_axis)}
            y = ReverseSequence<{attrs}>(h, lens)
        }}"""
    )


JOINED = "h = Concat<axis = {axis}>(a, x)"  # twice as long
CUT = "h = Slice(a, start, ends, axis)"  # as long as ends says


def stack_feeds(time_axis: int, inner: bool, lens: list[int], end: int = 5) -> dict[str, Any]:
    shape = (5, len(lens)) if time_axis == 0 else (len(lens), 5)
    x = np.random.default_rng(8).standard_normal((*shape, 2)[: 3 if inner else 2])
    return {
        "x": x.astype(np.float32),
        "lens": np.array(lens, np.int64),
        "ends": np.array([end], np.int64),
    }


@pytest.mark.parametrize("time_axis", [0, 1])
@pytest.mark.parametrize("inner", [", C", ""], ids=["slices", "one_per_step"])
def test_unrelated_time_lengths_share_the_lengths_part(time_axis: int, inner: str) -> None:
    """Only the time-dependent part of the index is computed per node: the count check and the
    batch coordinates once (one batches Range, a valid-lengths and a steps Range per node)."""
    model = stack_model(time_axis, inner, JOINED)
    lowered, forms = lowered_forms(model)
    assert forms == {("computed" if inner else "elements"): 2}
    ops = all_op_types(lowered)
    assert ops.count("Range") == 5, ops
    assert count_checks(lowered) == 1  # one count check (a symbolic name proves nothing)
    for lens in ([5, 0, 3], [1, 1, 0], [0, 0, 0]):
        assert_runs_everywhere(model, stack_feeds(time_axis, bool(inner), lens))


def test_a_cut_stack_shares_one_lengths_part() -> None:
    """The shape of ``benchmarks/reverse_sequence_load.py``'s worst case: each layer's output is
    cut along time, then read by the next layer's reversal through an ``Add``. The batch axis
    is proven through every cut (the ``Slice``'s rank included), so one lengths part serves all
    three reversals."""
    model = parse(
        """
        g (float[T, N, C] x, int64[N] lens, int64[1] ends) => (float[?, ?, C] y) {
            zero = Constant<value = int64[1] {0}>()
            r0 = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
            h0 = Slice(r0, zero, ends, zero)
            r1 = ReverseSequence<batch_axis = 1, time_axis = 0>(h0, lens)
            a1 = Add(r1, x)
            h1 = Slice(a1, zero, ends, zero)
            y = ReverseSequence<batch_axis = 1, time_axis = 0>(h1, lens)
        }"""
    )
    lowered, forms = lowered_forms(model)
    assert forms == {"computed": 3}
    ops = all_op_types(lowered)
    assert (ops.count("Range"), count_checks(lowered)) == (7, 1), ops
    feeds = stack_feeds(0, True, [4, 0, 3])
    assert_same(native(model, feeds), run("onnxruntime", lowered, feeds))
    assert_same(native(model, feeds), run("openvino", lowered, feeds))


@st.composite
def stacks(draw: st.DrawFn) -> tuple[onnx.ModelProto, dict[str, np.ndarray], int]:
    """2-4 reversals with the same lengths, each of the previous layer's output either as it is
    (index shared), joined with the input along time (longer), or cut along time to an end
    given at run time (lengths past the cut make the model fail, natively as lowered)."""
    time_axis = draw(st.integers(0, 1))
    inner = draw(st.sampled_from([(), (1,), (2,), (2, 1)]))
    time = draw(st.integers(0, 5))
    batch = draw(st.integers(1, 3))
    steps = draw(st.lists(st.sampled_from(["same", "join", "cut"]), min_size=1, max_size=3))
    end = draw(st.integers(0, 6))
    lens = draw(st.lists(st.integers(0, time), min_size=batch, max_size=batch))
    lead = "T, N" if time_axis == 0 else "N, T"
    dims = lead + "".join(f", {d}" for d in inner)
    attrs = f"batch_axis = {1 - time_axis}, time_axis = {time_axis}"
    lines = [f"r0 = ReverseSequence<{attrs}>(x, lens)"]
    for i, step in enumerate(steps, start=1):
        previous = f"r{i - 1}"
        value = {
            "same": f"v{i} = Neg({previous})",
            "join": f"v{i} = Concat<axis = {time_axis}>({previous}, x)",
            "cut": f"v{i} = Slice({previous}, start, ends, axis)",
        }[step]
        lines += [value, f"r{i} = ReverseSequence<{attrs}>(v{i}, lens)"]
    body = "\n            ".join(lines)
    out_dims = ", ".join(["?", "?", *(str(d) for d in inner)])
    model = parse(
        f"""
        g (float[{dims}] x, int64[N] lens, int64[1] ends) => (float[{out_dims}] y) {{
            axis = Constant<value = int64[1] {{{time_axis}}}>()
            start = Constant<value = int64[1] {{0}}>()
            {body}
            y = Identity(r{len(steps)})
        }}"""
    )
    shape = (time, batch, *inner) if time_axis == 0 else (batch, time, *inner)
    feeds = {
        "x": np.arange(np.prod(shape), dtype=np.float32).reshape(shape),
        "lens": np.array(lens, np.int64),
        "ends": np.array([end], np.int64),
    }
    return model, feeds, len(steps) + 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stacks())
def test_random_stacks_match_or_fail_as_the_kernel(
    case: tuple[onnx.ModelProto, dict[str, np.ndarray], int],
) -> None:
    """Shared indices and shared lengths parts give the kernel's numbers, and fail where it
    does (a length past a cut), on onnxruntime and OpenVINO (tract 0.23 runs no ``Slice`` that
    cuts to a run-time end, original models included; README)."""
    model, feeds, reversals = case
    lowered, forms = lowered_forms(model)
    assert sum(forms.values()) == reversals
    try:
        want = native(model, feeds)
    except RuntimeFailure:
        with pytest.raises(RuntimeFailure, match="sequence_lens"):
            run("onnxruntime", lowered, feeds)
        return
    for runtime in ("onnxruntime", "openvino"):
        assert_same(want, run(runtime, lowered, feeds))


@pytest.mark.parametrize("time_axis", [0, 1])
def test_a_shared_lengths_part_checks_every_node(time_axis: int) -> None:
    """Lengths valid for the first reversal but past the (cut) second one fail there, as the
    kernel does; negative ones fail before either. onnxruntime only: tract 0.23 runs no
    ``Slice`` to an end given at run time that cuts, original models included (README)."""
    model = stack_model(time_axis, ", C", CUT)
    lowered, forms = lowered_forms(model)
    assert forms == {"computed": 2} and all_op_types(lowered).count("Range") == 5
    assert_same(
        native(model, stack_feeds(time_axis, True, [3, 0, 2], 3)),
        run("onnxruntime", lowered, stack_feeds(time_axis, True, [3, 0, 2], 3)),
    )
    for lens, end in (([5, 0, 3], 3), ([4, 1, 0], 0), ([-1, 0, 0], 5)):
        feeds = stack_feeds(time_axis, True, lens, end)
        with pytest.raises(RuntimeFailure):
            native(model, feeds)
        with pytest.raises(RuntimeFailure, match="sequence_lens"):
            run("onnxruntime", lowered, feeds)


def test_a_shared_count_check_fails_a_wrong_count() -> None:
    """The count check, shared by both nodes, fails a wrong count as the kernel does."""
    model = stack_model(0, ", C", JOINED)
    lowered, _ = lowered_forms(model)
    for lens in ([2, 0], [2, 0, 3, 1]):
        feeds = {**stack_feeds(0, True, [1, 1, 1]), "lens": np.array(lens, np.int64)}
        with pytest.raises(RuntimeFailure):
            native(model, feeds)
        with pytest.raises(RuntimeFailure, match="batch_entry"):
            run("onnxruntime", lowered, feeds)


# ------------------------------------------------------------------ out-of-range lengths


BAD_LENGTHS = [[5, 1, 0], [-1, 1, 0], [1, 2], [1, 2, 3, 4]]


@pytest.mark.parametrize("static_slice", [False, True])
@pytest.mark.parametrize("time_axis", [0, 1])
@pytest.mark.parametrize("lens", BAD_LENGTHS, ids=["long", "negative", "too_few", "too_many"])
def test_bad_lengths_fail_on_onnxruntime(
    time_axis: int, lens: list[int], static_slice: bool
) -> None:
    model = parse(general_model("float", time_axis, "input", static_slice=static_slice))
    lowered, forms = lowered_forms(model)
    assert forms == {"row_gather" if static_slice else "computed": 1}
    shape = (4, 3, 2) if time_axis == 0 else (3, 4, 2)
    feeds = feeds_for("float", time_axis, "input", lens, shape)
    with pytest.raises(RuntimeFailure):
        native(model, feeds)
    with pytest.raises(RuntimeFailure, match=r"sequence_lens|batch_entry"):
        run("onnxruntime", lowered, feeds)


def test_bad_lengths_abort_tract() -> None:
    """tract's Gather panics on an out-of-range index, which aborts its process (documented;
    the check runs tract in a child process): the run fails with tract's message."""
    require("tract")
    model = parse(general_model("float", 0, "input"), opset=17)
    feeds = {"x": np.zeros((4, 3, 2), np.float32), "lens": np.array([5, 1, 0], np.int64)}
    with pytest.raises(RuntimeFailure, match="tract aborted the process"):
        run("tract", seqlower.lower(model), feeds)


def test_reversals_around_an_lstm_share_one_index() -> None:
    """A bidirectional RNN's backward direction as exporters write it: reverse the input, run a
    forward LSTM, squeeze the direction axis, reverse the output. The LSTM keeps the sequence
    and batch axes of its input, so both reversals share one index."""
    rng = np.random.default_rng(5)
    hidden, features = 3, 2
    weights = {
        "W": rng.standard_normal((1, 4 * hidden, features)).astype(np.float32),
        "R": rng.standard_normal((1, 4 * hidden, hidden)).astype(np.float32),
    }
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("ReverseSequence", ["x", "lens"], ["xr"], batch_axis=1),
            onnx.helper.make_node("LSTM", ["xr", "W", "R"], ["y", "", ""], hidden_size=hidden),
            onnx.helper.make_node("Squeeze", ["y", "one"], ["ys"]),
            onnx.helper.make_node("ReverseSequence", ["ys", "lens"], ["out"], batch_axis=1),
        ],
        "backward_rnn",
        [
            onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["T", "N", features]),
            onnx.helper.make_tensor_value_info("lens", onnx.TensorProto.INT64, ["N"]),
        ],
        [onnx.helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, ["T", "N", hidden])],
        [
            *(onnx.numpy_helper.from_array(v, k) for k, v in weights.items()),
            onnx.numpy_helper.from_array(np.array([1], np.int64), "one"),
        ],
    )
    model = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=IR_VERSION
    )
    lowered, forms = lowered_forms(model)
    assert forms == {"row_gather": 2}  # static slices: x's features, the LSTM's hidden_size
    assert all_op_types(lowered).count("Range") == 3  # one index
    feeds = {
        "x": rng.standard_normal((5, 3, features)).astype(np.float32),
        "lens": np.array([5, 0, 3], np.int64),
    }
    want = native(model, feeds)
    assert_same(want, run("onnxruntime", lowered, feeds))


def test_reversals_around_a_scan_share_one_index() -> None:
    """A custom recurrent cell as a Scan over time: its scan output is as long as its input.
    (A symbolic slice size: both take GatherND; a row ``Gather`` and a ``GatherND`` index
    differ, so a static size on one side only would share nothing.)"""
    model = onnx.parser.parse_model(
        f"""
        <ir_version: {IR_VERSION}, opset_import: ["" : 17]>
        scan_rnn (float[T,N,C] x, int64[N] lens) => (float[T,N,C] out) {{
            xr = ReverseSequence <batch_axis = 1> (x, lens)
            ys = Scan <num_scan_inputs = 1, body = cell (float[] e) => (float[] o) {{
                o = Neg (e)
            }}> (xr)
            out = ReverseSequence <batch_axis = 1> (ys, lens)
        }}
        """
    )
    lowered, forms = lowered_forms(model)
    assert forms == {"computed": 2}
    assert all_op_types(lowered).count("Range") == 3  # one index
    feeds = {
        "x": np.random.default_rng(6).standard_normal((5, 3, 2)).astype(np.float32),
        "lens": np.array([5, 0, 3], np.int64),
    }
    assert_runs_everywhere(model, feeds, ["onnxruntime", "openvino", "tract"])


# ------------------------------------------------------------------ form="gather"

# Where the row Gather (LowerReverseSequence(form="gather")) runs: tract cannot solve its
# Flatten/Reshape of symbolic dimensions, so it is for the runtimes below only.
GATHER_FORM_RUNTIMES = ["onnxruntime", "openvino"]


@pytest.mark.parametrize("dtype", ["float", "int64", "uint8"])
@pytest.mark.parametrize("time_axis", [0, 1])
@pytest.mark.parametrize("lens_kind", ["input", "int32", "constant"])
@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("rank4", [False, True])
def test_gather_form_runs_on_its_runtimes(
    dtype: str, time_axis: int, lens_kind: str, static: bool, rank4: bool
) -> None:
    import onnx_ir as ir

    text = general_model(dtype, time_axis, lens_kind, static=static)
    shape: tuple[int, ...] = (4, 3, 2) if time_axis == 0 else (3, 4, 2)
    if rank4:  # one more inner axis: a Reshape rather than a Flatten
        text = text.replace(", 2]", ", 2, 5]").replace(", C]", ", C, D]")
        shape = (*shape, 5)
    model = parse(text)
    lowering = LowerReverseSequence(form="gather")
    lowered_ir = ir.serde.deserialize_model(model)
    lowering(lowered_ir)
    assert lowering.forms == {"rows": 1}
    lowered = seqlower.lower(model, [LowerReverseSequence(form="gather")])
    onnx.checker.check_model(lowered, full_check=True)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True)
    assert "GatherND" not in all_op_types(lowered)
    feeds = feeds_for(dtype, time_axis, lens_kind, [4, 0, 2], shape)  # type: ignore[arg-type]
    want = native(model, feeds)
    for runtime in GATHER_FORM_RUNTIMES:
        assert_same(want, run(runtime, lowered, feeds))


@pytest.mark.parametrize("lens", [[5, 0, 2], [-1, 0, 2], [1, 2]])
def test_gather_form_fails_on_bad_lengths(lens: list[int]) -> None:
    model = parse(general_model("float", 0, "input"), opset=17)
    lowered = seqlower.lower(model, [LowerReverseSequence(form="gather")])
    feeds = feeds_for("float", 0, "input", lens, (4, 3, 2))
    with pytest.raises(RuntimeFailure):
        run("onnxruntime", lowered, feeds)


def test_unknown_form_is_refused() -> None:
    with pytest.raises(ValueError, match="gathernd"):
        LowerReverseSequence(form="scatter")


SHAPE_PROOFS = {
    # name: (nodes between the reversals, Range nodes lowered: 3 for one shared index, 5 for
    # a shared lengths part (the batch axis proven, not the time axis), 6 for nothing shared)
    "matmul": ("m = MatMul (xr, w)", 3),  # [T, N, 4] @ [4, 4]: T and N are xr's
    "concat": ("m = Concat <axis = 2> (xr, xr)", 3),  # other axes agree or it fails
    "reshape_like": ("m = Reshape (xr, shape)", 3),  # Reshape(_, Shape(x)): x's shape
    "reshape_fixed": ("m = Reshape (xr, fixed)", 4),  # a constant target [5, 3, -1] proves
    # nothing of x's sizes, but gives m's time and batch as 5 and 3: m's index is partly constant
    "slice_inner": ("m = Slice (xr, zero, two, two)", 3),  # cuts neither time nor batch
    "slice_time": ("m = Slice (xr, zero, two)", 5),  # axes default to the first: time
    "slice_batch": ("m = Slice (xr, zero, three, one)", 6),  # the count checked again
}
#: The cases whose second reversal's slice size is not proven static (GatherND there).
_SYMBOLIC_SLICE = {"reshape_fixed"}


@pytest.mark.parametrize("case", list(SHAPE_PROOFS))
def test_reversals_share_an_index_through_shape_proofs(case: str) -> None:
    """Reversals of values whose time and batch dimensions are proven equal share one computed
    index; a wrong proof would give wrong numbers, so each case also runs against the kernel."""
    between, ranges = SHAPE_PROOFS[case]
    weights = ", ".join(str(i / 8) for i in range(16))
    model = onnx.parser.parse_model(
        f"""
        <ir_version: {IR_VERSION}, opset_import: ["" : 17]>
        g (float[T,N,4] x, int64[N] lens) => (float[?,?,?] out)
            <float[4,4] w = {{{weights}}}, int64[3] fixed = {{5, 3, -1}}, int64[1] zero = {{0}},
             int64[1] one = {{1}}, int64[1] two = {{2}}, int64[1] three = {{3}}> {{
            shape = Shape (x)
            xr = ReverseSequence <batch_axis = 1> (x, lens)
            {between}
            out = ReverseSequence <batch_axis = 1> (m, lens)
        }}
        """
    )
    lowered, forms = lowered_forms(model)
    both = {"row_gather": 1, "computed": 1} if case in _SYMBOLIC_SLICE else {"row_gather": 2}
    assert forms == both
    assert all_op_types(lowered).count("Range") == ranges
    feeds = {
        "x": np.random.default_rng(3).standard_normal((5, 3, 4)).astype(np.float32),
        "lens": np.array([2, 0, 1], np.int64),  # within the cut time axis too
    }
    assert_same(native(model, feeds), run("onnxruntime", lowered, feeds))


MAPPED_SPLITS = {
    # name: (SplitToSequence, ConcatFromSequence, whether the index is shared): onnxscript's
    # map over a tensor's slices keeps its shape when the body keeps the element's.
    "stacked": ("<axis = 0, keepdims = 0> (xr)", "<axis = 0, new_axis = 1>", True),
    "joined": ("<axis = 0> (xr)", "<axis = 0>", True),  # slices [1, N, 4] kept 3-D
    "batch_slices": ("<axis = 1, keepdims = 0> (xr)", "<axis = 1, new_axis = 1>", True),
    "negative_axes": ("<axis = -3, keepdims = 0> (xr)", "<axis = -3, new_axis = 1>", True),
    # Pieces of given sizes: their count is not the split axis' length.
    "sizes": ("<axis = 0> (xr, sizes)", "<axis = 0>", False),
}
#: The element each case's body takes (2-D slices, or 3-D where the split keeps its axis).
_ELEMENT = {"joined": "float[a, b, 4]", "sizes": "float[a, b, 4]"}


@pytest.mark.parametrize("case", list(MAPPED_SPLITS))
def test_reversals_share_an_index_through_a_mapped_split(case: str) -> None:
    split, concat, shared = MAPPED_SPLITS[case]
    element = _ELEMENT.get(case, "float[a, 4]")
    model = onnx.parser.parse_model(
        f"""
        <ir_version: {IR_VERSION}, opset_import: ["" : 17]>
        g (float[T,N,4] x, int64[N] lens) => (float[?,?,?] out) <int64[2] sizes = {{2, 3}}> {{
            xr = ReverseSequence <batch_axis = 1> (x, lens)
            pieces = SplitToSequence {split}
            mapped = SequenceMap (pieces) <body = square ({element} e) => ({element} r) {{
                sq = Mul (e, e)
                r = Neg (sq)
            }}>
            m = ConcatFromSequence {concat} (mapped)
            out = ReverseSequence <batch_axis = 1> (m, lens)
        }}
        """
    )
    lowered, forms = lowered_forms(model)
    assert forms == {"row_gather": 2}
    assert all_op_types(lowered).count("Range") == (3 if shared else 6)
    feeds = {
        "x": np.random.default_rng(5).standard_normal((5, 3, 4)).astype(np.float32),
        "lens": np.array([5, 0, 3], np.int64),
    }
    assert_same(native(model, feeds), run("onnxruntime", lowered, feeds))


def test_a_mapped_split_whose_body_changes_the_element_proves_only_what_it_keeps() -> None:
    """A body that transposes each [N, 4] slice: the stacked result is [T, 4, N], whose axis 1
    is x's last axis, not its batch axis; the two reversals (valid when N is 4) must not share
    an index built for x's dimensions."""
    model = onnx.parser.parse_model(
        f"""
        <ir_version: {IR_VERSION}, opset_import: ["" : 17]>
        g (float[T,N,4] x, int64[N] lens) => (float[?,?,?] out) {{
            xr = ReverseSequence <batch_axis = 1> (x, lens)
            pieces = SplitToSequence <axis = 0, keepdims = 0> (xr)
            mapped = SequenceMap (pieces) <body = flip (float[a, 4] e) => (float[4, a] r) {{
                r = Transpose <perm = [1, 0]> (e)
            }}>
            m = ConcatFromSequence <axis = 0, new_axis = 1> (mapped)
            out = ReverseSequence <batch_axis = 1> (m, lens)
        }}
        """
    )
    lowered, forms = lowered_forms(model)
    assert forms == {"row_gather": 1, "computed": 1}  # [T, 4, N]: N is not static
    assert all_op_types(lowered).count("Range") == 6
    feeds = {
        "x": np.random.default_rng(6).standard_normal((5, 4, 4)).astype(np.float32),
        "lens": np.array([1, 5, 0, 2], np.int64),
    }
    assert_same(native(model, feeds), run("onnxruntime", lowered, feeds))


# ------------------------------------------------------------------ one element per step

ONE_PER_STEP = {"rank2": 0, "trailing_one": 1, "trailing_ones": 2}


def one_per_step_model(dtype: str, time_axis: int, ones: int) -> str:
    lead = "T, N" if time_axis == 0 else "N, T"
    dims = ", ".join([lead, *["1"] * ones])
    return f"""
        g ({dtype}[{dims}] x, int64[N] lens) => ({dtype}[{dims}] y) {{
            y = ReverseSequence<batch_axis = {1 - time_axis}, time_axis = {time_axis}>(x, lens)
        }}"""


@pytest.mark.parametrize("dtype", ["float", "int64", "bool"])
@pytest.mark.parametrize("time_axis", [0, 1])
@pytest.mark.parametrize("case", list(ONE_PER_STEP))
def test_one_element_per_step_is_a_gather_elements(case: str, time_axis: int, dtype: str) -> None:
    """[T, B] (or trailing static 1s): GatherElements on the source steps, no batch coordinate."""
    ones = ONE_PER_STEP[case]
    model = parse(one_per_step_model(dtype, time_axis, ones))
    lowered, forms = lowered_forms(model)
    assert forms == {"elements": 1}
    assert "GatherND" not in all_op_types(lowered)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True)
    shape = (5, 3) if time_axis == 0 else (3, 5)
    rng = np.random.default_rng(11)
    x = rng.integers(0, 100, (*shape, *[1] * ones))
    np_dtype = {"float": np.float32, "int64": np.int64, "bool": np.bool_}[dtype]
    for lens in ([5, 0, 3], [1, 5, 2]):
        feeds = {"x": (x % 2 if dtype == "bool" else x).astype(np_dtype), "lens": np.array(lens)}
        assert_runs_everywhere(model, feeds)


def test_one_string_per_step() -> None:
    model = parse(one_per_step_model("string", 0, 0))
    lowered, forms = lowered_forms(model)
    assert forms == {"elements": 1}
    x = np.array([[f"{t}{b}" for b in range(3)] for t in range(4)], dtype=object)
    feeds = {"x": x, "lens": np.array([4, 0, 2], np.int64)}
    assert_same(native(model, feeds), run("onnxruntime", lowered, feeds))


def test_a_trailing_axis_not_proven_one_keeps_gathernd() -> None:
    model = parse(
        """
        g (float[T, N, C] x, int64[N] lens) => (float[T, N, C] y) {
            y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
        }"""
    )
    _, forms = lowered_forms(model)
    assert forms == {"computed": 1}


def test_one_per_step_reversals_share_one_index() -> None:
    model = parse(
        """
        g (float[T, N] x, int64[N] lens) => (float[T, N] y) {
            r1 = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
            h = Neg(r1)
            r2 = ReverseSequence<batch_axis = 1, time_axis = 0>(h, lens)
            y = Add(r2, x)
        }"""
    )
    lowered, forms = lowered_forms(model)
    assert forms == {"elements": 2}
    assert all_op_types(lowered).count("Range") == 3
    feeds = {
        "x": np.random.default_rng(5).standard_normal((6, 4)).astype(np.float32),
        "lens": np.array([6, 0, 3, 1], np.int64),
    }
    assert_runs_everywhere(model, feeds)


@pytest.mark.parametrize("lens", BAD_LENGTHS, ids=["long", "negative", "too_few", "too_many"])
def test_bad_lengths_fail_one_per_step(lens: list[int]) -> None:
    model = parse(one_per_step_model("float", 0, 0))
    lowered, _ = lowered_forms(model)
    feeds = {"x": np.zeros((4, 3), np.float32), "lens": np.array(lens, np.int64)}
    with pytest.raises(RuntimeFailure):
        native(model, feeds)
    with pytest.raises(RuntimeFailure, match=r"sequence_lens|batch_entry"):
        run("onnxruntime", lowered, feeds)


@pytest.mark.parametrize(
    ("lens", "form"),
    [
        ([0, 1, 0], "copy"),
        ([1, 1, 1], "copy"),
        ([3, 3, 3], "constant"),
        ([4, 4, 4], "slice"),
        ([4, 0, 2], "constant"),
        ([2, 3, 1], "constant"),
    ],
)
@pytest.mark.parametrize("time_axis", [0, 1])
@pytest.mark.parametrize("ones", [0, 2])
def test_constant_lengths_on_a_static_time_axis_compute_no_index(
    lens: list[int], form: str, time_axis: int, ones: int
) -> None:
    """Lengths known when lowering, on a static T and batch: a copy, a Slice or a constant
    index; nothing of the index is computed at run time."""
    dims = ["4", "3"] if time_axis == 0 else ["3", "4"]
    dims += ["2"] if not ones else ["1"] * ones
    shape = ", ".join(dims)
    values = ", ".join(map(str, lens))
    model = parse(f"""
        g (float[{shape}] x) => (float[{shape}] y) {{
            lens = Constant<value = int64[3] {{{values}}}>()
            y = ReverseSequence<batch_axis = {1 - time_axis}, time_axis = {time_axis}>(x, lens)
        }}""")
    lowered, forms = lowered_forms(model)
    assert forms == {form: 1}
    ops = set(all_op_types(lowered))
    assert not ops & {"Shape", "Range", "Where", "Less", "Sub", "Expand"}, ops
    if form == "constant" and not ones:
        # A static slice: one constant row index, no coordinate pairs to join.
        gather = "GatherND" if time_axis == 0 else "Gather"
        assert "Reshape" in ops and gather in ops and "Concat" not in ops, ops
    feeds = {"x": np.random.default_rng(3).standard_normal([int(d) for d in dims], np.float32)}
    assert_runs_everywhere(model, feeds)


def test_constant_row_indices_of_gather_and_gathernd_are_not_shared() -> None:
    """Equal constant lengths and dims, time-major: slices of 2 gather rows by GatherND (an
    int64 index), slices of 128 by Gather (int32); each gets an index of its own type."""
    model = parse("""
        g (float[4, 3, 2] x, float[4, 3, 128] z) => (float[4, 3, 2] y, float[4, 3, 128] w) {
            lens = Constant<value = int64[3] {4, 0, 2}>()
            w = ReverseSequence<batch_axis = 1, time_axis = 0>(z, lens)
            y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
        }""")
    lowered, forms = lowered_forms(model)
    assert forms == {"constant": 2}
    ops = all_op_types(lowered)
    assert ops.count("GatherND") == 1 and ops.count("Gather") == 1, ops
    rng = np.random.default_rng(5)
    feeds = {
        "x": rng.standard_normal((4, 3, 2)).astype(np.float32),
        "z": rng.standard_normal((4, 3, 128)).astype(np.float32),
    }
    assert_runs_everywhere(model, feeds)


def test_a_shared_constant_gathernd_row_index_is_unsqueezed_once() -> None:
    """Reversals sharing a constant GatherND row index read its [T, B, 1] form, made once (an
    Unsqueeze per node before: 50 in issue 33's synthetic model with constant lengths)."""
    model = parse("""
        g (float[4, 3, 2] x) => (float[4, 3, 2] y) {
            lens = Constant<value = int64[3] {4, 0, 2}>()
            r = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
            a = Relu(r)
            y = ReverseSequence<batch_axis = 1, time_axis = 0>(a, lens)
        }""")
    lowered, forms = lowered_forms(model)
    assert forms == {"constant": 2}
    ops = all_op_types(lowered)
    assert ops.count("GatherND") == 2 and ops.count("Unsqueeze") == 1, ops
    feeds = {"x": np.random.default_rng(6).standard_normal((4, 3, 2)).astype(np.float32)}
    assert_runs_everywhere(model, feeds)


def test_constant_lengths_on_a_dynamic_time_axis_share_a_constant_lengths_part() -> None:
    """Constant lengths, one per batch entry of a static batch axis: the lengths part is two
    constants; only the time-dependent rest is computed."""
    model = parse("""
        g (float[T, 3, 2] x) => (float[T, 3, 2] y) {
            lens = Constant<value = int64[3] {4, 0, 2}>()
            y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
        }""")
    lowered, forms = lowered_forms(model)
    assert forms == {"row_gather": 1}
    ops = all_op_types(lowered)
    assert count_checks(lowered) == 0 and ops.count("Range") == 2, ops  # the time steps only
    assert_runs_everywhere(model, {"x": np.arange(30, dtype=np.float32).reshape(5, 3, 2)})
    with pytest.raises(RuntimeFailure):  # a length past T still fails, as the kernel does
        run("onnxruntime", lowered, {"x": np.zeros((3, 3, 2), np.float32)})


def test_lengths_at_run_time_on_a_static_time_axis_take_constant_steps() -> None:
    model = parse(general_model("float", 0, "input", static=True))
    lowered, forms = lowered_forms(model)
    assert forms == {"row_gather": 1}
    assert "Range" in all_op_types(lowered)  # the batch coordinates, not the steps
    assert all_op_types(lowered).count("Range") == 1
    assert_runs_everywhere(model, feeds_for("float", 0, "input", [4, 0, 2], (4, 3, 2)))


OPENVINO_EMPTY_BROADCAST = """
    g (int64[1, 1] b) => (int64[0, 1, 1] y) {
        s = Constant<value = int64[0, 1, 1] {}>()
        y = Sub(b, s)
    }"""


@pytest.mark.xfail(strict=True, reason="OpenVINO 2026.4.1 broadcasts an empty constant away")
def test_openvino_broadcasts_an_empty_constant_right() -> None:
    """Why a static T of 0 keeps computed steps: OpenVINO returns [1, 1] here, not [0, 1, 1].
    When this passes (XPASS fails the suite), the T = 0 exception can go."""
    require("openvino")
    (y,) = run("openvino", parse(OPENVINO_EMPTY_BROADCAST), {"b": np.zeros((1, 1), np.int64)})
    assert y.shape == (0, 1, 1)


def test_a_static_time_axis_of_zero_runs_on_openvino() -> None:
    model = parse("""
        g (float[0, 1, 0] x, int64[1] lens) => (float[0, 1, 0] y) {
            y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
        }""")
    feeds = {"x": np.zeros((0, 1, 0), np.float32), "lens": np.array([0])}
    assert_runs_everywhere(model, feeds)


# ------------------------------------------------- static shapes, lengths known at run time

#: Ops that read or build shapes: none is left when T and B are static (issue 33).
SHAPE_OPS = {"Shape", "Size", "Range", "Squeeze", "Div"}

STATIC_SHAPES = {
    # name: (the slice after [T, B] written and fed, the form): the row gather (GatherND
    # time-major, Gather batch-major), one element per step, GatherND pairs (symbolic slice)
    "rows": (", 2", (2,), "row_gather"),
    "elements": ("", (), "elements"),
    "pairs": (", C", (5,), "computed"),
}


@pytest.mark.parametrize("time_axis", [0, 1])
@pytest.mark.parametrize("case", list(STATIC_SHAPES))
def test_static_shapes_compute_only_the_lengths_part(case: str, time_axis: int) -> None:
    """T and B static, the lengths a graph input of one per batch entry: every part of the
    index that depends on shapes is a constant (no Shape, Range or count check), only the [B]
    lengths are read at run time, and bad lengths still fail as the kernel does."""
    inner, fed, form = STATIC_SHAPES[case]
    lead = (4, 3) if time_axis == 0 else (3, 4)
    dims = f"{lead[0]}, {lead[1]}{inner}"
    model = parse(f"""
        g (float[{dims}] x, int64[3] lens) => (float[{dims}] y) {{
            y = ReverseSequence<batch_axis = {1 - time_axis}, time_axis = {time_axis}>(x, lens)
        }}""")
    lowered, forms = lowered_forms(model)
    assert forms == {form: 1}
    ops = all_op_types(lowered)
    assert not set(ops) & SHAPE_OPS and count_checks(lowered) == 0, ops
    if case == "rows":  # the index is made in the gather's own type (and layout)
        assert ops.count("Cast") == 1 and (time_axis or "Unsqueeze" not in ops), ops
    x = np.random.default_rng(9).standard_normal((*lead, *fed)).astype(np.float32)
    for lens in ([4, 0, 2], [1, 3, 4], [0, 0, 0]):
        feeds = {"x": x, "lens": np.array(lens, np.int64)}
        want = native(model, feeds)
        for runtime in RUNTIMES:
            assert_same(want, run(runtime, lowered, feeds))
    for lens in ([5, 1, 0], [-1, 1, 0], [4, 2**31 + 1, 0]):
        feeds = {"x": x, "lens": np.array(lens, np.int64)}
        with pytest.raises(RuntimeFailure):
            native(model, feeds)
        with pytest.raises(RuntimeFailure, match="sequence_lens"):
            run("onnxruntime", lowered, feeds)


def test_static_reversals_after_a_reduction_share_one_index() -> None:
    """issue 33's synthetic block: the second reversal reads an Add of a scalar ReduceSum (its
    rank is 0, so the Add keeps the first reversal's static shape): both share one index,
    computed from the lengths alone."""
    model = parse("""
        g (float[4, 3, 2] x, int64[3] lens, float[5] w) => (float[?, ?, ?] y) {
            r = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
            total = ReduceSum<keepdims = 0>(w)
            a = Add(r, total)
            y = ReverseSequence<batch_axis = 1, time_axis = 0>(a, lens)
        }""")
    lowered, forms = lowered_forms(model)
    assert forms == {"row_gather": 2}
    ops = all_op_types(lowered)
    assert not set(ops) & SHAPE_OPS and ops.count("GatherND") == 2, ops
    checks = [n for n in all_nodes(lowered) if "fails_if_sequence_lens_out_of_range" in n.name]
    assert len(checks) == 1  # one index
    rng = np.random.default_rng(4)
    feeds = {
        "x": rng.standard_normal((4, 3, 2)).astype(np.float32),
        "lens": np.array([3, 4, 1], np.int64),
        "w": rng.standard_normal(5).astype(np.float32),
    }
    assert_runs_everywhere(model, feeds)


# Sizes no proof reaches (an Expand to a constant shape), known to shape inference.
INFERRED = """
    g (float[1, 3, 2] x, int64[{count}] lens) => (float[?, ?, ?] y) {{
        to = Constant<value = int64[3] {{4, 3, 2}}>()
        e = Expand(x, to)
        y = ReverseSequence<batch_axis = 1, time_axis = 0>(e, lens)
    }}"""


def test_sizes_shape_inference_knows_are_constants() -> None:
    model = parse(INFERRED.format(count=3))
    lowered, forms = lowered_forms(model)
    assert forms == {"row_gather": 1}
    ops = all_op_types(lowered)
    assert not set(ops) & SHAPE_OPS and count_checks(lowered) == 0, ops
    feeds = {
        "x": np.random.default_rng(2).standard_normal((1, 3, 2)).astype(np.float32),
        "lens": np.array([2, 4, 0], np.int64),
    }
    assert_runs_everywhere(model, feeds)


def test_a_length_count_other_than_the_batch_size_is_refused() -> None:
    """Both known (here the batch size by shape inference alone) and different: the node fails
    whenever it runs, so no lowering is right; the error names it."""
    with pytest.raises(InvalidNodeError, match="holds 2 lengths but input 'e' has 3 batch"):
        seqlower.lower(parse(INFERRED.format(count=2)))
