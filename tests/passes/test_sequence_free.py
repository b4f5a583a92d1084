"""The sequence-free mode: no sequence op or value left, same outputs on every runtime, or exit 2
naming every blocker with nothing written."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seqlower
from seqlower.cli.commands import cli
from seqlower.cli.options import choose_passes
from seqlower.errors import SequenceFreeError
from seqlower.passes import (
    SEQUENCE_OPS,
    FoldSequenceOps,
    ScanSequenceMap,
    UnrollSequenceMap,
)
from seqlower.targets import PIPELINES
from tests import sequence_free_cases as cases
from tests.helpers import all_op_types, assert_one_line_error, every_graph, ort_run, run_cli
from tests.runtimes import RUNTIMES, RuntimeFailure, assert_same, run

CASES = cases.CASES


@functools.cache
def lowered_case(name: str) -> tuple[onnx.ModelProto, onnx.ModelProto, dict[str, Any]]:
    model, feeds = CASES[name]()
    return model, seqlower.lower(model, sequence_free=True), feeds


def sequence_typed_values(model: onnx.ModelProto) -> list[str]:
    """Names of every value declared with a sequence type, in every graph."""
    return [
        info.name
        for graph in every_graph(model.graph)
        for info in [*graph.input, *graph.output, *graph.value_info]
        if info.type.HasField("sequence_type")
    ]


@pytest.mark.parametrize("name", list(CASES))
def test_case_is_sequence_free_and_valid(name: str) -> None:
    model, lowered, _ = lowered_case(name)
    onnx.checker.check_model(lowered, full_check=True)
    assert not SEQUENCE_OPS & set(all_op_types(lowered))
    assert sequence_typed_values(lowered) == []
    assert lowered.ir_version == model.ir_version
    assert [(o.domain, o.version) for o in lowered.opset_import] == [
        (o.domain, o.version) for o in model.opset_import
    ]


#: tf2onnx's patterns keep their Loop, which tract does not implement (the original's neither).
NEEDS_LOOP = {"tf2onnx_map_fn", "tf2onnx_ragged"}


@pytest.mark.parametrize("runtime", list(RUNTIMES))
@pytest.mark.parametrize("name", list(CASES))
def test_case_runs_and_matches_on(name: str, runtime: str) -> None:
    model, lowered, feeds = lowered_case(name)
    if runtime.startswith("tract") and name in NEEDS_LOOP:
        with pytest.raises(RuntimeFailure, match="Unimplemented\\(Loop\\)"):
            run(runtime, lowered, feeds)
        return
    assert_same(ort_run(model, feeds), run(runtime, lowered, feeds))


def test_pytorch_rank_ifs_fold_away() -> None:
    """Each unrolled copy knows its element's rank: no Shape/Size/If/Equal is left."""
    names = ["hstack_atleast_1d", "vstack_atleast_2d", "dstack_atleast_3d"]
    names += ["torch_lib_hstack", "torch_lib_vstack", "torch_lib_dstack"]
    for name in names:
        _, lowered, _ = lowered_case(name)
        left = {"If", "Shape", "Size", "Equal", "LessOrEqual", "CastLike"}
        assert not left & set(all_op_types(lowered)), name


def test_loop_built_sequences_become_tensors() -> None:
    _, stacked, _ = lowered_case("tf2onnx_map_fn")
    _, ragged, _ = lowered_case("tf2onnx_ragged")
    assert all_op_types(stacked).count("Loop") == 1
    assert "Concat" in all_op_types(ragged)  # the carried, growing tensor


def test_runtime_length_becomes_a_scan() -> None:
    _, lowered, _ = lowered_case("onnxscript_rows")
    ops = all_op_types(lowered)
    assert "Scan" in ops and "Loop" not in ops  # tract has Scan but no Loop


def untyped_hstack() -> tuple[onnx.ModelProto, list[np.ndarray]]:
    arrays = cases._floats((3,), (), (2,))
    model = cases.torch_stack(cases.ATLEAST_1D, arrays, 0, 1)
    body = next(n for n in model.graph.node if n.op_type == "SequenceMap").attribute[0].g
    body.output[0].ClearField("type")  # as the exporter leaves it: onnxruntime refuses this
    return model, arrays


