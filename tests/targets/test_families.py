"""The export families kept in the repository (``benchmarks/families/jax2onnx`` and
``paddle2onnx``: real exports of loops and branches with the framework's own outputs) run on
their targets after ``--target``: every model listed is lowered with its proof on the target,
then run there on the framework's inputs against the framework's outputs. The lists are what
``benchmarks/target_samples.py benchmarks/families/<family>`` measured running; a model that
leaves a list is a regression."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

import seqlower
from benchmarks.target_samples import feeds_and_expected
from tests.runtimes import assert_close, require, run

FAMILIES = Path(__file__).resolve().parent.parent.parent / "benchmarks" / "families"

#: target -> the family models that run and match on it after ``--target``.
REACH: dict[str, tuple[str, ...]] = {
    "tract": (
        "jax2onnx/jax_cond",
        "jax2onnx/jax_flip",
        "jax2onnx/jax_fori_static",
        "jax2onnx/jax_map",
        "jax2onnx/jax_scan_cumsum",
        "jax2onnx/jax_scan_embed",
        "jax2onnx/jax_scan_flipped",
        "jax2onnx/jax_scan_nested",
        "jax2onnx/jax_scan_rnn",
        "jax2onnx/jax_while_counter",
        "jax2onnx/jax_while_decode",
        "jax2onnx/jax_while_newton",
        "paddle2onnx/paddle_greedy_decode",
        "paddle2onnx/paddle_gru",
        "paddle2onnx/paddle_if_value",
        "paddle2onnx/paddle_newton",
        "paddle2onnx/paddle_while_counter",
        "paddle2onnx/paddle_while_step",
    ),
    "openvino": (
        "jax2onnx/jax_cond",
        "jax2onnx/jax_flip",
        "jax2onnx/jax_fori_static",
        "jax2onnx/jax_map",
        "jax2onnx/jax_scan_cumsum",
        "jax2onnx/jax_scan_flipped",
        "jax2onnx/jax_scan_nested",
        "jax2onnx/jax_scan_rnn",
        "jax2onnx/jax_while_counter",
        "jax2onnx/jax_while_decode",
        "jax2onnx/jax_while_newton",
        "paddle2onnx/paddle_bilstm",
        "paddle2onnx/paddle_greedy_decode",
        "paddle2onnx/paddle_gru",
        "paddle2onnx/paddle_if_shapes",
        "paddle2onnx/paddle_if_value",
        "paddle2onnx/paddle_lstm2",
        "paddle2onnx/paddle_newton",
        "paddle2onnx/paddle_while_counter",
        "paddle2onnx/paddle_while_step",
    ),
}


@pytest.mark.parametrize(
    ("target", "name"), [(target, name) for target, names in REACH.items() for name in names]
)
def test_a_family_model_runs_on_its_target(target: str, name: str) -> None:
    require(target)
    path = FAMILIES / f"{name}.onnx"
    feeds, expected = feeds_and_expected(path.with_suffix(".npz"))
    lowered = seqlower.lower(onnx.load(path), target=target)
    assert_close(expected, run(target, lowered, feeds), atol=1e-5)


def test_the_families_are_stored_whole() -> None:
    """Every model has its framework outputs beside it, readable without pickle."""
    models = sorted(FAMILIES.glob("*2onnx/*.onnx"))
    assert len(models) >= 15
    for path in models:
        feeds, expected = feeds_and_expected(path.with_suffix(".npz"))
        assert feeds and expected
