"""Loops as exporters write them, for the Loop-to-Scan rewrite and the deploy targets.

Shaped as tf2onnx writes ``tf.while_loop`` (``tf.map_fn``, ``dynamic_rnn``, Keras RNN layers): a
counter state starting at 0 and stepping by one, the condition ``counter + 1 < limit`` through
float ``Cast``s, ``AND``ed with ``iteration < max``; TensorArray reads as ``Gather(x, counter)``,
writes as scan outputs; the limit a state passed through, and outer-scope reads. Each case gives
the model and its feeds; ``ir_version`` and opsets are pinned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnx.parser

Case = Callable[[], tuple[onnx.ModelProto, dict[str, Any]]]

_RNG = np.random.default_rng(19)


def _parse(text: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model(text)
    onnx.checker.check_model(model, full_check=True)
    return model


def map_fn() -> tuple[onnx.ModelProto, dict[str, Any]]:
    """``tf.map_fn(lambda r: -r, x)``: M the time length, condition through float Casts."""
    model = _parse(
        """
        <ir_version: 8, opset_import: ["" : 13]>
        map_fn (float[unk__1, 3] x) => (float[unk__2, 3] y, int32 count) {
            zero = Constant<value = int64[1] {0}>()
            shape = Shape(x)
            one_end = Constant<value = int64[1] {1}>()
            first = Slice(shape, zero, one_end)
            n32 = Cast<to = 6>(first)
            limit = Squeeze(n32, zero)
            fzero = Constant<value = float {0.0}>()
            flimit = Cast<to = 1>(limit)
            go = Less(fzero, flimit)
            cond0 = And(go, go)
            m = Cast<to = 7>(limit)
            start = Constant<value = int32 {0}>()
            count, limit_out, y = Loop(m, cond0, start, limit) <body = map_body (
                int64 i, bool cond_in, int32 counter, int32 lim
            ) => (bool cond_out, int32 next, int32 lim_out, float[unk__3] row_out) {
                one = Constant<value = int32 {1}>()
                next = Add(counter, one)
                row = Gather<axis = 0>(x, counter)
                row_out = Neg(row)
                f_next = Cast<to = 1>(next)
                f_lim = Cast<to = 1>(lim)
                less_1 = Less(f_next, f_lim)
                f_i = Cast<to = 1>(i)
                f_max = Cast<to = 1>(limit)
                less_2 = Less(f_i, f_max)
                cond_out = And(less_2, less_1)
                lim_out = Identity(lim)
            }>
        }
        """
    )
    return model, {"x": _RNG.standard_normal((4, 3)).astype(np.float32)}


def dynamic_rnn() -> tuple[onnx.ModelProto, dict[str, Any]]:
    """``bidirectional_dynamic_rnn``'s forward loop: ``time < min(T, max(lengths))`` (a trip
    count known only from data, before the loop), a carried state, ``iteration < T``."""
    model = _parse(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        rnn (float[unk__1, 2, 3] x, int32[2] lengths) => (float[unk__4, 2, 3] ys, float[2, 3] h) {
            shape = Shape(x)
            zero = Constant<value = int64[1] {0}>()
            t64 = Gather<axis = 0>(shape, zero)
            t32 = Cast<to = 6>(t64)
            t = Squeeze(t32, zero)
            longest = ReduceMax<keepdims = 0>(lengths)
            bound = Min(t, longest)
            m = Cast<to = 7>(t)
            fzero = Constant<value = float {0.0}>()
            f_t = Cast<to = 1>(t)
            f_bound = Cast<to = 1>(bound)
            a = Less(fzero, f_t)
            b = Less(fzero, f_bound)
            cond0 = And(a, b)
            time = Constant<value = int32 {0}>()
            h0 = Constant<value = float[2, 3] {0, 0, 0, 0, 0, 0}>()
            time_out, h, bound_out, ys = Loop(m, cond0, time, h0, bound) <body = rnn_body (
                int64 i, bool cond_in, int32 now, float[unk__7, 3] state, int32 stop
            ) => (bool cond_out, int32 later, float[unk__8, 3] new_state, int32 stop_out,
                  float[unk__9, 3] out) {
                one = Constant<value = int32 {1}>()
                later = Add(now, one)
                step = Gather<axis = 0>(x, now)
                sum = Add(step, state)
                new_state = Tanh(sum)
                out = Identity(new_state)
                f_later = Cast<to = 1>(later)
                f_stop = Cast<to = 1>(stop)
                c1 = Less(f_later, f_stop)
                f_i = Cast<to = 1>(i)
                f_t_in = Cast<to = 1>(t)
                c2 = Less(f_i, f_t_in)
                cond_out = And(c2, c1)
                stop_out = Identity(stop)
            }>
        }
        """
    )
    x = _RNG.standard_normal((5, 2, 3)).astype(np.float32)
    return model, {"x": x, "lengths": np.array([3, 4], dtype=np.int32)}