def test_fully_untyped_body() -> None:
    model, arrays = untyped_hstack()
    with pytest.raises(Exception, match="data type"):
        ort_run(model, cases._feeds(arrays))
    lowered = seqlower.lower(model, sequence_free=True)
    onnx.checker.check_model(lowered, full_check=True)
    expected = np.hstack([np.atleast_1d(a) for a in arrays])
    for runtime in RUNTIMES:
        assert_same([expected], run(runtime, lowered, cases._feeds(arrays)))


def test_mixed_element_types_become_valid() -> None:
    """One real export puts an int64 and a float tensor in one SequenceConstruct (invalid ONNX);
    unrolled, each copy has one type and the model is valid."""
    model = onnx.parser.parse_model(
        f"""{cases.HEADER}
        g (int64[2] a, float b) => (int64[d] x, float[e] y) {{{cases.CONSTANTS}
            seq = SequenceConstruct(a, b)
            mapped = SequenceMap<{cases.ATLEAST_1D}>(seq)
            i0 = Constant<value = int64 {{0}}>()
            i1 = Constant<value = int64 {{1}}>()
            x = SequenceAt(mapped, i0)
            y = SequenceAt(mapped, i1)
        }}"""
    )
    body = next(n for n in model.graph.node if n.op_type == "SequenceMap").attribute[0].g
    cases._untype(body)
    lowered = seqlower.lower(model, sequence_free=True)
    onnx.checker.check_model(lowered, full_check=True)
    feeds = {"a": np.array([4, -2], np.int64), "b": np.array(1.5, np.float32)}
    for runtime in RUNTIMES:
        assert_same([feeds["a"], np.array([1.5], np.float32)], run(runtime, lowered, feeds))


def test_folding_touches_only_the_unrolled_copies() -> None:
    """onnxscript's folder would fold the user's own constant If and Add and name unnamed nodes;
    restricted to the copies, everything else stays as it was."""
    arrays = cases._floats((3,), (), (2,))
    text = cases.torch_stack(cases.ATLEAST_1D, arrays, 0, 1)
    text.graph.output.append(onnx.helper.make_tensor_value_info("kept", onnx.TensorProto.FLOAT, []))
    extra = onnx.parser.parse_graph(
        """extra () => () {
            u_c1 = Constant<value = float {2}>()
            u_c2 = Constant<value = float {3}>()
            u_sum = Add(u_c1, u_c2)
            u_cond = Constant<value = bool {1}>()
            kept = If(u_cond) <then_branch = u_t () => (float u_r) { u_r = Identity(u_sum) },
                                else_branch = u_e () => (float u_q) { u_q = Neg(u_sum) }>
        }"""
    )
    text.graph.node.extend(extra.node)
    for node in text.graph.node:
        node.name = ""
    lowered = seqlower.lower(text, sequence_free=True)
    ops = all_op_types(lowered)
    assert ops.count("If") == 1 and ops.count("Add") == 1
    names = ("u_c1", "u_c2", "u_sum", "u_cond", "kept")
    user = [n for n in lowered.graph.node if n.output[0] in names]
    assert [n.name for n in user] == [""] * 5
    assert "pkg.onnxscript" not in str(lowered)
    feeds = cases._feeds(arrays)
    assert_same(ort_run(text, feeds), run("onnxruntime", lowered, feeds))


def test_default_pipeline_is_unchanged() -> None:
    assert choose_passes(None, ()) == list(PIPELINES["default"].passes)
    model, feeds = CASES["hstack_atleast_1d"]()
    lowered = seqlower.lower(model)
    assert "Loop" in all_op_types(lowered) and "SequenceAt" in all_op_types(lowered)
    assert_same(ort_run(model, feeds), ort_run(lowered, feeds))


def test_passes_work_in_any_pass_manager() -> None:
    model, feeds = CASES["split_known_count"]()
    ir_model = ir.serde.deserialize_model(model)
    passes = [FoldSequenceOps(), UnrollSequenceMap(), FoldSequenceOps(), ScanSequenceMap()]
    ir.passes.PassManager([*passes, ir.passes.common.RemoveUnusedNodesPass()])(ir_model)
    lowered = ir.serde.serialize_model(ir_model)
    assert not SEQUENCE_OPS & set(all_op_types(lowered))
    assert_same(ort_run(model, feeds), ort_run(lowered, feeds))


