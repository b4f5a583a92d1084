"""Loops for runtimes without Loop: the Loop-to-Scan rewrite, the deploy targets' pipelines and
their repairs, run on onnxruntime, OpenVINO and tract against the original on onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import seqlower
from seqlower.cli.commands import cli
from seqlower.errors import TargetError
from seqlower.passes import (
    PASSES,
    ExplicitConstantOfShapeValue,
    FoldStaticIfs,
    LoopToScan,
    StripSymbolicDims,
)
from seqlower.pipeline import pass_name
from seqlower.plan import build_pipeline
from seqlower.targets import TARGETS
from tests import loop_cases as cases
from tests.helpers import all_nodes, all_op_types, parse
from tests.runtimes import RuntimeFailure, assert_close, assert_same, run

RUNS = [(name, runtime) for name in cases.CASES for runtime in ("onnxruntime", "tract")]


def assert_valid(model: onnx.ModelProto) -> None:
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)


@pytest.mark.parametrize(("name", "runtime"), RUNS)
def test_exporter_loops_become_scans_that_run(name: str, runtime: str) -> None:
    model, feeds = cases.CASES[name]()
    expected = run("onnxruntime", model, feeds)
    lowered = seqlower.lower(model, target="tract", check=False)
    assert_valid(lowered)
    ops = all_op_types(lowered)
    assert "Loop" not in ops
    assert "Scan" in ops
    assert [(o.domain, o.version) for o in lowered.opset_import] == [
        (o.domain, o.version) for o in model.opset_import
    ]
    assert lowered.ir_version == model.ir_version
    assert_close(expected, run(runtime, lowered, feeds), atol=1e-7)


def test_tract_refuses_the_loops_as_written() -> None:
    """What the rewrite is for: tract has no Loop (OpenVINO runs these small ones; its
    conversion fails on the real tf2onnx loops, see docs/measurements.md)."""
    for name in ("map_fn", "dynamic_rnn", "for_loop"):
        model, feeds = cases.CASES[name]()
        with pytest.raises(RuntimeFailure, match="Loop"):
            run("tract", model, feeds)


@pytest.mark.parametrize(
    ("name", "feeds"),
    [
        # the condition's bound below M: 2 iterations of 5; 1 iteration.
        ("dynamic_rnn", {"lengths": np.array([2, 1], dtype=np.int32)}),
        ("dynamic_rnn", {"lengths": np.array([1, 0], dtype=np.int32)}),
        # M = 1 and M = 4 for a for-loop with a counter starting at a run-time value.
        ("for_loop", {"n": np.array(1, dtype=np.int64)}),
        ("for_loop", {"n": np.array(4, dtype=np.int64), "first": np.array(0, dtype=np.int64)}),
    ],
)
def test_trip_counts_match_the_loop(name: str, feeds: dict[str, np.ndarray]) -> None:
    """(Zero iterations are not among them: no runtime runs a Scan of none, see the README.)"""
    model, base = cases.CASES[name]()
    feeds = {**base, **feeds}
    lowered = seqlower.lower(model, target="tract", check=False)
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))
    assert_same(run("onnxruntime", model, feeds), run("tract", lowered, feeds))


def test_counter_final_value_and_stacked_rows_are_exact() -> None:
    model, feeds = cases.map_fn()
    lowered = seqlower.lower(model, target="tract", check=False)
    y, count = run("tract", lowered, feeds)
    np.testing.assert_array_equal(y, -feeds["x"])
    assert count.dtype == np.int32 and int(count) == 4


def test_scan_body_reads_nothing_from_outside_and_has_no_symbolic_names() -> None:
    """The form that carries every outer read (``loop-to-scan``: a Scan with no outer-scope
    reads, which OpenVINO's Scan import needs)."""
    model, _ = cases.dynamic_rnn()
    lowered = seqlower.lower(model, passes=["loop-to-scan"])
    (scan,) = [n for n in all_nodes(lowered) if n.op_type == "Scan"]
    body = scan.attribute[0].g
    defined = {i.name for i in body.input} | {o for n in body.node for o in n.output}
    reads = {i for n in body.node for i in n.input if i}
    assert reads <= defined
    assert int(scan.attribute[1].i) == 1  # num_scan_inputs: Range(0, N)
    for info in [*body.input, *body.output]:
        assert not any(d.dim_param for d in info.type.tensor_type.shape.dim), info.name


def test_a_loop_that_stops_on_data_stays_and_tract_names_it() -> None:
    model, feeds = cases.data_stop()
    with pytest.raises(TargetError) as caught:
        seqlower.lower(model, target="tract", check=False)
    assert len(caught.value.blockers) == 1
    assert "Loop node producing 'total'" in caught.value.blockers[0]
    assert "trip count is not fixed when it starts" in caught.value.blockers[0]
    assert "'c_out'" in caught.value.blockers[0]
    # OpenVINO runs such a Loop: its target keeps it.
    lowered = seqlower.lower(model, target="openvino", check=False)
    assert "Loop" in all_op_types(lowered)
    assert_same(run("onnxruntime", model, feeds), run("openvino", lowered, feeds))


def test_the_pass_alone_changes_only_what_it_can() -> None:
    model, _ = cases.data_stop()
    ir_model = ir.serde.deserialize_model(model)
    pass_ = LoopToScan()
    assert not pass_(ir_model).modified
    assert pass_.rewritten == 0
    model, _ = cases.nested()
    ir_model = ir.serde.deserialize_model(model)
    pass_ = LoopToScan()
    assert pass_(ir_model).modified
    assert pass_.rewritten == 2


CONSTANT_OF_SHAPE = """
<ir_version: 8, opset_import: ["" : 13]>
zeros_like (float[2, 3] x) => (float[2, 3] y) {
    shape = Shape(x)
    zeros = ConstantOfShape(shape)
    y = Add(x, zeros)
}
"""


def test_constant_of_shape_gets_its_value_written_out() -> None:
    model = onnx.parser.parse_model(CONSTANT_OF_SHAPE)
    ir_model = ir.serde.deserialize_model(model)
    pass_ = ExplicitConstantOfShapeValue()
    assert pass_(ir_model).modified and pass_.rewritten == 1
    repaired = ir.serde.serialize_model(ir_model)
    (node,) = [n for n in repaired.graph.node if n.op_type == "ConstantOfShape"]
    value = onnx.numpy_helper.to_array(node.attribute[0].t)
    assert value.dtype == np.float32 and value.tolist() == [0.0]
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    assert_same([feeds["x"]], run("tract", repaired, feeds))
    assert "explicit-constant-of-shape-value" in TARGETS["tract"].passes


SYMBOLIC = """
<ir_version: 8, opset_import: ["" : 13]>
named (float[n] x) => (float[m] y) <float[la] doubled> {
    doubled = Concat<axis = 0>(x, x)
    y = Neg(doubled)
}
"""


def test_exporter_symbolic_names_are_dropped_inside_the_model() -> None:
    model = onnx.parser.parse_model(SYMBOLIC)
    feeds = {"x": np.array([1.0, 2.0], dtype=np.float32)}
    with pytest.raises(RuntimeFailure, match="doubled"):
        run("tract", model, feeds)  # Impossible to unify Sym(la) with Val(4)
    ir_model = ir.serde.deserialize_model(model)
    assert StripSymbolicDims()(ir_model).modified
    repaired = ir.serde.serialize_model(ir_model)
    assert [d.dim_param for d in repaired.graph.input[0].type.tensor_type.shape.dim] == ["n"]
    assert not repaired.graph.value_info[0].type.tensor_type.shape.dim[0].dim_param
    assert_same([np.array([-1, -2, -1, -2], dtype=np.float32)], run("tract", repaired, feeds))


def test_every_target_names_registered_passes() -> None:
    for target in TARGETS.values():
        for name in [*target.pass_names, *target.requires]:
            assert name in PASSES, (target.name, name)
        assert target.loops in ("kept", "scan", "unrolled", "counted")
        assert target.reverse_sequence in ("native", "gathernd", "gather")
        scans = {
            "loop-to-scan",
            "loop-to-scan-reads",
            "loop-to-scan-fixed-states",
            "loop-to-scan-constant",
        } & set(target.pass_names)
        assert bool(scans) == (target.loops in ("scan", "unrolled", "counted"))
        unrolls = "unroll-constant-scans" in target.pass_names
        assert unrolls == (target.loops in ("unrolled", "counted"))
        counts = any(name.startswith("explicit-loop-counts") for name in target.pass_names)
        assert counts == (target.loops == "counted") == ("loop-to-scan-constant" in scans)
        form = {"lower-reverse-sequence": "gathernd", "lower-reverse-sequence-rows": "gather"}
        chosen = [form[name] for name in target.pass_names if name in form] or ["native"]
        assert chosen == [target.reverse_sequence], target.name
    assert set(TARGETS) >= {"onnxruntime", "openvino", "tract", "onnx2tf", "onnx2torch"}
    # onnx2tf's native ReverseSequence runs cases the lowered form does not (TFLite's SELECT).
    assert TARGETS["onnx2tf"].reverse_sequence == "native"


def test_target_pipelines() -> None:
    names = [pass_name(p) for p in build_pipeline(target="tract").passes]
    assert names == [
        "validate-nodes",  # every pipeline's first
        *TARGETS["tract"].passes,
        "expand-function-ops",  # tract has no CenterCropPad
        "remove-unused-nodes",
        "require-sequence-free",
        "require-no-loop",
        "require-shape-slice-bounds",
        "require-tract-ops",  # ops tract cannot load, named before any check
        "topological-sort",
    ]
    # onnxruntime's: the default pipeline, ReverseSequence lowered only where it lacks a kernel,
    # optionals of known presence folded first (it has no kernel for the opset-28 ones),
    # batch-major recurrences made time-major (it refuses them), the model re-stamped to an
    # older opset where optional ops it lacks are left.
    default = [pass_name(p) for p in build_pipeline().passes]
    gaps = [n.replace("lower-reverse-sequence", "lower-reverse-sequence-gaps") for n in default]
    gaps.insert(gaps.index("remove-unused-nodes"), "time-major-recurrences")
    # the default folds and re-stamps optionals as this row does (opset-28 conformance cases)
    assert {"fold-optionals", "restamp-op-versions"} <= set(default)
    assert [pass_name(p) for p in build_pipeline(target="onnxruntime").passes] == gaps
    with pytest.raises(ValueError, match="known targets: onnxruntime"):
        build_pipeline(target="coreml")
    with pytest.raises(ValueError, match="target"):
        build_pipeline(["lower-sequence-map"], target="tract")


def test_list_targets() -> None:
    result = CliRunner().invoke(cli, ["--list-targets"])
    assert result.exit_code == 0
    for name, target in TARGETS.items():
        assert f"{name}  [{target.measured}: {target.versions}]" in result.output
    assert "loop-to-scan" in result.output


FUNCTION = """
<ir_version: 10, opset_import: ["this" : 1, "" : 18]>
seqmap_in_function (float[N, D] X, SPLIT, float[D] W) => (float[N, D] Y2, float[K, 1] T2) {
   Y, T = this.seq_center_scale (X, SPLITNAME, W)
   Y2 = Tanh (Y)
   T2 = Abs (T)
}
<domain: "this", opset_import: ["" : 18]>
seq_center_scale (X, lens, W) => (Y, T)
{
   chunks = SplitToSequence <axis = 0> (X, lens)
   outs, totals = SequenceMap (chunks, W) <body = center_scale (chunk, w) => (scaled, total) {
      tmp = Constant <value_ints = [0]> ()
      mean = ReduceMean <keepdims = 1> (chunk, tmp)
      tmp_0 = Sub (chunk, mean)
      scaled = Mul (tmp_0, w)
      tmp_1 = Constant <value_ints = [0, 1]> ()
      tmp_2 = ReduceSum <keepdims = 0> (scaled, tmp_1)
      tmp_3 = Constant <value_ints = [1]> ()
      total = Reshape (tmp_2, tmp_3)
   }>
   Y = ConcatFromSequence <axis = 0> (outs)
   T = ConcatFromSequence <new_axis = 1, axis = 0> (totals)
}
"""


def _function_model(split: str) -> onnx.ModelProto:
    """onnxscript's shape (the sample in the README): untyped function parameters and body."""
    if split == "input":
        text = FUNCTION.replace("SPLITNAME", "lens").replace("SPLIT", "int64[K] lens")
    else:  # a constant split of two equal pieces
        text = FUNCTION.replace("(X, SPLITNAME, W)", "(X, lens, W)")
        text = text.replace(", SPLIT,", ",").replace(
            "   Y, T =", "   lens = Constant <value = int64[2] {2, 2}> ()\n   Y, T ="
        )
    model = onnx.parser.parse_model(text)
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("split", ["input", "constant"])
def test_sequence_map_in_an_untyped_local_function_is_lowered(split: str) -> None:
    model = _function_model(split)
    rng = np.random.default_rng(4)
    feeds = {"X": rng.standard_normal((4, 3)).astype(np.float32)}
    feeds["W"] = rng.standard_normal(3).astype(np.float32)
    if split == "input":
        feeds["lens"] = np.array([1, 3], dtype=np.int64)
    expected = run("onnxruntime", model, feeds)
    lowered = seqlower.lower(model)
    assert_valid(lowered)
    assert "SequenceMap" not in all_op_types(lowered)
    assert [(o.domain, o.version) for o in lowered.opset_import] == [("this", 1), ("", 18)]
    assert_same(expected, run("onnxruntime", lowered, feeds))
    if split == "input":
        # Ragged pieces of run-time sizes: a real blocker, named (no longer "annotate its type").
        with pytest.raises(seqlower.SeqlowerError, match="sizes known at run time"):
            seqlower.lower(model, sequence_free=True)
        return
    for target in ("tract", "openvino"):
        free = seqlower.lower(model, target=target, check=False)
        assert_valid(free)
        assert_same(expected, run(target, free, feeds))


@pytest.mark.parametrize("name", ["map_fn", "dynamic_rnn"])
def test_rows_form_scans_the_tensor_array_reads(name: str) -> None:
    """``loop-to-scan-rows``: x read as Gather(x, i) becomes a scan input over its first N rows
    (no copy of x per iteration on onnxruntime; benchmarks/loop_scan.py)."""
    model, feeds = cases.CASES[name]()
    lowered = seqlower.lower(model, passes=["loop-to-scan-rows"])
    assert_valid(lowered)
    (scan,) = [n for n in all_nodes(lowered) if n.op_type == "Scan"]
    body = scan.attribute[0].g
    assert "Gather" not in [n.op_type for n in body.node]
    assert "Range" not in [n.op_type for n in lowered.graph.node]
    assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


RANK_IF = """
<ir_version: 8, opset_import: ["" : 17]>
legacy_hstack (float[la] a, float[lb] b) => (float[ly] y) {
    shape = Shape(a)
    rank = Size(shape)
    one = Constant<value = int64 {1}>()
    is_1d = Equal(rank, one)
    pieces = SequenceConstruct(a, b)
    y = If(is_1d) <then_branch = then_g () => (float[lt] t) {
        t = ConcatFromSequence<axis = 0>(pieces)
    }, else_branch = else_g () => (float[le] e) {
        e = ConcatFromSequence<axis = 1>(pieces)
    }>
}
"""


def test_an_if_on_a_declared_rank_becomes_its_branch() -> None:
    """The TorchScript exporter's hstack: once the sequences are folded, the untaken branch
    concatenates 1-D tensors on axis 1, which OpenVINO and tract refuse although it never runs."""
    model = onnx.parser.parse_model(RANK_IF)
    onnx.checker.check_model(model)  # strict inference rejects the untaken branch already
    feeds = {"a": np.array([1.0, 2.0], dtype=np.float32), "b": np.array([3.0], dtype=np.float32)}
    expected = run("onnxruntime", model, feeds)
    for runtime in ("openvino", "tract"):
        with pytest.raises(RuntimeFailure):
            run(runtime, model, feeds)
        lowered = seqlower.lower(model, target=runtime, check=False)
        assert_valid(lowered)
        assert "If" not in all_op_types(lowered)
        assert [o.name for o in lowered.graph.output] == ["y"]
        assert_same(expected, run(runtime, lowered, feeds))
    # A rank that is not a graph input's declared one is not trusted: the If stays.
    ir_model = ir.serde.deserialize_model(
        onnx.parser.parse_model(
            RANK_IF.replace("shape = Shape(a)", "n = Neg(a)\n shape = Shape(n)")
        )
    )
    assert not FoldStaticIfs()(ir_model).modified


def test_a_state_the_body_never_reads_becomes_the_last_scanned_row() -> None:
    """tract discards a state input no node reads and then fails its own check; the state's
    final value is the last row of it as a scan output instead."""
    model, feeds = cases.keras_rnn()
    lowered = seqlower.lower(model, target="tract", check=False)
    (scan,) = [n for n in all_nodes(lowered) if n.op_type == "Scan"]
    body = scan.attribute[0].g
    read = {i for n in body.node for i in n.input}
    assert all(value.name in read for value in body.input)
    producers = {o: n for n in lowered.graph.node for o in n.output}
    # its initial value when the Loop runs none (the zero-trip guard: x may have no rows)
    assert producers["last"].op_type == "Where"
    assert producers[producers["last"].input[1]].op_type == "Gather"
    expected = run("onnxruntime", model, feeds)
    np.testing.assert_array_equal(expected[1], expected[0][-1])
    assert_same(expected, run("tract", lowered, feeds))


SPLIT_FIRST = """
<ir_version: 8, opset_import: ["" : 18]>
split_first (float[N, 3] x) => (float[M, 3] y) {
    shape = Shape(x)
    zero = Constant<value = int64[1] {0}>()
    n = Gather<axis = 0>(shape, zero)
    one = Constant<value = int64[1] {1}>()
    rest = Sub(n, one)
    flat = Constant<value = int64[1] {-1}>()
    rest_1d = Reshape(rest, flat)
    sizes = Concat<axis = 0>(one, rest_1d)
    pieces = SplitToSequence<axis = 0>(x, sizes)
    zero_scalar = Constant<value = int64 {0}>()
    first = SequenceAt(pieces, zero_scalar)
    one_scalar = Constant<value = int64 {1}>()
    others = SequenceAt(pieces, one_scalar)
    y = Concat<axis = 0>(others, first)
}
"""


def test_a_split_tensor_of_static_length_is_a_known_count() -> None:
    """PyTorch's split([1, N-1]) with optimize=False: the sizes are computed, their count (2) is
    static, so the sequence-free mode folds it into one Split."""
    model = onnx.parser.parse_model(SPLIT_FIRST)
    onnx.checker.check_model(model, full_check=True)
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(4, 3)}
    expected = run("onnxruntime", model, feeds)
    lowered = seqlower.lower(model, sequence_free=True)
    assert_valid(lowered)
    assert "SplitToSequence" not in all_op_types(lowered)
    for runtime in ("onnxruntime", "openvino", "tract"):
        assert_same(expected, run(runtime, lowered, feeds))


