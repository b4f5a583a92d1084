"""The induction analysis of Loop states (``seqlower/passes/_induction.py``): the trip count it
computes before a loop equals the number of iterations onnxruntime runs, for counters of any
start, step and type, updated and compared in the forms exporters write (tf2onnx's float
``Cast``s, Paddle's ``scale`` and ``[1]``-shaped conditions, ``Not``, ``And``), counts 0
included; and what it is not (a bound on data, a step away from the limit) it refuses."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import seqlower
from seqlower.passes._emit import Emitter, NameGenerator
from seqlower.passes._induction import Condition, passes_through
from seqlower.passes._trip_counts import trip_count
from seqlower.passes._types import TypeOracle
from tests.runtimes import run

_DTYPES = {"int32": TensorProto.INT32, "int64": TensorProto.INT64, "float": TensorProto.FLOAT}
_NUMPY = {"int32": np.int32, "int64": np.int64, "float": np.float32}


def _const(name: str, value: Any, dtype: str, shape: tuple[int, ...] = ()) -> onnx.NodeProto:
    array = np.full(shape, value, dtype=_NUMPY[dtype])
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(array, name))


def _counted_loop(
    *,
    dtype: str,
    start_outer: bool,
    step: int,
    update: str,
    compared: str,
    offset: int,
    through_float: bool,
    compare: str,
    swap: bool,
    negate: bool,
    limit_kind: str,
    limit_dtype: str,
    row: bool,
    and_max: bool,
    and_cond: bool,
    with_m: bool,
) -> onnx.ModelProto:
    """A Loop over one counter: ``counter`` starts at ``start`` and steps by ``step`` (updated as
    ``update`` says), the condition compares ``compared`` (+ ``offset``) with the limit. It
    returns the counter's final value and the iteration numbers, stacked."""
    shape: tuple[int, ...] = (1,) if row else ()
    nodes: list[onnx.NodeProto] = []
    body: list[onnx.NodeProto] = []
    if not start_outer:
        nodes.append(_const("start", 2, dtype, shape))
    # the counter's update
    if update == "add":
        body += [
            _const("step_c", step, dtype),
            helper.make_node("Add", ["counter", "step_c"], ["next"]),
        ]
    elif update == "add_left":
        body += [
            _const("step_c", step, dtype),
            helper.make_node("Add", ["step_c", "counter"], ["next"]),
        ]
    elif update == "sub":
        body += [
            _const("step_c", -step, dtype),
            helper.make_node("Sub", ["counter", "step_c"], ["next"]),
        ]
    else:  # Paddle's scale: Cast<float>(x) * 1.0 + step, Reshape [1], Cast back
        body += [
            helper.make_node("Cast", ["counter"], ["c_f"], to=TensorProto.FLOAT),
            _const("scale_c", 1, "float", shape),
            helper.make_node("Mul", ["c_f", "scale_c"], ["c_scaled"]),
            _const("bias_c", step, "float"),
            helper.make_node("Add", ["c_scaled", "bias_c"], ["c_biased"]),
            helper.make_node("Identity", ["c_biased"], ["c_shaped"]),
            helper.make_node("Cast", ["c_shaped"], ["next"], to=_DTYPES[dtype]),
        ]
    base = {"counter": "counter", "next": "next", "iteration": "i"}[compared]
    value_dtype = "int64" if compared == "iteration" else dtype
    body += [
        _const("off_c", offset, value_dtype),
        helper.make_node("Add", [base, "off_c"], ["moved"]),
    ]
    left, right = "moved", "lim"
    if through_float or limit_dtype != value_dtype:
        body.append(helper.make_node("Cast", ["moved"], ["moved_f"], to=_DTYPES[limit_dtype]))
        left = "moved_f"
    if limit_kind == "constant":
        body.append(_const("lim", 5, limit_dtype))
    elif limit_kind == "state":
        body.append(helper.make_node("Identity", ["lim_state"], ["lim"]))
    else:
        body.append(helper.make_node("Identity", ["limit"], ["lim"]))
    op = compare
    if negate:
        op = {"Less": "GreaterOrEqual", "LessOrEqual": "Greater", "Greater": "LessOrEqual",
              "GreaterOrEqual": "Less"}[compare]  # fmt: skip
    if swap:
        op = {"Less": "Greater", "LessOrEqual": "GreaterOrEqual", "Greater": "Less",
              "GreaterOrEqual": "LessOrEqual"}[op]  # fmt: skip
        left, right = right, left
    body.append(helper.make_node(op, [left, right], ["cmp"]))
    cond = "cmp"
    if negate:
        body.append(helper.make_node("Not", ["cmp"], ["cmp_not"]))
        cond = "cmp_not"
    if row:
        body += [
            _const("one_shape", 1, "int64", (1,)),
            helper.make_node("Reshape", [cond, "one_shape"], ["cond_row"]),
        ]
        cond = "cond_row"
    if and_max:
        body += [
            helper.make_node("Less", ["i", "max"], ["below_max"]),
            helper.make_node("And", [cond, "below_max"], ["with_max"]),
        ]
        cond = "with_max"
    if and_cond:
        body.append(helper.make_node("And", ["cond_in", cond], ["with_cond"]))
        cond = "with_cond"
    body += [
        helper.make_node("Identity", [cond], ["cond_out"]),
        helper.make_node("Identity", ["lim_state"], ["lim_state_out"]),
        helper.make_node("Identity", ["i"], ["at"]),
    ]
    cond_shape = [1] if row else []
    graph_body = helper.make_graph(
        body,
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, cond_shape),
            helper.make_tensor_value_info("counter", _DTYPES[dtype], list(shape)),
            helper.make_tensor_value_info("lim_state", _DTYPES[limit_dtype], []),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, cond_shape),
            helper.make_tensor_value_info("next", _DTYPES[dtype], list(shape)),
            helper.make_tensor_value_info("lim_state_out", _DTYPES[limit_dtype], []),
            helper.make_tensor_value_info("at", TensorProto.INT64, []),
        ],
    )
    nodes.append(
        helper.make_node(
            "Loop",
            ["m" if with_m else "", "go", "start", "limit"],
            ["final", "lim_final", "seen"],
            body=graph_body,
        )
    )
    inputs = [
        helper.make_tensor_value_info("m", TensorProto.INT64, []),
        helper.make_tensor_value_info("go", TensorProto.BOOL, cond_shape),
        helper.make_tensor_value_info("limit", _DTYPES[limit_dtype], []),
        helper.make_tensor_value_info("max", TensorProto.INT64, []),
    ]
    if start_outer:
        inputs.append(helper.make_tensor_value_info("start", _DTYPES[dtype], list(shape)))
    graph = helper.make_graph(
        nodes,
        "counted",
        inputs,
        [
            helper.make_tensor_value_info("final", _DTYPES[dtype], list(shape)),
            helper.make_tensor_value_info("seen", TensorProto.INT64, [None]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _with_trip_count(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """The model with one more output, the trip count the analysis computes (None: refused)."""
    ir_model = ir.serde.deserialize_model(model)
    graph = ir_model.graph
    loop = next(n for n in graph if n.op_type == "Loop")
    body = loop.attributes["body"].as_graph()
    facts = Condition(loop, body, TypeOracle(ir_model))
    terms = None
    if not passes_through(body.outputs[0], body.inputs[1]):
        terms = facts.terms(body.outputs[0])
        if terms is None:
            return None
    taken = Counter(v.name for v in ir_model.graph.inputs if v.name)
    emit = Emitter(NameGenerator(taken), "count", 17)
    count = trip_count(emit, loop, terms)
    for node in emit.nodes:
        graph.insert_before(loop, node)
    count.name = "trip_count"
    graph.outputs.append(count)
    return ir.serde.serialize_model(ir_model)


_FORMS = {
    "dtype": st.sampled_from(sorted(_DTYPES)),
    "start_outer": st.booleans(),
    "step": st.sampled_from([1, 2, 3, -1, -2]),
    "update": st.sampled_from(["add", "add_left", "sub", "scale"]),
    "compared": st.sampled_from(["counter", "next", "iteration"]),
    "offset": st.integers(-2, 2),
    "through_float": st.booleans(),
    "compare": st.sampled_from(["Less", "LessOrEqual", "Greater", "GreaterOrEqual"]),
    "swap": st.booleans(),
    "negate": st.booleans(),
    "limit_kind": st.sampled_from(["outer", "constant", "state"]),
    "limit_dtype": st.sampled_from(["int32", "int64", "float"]),
    "row": st.booleans(),
    "and_max": st.booleans(),
    "and_cond": st.booleans(),
    "with_m": st.booleans(),
    "toward": st.sampled_from([True, True, True, False]),
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    form=st.fixed_dictionaries(_FORMS),
    start=st.integers(-4, 6),
    limit=st.integers(-6, 9),
    fraction=st.sampled_from([0.0, 0.5, 0.25]),
    m=st.integers(0, 9),
    max_=st.integers(0, 9),
    go=st.booleans(),
)
def test_the_trip_count_is_the_iterations_onnxruntime_runs(
    form: dict[str, Any], start: int, limit: int, fraction: float, m: int, max_: int, go: bool
) -> None:
    """For every accepted form, counts 0 and up: the count computed before the loop equals the
    length of the stacked iteration numbers, and the counter's final value is its start plus
    the count times the step (what a Scan computes it as)."""
    if form["compared"] == "iteration":
        form = {**form, "step": 1}  # the iteration number steps by one, whatever the counter's
    toward = form.pop("toward")
    strict = form["compare"] in ("Less", "Greater")
    if toward:  # mostly a bound the step moves toward (one that counts)
        ups = {True: "Less", False: "LessOrEqual"}, {True: "Greater", False: "GreaterOrEqual"}
        form["compare"] = ups[0 if form["step"] > 0 else 1][strict]
    model = _counted_loop(**form)
    counted = _with_trip_count(model)
    below = form["compare"] in ("Less", "LessOrEqual")
    up = form["step"] > 0
    stops = form["with_m"] or form["and_max"] or below == up
    # a float counter from a run-time start may hold 0.3, whose sums are not exact
    inexact = form["dtype"] == "float" and form["start_outer"] and form["compared"] != "iteration"
    if counted is None:
        # refused: only where the bound cannot stop the loop, or the counter is not exact
        assert below != up or inexact, "a counted form was refused"
        event("refused")
        return
    assert below == up and not inexact, "a bound that does not count was accepted"
    assume(stops)
    shape = (1,) if form["row"] else ()
    feeds = {
        "m": np.array(m, np.int64),
        "go": np.full(shape, go),
        "limit": np.array(limit + (fraction if form["limit_dtype"] == "float" else 0)).astype(
            _NUMPY[form["limit_dtype"]]
        ),
        "max": np.array(max_, np.int64),
    }
    if form["start_outer"]:
        feeds["start"] = np.full(shape, start, _NUMPY[form["dtype"]])
    final, seen, count = run("onnxruntime", counted, feeds)
    assert int(count) == len(seen)
    event("zero trips" if len(seen) == 0 else "trips")
    first = feeds["start"] if form["start_outer"] else np.full(shape, 2, _NUMPY[form["dtype"]])
    np.testing.assert_array_equal(final, first + int(count) * form["step"])


def test_a_bound_on_data_is_named() -> None:
    """A condition the body computes from what it carries (not a counter) is refused, and the
    leaf named."""
    model = _counted_loop(
        dtype="float", start_outer=True, step=1, update="add", compared="counter", offset=0,
        through_float=False, compare="Less", swap=False, negate=False, limit_kind="outer",
        limit_dtype="float", row=False, and_max=False, and_cond=False, with_m=True,
    )  # fmt: skip
    # A float counter from a run-time start may hold 0.3: its sums are not exact.
    assert _with_trip_count(model) is None
    ir_model = ir.serde.deserialize_model(model)
    loop = next(n for n in ir_model.graph if n.op_type == "Loop")
    facts = Condition(loop, loop.attributes["body"].as_graph(), TypeOracle(ir_model))
    assert facts.terms(loop.attributes["body"].as_graph().outputs[0]) is None
    assert "steps by a fixed amount" in facts.why


@pytest.mark.parametrize("update", ["add", "scale"])
def test_paddle_counter_is_a_counter(update: str) -> None:
    """Paddle's ``i = i + 1`` through ``scale`` (Casts, Mul by 1, a [1] shape) steps by one:
    Loop-to-Scan reads it from the iteration number."""
    model = _counted_loop(
        dtype="int64", start_outer=True, step=1, update=update, compared="next", offset=0,
        through_float=False, compare="Less", swap=False, negate=False, limit_kind="outer",
        limit_dtype="int64", row=True, and_max=False, and_cond=False, with_m=False,
    )  # fmt: skip
    ir_model = ir.serde.deserialize_model(model)
    loop = next(n for n in ir_model.graph if n.op_type == "Loop")
    facts = Condition(loop, loop.attributes["body"].as_graph(), TypeOracle(ir_model))
    assert facts.is_counter(0)
    assert facts.step(1) is None  # the limit passes through: no step


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    form=st.fixed_dictionaries(
        {
            **_FORMS,
            "dtype": st.sampled_from(["int32", "int64"]),
            "compared": st.sampled_from(["counter", "next"]),
            "toward": st.just(True),
            "with_m": st.just(False),
            "and_max": st.just(False),
        }
    ),
    start=st.integers(-4, 6),
    limit=st.integers(-6, 12),
)
def test_loop_to_scan_reads_each_counter_from_the_iteration_number(
    form: dict[str, Any], start: int, limit: int
) -> None:
    """A counter of any step becomes ``start + step * i`` in the Scan, its final value
    ``start + step * N`` outside: the Scan's results are the Loop's (counts of 1 and up: no
    runtime runs a Scan of none, ``test_zero_trip_guard.py``)."""
    toward = form.pop("toward")
    strict = form["compare"] in ("Less", "Greater")
    if toward:
        ups = {True: "Less", False: "LessOrEqual"}, {True: "Greater", False: "GreaterOrEqual"}
        form["compare"] = ups[0 if form["step"] > 0 else 1][strict]
    form["start_outer"] = True
    model = _counted_loop(**form)
    shape = (1,) if form["row"] else ()
    feeds = {
        "m": np.array(0, np.int64),
        "go": np.full(shape, True),
        "limit": np.array(limit).astype(_NUMPY[form["limit_dtype"]]),
        "max": np.array(0, np.int64),
        "start": np.full(shape, start, _NUMPY[form["dtype"]]),
    }
    expected = run("onnxruntime", model, feeds)
    scan = seqlower.lower(model, passes=["loop-to-scan"])
    assert "Loop" not in {n.op_type for n in scan.graph.node}
    assume(len(expected[1]) > 0)
    actual = run("onnxruntime", scan, feeds)
    for want, got in zip(expected, actual, strict=True):
        np.testing.assert_array_equal(got, want)


def _initially_bounded_loop(
    *, step: int, strict: bool, through_float: bool, with_m: bool, and_max: bool, start_outer: bool
) -> onnx.ModelProto:
    """tf2onnx's counted while_loop: ``counter`` from ``start`` while ``counter + step`` compares
    with ``limit`` (toward it), the initial condition the same comparison on the start (through
    float ``Cast``s, as tf2onnx writes it, with ``through_float``), with ``i < max`` in the
    body's condition only."""
    op = (
        ("Less" if strict else "LessOrEqual")
        if step > 0
        else ("Greater" if strict else "GreaterOrEqual")
    )
    f = TensorProto.FLOAT

    def compared(value: str, out: str, nodes: list[onnx.NodeProto], floats: bool) -> None:
        left, right = value, "limit"
        if floats:
            nodes += [
                helper.make_node("Cast", [value], [f"{out}_f"], to=f),
                helper.make_node("Cast", ["limit"], [f"{out}_lim_f"], to=f),
            ]
            left, right = f"{out}_f", f"{out}_lim_f"
        nodes.append(helper.make_node(op, [left, right], [out]))

    body: list[onnx.NodeProto] = [
        _const("step_c", step, "int32"),
        helper.make_node("Add", ["counter", "step_c"], ["next"]),
    ]
    compared("next", "cmp", body, False)
    cond = "cmp"
    if and_max:
        body += [
            helper.make_node("Less", ["i", "max"], ["below_max"]),
            helper.make_node("And", ["cmp", "below_max"], ["with_max"]),
        ]
        cond = "with_max"
    body += [
        helper.make_node("Identity", [cond], ["cond_out"]),
        helper.make_node("Identity", ["i"], ["at"]),
    ]
    outer: list[onnx.NodeProto] = []
    if not start_outer:
        outer.append(_const("start", 2, "int32"))
    compared("start", "go", outer, through_float)
    outer.append(
        helper.make_node(
            "Loop",
            ["m" if with_m else "", "go", "start"],
            ["final", "seen"],
            body=helper.make_graph(
                body,
                "body",
                [
                    helper.make_tensor_value_info("i", TensorProto.INT64, []),
                    helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                    helper.make_tensor_value_info("counter", TensorProto.INT32, []),
                ],
                [
                    helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
                    helper.make_tensor_value_info("next", TensorProto.INT32, []),
                    helper.make_tensor_value_info("at", TensorProto.INT64, []),
                ],
            ),
        )
    )
    inputs = [
        helper.make_tensor_value_info("m", TensorProto.INT64, []),
        helper.make_tensor_value_info("limit", TensorProto.INT32, []),
        helper.make_tensor_value_info("max", TensorProto.INT64, []),
    ]
    if start_outer:
        inputs.append(helper.make_tensor_value_info("start", TensorProto.INT32, []))
    graph = helper.make_graph(
        outer,
        "initially_bounded",
        inputs,
        [
            helper.make_tensor_value_info("final", TensorProto.INT32, []),
            helper.make_tensor_value_info("seen", TensorProto.INT64, [None]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    step=st.sampled_from([1, -1]),
    strict=st.booleans(),
    through_float=st.booleans(),
    with_m=st.booleans(),
    and_max=st.booleans(),
    start_outer=st.booleans(),
    start=st.integers(-4, 6),
    limit=st.integers(-6, 9),
    m=st.integers(-1, 9),
    max_=st.integers(0, 9),
)
def test_an_initial_condition_that_is_the_bounds_needs_no_where(
    step: int,
    strict: bool,
    through_float: bool,
    with_m: bool,
    and_max: bool,
    start_outer: bool,
    start: int,
    limit: int,
    m: int,
    max_: int,
) -> None:
    """tf2onnx's initial condition is its bound on the start: the count is then max(min(M,
    1 + span, ...), 0), no Where on it (tract types it with declared facts), and still the
    iterations onnxruntime runs, counts 0 included."""
    model = _initially_bounded_loop(
        step=step, strict=strict, through_float=through_float, with_m=with_m,
        and_max=and_max, start_outer=start_outer,
    )  # fmt: skip
    counted = _with_trip_count(model)
    assert counted is not None
    assert "Where" not in {n.op_type for n in counted.graph.node}
    feeds = {
        "m": np.array(m, np.int64),
        "limit": np.array(limit, np.int32),
        "max": np.array(max_, np.int64),
    }
    if start_outer:
        feeds["start"] = np.array(start, np.int32)
    final, seen, count = run("onnxruntime", counted, feeds)
    assert int(count) == len(seen)
    first = start if start_outer else 2
    assert int(final) == first + int(count) * step


def test_an_initial_condition_on_data_keeps_its_where() -> None:
    """An initial condition that is not the bounds (a graph input): the Where on it stays."""
    model = _counted_loop(
        dtype="int32", start_outer=True, step=1, update="add", compared="next", offset=0,
        through_float=True, compare="Less", swap=False, negate=False, limit_kind="outer",
        limit_dtype="int32", row=False, and_max=False, and_cond=False, with_m=False,
    )  # fmt: skip
    counted = _with_trip_count(model)
    assert counted is not None and "Where" in {n.op_type for n in counted.graph.node}


# tf2onnx's map_fn summing the rows of x (tests/data/realworld/tf_map_fn_cumsum_op17): M and the
# limit are T from Shape(x) cast to int32, the initial condition Less(0.0, Cast(T)).
MAP_FN = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[T, 3] x) => (float[3] total, float[N, 3] y) {
    shape = Shape(x)
    shape32 = Cast<to = 6>(shape)
    first = Constant<value = int64[1] {0}>()
    one = Constant<value = int64[1] {1}>()
    rows = Slice(shape32, first, one, first)
    t = Squeeze(rows, first)
    m = Cast<to = 7>(t)
    zero_f = Constant<value = float {0}>()
    t_f = Cast<to = 1>(t)
    go = Less(zero_f, t_f)
    start = Constant<value = int32 {0}>()
    acc = Constant<value = float[3] {0, 0, 0}>()
    final, total, y = Loop(m, go, start, acc) <body = b (int64 i, bool c, int32 k, float[3] a)
            => (bool c_out, int32 k_out, float[3] a_out, float[3] a_row) {
        one32 = Constant<value = int32 {1}>()
        k_out = Add(k, one32)
        c_out = Less(k_out, t)
        row = Gather(x, k)
        a_out = Add(a, row)
        a_row = Identity(a_out)
    }>
}
"""


@pytest.mark.parametrize("runtime", ["tract", "tract-symbolic"])
def test_a_map_fn_loads_on_tract_with_declared_facts(runtime: str) -> None:
    """Its Scan over a symbolic count of rows: tract 0.23.9 types the Scan's body only when it
    knows the rows' length symbolically ('Source node without a determined fact' after a Where
    on the initial condition)."""
    from tests.runtimes import assert_same, require

    require("tract")
    model = onnx.parser.parse_model(MAP_FN)
    lowered = seqlower.lower(model, target="tract", check=False)
    for t in (0, 1, 4):
        feeds = {"x": np.arange(3 * t, dtype=np.float32).reshape(t, 3)}
        want = run("onnxruntime", model, feeds)
        got = run(runtime, lowered, feeds)
        if t == 0:  # onnxruntime's zero-trip scan output: its unknown sizes 0
            want, got = want[:1], got[:1]
        assert_same(want, got)


def _scan_of_rows(count: str) -> onnx.ModelProto:
    """A Scan summing the first ``count`` rows of x (``count`` computed by the nodes given)."""
    return onnx.parser.parse_model(
        f"""
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[N, T, 4] x, int64 k) => (float[T, 4] total) {{
            zero = Constant<value = int64 {{0}}>()
            one = Constant<value = int64 {{1}}>()
            shape = Shape(x)
            n = Gather(shape, zero)
            {count}
            index = Range(zero, count, one)
            rows = Gather(x, index)
            first = Gather(x, zero)
            start = Sub(first, first)
            total = Scan<num_scan_inputs = 1, body = b (float[T, 4] a, float[T, 4] r)
                    => (float[T, 4] a_out) {{
                a_out = Add(a, r)
            }}>(start, rows)
        }}
        """
    )


def test_tract_types_no_scan_over_rows_of_a_count_from_values() -> None:
    """Why the count is written without a Where: tract 0.23.9 types a Scan's body only when it
    knows the rows' length symbolically (a Max of the size loads; a Where on a comparison, or
    a Min with a value, does not: 'Source node without a determined fact'). When a tract loads
    the Where form, this fails."""
    from tests.runtimes import RuntimeFailure, require

    require("tract")
    feeds = {"x": np.ones((3, 2, 4), np.float32), "k": np.array(2, np.int64)}
    symbolic = _scan_of_rows("count = Max(n, one)")
    assert run("tract-symbolic", symbolic, feeds)[0].shape == (2, 4)
    for count in ("c = Greater(n, zero)\n count = Where(c, n, one)", "count = Min(n, k)"):
        with pytest.raises(RuntimeFailure, match="Scan"):
            run("tract-symbolic", _scan_of_rows(count), feeds)


def test_tract_panics_on_a_scan_without_states() -> None:
    """tract 0.23.9 aborts on a Scan with no state (core/src/ops/scan/decluttered.rs:448,
    'entered unreachable code'), either facts: a Loop whose only state is the counter that
    becomes the Scan's rows fails the proof (exit 1, named). When a tract runs it, this
    fails."""
    from tests.runtimes import RuntimeFailure, require

    require("tract")
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[T, 3] x) => (float[N, 3] y) {
            y = Scan<num_scan_inputs = 1, body = b (float[3] r) => (float[3] r2) {
                r2 = Add(r, r)
            }>(x)
        }
        """
    )
    with pytest.raises(RuntimeFailure, match="aborted"):
        run("tract", model, {"x": np.ones((4, 3), np.float32)})


