"""Export loops and branches of shapes the other families lack (run by hand, never in CI).

One section per exporter, each run from the venv that has it, into a folder of ``NAME.onnx`` +
``NAME.npz`` written by that family's own ``_save``/``export`` (so ``target_samples.py`` and the
command line's ``--inputs``/``--expected`` read them)::

    /work/wt/loops-venv/bin/python benchmarks/families/new_shapes.py jax /tmp/sweep/jax
    /work/wt/loops-venv/bin/python benchmarks/families/new_shapes.py paddle /tmp/sweep/paddle
    /work/venvs/torch/bin/python benchmarks/families/new_shapes.py torch /tmp/sweep/torch
    /work/venvs/tf/bin/python benchmarks/families/new_shapes.py tf /tmp/sweep/tf

The kinds: a ``switch`` of three branches inside a scan, a ``fori_loop`` whose bound is an
input's length, a ``while_loop`` over a state of mixed dtypes (int32 counter, float carry, bool
flag), ``scan(reverse=True)``, flips and reverse cumulative sums of a symbolic length, a ``cond``
in a ``cond``; ``torch.cond`` in a ``while_loop``, ``torch.flip`` of a symbolic axis,
``torch.split`` by a list of sizes; paddle ``while`` with two counters, ``if`` on a tensor in a
``for``; ``tf.while_loop`` with ``maximum_iterations``, ``tf.reverse_sequence`` with either axis
the batch one, a Keras ``Bidirectional(GRU)`` behind a mask. Exports that fail are reported.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

_RNG = np.random.default_rng(1)


def _floats(*shape: int) -> np.ndarray:
    return _RNG.standard_normal(shape).astype(np.float32)


def jax_models() -> dict[str, tuple[Any, list[Any], list[np.ndarray]]]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    out: dict[str, tuple[Any, list[Any], list[np.ndarray]]] = {}

    def scan_switch(x: Any) -> Any:
        def step(c: Any, r: Any) -> tuple[Any, Any]:
            k = jnp.clip(jnp.floor(jnp.sum(r)).astype(jnp.int32), 0, 2)
            c = lax.switch(k, [lambda v: v + 1.0, lambda v: v * 2.0, lambda v: -v], c + r)
            return c, c.sum()

        return lax.scan(step, jnp.zeros(3, x.dtype), x)

    out["jax_scan_switch3"] = (scan_switch, [("T", 3)], [_floats(6, 3) * 2.0])

    def switch3(x: Any, k: Any) -> Any:
        return lax.switch(k, [lambda v: v + 1.0, lambda v: v * 2.0, lambda v: -v], x)

    out["jax_switch3"] = (
        switch3,
        [(3,), jax.ShapeDtypeStruct((), jnp.int32)],
        [_floats(3), np.array(2, np.int32)],
    )

    def fori_shape(x: Any) -> Any:
        def body(s: Any) -> Any:
            return s[0] + 1, s[1] * 0.9 + lax.dynamic_index_in_dim(x, s[0], keepdims=False)

        # fori_loop(0, x.shape[0], ...) of a symbolic T fails in jax2onnx 0.17.1: its while form
        return lax.while_loop(lambda s: s[0] < x.shape[0], body, (0, jnp.zeros(3, x.dtype)))[1]

    out["jax_fori_shape_bound"] = (fori_shape, [("T", 3)], [_floats(5, 3)])

    def while_mixed(x: Any, n: Any) -> Any:
        def cond(s: Any) -> Any:
            return jnp.logical_and(s[0] < n, jnp.logical_not(s[2]))

        def body(s: Any) -> Any:
            i, c, _ = s
            c = c * 1.5 + 0.25
            return i + 1, c, jnp.max(c) > 20.0

        return lax.while_loop(cond, body, (jnp.int32(0), x, jnp.bool_(False)))

    out["jax_while_mixed_state"] = (
        while_mixed,
        [(3,), jax.ShapeDtypeStruct((), jnp.int32)],
        [np.abs(_floats(3)), np.array(9, np.int32)],
    )

    def scan_reverse(x: Any) -> Any:
        return lax.scan(lambda c, r: (c * 0.5 + r, c + r), jnp.zeros(3, x.dtype), x, reverse=True)

    out["jax_scan_reverse"] = (scan_reverse, [("T", 3)], [_floats(5, 3)])

    def flip_cumsum(x: Any) -> Any:
        return jnp.flip(x, 0) * 2.0, lax.cumsum(x, axis=0, reverse=True)

    out["jax_flip_cumsum_reverse"] = (flip_cumsum, [("T", 3)], [_floats(5, 3)])

    def cond_nested(x: Any) -> Any:
        def inner(v: Any) -> Any:
            return lax.cond(jnp.max(v) > 1.0, lambda u: u * 3.0, lambda u: u + 2.0, v)

        return lax.cond(jnp.sum(x) > 0, inner, lambda v: v - 1.0, x)

    out["jax_cond_in_cond"] = (cond_nested, [(2, 3)], [np.abs(_floats(2, 3))])

    def scan_cond_shape(x: Any) -> Any:
        """A cond inside a scan on a symbolic length, carrying an int32 count beside floats."""

        def step(c: Any, r: Any) -> tuple[Any, Any]:
            n, v = c
            big = jnp.sum(r) > 0
            v = lax.cond(big, lambda u: u + r, lambda u: u * 0.5, v)
            return (n + big.astype(jnp.int32), v), jnp.where(big, n, -n)

        return lax.scan(step, (jnp.int32(0), jnp.zeros(3, x.dtype)), x)

    out["jax_scan_cond_count"] = (scan_cond_shape, [("T", 3)], [_floats(6, 3)])

    def scan_while(x: Any) -> Any:
        """A data-dependent while_loop in each step of a scan (halve until small)."""

        def step(c: Any, r: Any) -> tuple[Any, Any]:
            def halve(s: Any) -> Any:
                return s[0] + 1, s[1] * 0.5

            k, v = lax.while_loop(lambda s: jnp.max(jnp.abs(s[1])) > 0.3, halve, (0, c + r))
            return v, k

        return lax.scan(step, jnp.zeros(3, x.dtype), x)

    out["jax_scan_while_inner"] = (scan_while, [("T", 3)], [_floats(5, 3) * 4.0])

    def fori_from(x: Any, lo: Any, hi: Any) -> Any:
        return lax.fori_loop(lo, hi, lambda i, c: c * 0.5 + i.astype(c.dtype), x)

    out["jax_fori_bounds_inputs"] = (
        fori_from,
        [(3,), jax.ShapeDtypeStruct((), jnp.int32), jax.ShapeDtypeStruct((), jnp.int32)],
        [_floats(3), np.array(2, np.int32), np.array(7, np.int32)],
    )

    def scan_two_xs(x: Any, t: Any) -> Any:
        """Two scanned inputs of different dtypes, an int and a float output per step."""

        def step(c: Any, xs: Any) -> tuple[Any, Any]:
            r, k = xs
            c = c + r * k.astype(r.dtype)
            return c, (jnp.argmax(c).astype(jnp.int32), c * 2.0)

        return lax.scan(step, jnp.zeros(3, x.dtype), (x, t))

    def cond_of_scans(x: Any) -> Any:
        """A scan in each branch of a cond: Loops in If branches."""

        def forward(v: Any) -> Any:
            return lax.scan(lambda c, r: (c + r, c * r), jnp.zeros(3, v.dtype), v)[1]

        def backward(v: Any) -> Any:
            return lax.scan(lambda c, r: (c * 0.5 + r, c - r), jnp.ones(3, v.dtype), v)[1]

        return lax.cond(jnp.sum(x) > 0, forward, backward, x)

    out["jax_cond_of_scans"] = (cond_of_scans, [("T", 3)], [_floats(5, 3)])

    def scan_in_scan(x: Any) -> Any:
        """A scan over each row's own symbolic length inside a scan over the rows."""

        def outer(c: Any, row: Any) -> tuple[Any, Any]:
            total, ys = lax.scan(lambda a, v: (a * 0.5 + v, a), c, row)
            return total, ys

        return lax.scan(outer, jnp.float32(0.0), x)

    out["jax_scan_in_scan"] = (scan_in_scan, [("T", "F")], [_floats(4, 5)])

    out["jax_scan_two_xs"] = (
        scan_two_xs,
        [("T", 3), jax.ShapeDtypeStruct(("T",), jnp.int32)],
        [_floats(5, 3), np.array([1, -2, 3, 0, 2], np.int32)],
    )
    return out