# ---------------------------------------------------------------- what blocks it

SEQUENCE_INPUT = """<ir_version: 8, opset_import: ["" : 18]>
g (seq(float[3]) s) => (float[n] y) {
    mapped = SequenceMap<body = f (float[3] e) => (float[3] r) { r = Neg(e) }>(s)
    y = ConcatFromSequence<axis = 0>(mapped)
}"""

SEQUENCE_OUTPUT = """<ir_version: 8, opset_import: ["" : 18]>
g (float[3] a, float[3] b) => (seq(float[3]) mapped) {
    seq = SequenceConstruct(a, b)
    mapped = SequenceMap<body = f (float[3] e) => (float[3] r) { r = Neg(e) }>(seq)
}"""

# Elements of two shapes at a run-time position (one shape is stacked: test_stack_sequences.py).
RUNTIME_POSITION = """<ir_version: 8, opset_import: ["" : 18]>
g (float[3] a, float[4] b, int64 i) => (float[N] y) {
    seq = SequenceConstruct(a, b)
    y = SequenceAt(seq, i)
}"""

VARYING_SHAPE = """<ir_version: 8, opset_import: ["" : 18]>
g (float[N, 3] x) => (int64[2, M] y) {
    seq = SplitToSequence<axis = 0, keepdims = 0>(x)
    mapped = SequenceMap<body = f (float[3] e) => (int64[1, K] r) { r = NonZero(e) }>(seq)
    y = ConcatFromSequence<axis = 1>(mapped)
}"""


