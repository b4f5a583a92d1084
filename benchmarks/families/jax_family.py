"""Export the jax2onnx family seqlower is measured on (run by hand, never in CI).

jax2onnx writes every ``lax.scan``, ``lax.map``, ``fori_loop`` and ``while_loop`` as a ``Loop``:
a scan over a symbolic length ``T`` as ``Loop(Squeeze(Gather(Shape(xs), 0)), true, ...)`` (a
trip count that may be 0), a ``while_loop`` as a ``Loop`` without ``M`` whose condition the body
recomputes (``i < n``); ``cond`` as an ``If`` on a computed scalar. (``lax.switch`` of three
branches and ``scan(reverse=True)`` fail in jax2onnx 0.17.1's export: not here.)

Set up once, then export into a folder of ``NAME.onnx`` + ``NAME.npz`` (``input.<name>`` /
``output.<name>`` keys in graph order, as ``../shared/realworld-samples/torch``); the exports of
jax2onnx 0.17.1 / jax 0.10.2 are kept in ``benchmarks/families/jax2onnx/`` (tests read them
without jax installed):

    python3 -m venv /work/venvs/jax
    /work/venvs/jax/bin/pip install jax jax2onnx onnx
    /work/venvs/jax/bin/python benchmarks/families/jax_family.py benchmarks/families/jax2onnx

and measure with the project's venv:
``.venv/bin/python benchmarks/target_samples.py benchmarks/families/jax2onnx``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx import to_onnx

_RNG = np.random.default_rng(0)


def _floats(*shape: int) -> np.ndarray:
    return _RNG.standard_normal(shape).astype(np.float32)


def models() -> dict[str, tuple[Callable[..., Any], list[Any], list[np.ndarray]]]:
    """name: (function, jax2onnx input specs, example inputs)."""
    out: dict[str, tuple[Callable[..., Any], list[Any], list[np.ndarray]]] = {}

    def scan_cumsum(x: Any) -> Any:
        def step(c: Any, r: Any) -> tuple[Any, Any]:
            c = c + r
            return c, c * 2.0

        return lax.scan(step, jnp.zeros(3, x.dtype), x)

    out["jax_scan_cumsum"] = (scan_cumsum, [("T", 3)], [_floats(5, 3)])

    def scan_rnn(x: Any, w: Any) -> Any:
        def step(h: Any, r: Any) -> tuple[Any, Any]:
            h = jnp.tanh(r @ w + h)
            return h, h

        return lax.scan(step, jnp.zeros(4, x.dtype), x)[1]

    out["jax_scan_rnn"] = (scan_rnn, [("T", 4), (4, 4)], [_floats(6, 4), _floats(4, 4)])

    def scan_flipped(x: Any) -> Any:  # jax2onnx 0.17.1 exports no scan(reverse=True)
        return lax.scan(lambda c, r: (c + r, c * r), jnp.ones(3, x.dtype), jnp.flip(x, 0))[1]

    out["jax_scan_flipped"] = (scan_flipped, [("T", 3)], [_floats(4, 3)])

    def map_rows(x: Any) -> Any:
        return lax.map(lambda r: jnp.sin(r) * 2.0, x)

    out["jax_map"] = (map_rows, [("T", 3)], [_floats(5, 3)])

    def fori_static(x: Any) -> Any:
        return lax.fori_loop(0, 6, lambda i, c: c * 0.5 + i.astype(c.dtype), x)

    out["jax_fori_static"] = (fori_static, [(3,)], [_floats(3)])

    def while_counter(x: Any, n: Any) -> Any:
        def cond(s: Any) -> Any:
            return s[0] < n

        def body(s: Any) -> Any:
            return s[0] + 2, s[1] * 1.5 + 1.0

        return lax.while_loop(cond, body, (jnp.int32(1), x))

    out["jax_while_counter"] = (
        while_counter,
        [(3,), jax.ShapeDtypeStruct((), jnp.int32)],
        [_floats(3), np.array(8, np.int32)],
    )

    def while_tolerance(x: Any) -> Any:
        def cond(s: Any) -> Any:
            return jnp.logical_and(s[0] < 50, jnp.max(jnp.abs(s[1] - s[2])) > 1e-4)

        def body(s: Any) -> Any:
            return s[0] + 1, 0.5 * (s[1] + 2.0 / s[1]), s[1]

        start = jnp.abs(x) + 1.0
        return lax.while_loop(cond, body, (jnp.int32(0), start, start + 1.0))[1]

    out["jax_while_newton"] = (while_tolerance, [(3,)], [_floats(3)])

    def cond_value(x: Any) -> Any:
        return lax.cond(jnp.sum(x) > 0, lambda v: v * 2.0, lambda v: v - 1.0, x)

    out["jax_cond"] = (cond_value, [(2, 3)], [_floats(2, 3)])

    def flip_time(x: Any) -> Any:
        return jnp.flip(x, 0) + jnp.cumsum(x, axis=0)

    out["jax_flip"] = (flip_time, [("T", 3)], [_floats(4, 3)])

    decoder = _floats(4, 4) * 0.8

    def while_decode(h: Any, max_len: Any) -> Any:
        """A greedy decode up to ``max_len`` steps into an 8-token buffer, stopped by token 0."""

        def cond(s: Any) -> Any:
            return jnp.logical_and(s[0] < max_len, jnp.logical_not(s[3]))

        def body(s: Any) -> Any:
            i, h, tokens, _ = s
            h = jnp.tanh(h @ decoder)
            token = jnp.argmax(h).astype(jnp.int32)
            return i + 1, h, tokens.at[i].set(token), token == 0

        start = (jnp.int32(0), h, jnp.zeros(8, jnp.int32), jnp.bool_(False))
        return lax.while_loop(cond, body, start)[:3]

    out["jax_while_decode"] = (
        while_decode,
        [(4,), jax.ShapeDtypeStruct((), jnp.int32)],
        [_floats(4), np.array(6, np.int32)],
    )

    def scan_nested(x: Any) -> Any:
        """A fori_loop of constant count inside a scan: a Loop in a Loop's body."""

        def outer(c: Any, r: Any) -> tuple[Any, Any]:
            inner = lax.fori_loop(0, 3, lambda i, v: v * 0.5 + 1.0, c + r)
            return inner, inner.sum()

        return lax.scan(outer, jnp.zeros(3, x.dtype), x)

    out["jax_scan_nested"] = (scan_nested, [("T", 3)], [_floats(4, 3)])

    table = jnp.asarray(_floats(10, 4))

    def scan_embed(tokens: Any) -> Any:
        """An embedding lookup by each scanned token: a Gather at an index from data."""

        def step(c: Any, t: Any) -> tuple[Any, Any]:
            c = jnp.tanh(c + table[t])
            return c, c.sum()

        return lax.scan(step, jnp.zeros(4, jnp.float32), tokens)

    out["jax_scan_embed"] = (
        scan_embed,
        [jax.ShapeDtypeStruct(("T",), jnp.int32)],
        [np.array([1, 4, 9, 0, 3], np.int32)],
    )
    return out


def _save(folder: Path, name: str, model: Any, arrays: list[np.ndarray], outs: Any) -> None:
    import onnx

    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(model, folder / f"{name}.onnx")
    data: dict[str, np.ndarray] = {}
    for value, array in zip(model.graph.input, arrays, strict=True):
        data[f"input.{value.name}"] = np.asarray(array)
    flat = jax.tree_util.tree_leaves(outs)
    for value, array in zip(model.graph.output, flat, strict=True):
        data[f"output.{value.name}"] = np.asarray(array)
    np.savez(folder / f"{name}.npz", **data)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--only", nargs="*", help="export these models alone")
    args = parser.parse_args()
    failed = 0
    for name, (fn, specs, arrays) in models().items():
        if args.only and name not in args.only:
            continue
        try:
            model = to_onnx(fn, specs, model_name=name, opset=18)
            _save(args.folder, name, model, arrays, fn(*arrays))
            print(f"{name}: ok")
        except Exception as error:  # one export failing does not stop the others
            failed += 1
            print(f"{name}: {type(error).__name__}: {str(error)[:200]}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
