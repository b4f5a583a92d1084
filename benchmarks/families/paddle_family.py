"""Export the paddle2onnx family seqlower is measured on (run by hand, never in CI).

paddle2onnx writes a ``to_static`` ``while`` as a ``Loop`` without ``M`` whose conditions have
shape ``[1]``, the initial one computed before the loop and the body's through Paddle's
``scale`` (``Cast<float>``, ``Mul`` by 1, ``Add``, ``Reshape [1]``, ``Cast`` back): a counter
``while i < n``, a greedy decode stopped by an end token or a maximum length, a Newton iteration
stopped by a tolerance; and ``if`` on a value as an ``If``; GRU/LSTM as ONNX's own ops.
(``paddle.flip`` aborts
paddle2onnx 2.0.1's export: not here.)

Set up once, then export into a folder of ``NAME.onnx`` + ``NAME.npz`` (``input.<name>`` /
``output.<name>`` keys in graph order); the exports of paddlepaddle 3.3.1 / paddle2onnx 2.0.1
are kept in ``benchmarks/families/paddle2onnx/`` (tests read them without paddle installed):

    python3 -m venv /work/venvs/paddle
    /work/venvs/paddle/bin/pip install paddlepaddle paddle2onnx onnx
    /work/venvs/paddle/bin/python benchmarks/families/paddle_family.py \
        benchmarks/families/paddle2onnx

and measure with the project's venv:
``.venv/bin/python benchmarks/target_samples.py benchmarks/families/paddle2onnx``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import paddle
import paddle2onnx
from paddle.static import InputSpec

_RNG = np.random.default_rng(0)


class WhileCounter(paddle.nn.Layer):
    """``while i < n: s += x; i += 1``."""

    def forward(self, x: Any, n: Any) -> Any:
        i = paddle.zeros([1], dtype="int64")
        s = paddle.zeros_like(x)
        while i < n:
            s = s + x * 0.5
            i = i + 1
        return s, i


class WhileStep(paddle.nn.Layer):
    """``while i < n: i += 3`` from a start given at run time."""

    def forward(self, x: Any, start: Any, n: Any) -> Any:
        i = start
        s = x
        while i < n:
            s = paddle.tanh(s) + 1.0
            i = i + 3
        return s, i


class GreedyDecode(paddle.nn.Layer):
    """A greedy decode up to ``max_len`` steps, stopped by the end token 0."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = paddle.nn.Embedding(6, 4)
        self.cell = paddle.nn.Linear(8, 4)
        self.head = paddle.nn.Linear(4, 6)

    def forward(self, h: Any, max_len: Any) -> Any:
        i = paddle.zeros([1], dtype="int64")
        token = paddle.ones([1], dtype="int64")
        total = paddle.zeros([1], dtype="int64")
        done = paddle.zeros([1], dtype="bool")
        while paddle.logical_and(i < max_len, paddle.logical_not(done)):
            e = self.embed(token)
            h = paddle.tanh(self.cell(paddle.concat([e, h], axis=-1)))
            token = paddle.argmax(self.head(h), axis=-1)
            total = total + token
            done = token == 0
            i = i + 1
        return h, total, i


class Newton(paddle.nn.Layer):
    """Square roots by Newton's iteration until the step is below a tolerance (at most 40)."""

    def forward(self, a: Any) -> Any:
        x = paddle.abs(a) + 1.0
        i = paddle.zeros([1], dtype="int64")
        step = paddle.ones([1], dtype="float32")
        while paddle.logical_and(i < 40, step > 1e-5):
            new = 0.5 * (x + (paddle.abs(a) + 1.0) / x)
            step = paddle.max(paddle.abs(new - x)).reshape([1])
            x = new
            i = i + 1
        return x, i


class IfValue(paddle.nn.Layer):
    """``if x.sum() > 0`` on a value."""

    def forward(self, x: Any) -> Any:
        if paddle.sum(x) > 0:  # noqa: SIM108 (to_static writes an if statement as an If)
            y = x * 2.0
        else:
            y = x - 1.0
        return y


class Recurrent(paddle.nn.Layer):
    """A ``paddle.nn.GRU``/``LSTM`` over a symbolic batch and time: paddle2onnx writes ONNX's
    recurrent op; with ``lengths``, it drops them (its ``sequence_length`` is read by nothing)."""

    def __init__(self, kind: str, lengths: bool = False, **kw: Any) -> None:
        super().__init__()
        self.rnn = getattr(paddle.nn, kind)(3, 4, **kw)
        self.lengths = lengths

    def forward(self, x: Any, lengths: Any = None) -> Any:
        y, _ = self.rnn(x, sequence_length=lengths) if self.lengths else self.rnn(x)
        return y


class WhileAccumulate(paddle.nn.Layer):
    """``while i < n: s = s + x[i]``: ``x[i]`` of a ``[1]`` index is ``[1, 3]``, so the state
    starts ``[3]`` and is ``[1, 3]`` after an iteration (its rank depends on ``n``)."""

    def forward(self, x: Any, n: Any) -> Any:
        i = paddle.zeros([1], dtype="int64")
        s = paddle.zeros_like(x[0])
        while i < n:
            s = s + x[i] * 0.5
            i = i + 1
        return s