LOOP_READS_ITS_SEQUENCE = """<ir_version: 8, opset_import: ["" : 18]>
g (float[3] x, int64 n) => (float[M] y) {
    zero_1d = Constant<value = int64[1] {0}>()
    go = Constant<value = bool {1}>()
    empty = SequenceEmpty<dtype = 1>()
    s = Loop(n, go, empty) <body = step (int64 i, bool c, seq(float[L]) acc) =>
                                        (bool c_out, seq(float[L]) acc_out) {
        count = SequenceLength(acc)
        count_1d = Unsqueeze(count, zero_1d)
        piece = Slice(x, count_1d, count_1d)
        acc_out = SequenceInsert(acc, piece)
        c_out = Identity(c)
    }>
    y = ConcatFromSequence<axis = 0>(s)
}"""


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (SEQUENCE_INPUT, ["graph input 's'", "SequenceMap node", "ConcatFromSequence node"]),
        (SEQUENCE_OUTPUT, ["graph output 'mapped'"]),
        (
            RUNTIME_POSITION,
            ["SequenceAt node", "position 'i' is not a constant", "not proven to have one shape"],
        ),
        (VARYING_SHAPE, ["SequenceMap node", "may change from one element to the next"]),
        (
            LOOP_READS_ITS_SEQUENCE,
            ["Loop node producing 's'", "carried sequence 'acc' is not only appended to"],
        ),
    ],
)
def test_blockers_are_named(text: str, words: list[str], tmp_path: Path) -> None:
    model = onnx.parser.parse_model(text)
    with pytest.raises(SequenceFreeError) as caught:
        seqlower.lower(model, sequence_free=True)
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    result = CliRunner().invoke(cli, [str(source), "-o", str(target), "--sequence-free"])
    assert result.exit_code == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("seqlower: error: cannot make the model")
    assert f"({len(caught.value.blockers)} blocker" in lines[0]
    assert [line.removeprefix("  - ") for line in lines[1:]] == caught.value.blockers
    assert all(word in result.stderr for word in words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx"]


def test_ir_model_is_put_back_when_blocked() -> None:
    ir_model = ir.serde.deserialize_model(onnx.parser.parse_model(SEQUENCE_INPUT))
    before = ir.serde.serialize_model(ir_model).SerializeToString()
    with pytest.raises(SequenceFreeError):
        seqlower.lower(ir_model, sequence_free=True)
    assert ir.serde.serialize_model(ir_model).SerializeToString() == before


# ---------------------------------------------------------------- the command line


@pytest.mark.parametrize(
    "name", ["dstack_atleast_3d", "onnxscript_rows", "insert_chain", "tf2onnx_ragged"]
)
def test_cli_flag_lowers_and_checks(name: str, tmp_path: Path) -> None:
    model, feeds = CASES[name]()
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    result = CliRunner().invoke(cli, [str(source), "-o", str(target), "--sequence-free"])
    assert result.exit_code == 0, result.stderr
    assert "outputs match" in result.stdout and "require-sequence-free" in result.stdout
    written = onnx.load(target)
    assert not SEQUENCE_OPS & set(all_op_types(written))
    assert_same(ort_run(model, feeds), run("openvino", written, feeds))


# ---------------------------------------------------------------- property


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shapes=st.lists(
        st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple), min_size=3, max_size=8
    ),
    seed=st.integers(0, 2**16),
)
def test_any_ranks_column_stack(shapes: list[tuple[int, ...]], seed: int) -> None:
    """Any mix of ranks 0-3 through atleast_3d, flattened and concatenated: equal to the
    original on onnxruntime, and to numpy."""
    arrays = cases._floats(*shapes, seed=seed)
    flat = "\n".join(f"        f{k} = Flatten<axis = 0>(e{k})" for k in range(len(arrays)))
    model = cases.exported(cases._flattened(arrays, flat))
    feeds = cases._feeds(arrays)
    lowered = seqlower.lower(model, sequence_free=True)
    assert not SEQUENCE_OPS & set(all_op_types(lowered))
    expected = np.concatenate([np.atleast_3d(a).reshape(1, -1) for a in arrays], axis=1)
    assert_same([expected], ort_run(lowered, feeds))
    assert_same(ort_run(model, feeds), ort_run(lowered, feeds))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_scan_form_any_axes(data: st.DataObject) -> None:
    """SplitToSequence (any axis, keepdims) → SequenceMap → ConcatFromSequence (any axis,
    new_axis) with a run-time count: the Scan form equals the original on onnxruntime."""
    rank = data.draw(st.integers(1, 3), label="rank")
    axis = data.draw(st.integers(-rank, rank - 1), label="split axis")
    keepdims = data.draw(st.sampled_from([0, 1]), label="keepdims")
    new_axis = data.draw(st.sampled_from([0, 1]), label="new_axis")
    element_rank = rank if keepdims else rank - 1
    out_rank = element_rank + new_axis
    if out_rank == 0:
        return  # concatenating scalars is not a ConcatFromSequence
    concat_axis = data.draw(st.integers(-out_rank, out_rank - 1), label="concat axis")
    shape = data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank), label="shape")
    dims = ",".join(f"D{k}" for k in range(rank))
    out_dims = ",".join(f"O{k}" for k in range(out_rank))
    model = onnx.parser.parse_model(
        f"""{cases.HEADER}
        g (float[{dims}] x, float s) => (float[{out_dims}] y) {{
            seq = SplitToSequence<axis = {axis}, keepdims = {keepdims}>(x)
            mapped = SequenceMap<body = f (float e, float t) => (float r) {{
                m = Mul(e, t)
                r = Sin(m)
            }}>(seq, s)
            y = ConcatFromSequence<axis = {concat_axis}, new_axis = {new_axis}>(mapped)
        }}"""
    )
    body = model.graph.node[1].attribute[0].g
    for value in [body.input[0], body.output[0]]:
        value.type.tensor_type.ClearField("shape")
    rng = np.random.default_rng(len(shape))
    feeds = {"x": rng.standard_normal(shape).astype(np.float32), "s": np.array(1.5, np.float32)}
    lowered = seqlower.lower(model, sequence_free=True)
    assert "Scan" in all_op_types(lowered)
    assert_same(ort_run(model, feeds), ort_run(lowered, feeds))