#: ``for_loop``'s body: row k of the outer ``x`` times the iteration number i, the counter k
#: stepping by one (``test_zero_trip_rows.py`` and ``test_loop_to_scan.py`` loop over it too).
FOR_BODY = """<body = for_body (int64 i, bool c, int64 k)
                => (bool c_out, int64 k_next, float[2] y) {
                one = Constant<value = int64 {1}>()
                k_next = Add(k, one)
                row = Gather<axis = 0>(x, k)
                at = Cast<to = 1>(i)
                y = Mul(row, at)
                c_out = Identity(c)
            }>"""


def for_loop() -> tuple[onnx.ModelProto, dict[str, Any]]:
    """A for-loop (condition passed through, trip count M) reading the iteration number, with a
    counter that starts at a run-time value and steps by one (opset 11)."""
    model = _parse(
        f"""
        <ir_version: 8, opset_import: ["" : 11]>
        for_loop (float[5, 2] x, int64 n, int64 first) => (float[unk__1, 2] ys, int64 last) {{
            true = Constant<value = bool {{1}}>()
            last, ys = Loop(n, true, first) {FOR_BODY}
        }}
        """
    )
    x = _RNG.standard_normal((5, 2)).astype(np.float32)
    return model, {"x": x, "n": np.array(3, dtype=np.int64), "first": np.array(1, dtype=np.int64)}


#: tf2onnx's RNN step at a static state of [2, 3], the loop's own bound its limit: the counter
#: ``now`` steps by one, the state is ``tanh(x[now] + state)`` and also written as a row, the
#: loop goes on while ``float(now + 1) < float(stop)`` (``stop`` passed through). The unroll
#: tests run it for a constant limit and for one bounded by lengths.
STATIC_RNN_BODY = """<body = rnn_body (
        int64 i, bool cond_in, int32 now, float[2, 3] state, int32 stop
    ) => (bool cond_out, int32 later, float[2, 3] new_state, int32 stop_out, float[2, 3] out) {
        one_in = Constant<value = int32 {1}>()
        later = Add(now, one_in)
        step = Gather<axis = 0>(x, now)
        sum = Add(step, state)
        new_state = Tanh(sum)
        out = Identity(new_state)
        f_later = Cast<to = 1>(later)
        f_stop = Cast<to = 1>(stop)
        cond_out = Less(f_later, f_stop)
        stop_out = Identity(stop)
    }>"""


def data_stop() -> tuple[onnx.ModelProto, dict[str, Any]]:
    """A while-loop that stops on what it computes (a sum passing a threshold): no trip count
    before it starts, so it stays a Loop."""
    model = _parse(
        """
        <ir_version: 8, opset_import: ["" : 13]>
        data_stop (float x) => (float total) {
            true = Constant<value = bool {1}>()
            total = Loop(, true, x) <body = stop_body (int64 i, bool c, float s)
                => (bool c_out, float s_next) {
                two = Constant<value = float {2.0}>()
                s_next = Mul(s, two)
                limit = Constant<value = float {100.0}>()
                c_out = Less(s_next, limit)
            }>
        }
        """
    )
    return model, {"x": np.array(1.5, dtype=np.float32)}


def nested() -> tuple[onnx.ModelProto, dict[str, Any]]:
    """A for-loop inside an If branch, whose body holds another for-loop reading both bodies'
    values (outer-scope reads two levels up)."""
    model = _parse(
        """
        <ir_version: 8, opset_import: ["" : 13]>
        nested (float[3, 2] x, bool flag) => (float[unk__1, unk__2, 2] y) {
            three = Constant<value = int64 {3}>()
            y = If(flag) <then_branch = then_g () => (float[unk__3, unk__4, 2] t) {
                true = Constant<value = bool {1}>()
                t = Loop(three, true) <body = outer_body (int64 i, bool c)
                    => (bool c_out, float[unk__5, 2] rows) {
                    c_out = Identity(c)
                    row = Gather<axis = 0>(x, i)
                    two = Constant<value = int64 {2}>()
                    rows = Loop(two, c) <body = inner_body (int64 j, bool d)
                        => (bool d_out, float[2] r) {
                        d_out = Identity(d)
                        fj = Cast<to = 1>(j)
                        r = Mul(row, fj)
                    }>
                }>
            }, else_branch = else_g () => (float[unk__6, unk__7, 2] e) {
                axis = Constant<value = int64[1] {2}>()
                column = Unsqueeze(x, axis)
                e = Concat<axis = 2>(column, column)
            }>
        }
        """
    )
    return model, {
        "x": _RNG.standard_normal((3, 2)).astype(np.float32),
        "flag": np.array(True),
    }


