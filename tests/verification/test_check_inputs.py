"""The check proves valid models with no flags: inputs drawn from the graph's constraints, an
oracle for what onnxruntime cannot run, an honest summary, and --inputs validated."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seqlower
from seqlower.verification import CheckOptions, Tolerances, verify
from seqlower.verification.constraints import Slot, analyze
from seqlower.verification.inputs import InputError, validate_inputs
from seqlower.verification.runtimes import OnnxRuntime, Reference
from tests.helpers import assert_one_line_error, parse, run_cli

#: The models here may call functions of a "local" domain.
parse_local = partial(parse, domains={"local": 1})


# Real exporter shapes: tf2onnx casts int32 lengths to int64 and names every dim unk__N.
PATTERNS = {
    "tf2onnx_cast_lengths": """
g (float[unk__1, unk__2, 8] x, int32[unk__3] seq_len) => (float[unk__1, unk__2, 8] y) {
  lens = Cast<to = 7>(seq_len)
  y = ReverseSequence<time_axis = 0, batch_axis = 1>(x, lens)
}""",
    "tf2onnx_transposed_to_time_major": """
g (float[unk__7, unk__8, 5] x, int32[unk__9] seq_len) => (float[unk__8, unk__7, 5] y) {
  t = Transpose<perm = [1, 0, 2]>(x)
  lens = Cast<to = 7>(seq_len)
  y = ReverseSequence<time_axis = 0, batch_axis = 1>(t, lens)
}""",
    "tf2onnx_lengths_through_reshape": """
g (float[unk__1, unk__2, 3] x, int32[unk__3, 1] seq_len) => (float[unk__1, unk__2, 3] y) {
  shape = Constant<value = int64[1] {-1}>()
  flat = Reshape(seq_len, shape)
  lens = Cast<to = 7>(flat)
  y = ReverseSequence<time_axis = 0, batch_axis = 1>(x, lens)
}""",
    "tf2onnx_batch_major_through_identity": """
g (float[unk__4, unk__5, 3] x, int32[unk__6] seq_len) => (float[unk__4, unk__5, 3] y) {
  i = Identity(seq_len)
  lens = Cast<to = 7>(i)
  y = ReverseSequence<time_axis = 1, batch_axis = 0>(x, lens)
}""",
    "constant_lengths_symbolic_data": """
g (float[T, B, 2] x) => (float[T, B, 2] y) {
  lens = Constant<value = int64[4] {1, 5, 0, 3}>()
  y = ReverseSequence<time_axis = 0, batch_axis = 1>(x, lens)
}""",
    "outer_lengths_in_sequence_map": """
g (seq(float[T, B, 2]) s, int64[B] lens) => (seq(float[T, B, 2]) out) {
  out = SequenceMap(s) <body = b (float[T, B, 2] x) => (float[T, B, 2] y) {
    y = ReverseSequence<time_axis = 0, batch_axis = 1>(x, lens)
  }>
}""",
    "two_sequences_and_a_broadcast_tensor": """
g (seq(float[N, C]) a, seq(float[N, C]) b, float[C] w) => (seq(float[N, C]) out) {
  out = SequenceMap(a, b) <body = body (float[N, C] x, float[N, C] y) => (float[N, C] z) {
    t = Add(x, y)
    z = Mul(t, w)
  }>
}""",
    "gather_through_unsqueeze_squeeze": """
g (float[A, 5] x, int32[2] i32) => (float[2, 5] y) {
  i = Cast<to = 7>(i32)
  zero = Constant<value = int64[1] {0}>()
  j = Unsqueeze(i, zero)
  k = Squeeze(j, zero)
  y = Gather<axis = 0>(x, k)
}""",
    "gather_of_a_vector_and_concat": """
g (float[A, B] x, int64[4] table, int16 pick, int64[1] more) => (float[A, ?] y) {
  p = Cast<to = 7>(pick)
  picked = Gather(table, p)
  zero = Constant<value = int64[1] {0}>()
  u = Unsqueeze(picked, zero)
  both = Concat<axis = 0>(u, more)
  y = Gather<axis = 1>(x, both)
}""",
    "sequence_positions": """
g (seq(float[H]) s, int32 at32, int64 insert_at) => (float[H] y, seq(float[H]) t) {
  at = Cast<to = 7>(at32)
  y = SequenceAt(s, at)
  t = SequenceInsert(s, y, insert_at)
}""",
    "topk_and_split": """