def _buffer_loop(
    written: str, *, transposed: bool = False, measured: str = "b_out"
) -> onnx.ModelProto:
    """PyTorch's while_loop writing rows into a preallocated buffer: ``while k < len(buf)``, the
    limit read in the body as ``Shape`` of what the body returns for the buffer (``written``
    from ``b_in``; ``transposed``: a [3, T] buffer, its length its axis 1; ``measured``: the
    value whose length is read). It returns the buffer and the iteration numbers, stacked."""
    shape, axis = ("3, T", 1) if transposed else ("T, 3", 0)
    return onnx.parser.parse_model(
        f"""
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[{shape}] buf, float[3] row) => (float[{shape}] out, int64[N] seen) {{
            zero = Constant<value = int64 {{0}}>()
            length = Shape<start = {axis}, end = {axis + 1}>(buf)
            go = Less(zero, length)
            go_scalar = Squeeze(go)
            k_end, out, seen = Loop("", go_scalar, zero, buf) <body = b (int64 i, bool c,
                    int64 k, float[{shape}] b_in) => (bool c_out, int64 k_out,
                    float[{shape}] b_out, int64 at) {{
                one = Constant<value = int64 {{1}}>()
                pair = Constant<value = int64[2] {{1, 1}}>()
                axes = Constant<value = int64[1] {{0}}>()
                k_out = Add(k, one)
                where = Reshape(k, pair)
                rows = Unsqueeze(row, axes)
                {written}
                size = Shape<start = {axis}, end = {axis + 1}>({measured})
                limit = Squeeze(size)
                c_out = Less(k_out, limit)
                at = Identity(i)
            }}>
        }}
        """
    )


