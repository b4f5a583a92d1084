"""SequenceMap lowering through the Python API: every promised situation, checked numerically."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h

import seqlower
from seqlower.passes import LowerSequenceMap
from tests.helpers import (
    ORT_DTYPES,
    all_op_types,
    assert_equivalent,
    assert_lowered_ok,
    defined_names,
    lower_and_compare,
    make_model,
    ort_run,
    parse,
    reference_run,
    repeated,
    seq_info,
    tensor_info,
)
from tests.sequence_map_cases import CASES, body, floats


@pytest.mark.parametrize("name", list(CASES))
def test_case_lowers_and_matches(name: str) -> None:
    model, feeds = CASES[name]()
    onnx.checker.check_model(model, full_check=True)
    lower_and_compare(model, feeds)


@pytest.mark.parametrize("name", ["nested_sequence_map", "function_op_in_body", "clashing_names"])
def test_onnxruntime_fails_where_lowering_fixes_it(name: str) -> None:
    """Why seqlower exists: the installed onnxruntime cannot run these originals (whatever its
    version: when one can, this fails and the README's claim must change), only the lowered."""
    model, feeds = CASES[name]()
    with pytest.raises(Exception, match=r"\S"):  # any onnxruntime failure, with a message
        ort_run(model, feeds)
    lowered = seqlower.lower(model)
    expected = reference_run(model, feeds)
    got = ort_run(lowered, feeds)
    for a, e in zip(got, expected, strict=True):
        for x, y in zip(a, e, strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-6)


@pytest.mark.parametrize(
    "dtype",
    [*ORT_DTYPES, T.COMPLEX64, T.COMPLEX128, T.BFLOAT16],
    ids=lambda d: T.DataType.Name(d),
)
def test_every_element_type(dtype: int) -> None:
    b = body([h.make_node("Identity", ["x"], ["y"])], ["x", "t"], ["y", "t"], dtype=dtype)
    model = make_model(
        [h.make_node("SequenceMap", ["s", "t"], ["ys", "ts"], body=b)],
        [seq_info("s", dtype), tensor_info("t", dtype, [2])],
        [seq_info("ys", dtype), seq_info("ts", dtype)],
    )
    np_dtype = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    if dtype == T.STRING:
        elements = [np.array(["a", "bc"], dtype=object), np.array([["d"]], dtype=object)]
        t = np.array(["x", "y"], dtype=object)
    else:
        rng = np.random.default_rng(0)
        elements = [(rng.standard_normal(shape) * 50).astype(np_dtype) for shape in [(2,), (1, 3)]]
        t = np.array([1, 0], dtype=np_dtype)
    feeds = {"s": elements, "t": t}
    lowered = seqlower.lower(model)
    # No sequence op admits bfloat16 at any opset, so the checker rejects input and output alike;
    # everything else must pass the full check.
    assert_lowered_ok(model, lowered, full_check=dtype != T.BFLOAT16)
    assert_equivalent(model, lowered, feeds)
    empties = [n for n in lowered.graph.node if n.op_type == "SequenceEmpty"]
    assert [n.attribute[0].i for n in empties] == [dtype, dtype]


def test_empty_sequence_output_has_declared_element_type() -> None:
    model, feeds = CASES["empty_input_sequence"]()
    lowered = lower_and_compare(model, feeds)
    out, count = ort_run(lowered, feeds)
    assert count == 0
    assert len(out) == 1 and out[0].dtype == np.int64


def test_generated_names_are_unique_across_all_scopes() -> None:
    model, _ = CASES["clashing_names"]()
    # The original already defines 'x' twice (outer graph, and the body shadowing it).
    assert repeated(defined_names(model)) == {"x"}
    lowered = seqlower.lower(model)
    assert repeated(defined_names(lowered)) <= {"x"}


def test_names_unique_even_when_body_already_uses_generated_names() -> None:
    model = parse(
        """
        test (seq(float[]) s) => (seq(float[]) SequenceMap_cond_in) {
            SequenceMap_cond_in = SequenceMap (s) <
                body: graph = body (float[] x) => (float[] SequenceMap_iteration) {
                    SequenceMap_length = Identity (x)
                    SequenceMap_iteration = Identity (SequenceMap_length)
                }>
        }
        """
    )
    lowered = lower_and_compare(model, {"s": floats((2,))})
    assert not repeated(defined_names(lowered))


def test_original_model_proto_is_untouched() -> None:
    model, _ = CASES["multi_io"]()
    before = model.SerializeToString()
    seqlower.lower(model)
    assert model.SerializeToString() == before


def test_ir_model_is_lowered_in_place() -> None:
    model, _ = CASES["multi_io"]()
    ir_model = ir.serde.deserialize_model(model)
    result = seqlower.lower(ir_model)
    assert result is ir_model
    assert "SequenceMap" not in all_op_types(ir.serde.serialize_model(ir_model))


def test_path_input_returns_model_proto(tmp_path) -> None:
    model, feeds = CASES["outer_scope_read"]()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    lowered = seqlower.lower(str(path))
    assert isinstance(lowered, onnx.ModelProto)
    assert_equivalent(model, lowered, feeds)


def test_pass_runs_inside_a_users_pass_manager() -> None:
    model, feeds = CASES["nested_sequence_map"]()
    ir_model = ir.serde.deserialize_model(model)
    pass_ = LowerSequenceMap()
    result = ir.passes.PassManager([pass_])(ir_model)
    assert result.modified and pass_.rewritten == 2
    lowered = ir.serde.serialize_model(result.model)
    assert_lowered_ok(model, lowered)
    assert_equivalent(model, lowered, feeds)
    # A second run finds nothing to do.
    assert not ir.passes.PassManager([LowerSequenceMap()])(result.model).modified


def test_everything_else_is_preserved() -> None:
    model, feeds = CASES["outer_scope_read"]()
    model.doc_string = "model doc"
    model.producer_name, model.producer_version, model.model_version = "prod", "1.2", 7
    h.set_model_props(model, {"author": "someone", "license": "MIT"})
    model.graph.doc_string = "graph doc"
    model.graph.node[0].doc_string = "map doc"
    model.graph.node[0].name = "the_map"
    model.graph.node.insert(0, h.make_node("Relu", ["w"], ["w_relu"], name="other"))
    model.graph.output.append(tensor_info("w_relu", T.FLOAT, [1]))
    unused_fn = h.make_function(
        "lib", "Unused", ["a"], ["b"], [h.make_node("Neg", ["a"], ["b"])], [h.make_opsetid("", 17)]
    )
    model.functions.append(unused_fn)
    model.opset_import.append(h.make_opsetid("lib", 1))
    lowered = lower_and_compare(model, feeds)
    assert lowered.doc_string == "model doc"
    assert (lowered.producer_name, lowered.producer_version, lowered.model_version) == (
        "prod",
        "1.2",
        7,
    )
    assert {p.key: p.value for p in lowered.metadata_props} == {
        "author": "someone",
        "license": "MIT",
    }
    assert lowered.graph.doc_string == "graph doc"
    assert [i.name for i in lowered.graph.initializer] == ["bias"]
    assert [i.name for i in lowered.graph.input] == [i.name for i in model.graph.input]
    assert [o.name for o in lowered.graph.output] == [o.name for o in model.graph.output]
    assert [f.name for f in lowered.functions] == ["Unused"]
    loop = next(n for n in lowered.graph.node if n.op_type == "Loop")
    assert (loop.name, loop.doc_string) == ("the_map", "map doc")
    assert any(n.name == "other" and n.op_type == "Relu" for n in lowered.graph.node)


def test_external_data_is_kept(tmp_path) -> None:
    big = np.arange(4096, dtype=np.float32)
    # onnx.helper, not text: a 4096-element initializer written out would drown the test.
    b = body([h.make_node("Add", ["x", "w"], ["y"])], ["x"], ["y"])
    model = make_model(
        [h.make_node("SequenceMap", ["s"], ["out"], body=b)],
        [seq_info("s")],
        [seq_info("out")],
        initializers=[onnx.numpy_helper.from_array(big, "w")],
    )
    path = tmp_path / "ext.onnx"
    on_disk = onnx.ModelProto.FromString(model.SerializeToString())  # onnx.save edits its input
    onnx.save(on_disk, path, save_as_external_data=True, location="ext.data", size_threshold=0)
    assert (tmp_path / "ext.data").stat().st_size == big.nbytes
    lowered = seqlower.lower(path)
    onnx.checker.check_model(lowered, full_check=True)
    assert_equivalent(model, lowered, {"s": [np.ones(4096, np.float32)]})


def test_cleanup_can_be_skipped() -> None:
    model, feeds = CASES["multi_io"]()
    model.graph.node.append(h.make_node("Neg", ["t"], ["dead"], name="dead_end"))
    kept = seqlower.lower(model, cleanup=False)
    assert any(n.name == "dead_end" for n in kept.graph.node)
    cleaned = seqlower.lower(model)
    assert not any(n.name == "dead_end" for n in cleaned.graph.node)
    assert_equivalent(model, kept, feeds)


def test_model_without_sequence_map_is_unchanged_by_lowering() -> None:
    model = parse("test (float[2] x) => (float[2] y) { y = Neg (x) }")
    pass_ = LowerSequenceMap()
    result = pass_(ir.serde.deserialize_model(model))
    assert not result.modified and pass_.rewritten == 0


def test_body_output_that_is_an_outer_scope_value() -> None:
    """Neither onnxruntime nor onnx.reference runs this original; the lowered model runs."""
    model = parse(
        """
        test (seq(float[]) s, float[2] w) => (seq(float[]) ys, seq(float[]) ws) {
            ys, ws = SequenceMap (s) <body: graph = body (float[] x) => (float[] y, float[] w) {
                y = Neg (x)
            }>
        }
        """,
        check=False,  # a body output that is an outer-scope value: invalid ONNX
    )
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    s, w = floats((3,), (1,)), np.array([1.0, 2.0], np.float32)
    ys, ws = ort_run(lowered, {"s": s, "w": w})
    assert [y.tobytes() for y in ys] == [(-x).tobytes() for x in s]
    assert [v.tobytes() for v in ws] == [w.tobytes(), w.tobytes()]


@pytest.mark.parametrize("length", [0, 1, 5])
def test_static_shapes_take_the_scan_output_form(length: int) -> None:
    # The body returns y twice, an outer-scope value and a body input: each needs care as a
    # scan output. (Returning 'w' directly is why no runtime runs this original: expected by hand.)
    model = parse(
        """
        test (seq(float[4]) s, float[2] t, float[3] w)
            => (seq(float[]) a, seq(float[]) b, seq(float[]) c, seq(float[]) d) {
            a, b, c, d = SequenceMap (s, t) <
                body: graph = body (float[4] x, float[2] t)
                    => (float[4] y, float[4] y, float[3] w, float[2] t) {
                    y = Neg (x)
                }>
        }
        """,
        check=False,  # a body output that is an outer-scope value: invalid ONNX
    )
    # The pass alone: ONNX's inference fails on this invalid body, so the pipeline could check
    # none of its declared sizes and would forget them (the carried form, as in
    # test_body_output_that_is_an_outer_scope_value).
    ir_model = ir.serde.deserialize_model(model)
    LowerSequenceMap()(ir_model)
    lowered = ir.serde.serialize_model(ir_model)
    assert_lowered_ok(model, lowered)
    ops = all_op_types(lowered)
    assert ops.count("SplitToSequence") == 4 and "SequenceInsert" not in ops
    feeds = {
        "s": floats(*[(4,)] * length),
        "t": np.array([1, 2], np.float32),
        "w": np.array([3, 4, 5], np.float32),
    }
    a, b_, c, d = ort_run(lowered, feeds)
    assert [x.tobytes() for x in a] == [(-x).tobytes() for x in feeds["s"]]
    assert [x.tobytes() for x in b_] == [x.tobytes() for x in a]
    assert [x.tobytes() for x in c] == [feeds["w"].tobytes()] * length
    assert [x.tobytes() for x in d] == [feeds["t"].tobytes()] * length


def test_cleanup_sorts_only_out_of_order_graphs() -> None:
    from seqlower.pipeline import SortIfNeeded

    model = parse("test (float[2] x) => (float[2] b) { b = Neg (a)  a = Abs (x) }", check=False)
    unsorted = ir.serde.deserialize_model(model)
    assert SortIfNeeded()(unsorted).modified
    assert [n.op_type for n in unsorted.graph] == ["Abs", "Neg"]
    assert not SortIfNeeded()(unsorted).modified
    lowered, _ = CASES["nested_sequence_map"]()
    ir_model = ir.serde.deserialize_model(seqlower.lower(lowered, cleanup=False))
    assert not SortIfNeeded()(ir_model).modified  # lowering keeps every graph in order


def _reduce_map(reduce: str, width: int, out: int) -> onnx.ModelProto:
    """Issue 45's "reduce" kind, small: each [n, width] element times a weight, Relu, then
    ``reduce`` over its rows, a static [out] result whatever n (0 included)."""
    weight = np.random.default_rng(width * 8 + out).standard_normal((width, out))
    elem = h.make_tensor_type_proto(T.FLOAT, ["N", width])
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["m"]),
        h.make_node("Relu", ["m"], ["r"]),
    ]
    if reduce == "ReduceSum":  # its axes an input since opset 13
        axes = h.make_tensor("axes", T.INT64, [1], [0])
        nodes += [
            h.make_node("Constant", [], ["axes"], value=axes),
            h.make_node(reduce, ["r", "axes"], ["y"], keepdims=0),
        ]
    else:
        nodes.append(h.make_node(reduce, ["r"], ["y"], axes=[0], keepdims=0))
    mapped = h.make_graph(
        nodes,
        "body",
        [h.make_tensor_value_info("x", T.FLOAT, ["N", width])],
        [h.make_tensor_value_info("y", T.FLOAT, [out])],
    )
    return make_model(
        [h.make_node("SequenceMap", ["s"], ["out"], body=mapped)],
        [h.make_value_info("s", h.make_sequence_type_proto(elem))],
        [seq_info("out", T.FLOAT, [out])],
        initializers=[onnx.numpy_helper.from_array(weight.astype(np.float32), "w")],
    )


@settings(max_examples=30, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 5), max_size=6),
    width=st.integers(1, 4),
    out=st.integers(1, 4),
    reduce=st.sampled_from(["ReduceMax", "ReduceMin", "ReduceSum"]),
    special=st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan]),
    data=st.data(),
)
def test_reducing_maps_match_over_lengths_and_element_sizes(
    lengths: list[int], width: int, out: int, reduce: str, special: float, data: st.DataObject
) -> None:
    """Bit for bit with onnxruntime's own SequenceMap, an empty sequence, empty elements and
    special values (signed zeros, infinities, NaN: where a max or a sum's order shows) included."""
    model = _reduce_map(reduce, width, out)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    elements = []
    for n in lengths:
        element = rng.standard_normal((n, width)).astype(np.float32)
        element[rng.random((n, width)) < 0.2] = special
        elements.append(element)
    lowered = seqlower.lower(model)
    assert_lowered_ok(model, lowered)
    assert assert_equivalent(model, lowered, {"s": elements}) == "onnxruntime"