class IfShapes(paddle.nn.Layer):
    """``if k > 0`` choosing between results of two shapes."""

    def forward(self, x: Any, k: Any) -> Any:
        if k > 0:
            y = paddle.matmul(x, x, transpose_y=True)
        else:
            y = paddle.matmul(x, x, transpose_x=True)[:2, :2]
        return y


class ForAppend(paddle.nn.Layer):
    """A ``for`` over a symbolic length appending to a list, stacked: paddle2onnx 2.0.1 writes
    its nodes out of topological order (an invalid model, named as such)."""

    def forward(self, x: Any) -> Any:
        out = []
        for i in range(x.shape[0]):
            out.append(x[i] * 2.0)
        return paddle.stack(out)


def models() -> dict[str, tuple[paddle.nn.Layer, list[InputSpec], list[np.ndarray]]]:
    floats = _RNG.standard_normal
    sequences = InputSpec([None, None, 3], "float32", "x")
    return {
        "paddle_while_counter": (
            WhileCounter(),
            [InputSpec([None, 3], "float32", "x"), InputSpec([1], "int64", "n")],
            [floats((2, 3)).astype(np.float32), np.array([4], np.int64)],
        ),
        "paddle_while_step": (
            WhileStep(),
            [
                InputSpec([None, 3], "float32", "x"),
                InputSpec([1], "int64", "start"),
                InputSpec([1], "int64", "n"),
            ],
            [floats((2, 3)).astype(np.float32), np.array([1], np.int64), np.array([9], np.int64)],
        ),
        "paddle_greedy_decode": (
            GreedyDecode(),
            [InputSpec([1, 4], "float32", "h"), InputSpec([1], "int64", "max_len")],
            [floats((1, 4)).astype(np.float32), np.array([7], np.int64)],
        ),
        "paddle_newton": (
            Newton(),
            [InputSpec([3], "float32", "a")],
            [floats(3).astype(np.float32)],
        ),
        "paddle_if_value": (
            IfValue(),
            [InputSpec([2, 3], "float32", "x")],
            [floats((2, 3)).astype(np.float32)],
        ),
        "paddle_gru": (Recurrent("GRU"), [sequences], [floats((2, 5, 3)).astype(np.float32)]),
        "paddle_lstm2": (
            Recurrent("LSTM", num_layers=2),
            [sequences],
            [floats((2, 5, 3)).astype(np.float32)],
        ),
        "paddle_bilstm": (
            Recurrent("LSTM", direction="bidirect"),
            [sequences],
            [floats((2, 5, 3)).astype(np.float32)],
        ),
        "paddle_lstm_lengths": (
            Recurrent("LSTM", lengths=True),
            [sequences, InputSpec([None], "int64", "lengths")],
            [floats((2, 5, 3)).astype(np.float32), np.array([5, 3], np.int64)],
        ),
        "paddle_while_accumulate": (
            WhileAccumulate(),
            [InputSpec([None, 3], "float32", "x"), InputSpec([1], "int64", "n")],
            [floats((5, 3)).astype(np.float32), np.array([3], np.int64)],
        ),
        "paddle_if_shapes": (
            IfShapes(),
            [InputSpec([3, 3], "float32", "x"), InputSpec([1], "int64", "k")],
            [floats((3, 3)).astype(np.float32), np.array([1], np.int64)],
        ),
        "paddle_for_append": (
            ForAppend(),
            [InputSpec([None, 3], "float32", "x")],
            [floats((4, 3)).astype(np.float32)],
        ),
    }


def _export(layer: paddle.nn.Layer, specs: list[InputSpec], path: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        static = paddle.jit.to_static(layer, input_spec=specs, full_graph=True)
        paddle.jit.save(static, f"{tmp}/model")
        params = f"{tmp}/model.pdiparams"
        paddle2onnx.export(
            f"{tmp}/model.json",
            params if Path(params).exists() else "",
            save_file=str(path),
            opset_version=17,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--only", nargs="*", help="export these models alone")
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    paddle.seed(0)
    failed = 0
    import onnx

    for name, (layer, specs, arrays) in models().items():
        if args.only and name not in args.only:
            continue
        try:
            layer.eval()
            path = args.folder / f"{name}.onnx"
            _export(layer, specs, path)
            outs = layer(*(paddle.to_tensor(a) for a in arrays))
            outs = outs if isinstance(outs, (tuple, list)) else [outs]
            model = onnx.load(path)
            data: dict[str, np.ndarray] = {}
            for value, array in zip(model.graph.input, arrays, strict=True):
                data[f"input.{value.name}"] = array
            for value, out in zip(model.graph.output, outs, strict=True):
                data[f"output.{value.name}"] = out.numpy()
            np.savez(args.folder / f"{name}.npz", **data)
            print(f"{name}: ok")
        except Exception as error:  # one export failing does not stop the others
            failed += 1
            print(f"{name}: {type(error).__name__}: {str(error)[:300]}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