def export_jax(folder: Path, only: set[str]) -> None:
    from jax2onnx import to_onnx
    from jax_family import _save

    for name, (fn, specs, arrays) in jax_models().items():
        if only and name not in only:
            continue
        try:
            model = to_onnx(fn, specs, model_name=name, opset=18)
            _save(folder, name, model, arrays, fn(*arrays))
            print(f"{name}: ok", flush=True)
        except Exception as error:  # one export failing does not stop the others
            print(f"{name}: {type(error).__name__}: {str(error)[:200]}", flush=True)


def paddle_models() -> dict[str, tuple[Any, list[Any], list[np.ndarray]]]:
    import paddle
    from paddle.static import InputSpec

    class TwoCounters(paddle.nn.Layer):
        """``while i < n and j < m``, i by 1 and j by 2."""

        def forward(self, x: Any, n: Any, m: Any) -> Any:
            i = paddle.zeros([1], dtype="int64")
            j = paddle.zeros([1], dtype="int64")
            s = paddle.zeros_like(x)
            while i < n and j < m:
                s = s * 0.5 + x
                i = i + 1
                j = j + 2
            return s, i, j

    class Flip(paddle.nn.Layer):
        def forward(self, x: Any) -> Any:
            # a symbolic flipped axis aborts paddle2onnx 2.0.1 ("must be fixed for flip")
            return paddle.flip(x, axis=[1]) + paddle.cumsum(x, axis=1)

    class ForIf(paddle.nn.Layer):
        """A ``for`` over a symbolic length with an ``if`` on each row's sum."""

        def forward(self, x: Any) -> Any:
            s = paddle.zeros([x.shape[1]], dtype="float32")
            for i in range(x.shape[0]):
                if paddle.sum(x[i]) > 0:  # noqa: SIM108 (an if statement: what paddle writes as an If)
                    s = s + x[i]
                else:
                    s = s * 0.5
            return s

    class WhileBreak(paddle.nn.Layer):
        """``while i < n`` with a ``break`` on the data."""

        def forward(self, x: Any, n: Any) -> Any:
            i = paddle.zeros([1], dtype="int64")
            s = x
            while i < n:
                s = s * 1.5 + 0.5
                if paddle.max(s) > 10.0:
                    break
                i = i + 1
            return s, i

    class WhileConcat(paddle.nn.Layer):
        """A ``while`` appending a row to a tensor each step (``paddle.concat``)."""

        def forward(self, x: Any, n: Any) -> Any:
            i = paddle.zeros([1], dtype="int64")
            out = x[0:1] * 0.0
            while i < n:
                out = paddle.concat([out, paddle.tanh(out[-1:]) + 1.0], axis=0)
                i = i + 1
            return out

    return {
        "paddle_while_concat": (
            WhileConcat(),
            [InputSpec([None, 3], "float32", "x"), InputSpec([1], "int64", "n")],
            [_floats(2, 3), np.array([4], np.int64)],
        ),
        "paddle_while_break": (
            WhileBreak(),
            [InputSpec([None, 3], "float32", "x"), InputSpec([1], "int64", "n")],
            [np.abs(_floats(2, 3)), np.array([9], np.int64)],
        ),
        "paddle_while_two_counters": (
            TwoCounters(),
            [
                InputSpec([None, 3], "float32", "x"),
                InputSpec([1], "int64", "n"),
                InputSpec([1], "int64", "m"),
            ],
            [_floats(2, 3), np.array([6], np.int64), np.array([7], np.int64)],
        ),
        "paddle_flip": (Flip(), [InputSpec([None, 5, 3], "float32", "x")], [_floats(2, 5, 3)]),
        "paddle_for_if": (ForIf(), [InputSpec([None, 3], "float32", "x")], [_floats(5, 3)]),
    }