g (float[3, L] x, int32[1] k32, int64[2] parts)
  => (float[3, ?] v, int64[3, ?] ix, float[3, ?] a, float[3, ?] b) {
  k = Cast<to = 7>(k32)
  v, ix = TopK<axis = 1>(x, k)
  a, b = Split<axis = 1>(x, parts)
}""",
    "gathernd_and_gatherelements": """
g (float[4, 6, 2] x, int64[3, 2] idx, int64[4, 6, 2] el) => (float[3, 2] y, float[4, 6, 2] z) {
  y = GatherND(x, idx)
  z = GatherElements<axis = 1>(x, el)
}""",
    "loop_trip_and_outer_index": """
g (int32 n32, float[5] x, int64 at) => (float[5] y, float[?] picked) {
  n = Cast<to = 7>(n32)
  y, picked = Loop(n, , x) <body = b (int64 i, bool c, float[5] v)
      => (bool co, float[5] w, float p) {
    co = Identity(c)
    w = Neg(v)
    p = Gather(v, at)
  }>
}""",
    "scan_slices_and_if_branch": """
g (float[S, 4] xs, int64 col, bool flag) => (float[S] picked, float[4] chosen) {
  zero = Constant<value = float {0}>()
  state, picked = Scan(zero, xs) <num_scan_inputs = 1,
      body = b (float s, float[4] row) => (float s2, float p) {
    s2 = Identity(s)
    p = Gather(row, col)
  }>
  chosen = If(flag) <then_branch = t () => (float[4] r) {
    r = Gather<axis = 0>(xs, col)
  }, else_branch = e () => (float[4] r2) {
    axes = Constant<value = int64[1] {0}>()
    r2 = ReduceSum<keepdims = 0>(xs, axes)
  }>
}""",
    "function_call": """
g (float[T, B, 2] x, int32[B] lens32) => (float[T, B, 2] y) {
  y = local.Rev(x, lens32)
}
<domain: "local", opset_import: ["" : 17]>
Rev (data, raw) => (out) {
  lens = Cast<to = 7>(raw)
  out = ReverseSequence<time_axis = 0, batch_axis = 1>(data, lens)
}""",
    "range_onehot_min_max_abs": """
g (int64 start, int64 limit, int64 delta, int64 depth, float[W] x, int64[2] i)
  => (int64[?] r, float[2, ?] oh, float[2] g) {
  r = Range(start, limit, delta)
  vals = Constant<value = float[2] {0, 1}>()
  oh = OneHot(i, depth, vals)
  a = Abs(i)
  lo = Min(a, a)
  hi = Max(lo, lo)
  g = Gather(x, hi)
}""",
}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_pattern_verifies_with_no_flags(name: str, tmp_path: Path) -> None:
    model = parse_local(PATTERNS[name])
    report = verify(model, seqlower.lower(model))
    assert report.ok, report.reason
    # Every draw was accepted first time: the inputs were valid, not lucky (an empty-sequence
    # run a SequenceAt rejects is skipped, and says so).
    skipped = tuple(f"run {s.index}," for s in report.skipped)
    assert [p for p in report.input_problems if not p.startswith(skipped)] == []
    source = tmp_path / "m.onnx"
    onnx.save(model, source)
    # Through verify: a pattern with nothing to lower is written by `seqlower -o` unchecked.
    code, out, err = run_cli("verify", source, source)
    assert code == 0, err
    assert "check: outputs match" in out


def test_tf2onnx_lengths_are_drawn_in_range() -> None:
    model = parse_local(PATTERNS["tf2onnx_cast_lengths"])
    report = verify(model, model, n=20)
    assert report.ok and report.input_problems == []
    for run in report.runs:  # the lengths count follows the batch of x (tied, names differ)
        assert run.inputs["seq_len"] == [run.inputs["x"][1]]


def test_lengths_reshaped_from_a_column_follow_a_given_batch() -> None:
    model = parse_local(PATTERNS["tf2onnx_lengths_through_reshape"])
    report = verify(model, seqlower.lower(model), dims={"unk__2": 5})
    assert report.ok and report.input_problems == []
    assert report.runs[0].inputs["seq_len"] == [5, 1]


def test_sequence_elements_mapped_together_agree() -> None:
    model = parse_local(PATTERNS["two_sequences_and_a_broadcast_tensor"])
    report = verify(model, seqlower.lower(model), n=5)
    assert report.ok
    for run in report.runs:
        assert run.inputs["a"] == run.inputs["b"]  # i-th elements agree on N and C
        assert all(shape[1] == run.inputs["w"][0] for shape in run.inputs["a"])
    # Elements of one sequence still differ (only C is shared with the tensor).
    assert any(len({s[0] for s in run.inputs["a"]}) > 1 for run in report.runs)


def test_a_draw_that_cannot_fit_names_the_input_and_the_node() -> None:
    model = parse_local("""