def test_without_the_folder_the_copies_keep_their_ifs(monkeypatch: pytest.MonkeyPatch) -> None:
    """An onnxscript whose folder seqlower does not know: no folding, still sequence-free."""
    from seqlower.passes import _fold

    monkeypatch.setattr(_fold, "_folding", lambda: None)
    model, feeds = CASES["dstack_atleast_3d"]()
    lowered = seqlower.lower(model, sequence_free=True)
    assert "If" in all_op_types(lowered) and not SEQUENCE_OPS & set(all_op_types(lowered))
    assert_same(ort_run(model, feeds), ort_run(lowered, feeds))


def _many_pieces(body: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(
        f"""{cases.HEADER}
        g (float[100, 3] x) => (float[100, 3] y) {{
            seq = SplitToSequence<axis = 0, keepdims = 0>(x)
            mapped = SequenceMap<body = f (float[3] e) => (float[3] r) {{ {body} }}>(seq)
            y = ConcatFromSequence<axis = 0, new_axis = 1>(mapped)
        }}"""
    )


def test_many_static_pieces_run_as_a_scan() -> None:
    """A known count above SPLIT_LIMIT is not unrolled: the map becomes a Scan."""
    model = _many_pieces("r = Softmax(e)")
    feeds = {"x": cases._floats((100, 3))[0]}
    lowered = seqlower.lower(model, sequence_free=True)
    assert "Scan" in all_op_types(lowered) and "Split" not in all_op_types(lowered)
    assert_same(ort_run(model, feeds), ort_run(lowered, feeds))


def test_an_elementwise_map_of_rows_runs_on_the_tensor() -> None:
    """No Scan either when the body works element by element: it runs once on x."""
    model = _many_pieces("r = Neg(e)")
    feeds = {"x": cases._floats((100, 3))[0]}
    lowered = seqlower.lower(model, sequence_free=True)
    assert all_op_types(lowered) == ["Neg"]
    assert [o.name for o in lowered.graph.output] == ["y"]
    assert_same([-feeds["x"]], ort_run(lowered, feeds))
    for target in ("openvino", "tract"):
        assert all_op_types(seqlower.lower(model, target=target, check=False)) == ["Neg"]


# ---------------------------------------------------------------- --unroll-input


def test_unroll_input_replaces_a_sequence_input(tmp_path: Path) -> None:
    model = onnx.parser.parse_model(SEQUENCE_INPUT)
    lowered = seqlower.lower(model, sequence_free=True, unroll_inputs={"s": 3})
    assert [i.name for i in lowered.graph.input] == ["s_0", "s_1", "s_2"]
    assert not SEQUENCE_OPS & set(all_op_types(lowered))
    feeds = {f"s_{k}": cases._floats((3,), seed=k)[0] for k in range(3)}
    expected = ort_run(model, {"s": list(feeds.values())})
    for runtime in RUNTIMES:
        assert_same(expected, run(runtime, lowered, feeds))
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    args = [str(source), "-o", str(target), "--sequence-free", "--unroll-input", "s=3"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.stderr
    assert "outputs match" in result.stdout  # the original got the three tensors as its sequence
    assert [i.name for i in onnx.load(target).graph.input] == ["s_0", "s_1", "s_2"]


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("t=2", "no input of that name (inputs: s)"),
        ("s=0", "K must be at least 1"),
        ("s", "expected NAME=VALUE"),
    ],
)
def test_unroll_input_errors(spec: str, words: str, tmp_path: Path) -> None:
    source, target = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(onnx.parser.parse_model(SEQUENCE_INPUT), source)
    args = [str(source), "-o", str(target), "--sequence-free", "--unroll-input", spec]
    assert_one_line_error(run_cli(*args), words)
    assert not target.exists()