def keras_rnn() -> tuple[onnx.ModelProto, dict[str, Any]]:
    """Keras' RNN loop as tf2onnx writes it: an "output" state the body never reads (only
    writes; its final value is the layer's last output), the written row also a scan output."""
    model = _parse(
        """
        <ir_version: 8, opset_import: ["" : 13]>
        keras_rnn (float[unk__1, 2, 3] x) => (float[unk__2, 2, 3] ys, float[2, 3] last) {
            zero = Constant<value = int64[1] {0}>()
            shape = Shape(x)
            t64 = Gather<axis = 0>(shape, zero)
            t32 = Cast<to = 6>(t64)
            limit = Squeeze(t32, zero)
            m = Cast<to = 7>(limit)
            fzero = Constant<value = float {0.0}>()
            flimit = Cast<to = 1>(limit)
            cond0 = Less(fzero, flimit)
            start = Constant<value = int32 {0}>()
            h0 = Constant<value = float[2, 3] {0, 0, 0, 0, 0, 0}>()
            count, last, h, lim_final, ys = Loop(m, cond0, start, h0, h0, limit) <body = rnn_body (
                int64 i, bool cond_in, int32 counter, float[unk__5, 3] out_in,
                float[unk__6, 3] state, int32 lim
            ) => (bool cond_out, int32 next, float[unk__7, 3] out_state,
                  float[unk__8, 3] new_state, int32 lim_out, float[unk__9, 3] y) {
                one = Constant<value = int32 {1}>()
                next = Add(counter, one)
                step = Gather<axis = 0>(x, counter)
                sum = Add(step, state)
                new_state = Tanh(sum)
                half = Constant<value = float {0.5}>()
                y = Mul(new_state, half)
                out_state = Identity(y)
                f_next = Cast<to = 1>(next)
                f_lim = Cast<to = 1>(lim)
                cond_out = Less(f_next, f_lim)
                lim_out = Identity(lim)
            }>
        }
        """
    )
    return model, {"x": _RNG.standard_normal((4, 2, 3)).astype(np.float32)}


def _rnn_direction(x: str, d: str) -> str:
    """One direction of ``bidirectional_dynamic_rnn`` over ``x``, names suffixed with ``d``: its
    own shape computations, as tf2onnx writes each direction."""
    return f"""
            shape{d} = Shape({x})
            t64{d} = Gather<axis = 0>(shape{d}, zero)
            t32{d} = Cast<to = 6>(t64{d})
            t{d} = Squeeze(t32{d}, zero)
            bound{d} = Min(t{d}, longest)
            m{d} = Cast<to = 7>(t{d})
            f_t{d} = Cast<to = 1>(t{d})
            f_bound{d} = Cast<to = 1>(bound{d})
            a{d} = Less(fzero, f_t{d})
            b{d} = Less(fzero, f_bound{d})
            cond0{d} = And(a{d}, b{d})
            time_out{d}, h{d}, stop_final{d}, ys{d} = Loop(m{d}, cond0{d}, time, h0, bound{d})
              <body = body{d} (int64 i{d}, bool c_in{d}, int32 now{d}, float[unk__7, 3] state{d},
                                int32 stop{d})
                => (bool c_out{d}, int32 later{d}, float[unk__8, 3] new{d}, int32 stop_out{d},
                    float[unk__9, 3] out{d}) {{
                later{d} = Add(now{d}, one)
                step{d} = Gather<axis = 0>({x}, now{d})
                sum{d} = Add(step{d}, state{d})
                new{d} = Tanh(sum{d})
                out{d} = Identity(new{d})
                f_later{d} = Cast<to = 1>(later{d})
                f_stop{d} = Cast<to = 1>(stop{d})
                c1{d} = Less(f_later{d}, f_stop{d})
                f_i{d} = Cast<to = 1>(i{d})
                f_max{d} = Cast<to = 1>(t{d})
                c2{d} = Less(f_i{d}, f_max{d})
                c_out{d} = And(c2{d}, c1{d})
                stop_out{d} = Identity(stop{d})
            }}>
    """