LOOP_IN_FUNCTION = f"""
<ir_version: 10, opset_import: ["" : 18, "this" : 1]>
outer (float[5, 2] x, int64 n) => (float[N, 2] ys) {{
    ys = this.body_fn(x, n)
}}
<domain: "this", opset_import: ["" : 18]>
body_fn (x, n) => (ys)
{{
    true = Constant<value = bool {{1}}>()
    zero = Constant<value = int64 {{0}}>()
    last, ys = Loop(n, true, zero) {cases.FOR_BODY}
}}
"""


def test_a_loop_in_a_model_local_function() -> None:
    """The pass rewrites a Loop inside a function (the default pipeline keeps functions); the
    targets inline functions first, which neither tract (``Unimplemented(body_fn)``) nor
    OpenVINO runs."""
    model = onnx.parser.parse_model(LOOP_IN_FUNCTION)
    onnx.checker.check_model(model, full_check=True)
    feeds = {"x": np.arange(10, dtype=np.float32).reshape(5, 2), "n": np.array(3, dtype=np.int64)}
    expected = run("onnxruntime", model, feeds)
    alone = seqlower.lower(model, passes=["loop-to-scan"])
    assert_valid(alone)
    assert [n.op_type for n in alone.functions[0].node][-1] == "Scan"
    assert_same(expected, run("onnxruntime", alone, feeds))
    for runtime in ("tract", "openvino"):
        with pytest.raises(RuntimeFailure):
            run(runtime, model, feeds)
        lowered = seqlower.lower(model, target=runtime, check=False)
        assert_valid(lowered)
        assert not lowered.functions
        # the inlined function's domain leaves the imports (inline-functions, since 468a19b)
        assert [(o.domain, o.version) for o in lowered.opset_import] == [("", 18)]
        assert_same(expected, run(runtime, lowered, feeds))