g (float[T, B, 2] x, int64[5] lens) => (float[T, B, 2] y) {
  y = ReverseSequence<time_axis = 0, batch_axis = 1>(x, lens)
}""")
    model.graph.node[0].name = "rs"
    report = verify(model, model, input_shapes={"x": (3, 3, 2)})
    assert report.status == "cannot_verify"
    assert "ReverseSequence node 'rs' rejected inputs 'lens', 'x'" in report.reason
    # A feed that contradicts a declared shape is named by onnxruntime's own check.
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 4
    report = verify(model, model, input_shapes={"x": (3, 3, 2)}, n=1)
    assert "onnxruntime refused input 'x'" in report.reason


# ---------------------------------------------------------------- oracles


CENTER_CROP = """
g (seq(uint8[H, W, 3]) images) => (seq(float[3, 4, 5]) out) {
  sizes = Constant<value = int64[2] {4, 5}>()
  out = SequenceMap(images) <body = b (uint8[H, W, 3] img) => (float[3, 4, 5] y) {
    c = CenterCropPad<axes = [0, 1]>(img, sizes)
    f = Cast<to = 1>(c)
    y = Transpose<perm = [2, 0, 1]>(f)
  }>
}"""


def test_reference_oracle_runs_a_map_over_a_function_op_reading_outer_scope() -> None:
    model = onnx.parser.parse_model('<ir_version: 8, opset_import: ["" : 18]>' + CENTER_CROP)
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime's issue #22100
        OnnxRuntime().load(model).run({"images": [np.zeros((2, 3, 3), np.uint8)]})
    report = verify(model, seqlower.lower(model))
    assert report.ok and report.skipped == [], report.reason
    assert report.oracles["reference"] == "onnx.reference"
    assert len(report.runs) == 4 and report.runs[-1].inputs["images"] == []


LOOP_SCAN = """
g (int64 n, float[3] x) => (float[3] y, float[?, 3] ys, float[?] sums) {
  y, ys, sums = Loop(n, , x) <body = b (int64 i, bool c, float[3] v)
      => (bool co, float[3] w, float[3] s, float t) {
    co = Identity(c)
    w = Neg(v)
    s = Identity(v)
    t = ReduceSum<keepdims = 0>(v)
  }>
}"""


@pytest.mark.parametrize("trips", [0, 1, 3])
def test_reference_oracle_loops_agree_with_onnxruntime(trips: int) -> None:
    model = parse_local(LOOP_SCAN)
    feeds = {"n": np.array(trips, np.int64), "x": np.arange(3, dtype=np.float32)}
    expected = OnnxRuntime().load(model).run(feeds)
    got = Reference().load(model).run(feeds)  # omitted condition, zero trips, scalar scans
    for e, g in zip(expected, got, strict=True):
        assert e.shape == g.shape and e.dtype == g.dtype
        np.testing.assert_array_equal(e, g)


def test_reference_oracle_maps_empty_sequences_and_zips_several() -> None:
    model = parse_local("""