def bidirectional_rnn() -> tuple[onnx.ModelProto, dict[str, Any]]:
    """``bidirectional_dynamic_rnn``: a forward loop over x, a backward one over its per-row
    reversal, trip counts known only from data (``min(T, max(lengths))``), outputs joined: the
    two Scans must share one trip count for tract to join them."""
    model = _parse(
        f"""
        <ir_version: 8, opset_import: ["" : 17]>
        bidi (float[unk__1, 2, 3] x, int32[2] lengths) => (float[unk__2, 2, 6] y) {{
            zero = Constant<value = int64[1] {{0}}>()
            one = Constant<value = int32 {{1}}>()
            fzero = Constant<value = float {{0.0}}>()
            time = Constant<value = int32 {{0}}>()
            h0 = Constant<value = float[2, 3] {{0, 0, 0, 0, 0, 0}}>()
            longest = ReduceMax<keepdims = 0>(lengths)
            lens = Cast<to = 7>(lengths)
            {_rnn_direction("x", "_fw")}
            xr = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
            {_rnn_direction("xr", "_bw")}
            back = ReverseSequence<batch_axis = 1, time_axis = 0>(ys_bw, lens)
            y = Concat<axis = 2>(ys_fw, back)
        }}
        """
    )
    x = _RNG.standard_normal((5, 2, 3)).astype(np.float32)
    return model, {"x": x, "lengths": np.array([5, 3], dtype=np.int32)}


def repeat() -> tuple[onnx.ModelProto, dict[str, Any]]:
    """A for-loop whose body reads neither the iteration number nor a counter (doubling a state
    n times): OpenVINO ran such a Scan once, tract dropped its scan input."""
    model = _parse(
        """
        <ir_version: 8, opset_import: ["" : 13]>
        repeat (float[2] x, int64 n) => (float[2] y) {
            true = Constant<value = bool {1}>()
            y = Loop(n, true, x) <body = repeat_body (int64 i, bool c, float[2] s)
                => (bool c_out, float[2] doubled) {
                two = Constant<value = float {2.0}>()
                doubled = Mul(s, two)
                c_out = Identity(c)
            }>
        }
        """
    )
    return model, {"x": np.array([1, 3], dtype=np.float32), "n": np.array(3, dtype=np.int64)}


def counter_out() -> tuple[onnx.ModelProto, dict[str, Any]]:
    """A counter from 5 that the body returns as it is, as a scan output (a body output that is
    a body input)."""
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 13]>
        counts (int64 n) => (int64 last, int64[K] seen) {
            true = Constant<value = bool {1}>()
            start = Constant<value = int64 {5}>()
            last, seen = Loop(n, true, start) <body = count_body (int64 i, bool c, int64 k)
                => (bool c_out, int64 k2, int64 k) {
                one = Constant<value = int64 {1}>()
                k2 = Add(k, one)
                c_out = Identity(c)
            }>
        }
        """
    )
    onnx.checker.check_model(model, full_check=True)
    return model, {"n": np.array(3, dtype=np.int64)}


def torch_while_loop() -> tuple[onnx.ModelProto, dict[str, Any]]:
    """``torch.while_loop`` over the rows of ``xs`` (an SSM recurrence), as the dynamo exporter
    writes it: no M, and the body recomputes its limit ``Squeeze(Shape(xs, 0, 1))`` and reads
    row i through ``Reshape(i, [1])`` with an outer constant and ``Gather`` + ``Squeeze``."""
    model = _parse(
        """
        <ir_version: 8, opset_import: ["" : 18]>
        main_graph (float[t,3,4] xs) => (float[3,4] h) <
            float[4,4] a = {0.1, -0.2, 0.3, 0.05, 0.2, 0.1, -0.1, 0.3, -0.3, 0.2, 0.1, 0.0,
                            0.05, 0.1, 0.2, -0.1},
            int64 clone = {0}, float[3,4] zeros = {0,0,0,0,0,0,0,0,0,0,0,0},
            int64[1] one_1d = {1}, int64 one = {1}, int64[1] zero_1d = {0}> {
            size = Shape <end = 1, start = 0> (xs)
            length = Squeeze (size)
            go = Less (clone, length)
            counter, h = Loop ("", go, clone, zeros) <body = loop_body (
                int64 iter_num, bool cond_in, int64 i, float[3,4] state
            ) => (bool cond_out, int64 next, float[3,4] new_state) {
                next = Add (i, one)
                mixed = MatMul (state, a)
                index = Reshape (i, one_1d)
                row = Gather <axis = 0> (xs, index)
                row_2d = Squeeze (row, zero_1d)
                total = Add (mixed, row_2d)
                new_state = Tanh (total)
                size_again = Shape <end = 1, start = 0> (xs)
                length_again = Squeeze (size_again)
                cond_out = Less (next, length_again)
            }>
        }
        """
    )
    return model, {"xs": _RNG.standard_normal((5, 3, 4)).astype(np.float32)}


CASES: dict[str, Case] = {
    "torch_while_loop": torch_while_loop,
    "counter_out": counter_out,
    "repeat": repeat,
    "bidirectional_rnn": bidirectional_rnn,
    "keras_rnn": keras_rnn,
    "map_fn": map_fn,
    "dynamic_rnn": dynamic_rnn,
    "for_loop": for_loop,
    "nested": nested,
}