def _while_loop(
    compare: str, swap: bool, offset: int, start: int, step_on: str, with_m: bool, and_max: bool
) -> onnx.ModelProto:
    """A while-loop ``counter (+1) + offset <compare> limit`` (maybe through float Casts, maybe
    ANDed with ``i < max``), the counter starting at ``start``; it returns the counter and the
    stacked iteration numbers."""
    left = "moved" if step_on == "next" else ("counter" if step_on == "counter" else "i32")
    sides = (f"f_{left}", "f_lim") if not swap else ("f_lim", f"f_{left}")
    flipped = {"Less": "Greater", "LessOrEqual": "GreaterOrEqual"}[compare] if swap else compare
    m_input = "m" if with_m else ""
    cond = "cmp"
    extra = ""
    if and_max:
        extra = """
                f_i = Cast<to = 1>(i)
                f_max = Cast<to = 1>(max)
                below = Less(f_i, f_max)
                both = And(below, cmp)"""
        cond = "both"
    text = f"""
        <ir_version: 8, opset_import: ["" : 13]>
        while_loop (int32 limit, int64 m, int32 max, bool go) => (int32 count, int64[K] seen) {{
            start = Constant<value = int32 {{{start}}}>()
            count, lim_out, seen = Loop({m_input}, go, start, limit) <body = while_body (
                int64 i, bool c, int32 counter, int32 lim
            ) => (bool c_out, int32 next, int32 lim_same, int64 at) {{
                one = Constant<value = int32 {{1}}>()
                next = Add(counter, one)
                off = Constant<value = int32 {{{offset}}}>()
                i32 = Cast<to = 6>(i)
                moved_base = Identity({"next" if step_on == "next" else "counter"})
                moved = Add(moved_base, off)
                f_{left} = Cast<to = 1>({left})
                f_lim = Cast<to = 1>(lim)
                cmp = {flipped}({sides[0]}, {sides[1]}){extra}
                c_out = Identity({cond})
                lim_same = Identity(lim)
                at = Identity(i)
            }}>
        }}
    """
    model = onnx.parser.parse_model(text)
    onnx.checker.check_model(model, full_check=True)
    return model


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    compare=st.sampled_from(["Less", "LessOrEqual"]),
    swap=st.booleans(),
    offset=st.integers(-2, 2),
    start=st.integers(-3, 3),
    step_on=st.sampled_from(["next", "counter", "iteration"]),
    with_m=st.booleans(),
    and_max=st.booleans(),
    limit=st.integers(-4, 8),
    m=st.integers(0, 8),
    max_=st.integers(0, 8),
    go=st.booleans(),
    form=st.sampled_from(["loop-to-scan", "loop-to-scan-reads"]),
)
def test_trip_count_property(
    compare: str,
    swap: bool,
    offset: int,
    start: int,
    step_on: str,
    with_m: bool,
    and_max: bool,
    limit: int,
    m: int,
    max_: int,
    go: bool,
    form: str,
) -> None:
    """The Scan runs as many iterations as the Loop, for every form of the condition tf2onnx
    writes and a few it could, whatever M, the limit, the start and the initial condition, in
    OpenVINO's form (outer reads carried) and tract's (outer reads kept)."""
    if step_on == "iteration" and offset != 0:
        offset = 0
    model = _while_loop(compare, swap, offset, start, step_on, with_m, and_max)
    feeds = {
        "limit": np.array(limit, dtype=np.int32),
        "m": np.array(m, dtype=np.int64),
        "max": np.array(max_, dtype=np.int32),
        "go": np.array(go),
    }
    expected = run("onnxruntime", model, feeds)
    lowered = seqlower.lower(model, passes=[form])
    assert "Loop" not in all_op_types(lowered)
    assume(len(expected[1]) > 0)  # no runtime runs a Scan of zero iterations (README)
    assert_same(expected, run("onnxruntime", lowered, feeds))


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_target_pipeline_lowers_an_exporter_model(target: str) -> None:
    """Each row's pipeline runs: a tf2onnx map_fn with a ReverseSequence in its body, kept or
    lowered as the row says, its Loop kept or made a Scan as the row says."""
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 13]>
        rev (float[4, 3, 2] x, int64[3] lens) => (float[4, 3, 2] y) {
            y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
        }
        """
    )
    loop_model, feeds = cases.map_fn()
    row = TARGETS[target]
    lowered = seqlower.lower(model, target=target, check=False)
    assert_valid(lowered)
    assert ("ReverseSequence" in all_op_types(lowered)) == (row.reverse_sequence == "native")
    if (
        row.loops == "unrolled"
    ):  # a Scan of a run-time trip count (onnx2torch, tvm, tinygrad): exit 2
        with pytest.raises(TargetError, match="has no converter for Scan"):
            seqlower.lower(loop_model, target=target, check=False)
        return
    if "require-onnx2tf-loops" in row.requires:  # scan outputs of a run-time count: ONNX_LOOP
        with pytest.raises(TargetError, match="ONNX_LOOP"):
            seqlower.lower(loop_model, target=target, check=False)
        return
    lowered_loop = seqlower.lower(loop_model, target=target, check=False)
    assert_valid(lowered_loop)
    # A Loop of a run-time count: kept (onnx2tf's with its count written out).
    assert ("Loop" in all_op_types(lowered_loop)) == (row.loops in ("kept", "counted"))
    assert_same(run("onnxruntime", loop_model, feeds), run("onnxruntime", lowered_loop, feeds))


GROW = """
<ir_version: 8, opset_import: ["" : 13]>
grow (float[3] x, int64 n) => (float[K] y) {
    true = Constant<value = bool {1}>()
    empty = SequenceEmpty<dtype = 1>()
    s = Loop(n, true, empty) <body = grow_body (int64 i, bool c, seq(float) acc)
        => (bool c_out, seq(float) acc2) {
        acc2 = SequenceInsert(acc, x)
        c_out = Identity(c)
    }>
    y = ConcatFromSequence<axis = 0>(s)
}
"""


def test_a_loop_carrying_a_sequence_is_left_to_the_sequence_passes() -> None:
    """Scan carries tensors only: alone, the pass leaves the Loop (with the reason); in the
    targets' pipelines StackLoopSequences first makes its sequence a scan output."""
    model = onnx.parser.parse_model(GROW)
    onnx.checker.check_model(model, full_check=True)
    ir_model = ir.serde.deserialize_model(model)
    assert not LoopToScan()(ir_model).modified
    feeds = {"x": np.array([1, 2, 3], dtype=np.float32), "n": np.array(2, dtype=np.int64)}
    expected = run("onnxruntime", model, feeds)
    for runtime in ("tract", "openvino"):
        lowered = seqlower.lower(model, target=runtime, check=False)
        assert_valid(lowered)
        ops = set(all_op_types(lowered))
        assert not ops & {"SequenceEmpty", "SequenceInsert", "ConcatFromSequence"}
        # OpenVINO runs the Loop once it carries a tensor; tract gets a Scan.
        assert ("Loop" in ops) == (runtime == "openvino")
        assert_same(expected, run(runtime, lowered, feeds))


