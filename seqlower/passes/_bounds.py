"""The range a number computed before a loop stays in on every run, traced from constants.

A loop's trip count is often a run-time value with constant bounds: tf2onnx's
``bidirectional_dynamic_rnn`` with ``sequence_length`` runs ``min(T, max(1, max(lengths)))``
times, at most ``M = T`` (a constant at fixed input shapes) and at least 1. Such a count can be
unrolled to its upper bound (``unroll-bounded-scans``) or its scan outputs preallocated to it
(``scan-outputs-as-states``) when the bounds are proven. :func:`value_range` proves them by
interval arithmetic over what computes the value: constants, ``Min``/``Max``/``Add``/``Sub``,
casts and reshapes, comparisons and logic (booleans as 0 and 1, so a condition proven true
decides a ``Where``). Everything else is unbounded. Reads the IR only.
"""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from seqlower.passes._ir import constant_array, is_onnx

__all__ = ["lower_bound", "upper_bound", "value_range"]

#: (lowest, highest) of every element on every run; None where nothing bounds it.
Range = tuple[float | None, float | None]

_UNKNOWN: Range = (None, None)
_DEPTH = 24  # nodes followed back from the value
_SAME = frozenset({"Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Expand"})
_NUMBERS = frozenset(
    {
        ir.DataType.INT64,
        ir.DataType.INT32,
        ir.DataType.INT16,
        ir.DataType.INT8,
        ir.DataType.BOOL,
        ir.DataType.FLOAT,
        ir.DataType.DOUBLE,
    }
)
_EXACT = 2.0**24  # past this a float32 no longer holds every integer: no bound kept


def upper_bound(value: ir.Value | None) -> int | None:
    """An integer no element of ``value`` exceeds on any run, or None."""
    high = value_range(value)[1]
    return None if high is None else math.ceil(high)


def lower_bound(value: ir.Value | None) -> int | None:
    """An integer no element of ``value`` is below on any run, or None."""
    low = value_range(value)[0]
    return None if low is None else math.floor(low)


def value_range(value: ir.Value | None, depth: int = 0) -> Range:
    """The interval every element of ``value`` lies in on every run (module docstring)."""
    if value is None or depth > _DEPTH:
        return _UNKNOWN
    array = constant_array(value)
    if array is not None:
        if array.size == 0 or array.dtype.kind not in "biuf" or not np.all(np.isfinite(array)):
            return _UNKNOWN
        return float(np.min(array)), float(np.max(array))
    node = value.producer()
    if not is_onnx(node) or not node.inputs:
        return _UNKNOWN
    ranges = [value_range(v, depth + 1) for v in node.inputs]
    op = node.op_type
    if op in _SAME:
        return ranges[0]
    if op == "Cast":
        to = node.attributes["to"].as_int() if "to" in node.attributes else None
        return _cast(ranges[0], to)
    if op in ("Min", "Max", "Add", "Sub"):
        return _arithmetic(op, ranges)
    if op == "Where" and len(ranges) == 3:
        if ranges[0] == (1.0, 1.0):
            return ranges[1]
        if ranges[0] == (0.0, 0.0):
            return ranges[2]
        return _hull(ranges[1], ranges[2])
    return _logic(op, ranges)


def _cast(source: Range, to: int | None) -> Range:
    """Integers and floats keep their bounds (a float's truncation stays within them) while
    float32 holds them exactly; a cast to bool is 0 or 1."""
    if to is None or ir.DataType(to) not in _NUMBERS:
        return _UNKNOWN
    if ir.DataType(to) == ir.DataType.BOOL:
        return 0.0, 1.0
    low, high = source
    return (
        None if low is None or abs(low) > _EXACT else low,
        None if high is None or abs(high) > _EXACT else high,
    )


def _arithmetic(op: str, ranges: list[Range]) -> Range:
    lows = [r[0] for r in ranges]
    highs = [r[1] for r in ranges]
    known_lows = [x for x in lows if x is not None]
    known_highs = [x for x in highs if x is not None]
    all_lows = None if None in lows else known_lows
    all_highs = None if None in highs else known_highs
    if op == "Min":
        return (min(all_lows) if all_lows else None, min(known_highs) if known_highs else None)
    if op == "Max":
        return (max(known_lows) if known_lows else None, max(all_highs) if all_highs else None)
    if op == "Add":
        return _in_int32(
            (sum(all_lows) if all_lows else None, sum(all_highs) if all_highs else None)
        )
    if len(ranges) != 2:
        return _UNKNOWN
    (a_low, a_high), (b_low, b_high) = ranges  # Sub
    return _in_int32(
        (
            None if a_low is None or b_high is None else a_low - b_high,
            None if a_high is None or b_low is None else a_high - b_low,
        )
    )


def _in_int32(bounds: Range) -> Range:
    """A sum's bounds where no int32 sum of values within them wraps around; else unknown."""
    low, high = bounds
    if (low is not None and low < -(2.0**31)) or (high is not None and high >= 2.0**31):
        return _UNKNOWN
    return bounds


def _hull(a: Range, b: Range) -> Range:
    return (
        None if a[0] is None or b[0] is None else min(a[0], b[0]),
        None if a[1] is None or b[1] is None else max(a[1], b[1]),
    )


def _logic(op: str, ranges: list[Range]) -> Range:
    """Comparisons decided by disjoint ranges, ``And``/``Or``/``Not`` of decided conditions
    (0 false, 1 true; (0, 1) undecided)."""
    if op == "Not" and len(ranges) == 1:
        low, high = ranges[0]
        return (0.0 if high is None else 1.0 - high, 1.0 if low is None else 1.0 - low)
    if op in ("And", "Or") and len(ranges) == 2:
        pick = min if op == "And" else max
        lows = [0.0 if r[0] is None else r[0] for r in ranges]
        highs = [1.0 if r[1] is None else r[1] for r in ranges]
        return pick(lows), pick(highs)
    if op not in ("Less", "LessOrEqual", "Greater", "GreaterOrEqual") or len(ranges) != 2:
        return _UNKNOWN
    a, b = ranges if op.startswith("Less") else ranges[::-1]  # a < b or a <= b
    strict = op in ("Less", "Greater")
    if a[1] is not None and b[0] is not None and (a[1] < b[0] or (not strict and a[1] <= b[0])):
        return 1.0, 1.0
    if a[0] is not None and b[1] is not None and (a[0] >= b[1] if strict else a[0] > b[1]):
        return 0.0, 0.0
    return 0.0, 1.0
