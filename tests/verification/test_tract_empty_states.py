"""tract 0.23.9 never finishes typing a Scan whose body is an ``If`` and whose state is empty
(a batch of 0) with input facts set from the inputs: the zero-trip guarded form (a ``Scan`` of
``Max(N, 1)`` iterations, its body under an ``If`` on ``N > 0``) run on a batch of 0 waited the
whole ``--target-timeout`` (120 s), then blamed the lowering. The check now says at once that
tract hangs there, the runtime's fault."""

from __future__ import annotations

import numpy as np
import onnx

import seqlower
from seqlower.verification import verify
from seqlower.verification.runtimes import RuntimeRefusal
from seqlower.verification.runtimes.tract import _TractChild, hangs_typing
from tests.helpers import parse
from tests.passes.test_zero_trip_guarded_body import BATCHED
from tests.runtimes import require

#: The smallest model found that hangs tract: a state ``h`` (rows of ``h0``), an ``If`` in the
#: body, a scan output; any one of them dropped, or ``h0`` given a row, tract types it at once.
SMALLEST = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[B, 3] h0, int64 n) => (float[B, 3] h, float[M, B, 3] hs) {
    one = Constant <value = int64 {1}> ()
    zero = Constant <value = int64 {0}> ()
    count = Max (n, one)
    runs = Greater (n, zero)
    steps = Range (zero, count, one)
    h, hs = Scan (h0, steps) <num_scan_inputs = 1,
            body = b (float[?, 3] s, int64 i) => (float[?, 3] s_out, float[?, 3] y) {
        s_out, y = If (runs) <
            then_branch = ran () => (float[?, 3] s2, float[?, 3] y2) {
                f = Cast <to = 1> (i)
                s2 = Add (s, f)
                y2 = Neg (s2)
            },
            else_branch = skipped () => (float[?, 3] s3, float[?, 3] y3) {
                s3 = Identity (s)
                y3 = Identity (s)
            }>
    }>
}
"""


def _feeds(batch: int) -> dict[str, np.ndarray]:
    return {"h0": np.ones((batch, 3), np.float32), "n": np.array(2, np.int64)}


def test_tract_hangs_typing_it_for_an_empty_state() -> None:
    """tract's own behaviour, the adapter's guard left out: a run with a batch of 0 never
    returns (stopped here after 3 s; it spins a core for minutes), with a batch of 2 it runs."""
    require("tract")
    model = parse(SMALLEST)
    child = _TractChild(model.SerializeToString(), True, 3.0, "tract")
    try:
        child.load()
        (h, hs) = child.run(list(_feeds(2).values()))
        assert h.shape == (2, 3) and hs.shape == (2, 2, 3)
        try:
            child.run(list(_feeds(0).values()))
        except RuntimeRefusal as e:
            assert "timed out after 3 s" in str(e)
        else:
            raise AssertionError("tract typed it: the guard in runtimes/tract.py may go")
    finally:
        child.stop()


def test_the_adapter_knows_which_shapes_hang() -> None:
    model = parse(SMALLEST)
    shapes = {"h0": (0, 3), "n": ()}
    assert "Scan node" in (hangs_typing(model, shapes) or "")
    assert hangs_typing(model, {**shapes, "h0": (1, 3)}) is None
    # No If in the body: tract fails on its own (quickly), nothing to say before it.
    unguarded = onnx.ModelProto()
    unguarded.CopyFrom(model)
    scan = next(n for n in unguarded.graph.node if n.op_type == "Scan")
    body = next(a.g for a in scan.attribute if a.name == "body")
    body.node[0].op_type = "Identity"
    assert hangs_typing(unguarded, shapes) is None


def test_the_check_names_tract_at_once_for_a_batch_of_zero() -> None:
    """A zero-trip guarded Loop over a batch of 0: blamed on the lowering after the timeout
    before (the original, a Loop, does not load on tract); now tract's, said before the run."""
    require("tract")
    original = parse(BATCHED)
    lowered = seqlower.lower(original, target="tract", check=False)
    report = verify(original, lowered, runtimes=("tract",), dims={"B": 0}, target_timeout=20, n=1)
    assert report.status == "mismatch" and report.culprit == "runtime", report.reason
    (label,) = report.targets
    line = report.targets[label]
    assert "hangs typing Scan node" in line and "not the lowering's fault" in line, line
    assert "timed out" not in line
    assert line in report.reason