CONSTANT_THEN_IF = """
<ir_version: 10, opset_import: ["" : 20]>
g (float[2] x) => (float[2] y) {
  s = ReduceSum (x)
  zero = Constant <value = float {0.}> ()
  c = Greater (s, zero)
  r = If (c) <then_branch = tg () => (float[2] a) {
    a = Constant <value = float[2] {0., 0.}> ()
  }, else_branch = eg () => (float[2] b) {
    b = Neg (x)
  }>
  y = Add (r, x)
}
"""


def test_an_if_whose_then_branch_is_constant_gets_it_as_else() -> None:
    """tract 0.23.9 gives the If the then branch's constant whatever the condition (a wrong
    answer when the else branch is taken); swapped, it matches."""
    model = onnx.parser.parse_model(CONSTANT_THEN_IF)
    taken_else = {"x": np.array([-1.0, -2.0], dtype=np.float32)}
    taken_then = {"x": np.array([1.0, 2.0], dtype=np.float32)}
    lowered = seqlower.lower(model, target="tract", check=False)
    assert_valid(lowered)
    (if_node,) = [n for n in lowered.graph.node if n.op_type == "If"]
    assert if_node.attribute[0].g.node[0].op_type == "Neg"
    for feeds in (taken_else, taken_then):
        assert_same(run("onnxruntime", model, feeds), run("tract", lowered, feeds))
        assert_same(run("onnxruntime", model, feeds), run("onnxruntime", lowered, feeds))