g (seq(float[N]) a, seq(float[N]) b, float k) => (seq(float[N]) out) {
  out = SequenceMap(a, b, k) <body = body (float[N] x, float[N] y, float z) => (float[N] w) {
    s = Add(x, y)
    w = Mul(s, z)
  }>
}""")
    runner = Reference().load(model)
    assert runner.run({"a": [], "b": [], "k": np.float32(2)}) == [[]]
    a = [np.ones(2, np.float32), np.ones(3, np.float32)]
    b = [np.full(2, 2, np.float32), np.full(3, 3, np.float32)]
    [out] = runner.run({"a": a, "b": b, "k": np.array(2, np.float32)})
    assert [o.tolist() for o in out] == [[6, 6], [8, 8, 8]]
    report = verify(model, seqlower.lower(model), oracles=(Reference(),))
    assert report.ok and report.oracles == {
        "reference": "onnx.reference",
        "candidate": "onnx.reference",
    }


# ---------------------------------------------------------------- the summary


SEQUENCE_AT = """
g (seq(float[H]) s) => (float[H] first, seq(float[H]) negs) {
  zero = Constant<value = int64 {0}>()
  first = SequenceAt(s, zero)
  negs = SequenceMap(s) <body = b (float[H] x) => (float[H] y) { y = Neg(x) }>
}"""


def test_summary_says_which_runs_were_skipped_and_why(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(parse_local(SEQUENCE_AT), source)
    code, out, err = run_cli(source, "-o", tmp_path / "out.onnx")
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("check:"))
    assert "outputs match in 3 runs; run 4 (empty sequences) was skipped" in line
    assert "SequenceAt" in line  # why: the node that rejects an empty sequence
    assert "outputs match: all outputs match" not in out


def test_runs_are_numbered_from_one() -> None:
    model = parse_local(SEQUENCE_AT)
    report = verify(model, seqlower.lower(model))
    assert [run.index for run in report.runs] == [1, 2, 3]
    assert [s.index for s in report.skipped] == [4]
    assert all(p.startswith("run 4") for p in report.input_problems)


def test_no_shape_hint_when_the_user_gave_every_shape(tmp_path: Path) -> None:
    model = parse_local("""
g (float[T, B, 2] x, int64[2] lens) => (float[T, B, 2] y) {
  y = ReverseSequence<time_axis = 0, batch_axis = 1>(x, lens)
}""")
    report = verify(model, model, input_shapes={"x": (3, 3, 2)})
    assert report.status == "cannot_verify"
    assert "--dim" not in report.reason and "--inputs" in report.reason


# ---------------------------------------------------------------- --inputs


RS = """
g (float[T, B, 4] x, int32[B] lens32) => (float[T, B, 4] y) {
  lens = Cast<to = 7>(lens32)
  y = ReverseSequence<time_axis = 0, batch_axis = 1>(x, lens)
}"""
X = np.zeros((3, 2, 4), np.float32)


@pytest.mark.parametrize(
    ("arrays", "words"),
    [
        ({"x": X, "lens32": np.array([3, 1], np.int32), "extra": X}, ["'extra'", "no input"]),
        ({"X": X, "lens32": np.array([3, 1], np.int32)}, ["'X'", "no input"]),
        ({"lens32": np.array([3, 1], np.int32)}, ["'x'"]),
        ({"x": X, "lens32": np.array([3, 1], np.int64)}, ["'lens32'", "int64", "int32"]),
        ({"x": X[0], "lens32": np.array([3, 1], np.int32)}, ["'x'", "rank 2"]),
        ({"x": X[:, :, :2], "lens32": np.array([3, 1], np.int32)}, ["'x'", "axis 2"]),
        ({"x": X, "lens32": np.array([7, 1], np.int32)}, ["'lens32'", "7", "ReverseSequence"]),
    ],
)
def test_bad_inputs_files_are_exit_2_naming_the_input(
    tmp_path: Path, arrays: dict[str, Any], words: list[str]
) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(parse_local(RS), source)
    np.savez(tmp_path / "in.npz", **arrays)
    code, _, err = run_cli(source, "-o", tmp_path / "o.onnx", "--inputs", tmp_path / "in.npz")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert not (tmp_path / "o.onnx").exists()


def test_good_inputs_file_verifies(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(parse_local(RS), source)
    np.savez(tmp_path / "in.npz", x=X, lens32=np.array([3, 0], np.int32))
    code, out, err = run_cli(source, "-o", tmp_path / "o.onnx", "--inputs", tmp_path / "in.npz")
    assert code == 0 and "outputs match in 1 run " in out, err


def test_validation_through_the_api_and_in_sequences() -> None:
    model = parse_local(PATTERNS["sequence_positions"])
    s = [np.zeros(2, np.float32)] * 2
    validate_inputs(model, {"s": s, "at32": np.array(-2, np.int32), "insert_at": np.array(2)})
    with pytest.raises(InputError, match="'at32' holds 2, out of range"):
        validate_inputs(model, {"s": s, "at32": np.array(2, np.int32), "insert_at": np.array(0)})
    with pytest.raises(InputError, match="'s' must be a sequence"):
        validate_inputs(model, {"s": s[0], "at32": np.array(0, np.int32), "insert_at": 0})
    with pytest.raises(InputError):
        verify(model, model, inputs=[{"s": s, "at32": np.array(5, np.int32), "insert_at": 0}])


def test_clamped_lengths_are_not_refused() -> None:
    # Min(lens, T) clamps: a large length is valid input, so validation must not refuse it.
    model = parse_local("""
