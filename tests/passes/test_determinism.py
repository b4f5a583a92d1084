"""A model lowers to the same bytes whatever ran before in the process: nothing a lowering
emits may follow the memory addresses of IR objects (a set of values iterated in hash order,
``id()`` order), which differ from process to process and after other lowerings.

``ragged-maps-as-scans`` (tract's row) once built its buffer's shape from a ``frozenset`` of
(outer value, axis) pairs, so ``Shape(W)`` and ``Shape(X)`` came out in either order
(realworld-samples' seqmap_in_local_function: two hashes in ``benchmarks/lowered_hashes.py``)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import warnings

import onnx

import seqlower
from tests.helpers import ROOT, ragged_map
from tests.sequence_map_cases import CASES

#: Lowered in a fresh interpreter: the digest of ``ragged_map()`` lowered for tract.
_FRESH = """
import hashlib, sys, warnings
sys.path.insert(0, {root!r})
import seqlower
from tests.helpers import ragged_map
warnings.simplefilter("ignore")
model = seqlower.lower(ragged_map(), target="tract", check=False)
print(hashlib.sha256(model.SerializeToString(deterministic=True)).hexdigest())
"""


def _digest(model: onnx.ModelProto) -> str:
    return hashlib.sha256(model.SerializeToString(deterministic=True)).hexdigest()


def _lowered_after_others() -> list[str]:
    """Digests of ``ragged_map()`` lowered several times, after other lowerings and between
    allocations of varying sizes (kept alive), so its IR objects land at other addresses."""
    digests, kept = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for make in list(CASES.values())[:3]:
            kept.append(seqlower.lower(make()[0], check=False))
        for size in range(8):
            kept.append([object() for _ in range(1 + 97 * size)])
            digests.append(_digest(seqlower.lower(ragged_map(), target="tract", check=False)))
    return digests


def test_a_lowering_is_the_same_bytes_after_others_as_in_a_fresh_process() -> None:
    fresh = subprocess.run(
        [sys.executable, "-c", _FRESH.format(root=str(ROOT))],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout.split()[-1]
    here = _lowered_after_others()
    assert set(here) == {fresh}, f"fresh process {fresh[:12]}, here {[d[:12] for d in here]}"