def test_an_if_of_constants_becomes_a_where() -> None:
    """Both branches constant: swapping cannot help (tract would fold to the other one), a
    Where per output does."""
    text = CONSTANT_THEN_IF.replace("b = Neg (x)", "b = Constant <value = float[2] {5., 7.}> ()")
    model = onnx.parser.parse_model(text)
    lowered = seqlower.lower(model, target="tract", check=False)
    assert_valid(lowered)
    ops = set(all_op_types(lowered))
    assert "If" not in ops and "Where" in ops
    for x in ([-1.0, -2.0], [1.0, 2.0]):
        feeds = {"x": np.array(x, dtype=np.float32)}
        expected = run("onnxruntime", model, feeds)
        assert_same(expected, run("tract", lowered, feeds))
        assert_same(expected, run("onnxruntime", lowered, feeds))


@pytest.mark.parametrize("runtime", ["onnxruntime", "tract"])
def test_a_state_the_body_returns_unchanged_keeps_its_start(runtime: str) -> None:
    """A state read by nothing in the body and returned as it is (a loop-invariant limit once
    the condition is gone): its final value is its initial one (it referred to the removed body
    input, an invalid model, until 2026-11-24)."""
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[3] x, int64 n, float[3] keep) => (float[3] y, float[3] kept) {
            t = Constant<value = bool {1}>()
            y, kept = Loop(n, t, x, keep) <body = b (int64 i, bool c, float[3] xi, float[3] k)
                => (bool c, float[3] xo, float[3] k) {
                xo = Neg(xi)
            }>
        }
        """
    )
    lowered = seqlower.lower(model, target="tract", check=False)
    assert_valid(lowered)
    for trips in (1, 3):
        feeds = {
            "x": np.array([1, 2, 3], np.float32),
            "n": np.array(trips),
            "keep": np.array([5, 6, 7], np.float32),
        }
        assert_same(run("onnxruntime", model, feeds), run(runtime, lowered, feeds))


# A Loop growing a state by Concat (tf2onnx's ragged loops, the grown form of a map over pieces
# of run-time sizes): a Scan's states keep their shape (onnxruntime preallocates them).
GROWN = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[5, 2] x, int64 n) => (float[M, 2] acc_out) {
        true = Constant<value = bool {1}>()
        empty = Constant<value = float[0, 2] {}>()
        acc_out = Loop(n, true, empty) <body = b (int64 i, bool c, float[K, 2] acc)
            => (bool c_out, float[L, 2] grown) {
            zero = Constant<value = int64[1] {0}>()
            j = Unsqueeze(i, zero)
            row = Gather<axis = 0>(x, j)
            grown = Concat<axis = 0>(acc, row)
            c_out = Identity(c)
        }>
    }
    """
)