g (float[T, B, 2] x, int64[B] raw, int64[1] cap) => (float[T, B, 2] y) {
  lens = Min(raw, cap)
  y = ReverseSequence<time_axis = 0, batch_axis = 1>(x, lens)
}""")
    feeds = {
        "x": np.zeros((3, 2, 2), np.float32),
        "raw": np.array([9, 1]),
        "cap": np.array([3]),
    }
    validate_inputs(model, feeds)
    assert verify(model, seqlower.lower(model), inputs=[feeds]).ok


def test_check_options_object() -> None:
    model = parse_local(PATTERNS["tf2onnx_cast_lengths"])
    seen: list[tuple[int, int]] = []
    options = CheckOptions(
        n=2,
        tolerances=Tolerances(rtol=1e-3, per_output={"y": (1e-4, None)}),
        on_run=lambda k, total: seen.append((k, total)),
    )
    assert verify(model, seqlower.lower(model), options).ok
    assert seen == [(1, 2), (2, 2)]
    assert options.tolerances.for_output("y") == (1e-4, None)
    assert options.tolerances.for_output("other") == (1e-3, None)
    with pytest.raises(TypeError):
        verify(model, model, options, n=3)


# ---------------------------------------------------------------- property


OPS = ("ReverseSequence", "Gather", "TopK")
PLACES = ("main", "sequence_map", "if", "loop", "function")
CHAINS = {
    "cast": ["{o} = Cast<to = 7>({i})"],
    "cast_identity": ["t_ = Identity({i})", "{o} = Cast<to = 7>(t_)"],
    "unsqueeze_squeeze_cast": [
        "z_ = Constant<value = int64[1] {{0}}>()",
        "u_ = Unsqueeze({i}, z_)",
        "q_ = Squeeze(u_, z_)",
        "{o} = Cast<to = 7>(q_)",
    ],
}


def _program(op: str, time_axis: int, chain: str, dtype: str, named: bool) -> tuple[str, str, str]:
    """(index input declaration, the op's lines reading data `x` and raw index `raw`, out)."""
    t, b = ("T", "B") if named else ("?", "?")
    lines = [line.format(i="raw", o="idx") for line in CHAINS[chain]]
    if op == "ReverseSequence":
        decl = f"{dtype}[{b if time_axis == 0 else 'B2'}] raw"
        lines.append(
            f"res = ReverseSequence<time_axis = {time_axis}, batch_axis = {1 - time_axis}>(x, idx)"
        )
        if time_axis == 1:
            decl = f"{dtype}[{t}] raw"
    elif op == "Gather":
        decl = f"{dtype}[2] raw"
        lines.append(f"res = Gather<axis = {time_axis}>(x, idx)")
    else:
        decl = f"{dtype}[1] raw"
        lines.append(f"res, ix_ = TopK<axis = {time_axis}>(x, idx)")
    return decl, "\n    ".join(lines), "res"


@st.composite
def index_models(draw: st.DrawFn) -> onnx.ModelProto:
    op = draw(st.sampled_from(OPS))
    place = draw(st.sampled_from(PLACES))
    time_axis = draw(st.sampled_from([0, 1]))
    chain = draw(st.sampled_from(sorted(CHAINS)))
    dtype = draw(st.sampled_from(["int32", "int64", "int16", "uint8"]))
    named = draw(st.booleans())
    t, b = ("T", "B") if named else ("?", "?")
    decl, body, out = _program(op, time_axis, chain, dtype, named)
    shape = f"float[{t}, {b}, 3]"
    if place == "main":
        text = f"g ({shape} x, {decl}) => (float[?, ?, ?] y) {{\n    {body}\n"
        text += f"    y = Identity({out})\n}}"
    elif place == "sequence_map":
        # The index comes from the outer scope; the data is each element of the sequence.
        text = (
            f"g (seq({shape}) s, {decl}) => (seq(float[?, ?, ?]) y) {{\n"
            f"  y = SequenceMap(s) <body = m ({shape} x) => (float[?, ?, ?] r) {{\n"
            f"    {body}\n    r = Identity({out})\n  }}>\n}}"
        )
    elif place == "if":
        text = (
            f"g ({shape} x, {decl}, bool flag) => (float[?, ?, ?] y) {{\n"
            f"  y = If(flag) <then_branch = th () => (float[?, ?, ?] r) {{\n"
            f"    {body}\n    r = Identity({out})\n  }}, else_branch = el () => "
            f"(float[?, ?, ?] r2) {{\n    r2 = Identity(x)\n  }}>\n}}"
        )
    elif place == "loop":
        text = (
            f"g ({shape} x, {decl}, int64 n) => (float[?, ?, ?, ?] y) {{\n"
            f"  last, y = Loop(n, , n) <body = lb (int64 i, bool c, int64 k)\n"
            f"      => (bool co, int64 k2, float[?, ?, ?] r) {{\n"
            f"    co = Identity(c)\n    k2 = Identity(k)\n    {body}\n"
            f"    r = Identity({out})\n  }}>\n}}"
        )
    else:
        text = (
            f"g ({shape} x, {decl}) => (float[?, ?, ?] y) {{\n  y = local.F(x, raw)\n}}\n"
            f'<domain: "local", opset_import: ["" : 17]>\n'
            f"F (x, raw) => (res2) {{\n    {body}\n    res2 = Identity({out})\n}}"
        )
    return parse_local(text)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(index_models(), st.integers(0, 2**16))
def test_index_inputs_through_casts_and_scopes_verify(model: onnx.ModelProto, seed: int) -> None:
    analysis = analyze(model)
    assert analysis.constraints.get("raw"), "the index input was not traced"
    report = verify(model, seqlower.lower(model), seed=seed)
    assert report.ok, report.reason
    assert report.input_problems == [], report.input_problems


# ---------------------------------------------------------------- types from call sites

SCALE = """
<domain: "local", opset_import: ["" : 17]>
Scale (xs, W) => (ys) {
  ys = SequenceMap(xs, W) <body = b (float[N, C] x, float[C] k) => (float[N, C] y) {
    y = Mul(x, k)
  }>
}"""


def test_function_input_types_come_from_call_sites(tmp_path: Path) -> None:
    # onnxscript writes model-local functions with untyped inputs, as ONNX intends.
    model = parse_local(
        """
g (seq(float[N, C]) s, float[C] w) => (seq(float[N, C]) out, seq(float[N, C]) again) {
  out = local.Scale(s, w)
  again = local.Scale(out, w)
}"""
        + SCALE
    )
    lowered = seqlower.lower(model)
    assert [n.op_type for n in lowered.functions[0].node].count("SequenceMap") == 0
    assert verify(model, lowered).ok
    source = tmp_path / "m.onnx"
    onnx.save(model, source)
    code, _, err = run_cli(source, "-o", tmp_path / "out.onnx")
    assert code == 0, err


def test_conflicting_call_sites_name_both(tmp_path: Path) -> None:
    model = parse_local(
        """
g (seq(float[N, C]) s, float[C] w, seq(float[C]) ws) => (seq(float[N, C]) a, seq(float[N, C]) b) {
  first = Identity(s)
  a = local.Scale<name = "x">(first, w)
  b = local.Scale(s, ws)
}""".replace('<name = "x">', "")
        + SCALE
    )
    model.graph.node[1].name = "with_tensor"
    model.graph.node[2].name = "with_sequence"
    with pytest.raises(seqlower.InvalidModelError) as caught:
        seqlower.lower(model)
    message = str(caught.value)
    assert "'W'" in message and "local::Scale" in message
    assert "'with_tensor'" in message and "'with_sequence'" in message
    source = tmp_path / "m.onnx"
    onnx.save(model, source)
    assert_one_line_error(run_cli(source, "-o", tmp_path / "out.onnx"), "with_sequence")


# ---------------------------------------------------------------- progress


def test_progress_shows_the_current_run(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import time

    from seqlower.cli.output import Printer
    from seqlower.job import LowerOptions, lower_file

    printer = Printer(quiet=False)
    printer.progress = True  # as on a terminal
    with printer.step("checking"):
        printer.run_progress(2, 4)
        time.sleep(0.8)
    assert "seqlower: checking run 2/4... " in capsys.readouterr().err
    source = tmp_path / "m.onnx"
    onnx.save(parse_local(SEQUENCE_AT), source)
    seen: list[tuple[int, int]] = []
    result = lower_file(
        source, tmp_path / "o.onnx", LowerOptions(), on_run=lambda k, n: seen.append((k, n))
    )
    assert result.exit_code == 0 and seen == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_untyped_body_onnxruntime_refuses_verifies_in_the_reference() -> None:
    from tests.passes.test_sequence_free import untyped_hstack

    model, _ = untyped_hstack()
    report = verify(model, seqlower.lower(model, sequence_free=True))
    assert report.ok, report.reason
    assert report.oracles == {"reference": "onnx.reference", "candidate": "onnx.reference"}


def test_reference_errors_name_the_node() -> None:
    # The bundled example's shape: a map, then a stack that cannot take an empty sequence.
    model = parse_local("""
g (seq(float[H, 2]) s) => (float[n, ?, 2] y) {
  m = SequenceMap(s) <body = b (float[H, 2] x) => (float[H, 2] z) { z = Neg(x) }>
  y = ConcatFromSequence<axis = 0, new_axis = 1>(m)
}""")
    model.graph.node[1].name = "stack"
    report = verify(model, model, oracles=(Reference(),))
    assert report.ok
    [skipped] = report.skipped
    assert skipped.index == 4 and skipped.what == "empty sequences"
    assert "ConcatFromSequence node 'stack' rejected input 's'" in skipped.reason


def test_reverse_sequence_in_every_scope_verifies() -> None:
    from tests.passes.test_reverse_sequence import _nested_model

    model, _ = _nested_model()  # a map in an If branch reading outer lengths; a function
    report = verify(model, seqlower.lower(model))
    assert report.ok and report.input_problems == [], report.reason


def test_an_analysis_failure_falls_back_to_declared_types(monkeypatch: pytest.MonkeyPatch) -> None:
    import seqlower.verification.check as check

    def broken(_model: onnx.ModelProto) -> Any:
        raise ValueError("unexpected graph")

    monkeypatch.setattr(check, "analyze", broken)
    model = parse_local(
        PATTERNS["two_sequences_and_a_broadcast_tensor"].replace("float[C] w", "float w")
    )
    report = verify(model, seqlower.lower(model))
    assert report.input_problems[0].startswith("inputs drawn from declared types only")


def test_verify_command_validates_inputs_too(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(parse_local(RS), source)
    np.savez(tmp_path / "in.npz", x=X, lens32=np.array([1, 9], np.int32))
    result = run_cli("verify", source, source, "--inputs", tmp_path / "in.npz")
    assert_one_line_error(result, "'lens32' holds 9")


def test_lengths_bounded_through_every_same_shape_op() -> None:
    # The check's walk had its own list of ops that keep their input's shape, without Softsign
    # (and a dozen more of the shape rules' list): lengths of a reversal of Softsign(x) were
    # drawn with no bound on x's time axis.
    model = parse(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[T, B, 4] x, int64[B] lens) => (float[T, B, 4] y) {
          s = Softsign(x)
          y = ReverseSequence<time_axis = 0, batch_axis = 1>(s, lens)
        }
        """
    )
    (constraint,) = analyze(model).constraints["lens"]
    assert constraint.limit == Slot("x", 0)


def test_a_concat_ties_its_inputs_other_axes_across_one_of_no_input() -> None:
    # Every input of a Concat has one size on the other axes; the walk tied each input to the
    # next, so an input between them whose axis is no graph input's (an Unsqueeze's 1) left
    # a's and b's batch axes untied.
    model = parse(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[B, 2] a, float[2] v, float[C, 2] b) => (float[?, 6] y) {
          zero = Constant<value = int64[1] {0}>()
          mid = Unsqueeze(v, zero)
          y = Concat<axis = 1>(a, mid, b)
        }
        """
    )
    assert (Slot("a", 0), Slot("b", 0)) in analyze(model).ties


def test_a_broadcast_axis_is_the_size_it_broadcasts_to() -> None:
    # The walk gave a broadcast the axes of its first input of the highest rank: a + t with a
    # of [1, 4] had a's static 1 for its time axis, so the lengths were drawn in 0..1.
    model = parse(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[1, 4] a, float[T, 4] t, int64[4] lens) => (float[T, 4] y) {
          s = Add(a, t)
          y = ReverseSequence<time_axis = 0, batch_axis = 1>(s, lens)
        }
        """
    )
    (constraint,) = analyze(model).constraints["lens"]
    assert constraint.limit == Slot("t", 0)