_WRITTEN = {
    "rows": ("b_out = ScatterND(b_in, where, rows)", False),
    "rows, the start measured": ("b_out = ScatterND(b_in, where, rows)", False),
    "rows, scaled": ("w = ScatterND(b_in, where, rows)\n b_out = Mul(w, w)", False),
    "columns": (
        "flat = Transpose<perm = [1, 0]>(b_in)\n"
        "w = ScatterND(flat, where, rows)\n"
        "b_out = Transpose<perm = [1, 0]>(w)",
        True,
    ),
}


@pytest.mark.parametrize("form", sorted(_WRITTEN))
def test_a_limit_read_from_a_buffer_the_body_writes_is_fixed(form: str) -> None:
    """The buffer keeps its start's shape on every iteration (ScatterND keeps its data's shape,
    the Transposes undo each other), so its length is known before the loop: the count is
    computed there, and is the iterations onnxruntime runs, 0 included (was: "'limit' is not
    fixed when the loop starts"). The initial condition, the same bound on the buffer's start,
    needs no Where (with one, tract 0.23.9 types no If guarding the Scan with declared facts)."""
    written, transposed = _WRITTEN[form]
    measured = "buf" if "start" in form else "b_out"
    model = _buffer_loop(written, transposed=transposed, measured=measured)
    counted = _with_trip_count(model)
    assert counted is not None
    assert "Where" not in {n.op_type for n in counted.graph.node}
    row = np.arange(3, dtype=np.float32)
    for t in (0, 1, 4):
        buf = np.zeros((3, t) if transposed else (t, 3), np.float32)
        _, seen, count = run("onnxruntime", counted, {"buf": buf, "row": row})
        assert int(count) == len(seen) == t


def test_a_buffer_that_grows_is_no_fixed_limit() -> None:
    """A state the body returns in another shape (a row appended) gives no limit fixed before the
    loop: refused, named."""
    model = _buffer_loop("b_out = Concat<axis = 0>(b_in, rows)")
    ir_model = ir.serde.deserialize_model(model)
    loop = next(n for n in ir_model.graph if n.op_type == "Loop")
    body = loop.attributes["body"].as_graph()
    facts = Condition(loop, body, TypeOracle(ir_model))
    assert facts.terms(body.outputs[0]) is None
    assert "'limit' is not fixed when the loop starts" in facts.why