def test_a_grown_state_stays_a_loop_for_tract() -> None:
    """tract's loop-to-scan leaves a state that grows (a Scan's states keep their shape): the
    Loop stays, named by the row's check. tract's row turns such a state into a scan output
    first (``grown-states-as-scan-outputs``: ``test_grown_states_as_scan_outputs.py``)."""
    with pytest.raises(seqlower.TargetError, match="'acc' grows by a Concat each iteration"):
        seqlower.lower(GROWN, passes=["loop-to-scan-fixed-states", "require-no-loop"], check=False)
    assert "Loop" not in all_op_types(seqlower.lower(GROWN, target="tract", check=False))
    # Where the Scans of a constant count are unrolled afterwards, it is still taken.
    alone = seqlower.lower(GROWN, passes=["loop-to-scan-reads"], check=False)
    assert [n.op_type for n in alone.graph.node][-1] == "Scan"


SIZE_IF = """
<ir_version: 8, opset_import: ["" : 18]>
affine_grid_sizes (int64[4] size) => (int64[2] y) {
    count = Size(size)
    four = Constant<value = int64 {4}>()
    is_2d = Equal(count, four)
    y = If(is_2d) <then_branch = then_g () => (int64[2] t) {
        n, c, h, w = Split<num_outputs = 4>(size)
        t = Concat<axis = 0>(h, w)
    }, else_branch = else_g () => (int64[2] e) {
        n2, c2, d2, h2, w2 = Split<num_outputs = 5>(size)
        e = Concat<axis = 0>(h2, w2)
    }>
}
"""