def test_unroll_input_must_name_a_sequence() -> None:
    model = onnx.parser.parse_model(RUNTIME_POSITION)
    with pytest.raises(seqlower.SeqlowerError, match="--unroll-input a: that input is not"):
        seqlower.lower(model, sequence_free=True, unroll_inputs={"a": 2})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_insert_erase_program(data: st.DataObject) -> None:
    """A random chain of SequenceInsert/SequenceErase (default, positive and negative positions)
    from SequenceEmpty or SequenceConstruct, read by SequenceAt, SequenceLength and
    ConcatFromSequence: folded to tensor ops, equal to the original on onnxruntime."""
    count = data.draw(st.integers(0, 3), label="constructed")
    lines = []
    length, current, fresh = count, "s0", 0
    if count:
        lines.append(f"s0 = SequenceConstruct({', '.join(f'x{k}' for k in range(count))})")
    else:
        lines.append("s0 = SequenceEmpty<dtype = 1>()")
    for step in range(data.draw(st.integers(1, 6), label="steps")):
        erase = length > 1 and data.draw(st.booleans(), label="erase")
        position = data.draw(st.none() | st.integers(-length, length - (1 if erase else 0)))
        args = current
        if position is not None:
            lines.append(f"p{step} = Constant<value = int64 {{{position}}}>()")
        if erase:
            args += f", p{step}" if position is not None else ""
            lines.append(f"s{step + 1} = SequenceErase({args})")
            length -= 1
        else:
            args += f", x{fresh % 4}" + (f", p{step}" if position is not None else "")
            lines.append(f"s{step + 1} = SequenceInsert({args})")
            length, fresh = length + 1, fresh + 1
        current = f"s{step + 1}"
    at = data.draw(st.integers(-length, length - 1), label="at")
    body = "\n            ".join(lines)
    model = onnx.parser.parse_model(
        f"""{cases.HEADER}
        g (float[2] x0, float[2] x1, float[2] x2, float[2] x3) => (float[n,2] y, float[2] e,
                                                                    int64 k) {{
            {body}
            y = ConcatFromSequence<axis = 0, new_axis = 1>({current})
            i = Constant<value = int64 {{{at}}}>()
            e = SequenceAt({current}, i)
            k = SequenceLength({current})
        }}"""
    )
    feeds = {f"x{k}": cases._floats((2,), seed=k)[0] for k in range(4)}
    lowered = seqlower.lower(model, sequence_free=True)
    assert not SEQUENCE_OPS & set(all_op_types(lowered))
    assert_same(ort_run(model, feeds), ort_run(lowered, feeds))


def test_rows_stacked_back_inside_a_branch_stay_valid() -> None:
    """The map outside, its ConcatFromSequence in an If branch that returns it: the branch
    must not return the outer result directly (onnxruntime refuses that)."""
    model = onnx.parser.parse_model(
        f"""{cases.HEADER}
        g (float[N, 3] x, bool c) => (float[N, 3] y) {{
            seq = SplitToSequence<axis = 0, keepdims = 0>(x)
            mapped = SequenceMap<body = f (float[3] e) => (float[3] r) {{ r = Neg(e) }}>(seq)
            y = If(c) <
                then_branch = t () => (float[N, 3] a) {{
                    a = ConcatFromSequence<axis = 0, new_axis = 1>(mapped)
                }},
                else_branch = e () => (float[N, 3] b) {{ b = Identity(x) }}
            >
        }}"""
    )
    x = cases._floats((5, 3))[0]
    lowered = seqlower.lower(model, sequence_free=True)
    assert not SEQUENCE_OPS & set(all_op_types(lowered))
    for c in (True, False):
        feeds = {"x": x, "c": np.array(c)}
        assert_same(ort_run(model, feeds), ort_run(lowered, feeds))


@pytest.mark.parametrize("rows", [1, 5, 64])
def test_an_elementwise_map_of_few_rows_is_not_unrolled(rows: int) -> None:
    """A count known when lowering would be split and unrolled (one body copy per row): an
    elementwise body runs once on the tensor instead."""
    model = onnx.parser.parse_model(
        f"""{cases.HEADER}
        g (float[{rows}, 3] x) => (float[{rows}, 3] y) {{
            seq = SplitToSequence<axis = 0, keepdims = 0>(x)
            mapped = SequenceMap<body = f (float[3] e) => (float[3] r) {{
                w = Constant<value = float[3] {{1, -2, 3}}>()
                m = Mul(e, w)
                r = Relu(m)
            }}>(seq)
            y = ConcatFromSequence<axis = 0, new_axis = 1>(mapped)
        }}"""
    )
    feeds = {"x": cases._floats((rows, 3))[0]}
    lowered = seqlower.lower(model, sequence_free=True)
    assert sorted(all_op_types(lowered)) == ["Constant", "Mul", "Relu"]
    assert_same(ort_run(model, feeds), ort_run(lowered, feeds))