def export_paddle(folder: Path, only: set[str]) -> None:
    import onnx
    import paddle
    from paddle_family import _export

    paddle.seed(0)
    for name, (layer, specs, arrays) in paddle_models().items():
        if only and name not in only:
            continue
        try:
            layer.eval()
            path = folder / f"{name}.onnx"
            _export(layer, specs, path)
            outs = layer(*(paddle.to_tensor(a) for a in arrays))
            outs = outs if isinstance(outs, tuple | list) else [outs]
            model = onnx.load(path)
            data: dict[str, np.ndarray] = {}
            for value, array in zip(model.graph.input, arrays, strict=True):
                data[f"input.{value.name}"] = array
            for value, o in zip(model.graph.output, outs, strict=True):
                data[f"output.{value.name}"] = o.numpy()
            np.savez(folder / f"{name}.npz", **data)
            print(f"{name}: ok", flush=True)
        except Exception as error:  # one export failing does not stop the others
            print(f"{name}: {type(error).__name__}: {str(error)[:300]}", flush=True)


def torch_models() -> dict[str, Any]:
    import torch
    from torch import nn
    from torch._higher_order_ops.while_loop import while_loop
    from torch_family import _row

    t = torch.export.Dim("t", min=2, max=64)

    class CondInWhile(nn.Module):
        def forward(self, xs: torch.Tensor) -> torch.Tensor:
            def cond(i: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
                return i < xs.shape[0]

            def body(i: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                r = _row(xs, i)
                h = torch.cond(r.sum() > 0, lambda h, r: h + r, lambda h, r: h * 0.5 - r, (h, r))
                return i + 1, h

            _, h = while_loop(cond, body, (torch.tensor(0), torch.zeros(xs.shape[1:])))
            return h

    class Flip(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.flip(x, [0]) * 2.0 + x.flip(1)

    class SplitSizes(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a, b, c = torch.split(x, [2, 3, 1], dim=1)
            return torch.cat([a.relu(), b * 2.0, c.tanh()], dim=1).sum(1)

    class SplitHalves(nn.Module):
        """``split`` by a list of symbolic sizes: the halves of a symbolic length."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            n = x.shape[0] // 2
            a, b = torch.split(x, [n, x.shape[0] - n], dim=0)
            return a.sum(0) - b.sum(0)

    class CountDown(nn.Module):
        """``while i > 0: i -= 1`` from a length, carrying an int64 sum beside a float."""

        def forward(self, xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            def cond(i: torch.Tensor, h: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
                return i > 0

            def body(
                i: torch.Tensor, h: torch.Tensor, s: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
                r = _row(xs, i - 1)
                return i - 1, h * 0.5 + r, s + (r > 0).sum()

            start = (torch.tensor(xs.shape[0]), torch.zeros(xs.shape[1:]), torch.tensor(0))
            _, h, s = while_loop(cond, body, start)
            return h, s

    class FlipCumsum(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1])

    class CondShapes(nn.Module):
        """Branches of different lengths: ``x[:2]`` or ``x[1:]``."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cond(x.sum() > 0, lambda x: x[:2] * 2.0, lambda x: x[1:] - 1.0, (x,))

    class NestedWhile(nn.Module):
        """A while_loop over the columns inside a while_loop over the rows."""

        def forward(self, xs: torch.Tensor) -> torch.Tensor:
            def outer_cond(i: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
                return i < xs.shape[0]

            def outer_body(i: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                row = _row(xs, i)

                def inner_cond(j: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
                    return j < row.shape[0]

                def inner_body(j: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, ...]:
                    return j + 1, a * 0.5 + _row(row, j)

                _, a = while_loop(inner_cond, inner_body, (torch.tensor(0), h))
                return i + 1, a

            _, h = while_loop(outer_cond, outer_body, (torch.tensor(0), torch.zeros(())))
            return h

    return {
        "torch_cond_shapes": (CondShapes(), (_floats_t(4, 3),), None, True),
        "torch_nested_while": (
            NestedWhile(),
            (_floats_t(4, 5),),
            ({0: t, 1: torch.export.Dim("c", min=2, max=64)},),
            True,
        ),
        "torch_while_count_down": (CountDown(), (_floats_t(5, 3),), ({0: t},), True),
        "torch_flip_cumsum": (FlipCumsum(), (_floats_t(2, 5),), ({1: t},), True),
        "torch_cond_in_while": (CondInWhile(), (_floats_t(5, 3),), ({0: t},), False),
        "torch_flip_dyn": (Flip(), (_floats_t(5, 3),), ({0: t, 1: torch.export.Dim("f")},), True),
        "torch_split_sizes": (SplitSizes(), (_floats_t(4, 6),), ({0: t},), False),
        "torch_split_sym_sizes": (SplitHalves(), (_floats_t(6, 3),), ({0: t},), False),
    }


def _floats_t(*shape: int) -> Any:
    import torch

    return torch.from_numpy(_floats(*shape))


def export_torch(folder: Path, only: set[str]) -> None:
    from torch_family import export

    for name, item in torch_models().items():
        if only and name not in only:
            continue
        try:
            print(f"{name}: {export(name, item, folder)}", flush=True)
        except Exception as e:  # report and go on
            line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            print(f"{name}: not exported: {line[:200]}", flush=True)


def tf_models() -> dict[str, Any]:
    import tensorflow as tf
    import tf_keras as keras
    from tf_family import _masked
    from tf_keras import layers

    x = _floats(7, 3, 4)
    spec3 = tf.TensorSpec((None, None, 4), tf.float32, name="x")
    lens_spec = tf.TensorSpec((None,), tf.int32, name="lens")

    def while_max_iterations(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        i, v = tf.while_loop(
            lambda i, v: tf.reduce_max(tf.abs(v)) > 0.01,
            lambda i, v: (i + 1, v * 0.5),
            (tf.constant(0), x),
            maximum_iterations=5,
        )
        return i, v

    def reverse_sequence_batch0(x: tf.Tensor, lens: tf.Tensor) -> tf.Tensor:
        return tf.reverse_sequence(x, lens, seq_axis=1, batch_axis=0) * 2.0

    def reverse_sequence_batch1(x: tf.Tensor, lens: tf.Tensor) -> tf.Tensor:
        return tf.reverse_sequence(x, lens, seq_axis=0, batch_axis=1) + 1.0

    def scan_reverse(x: tf.Tensor) -> tf.Tensor:
        return tf.scan(lambda c, r: c * 0.5 + r, x, reverse=True)

    def cond_in_while(x: tf.Tensor) -> tf.Tensor:
        steps = tf.shape(x)[0]

        def body(i: tf.Tensor, h: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            r = x[i]
            h = tf.cond(tf.reduce_sum(r) > 0, lambda: h + r, lambda: h * 0.5 - r)
            return i + 1, h

        return tf.while_loop(lambda i, h: i < steps, body, (0, tf.zeros_like(x[0])))[1]

    def foldr(x: tf.Tensor) -> tf.Tensor:
        return tf.foldr(lambda c, r: c * 0.5 + r, x, initializer=tf.zeros_like(x[0]))

    def while_grow(x: tf.Tensor) -> tf.Tensor:
        """A state that grows a row per iteration (shape_invariants)."""
        steps = tf.shape(x)[0]

        def body(i: tf.Tensor, acc: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            return i + 1, tf.concat([acc, tf.reduce_sum(x[i], 0, keepdims=True)], 0)

        _, acc = tf.while_loop(
            lambda i, acc: i < steps,
            body,
            (0, tf.zeros((0, 4))),
            shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, 4])),
        )
        return acc

    def while_stop_stack(x: tf.Tensor) -> tf.Tensor:
        """Rows written to a TensorArray until their running sum passes a threshold."""

        def body(i: tf.Tensor, s: tf.Tensor, ta: Any) -> tuple[Any, ...]:
            s = s + tf.reduce_sum(x[i])
            return i + 1, s, ta.write(i, x[i] * 2.0)

        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        _, _, ta = tf.while_loop(
            lambda i, s, ta: s < 2.0,
            body,
            (0, tf.constant(0.0), ta),
            maximum_iterations=tf.shape(x)[0],
        )
        return ta.stack()

    def cond_shapes(x: tf.Tensor) -> tf.Tensor:
        return tf.cond(tf.reduce_sum(x) > 0, lambda: x[:2] * 2.0, lambda: x[1:] - 1.0)

    inputs = keras.Input((None, 4))
    masked = layers.Masking(0.0)(inputs)
    bigru = layers.Bidirectional(layers.GRU(3, return_sequences=True))(masked)
    backwards = layers.LSTM(3, return_sequences=True, go_backwards=True)(masked)
    functions = {
        "tf_scan_reverse": (scan_reverse, [spec3], [x]),
        "tf_while_grow": (while_grow, [spec3], [x]),
        "tf_while_stop_stack": (while_stop_stack, [spec3], [np.abs(x)]),
        "tf_cond_shapes": (cond_shapes, [spec3], [x]),
        "tf_cond_in_while": (cond_in_while, [spec3], [x]),
        "tf_foldr": (foldr, [spec3], [x]),
        "tf_while_maximum_iterations": (while_max_iterations, [spec3], [x]),
        "tf_reverse_sequence_batch0": (
            reverse_sequence_batch0,
            [spec3, lens_spec],
            [_floats(3, 7, 4), np.array([7, 2, 5], np.int32)],
        ),
        "tf_reverse_sequence_batch1": (
            reverse_sequence_batch1,
            [spec3, lens_spec],
            [x, np.array([1, 7, 4], np.int32)],
        ),
    }
    keras_models = {
        "k2_bigru_mask": (keras.Model(inputs, bigru), [_masked()]),
        "k2_lstm_backwards_mask": (keras.Model(inputs, backwards), [_masked()]),
    }
    return {"keras": keras_models, **functions}


def export_tf(folder: Path, only: set[str]) -> None:
    import tensorflow as tf
    import tf2onnx
    from tf_family import _save

    table = tf_models()
    for name, (model, arrays) in table.pop("keras").items():
        if only and name not in only:
            continue
        outs = model(*arrays)
        outs = list(outs) if isinstance(outs, list | tuple) else [outs]
        try:
            spec = [tf.TensorSpec(model.input_shape, tf.float32, name="x")]
            proto, _ = tf2onnx.convert.from_keras(model, input_signature=spec, opset=17)
            _save(folder, name, proto, arrays, outs)
            print(f"{name}: ok", flush=True)
        except Exception as e:  # report and go on
            print(f"{name}: not exported: {str(e).splitlines()[0][:160]}", flush=True)
    for name, (function, specs, arrays) in table.items():
        if only and name not in only:
            continue
        traced = tf.function(function, input_signature=specs)
        outs = traced(*arrays)
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        try:
            proto, _ = tf2onnx.convert.from_function(traced, input_signature=specs, opset=17)
            _save(folder, name, proto, arrays, outs)
            print(f"{name}: ok", flush=True)
        except Exception as e:  # report and go on
            print(f"{name}: not exported: {str(e).splitlines()[0][:160]}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exporter", choices=("jax", "paddle", "torch", "tf"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--only", default="", help="comma-separated names")
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    only = {n for n in args.only.split(",") if n}
    exporters = {"jax": export_jax, "paddle": export_paddle, "torch": export_torch, "tf": export_tf}
    exporters[args.exporter](args.folder, only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