def test_an_if_on_a_declared_size_becomes_its_branch() -> None:
    """ONNX's AffineGrid function tells 2-D from 3-D by ``Size(size)``; the untaken branch splits
    the 4 sizes in 5, which OpenVINO refuses although it never runs (ONNX's
    test_affine_grid_*_expanded cases)."""
    model = onnx.parser.parse_model(SIZE_IF)
    feeds = {"size": np.array([2, 3, 5, 6], dtype=np.int64)}
    expected = run("onnxruntime", model, feeds)
    with pytest.raises(RuntimeFailure):
        run("openvino", model, feeds)
    lowered = seqlower.lower(model, target="openvino", check=False)
    assert_valid(lowered)
    assert "If" not in all_op_types(lowered)
    assert_same(expected, run("openvino", lowered, feeds))
    # A size that is not a graph input's declared static shape is not trusted: the If stays.
    for text in (
        SIZE_IF.replace("int64[4] size", "int64[k] size"),
        SIZE_IF.replace("count = Size(size)", "m = Neg(size)\n count = Size(m)"),
    ):
        ir_model = ir.serde.deserialize_model(onnx.parser.parse_model(text))
        assert not FoldStaticIfs()(ir_model).modified


def test_a_state_that_changes_rank_stays_a_loop_named() -> None:
    """Paddle carries a placeholder state that starts as a scalar 0 and becomes a [3]: a Scan's
    states keep their shape, and a loop that may run none cannot run its first iteration before
    (peel-first-iteration), so it is refused naming the state (it was an invalid Scan that
    onnxruntime refused to load)."""
    model = parse(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[3] x, int64 n) => (float[3] y) {
            t = Constant<value = bool {1}>()
            s0 = Constant<value = float {0}>()
            y = Loop(n, t, s0) <body = b (int64 i, bool c, float[?] s)
                    => (bool c_out, float[3] s2) {
                c_out = Identity(c)
                s2 = Add(s, x)
            }>
        }
        """
    )
    with pytest.raises(
        TargetError,
        match=r"starts of shape \[\] and the body returns it of shape \[3\].*may run no iteration",
    ):
        seqlower.lower(model, target="tract", check=False)
