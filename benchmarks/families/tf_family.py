"""Export the tf2onnx (TensorFlow/Keras) family seqlower is measured on (run by hand, never in CI).

tf2onnx writes every Keras ``Bidirectional`` RNN, ``go_backwards`` RNN and ``tf.reverse`` as
``ReverseSequence`` (full-length lengths ``Expand(Gather(Shape(x)))``, or per-row int32
lengths through a ``Cast``), and RNNs with masks, ``TimeDistributed`` and ``tf.map_fn`` as
``while_loop`` ``Loop``s whose trip count is fixed at loop start (``counter + 1 < limit``
through float ``Cast``s).

Set up once, then export into a folder of ``NAME.onnx`` + ``NAME.npz`` (``__inputs__`` /
``__outputs__`` name lists and arrays under their bare ONNX names, as
``../shared/realworld-samples/tf``):

    python3.11 -m venv /work/venvs/tf
    /work/venvs/tf/bin/pip install tensorflow==2.21.0 tf_keras==2.21.0 tf2onnx==1.17.0
    /work/venvs/tf/bin/python benchmarks/families/tf_family.py /work/exports/tf

and measure with the project's venv:
``.venv/bin/python benchmarks/target_samples.py /work/exports/tf``. ``--fixed-length`` exports
the Keras models for inputs of exactly T steps instead (what fixed-length deployments have:
tf2onnx's loops then stop at a constant limit, which ``--target onnx2torch`` unrolls).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf2onnx converts Keras 2 models
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import tensorflow as tf
import tf2onnx
import tf_keras as keras
from tf_keras import layers

_RNG = np.random.default_rng(0)
T, B, F = 7, 3, 4


def _masked(batch: int = B) -> np.ndarray:
    """Padded sequences: row b has T - b steps, zeros after (what Masking(0.0) skips)."""
    x = _RNG.standard_normal((batch, T, F)).astype(np.float32)
    for b in range(batch):
        x[b, T - b :] = 0.0
    return x


def _rnn(kind: str, units: int, **kwargs: Any) -> layers.Layer:
    return {"lstm": layers.LSTM, "gru": layers.GRU, "simple": layers.SimpleRNN}[kind](
        units, **kwargs
    )


def keras_models(time: int | None = None) -> dict[str, tuple[keras.Model, list[np.ndarray]]]:
    """``time``: a fixed time length (``keras.Input((time, F))``), else any."""
    out: dict[str, tuple[keras.Model, list[np.ndarray]]] = {}
    for kind in ("lstm", "gru", "simple"):
        for mask in (False, True):
            for merge in ("concat", "sum"):
                inputs = keras.Input((time, F))
                h = layers.Masking(0.0)(inputs) if mask else inputs
                h = layers.Bidirectional(_rnn(kind, 5, return_sequences=True), merge_mode=merge)(h)
                name = f"k2_bi{kind}{'_mask' if mask else ''}_{merge}"
                out[name] = (keras.Model(inputs, h), [_masked()])
        inputs = keras.Input((time, F))
        h = layers.Bidirectional(_rnn(kind, 4, return_sequences=True))(inputs)
        h = layers.Bidirectional(_rnn(kind, 3))(h)
        out[f"k2_stacked_bi{kind}"] = (keras.Model(inputs, h), [_masked()])
        inputs = keras.Input((time, F))
        h = _rnn(kind, 4, go_backwards=True, return_sequences=True)(inputs)
        out[f"k2_backwards_{kind}"] = (keras.Model(inputs, h), [_masked()])
    inputs = keras.Input((time, F))
    h = layers.TimeDistributed(layers.Dense(6))(inputs)
    out["k2_time_distributed_dense"] = (keras.Model(inputs, h), [_masked()])
    # Masked: a Loop (TimeDistributed over the time axis) around others (the LSTMs' over the 3
    # steps of each time step).
    inputs = keras.Input((time, 3, F))
    lstm = layers.LSTM(4, return_sequences=True)
    h = layers.TimeDistributed(layers.Bidirectional(lstm))(layers.Masking(0.0)(inputs))
    nested = _RNG.standard_normal((B, T, 3, F)).astype(np.float32)
    nested[1, :, 2:] = 0.0  # the second row's last step masked at every time step
    out["k2_time_distributed_bilstm_mask"] = (keras.Model(inputs, h), [nested])
    # Unmasked, GRU and LSTM, with and without return_sequences (issue 30: tract's numbers
    # wrong after the first step on one such export).
    for kind in ("gru", "lstm"):
        for sequences in (True, False):
            inputs = keras.Input((time, 3, F))
            inner = _rnn(kind, 4, return_sequences=sequences)
            h = layers.TimeDistributed(layers.Bidirectional(inner))(inputs)
            label = f"k2_time_distributed_bi{kind}{'_seq' if sequences else ''}"
            out[label] = (
                keras.Model(inputs, h),
                [_RNG.standard_normal((B, T, 3, F)).astype(np.float32)],
            )
    inputs = keras.Input((time, F))
    h = layers.Masking(0.0)(inputs)
    h = layers.LSTM(5, return_sequences=True, return_state=True)(h)
    out["k2_lstm_mask_state"] = (keras.Model(inputs, h), [_masked()])
    out.update(masked_models(time))
    return out


def masked_models(time: int | None = None) -> dict[str, tuple[keras.Model, list[np.ndarray]]]:
    """What a Keras user writes around masks and ``TimeDistributed`` (tf2onnx's ``Loop``s)."""
    out: dict[str, tuple[keras.Model, list[np.ndarray]]] = {}
    for kind in ("lstm", "gru", "simple"):
        for sequences in (True, False):
            inputs = keras.Input((time, F))
            h = _rnn(kind, 5, return_sequences=sequences)(layers.Masking(0.0)(inputs))
            name = f"k2_{kind}_mask{'_seq' if sequences else ''}"
            out[name] = (keras.Model(inputs, h), [_masked()])
        inputs = keras.Input((time, F))
        h = _rnn(kind, 4, return_state=True)(layers.Masking(0.0)(inputs))
        out[f"k2_{kind}_mask_last_state"] = (keras.Model(inputs, h), [_masked()])
        inputs = keras.Input((time, F))
        h = layers.Masking(0.0)(inputs)
        h = _rnn(kind, 4, return_sequences=True)(h)
        h = _rnn(kind, 3, return_sequences=True)(h)
        h = _rnn(kind, 2)(h)
        out[f"k2_stacked_{kind}_mask"] = (keras.Model(inputs, h), [_masked()])
        inputs = keras.Input((time, F))
        h = _rnn(kind, 4, go_backwards=True, return_sequences=True)(layers.Masking(0.0)(inputs))
        out[f"k2_backwards_{kind}_mask"] = (keras.Model(inputs, h), [_masked()])
        inputs = keras.Input((time, F))
        inner = _rnn(kind, 3, return_state=True)
        h = layers.Bidirectional(inner)(layers.Masking(0.0)(inputs))
        out[f"k2_bi{kind}_mask_state"] = (keras.Model(inputs, h), [_masked()])
    inputs = keras.Input((time, F))
    h = layers.Masking(0.0)(inputs)
    h = layers.TimeDistributed(layers.Dense(6, activation="tanh"))(h)
    h = layers.LSTM(3, return_sequences=True)(h)
    out["k2_time_distributed_dense_mask_lstm"] = (keras.Model(inputs, h), [_masked()])
    inputs = keras.Input((time, 5, F))
    h = layers.TimeDistributed(layers.Conv1D(6, 3, padding="same", activation="relu"))(inputs)
    h = layers.TimeDistributed(layers.GlobalAveragePooling1D())(h)
    out["k2_time_distributed_conv1d"] = (
        keras.Model(inputs, h),
        [_RNG.standard_normal((B, T, 5, F)).astype(np.float32)],
    )
    inputs = keras.Input((time, 5, F))
    h = layers.TimeDistributed(layers.Conv1D(4, 2))(inputs)
    h = layers.TimeDistributed(layers.Flatten())(h)
    h = layers.GRU(3, return_sequences=True)(h)
    out["k2_time_distributed_conv1d_gru"] = (
        keras.Model(inputs, h),
        [_RNG.standard_normal((B, T, 5, F)).astype(np.float32)],
    )
    return out


def functions() -> dict[str, tuple[Callable[..., Any], list[tf.TensorSpec], list[np.ndarray]]]:
    x = _RNG.standard_normal((T, B, F)).astype(np.float32)
    lens = np.array([7, 2, 5], np.int32)
    spec3 = tf.TensorSpec((None, None, F), tf.float32, name="x")
    lens_spec = tf.TensorSpec((None,), tf.int32, name="lens")

    def map_fn_reverse(x: tf.Tensor) -> tf.Tensor:
        return tf.map_fn(lambda r: tf.reverse(r, [0]), x)

    def map_fn_cumsum(x: tf.Tensor) -> tf.Tensor:
        return tf.map_fn(lambda r: tf.cumsum(r, axis=0) * 2.0, x)

    def reverse_time(x: tf.Tensor) -> tf.Tensor:
        return tf.reverse(x, [1]) + 1.0

    def reverse_sequence(x: tf.Tensor, lens: tf.Tensor) -> tf.Tensor:
        return tf.reverse_sequence(x, lens, seq_axis=0, batch_axis=1)

    def band_part(x: tf.Tensor) -> tf.Tensor:
        return tf.linalg.band_part(x, 1, 2) * 2.0

    def causal_mask(x: tf.Tensor) -> tf.Tensor:
        steps = tf.shape(x)[0]
        mask = tf.linalg.band_part(tf.ones(tf.stack([steps, steps])), -1, 0)
        return tf.einsum("ts,sbf->tbf", mask, x)

    def bidir_dynamic_rnn(x: tf.Tensor, lens: tf.Tensor) -> tf.Tensor:
        fw = tf.compat.v1.nn.rnn_cell.BasicRNNCell(3, name="fw")
        bw = tf.compat.v1.nn.rnn_cell.BasicRNNCell(3, name="bw")
        (a, b), _ = tf.compat.v1.nn.bidirectional_dynamic_rnn(
            fw, bw, x, sequence_length=lens, dtype=tf.float32, time_major=True
        )
        return tf.concat([a, b], -1)

    def map_fn_pair(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return tf.map_fn(
            lambda r: (tf.reduce_sum(r, 0), tf.nn.relu(r) * 3.0),
            x,
            fn_output_signature=(tf.float32, tf.float32),
        )

    def while_tolerance(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        # Halve until small: the stop depends on the data, bounded by 50 iterations.
        def cond(i: tf.Tensor, v: tf.Tensor) -> tf.Tensor:
            return tf.logical_and(i < 50, tf.reduce_max(tf.abs(v)) > 0.01)

        i, v = tf.while_loop(cond, lambda i, v: (i + 1, v * 0.5), (tf.constant(0), x))
        return i, v

    def while_cumulative(x: tf.Tensor) -> tf.Tensor:
        # Sum rows until the running total passes a threshold: no bound but the row count.
        steps = tf.shape(x)[0]

        def cond(i: tf.Tensor, total: tf.Tensor) -> tf.Tensor:
            return tf.logical_and(i < steps, tf.reduce_sum(total) < 3.0)

        _, total = tf.while_loop(
            cond, lambda i, total: (i + 1, total + tf.abs(x[i])), (0, tf.zeros_like(x[0]))
        )
        return total

    return {
        "tf_map_fn_pair": (map_fn_pair, [spec3], [x]),
        "tf_while_tolerance": (while_tolerance, [spec3], [x]),
        "tf_while_cumulative": (while_cumulative, [spec3], [x]),
        "tf_map_fn_reverse": (map_fn_reverse, [spec3], [x]),
        "tf_map_fn_cumsum": (map_fn_cumsum, [spec3], [x]),
        "tf_reverse_time": (reverse_time, [spec3], [x]),
        "tf_band_part": (band_part, [spec3], [x]),
        "tf_causal_mask": (causal_mask, [spec3], [x]),
        "tf_reverse_sequence_lens": (reverse_sequence, [spec3, lens_spec], [x, lens]),
        "v1_bidir_dynamic_rnn_lens": (bidir_dynamic_rnn, [spec3, lens_spec], [x, lens]),
    }


def _save(folder: Path, name: str, proto: Any, arrays: list[np.ndarray], outs: list[Any]) -> None:
    import onnx

    onnx.save(proto, folder / f"{name}.onnx")
    inputs = [v.name for v in proto.graph.input]
    outputs = [v.name for v in proto.graph.output]
    data: dict[str, Any] = {"__inputs__": np.array(inputs), "__outputs__": np.array(outputs)}
    data.update(zip(inputs, arrays, strict=True))
    data.update(zip(outputs, [np.asarray(o) for o in outs], strict=True))
    np.savez(folder / f"{name}.npz", **data)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--opsets", default="13,17")
    parser.add_argument("--only", default="", help="comma-separated names (without _opN)")
    parser.add_argument(
        "--fixed-length",
        action="store_true",
        help=f"export the Keras models for inputs of exactly {T} steps (tf2onnx's loops then "
        "stop at a constant limit), and skip the tf.function family",
    )
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    opsets = [int(o) for o in args.opsets.split(",")]
    time = T if args.fixed_length else None
    only = {n for n in args.only.split(",") if n}
    for name, (model, arrays) in keras_models(time).items():
        if only and name not in only:
            continue
        outs = model(*arrays)
        outs = list(outs) if isinstance(outs, list | tuple) else [outs]
        for opset in opsets:
            label = f"{name}_op{opset}"
            try:
                spec = [tf.TensorSpec(model.input_shape, tf.float32, name="x")]
                proto, _ = tf2onnx.convert.from_keras(model, input_signature=spec, opset=opset)
                _save(args.folder, label, proto, arrays, outs)
                print(f"{label:40} ok", flush=True)
            except Exception as e:  # report and go on
                print(f"{label:40} not exported: {str(e).splitlines()[0][:120]}", flush=True)
    for name, (function, specs, arrays) in ({} if args.fixed_length else functions()).items():
        if only and name not in only:
            continue
        traced = tf.function(function, input_signature=specs)
        try:
            outs = traced(*arrays)
            outs = list(outs) if isinstance(outs, tuple) else [outs]
        except Exception as e:  # report and go on (v1 cells create variables when traced)
            print(f"{name:40} not run: {str(e).strip().splitlines()[-1][:120]}", flush=True)
            continue
        for opset in opsets:
            label = f"{name}_op{opset}"
            try:
                proto, _ = tf2onnx.convert.from_function(traced, input_signature=specs, opset=opset)
                _save(args.folder, label, proto, arrays, outs)
                print(f"{label:40} ok", flush=True)
            except Exception as e:  # report and go on
                print(f"{label:40} not exported: {str(e).splitlines()[0][:120]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
