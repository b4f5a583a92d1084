"""Comparing outputs: bit-exact for ints, bools and strings; floats within tolerances."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from seqlower.verification.report import OutputReport

__all__ = ["Tolerances", "compare_values", "default_tolerance"]

# (rtol, atol) by element type; float16/bfloat16 carry 11 and 8 bits of mantissa.
_TOLERANCES: dict[int, tuple[float, float]] = {
    onnx.TensorProto.FLOAT: (1e-5, 1e-6),
    onnx.TensorProto.COMPLEX64: (1e-5, 1e-6),
    onnx.TensorProto.DOUBLE: (1e-9, 1e-12),
    onnx.TensorProto.COMPLEX128: (1e-9, 1e-12),
    onnx.TensorProto.FLOAT16: (1e-3, 1e-3),
    onnx.TensorProto.BFLOAT16: (1e-2, 1e-2),
}


def default_tolerance(np_dtype: np.dtype) -> tuple[float, float]:
    """(rtol, atol) for a numpy dtype; (0, 0) means bit-exact (ints, bools, strings)."""
    try:
        onnx_type = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(np_dtype))
    except Exception:
        return (0.0, 0.0)
    return _TOLERANCES.get(onnx_type, (0.0, 0.0))


@dataclasses.dataclass(frozen=True)
class Tolerances:
    """Float tolerances: ``rtol``/``atol`` for every output (None: the dtype's default), and
    per-output overrides, so a global ``--rtol`` combines with per-output ones."""

    rtol: float | None = None
    atol: float | None = None
    per_output: Mapping[str, tuple[float | None, float | None]] = dataclasses.field(
        default_factory=dict
    )
    #: Per output, the axes whose size ONNX leaves open when the output is empty: a zero-trip
    #: ``Loop``'s scan output, past axis 0, where its body declares no size (onnxruntime makes
    #: them 0, OpenVINO keeps the previous run's, a Scan the rows' own). Read from the reference
    #: model (:func:`seqlower.verification.check.unspecified_empty_axes`), not from options.
    unspecified: Mapping[str, frozenset[int]] = dataclasses.field(default_factory=dict)
    #: Float types the runtime compared computes in a narrower one (numpy names: OpenVINO's CPU
    #: plugin runs float64 as float32): their outputs there get the narrower type's default
    #: tolerance, not one no run of that runtime could meet (set per runtime by the check).
    narrowed: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_options(
        cls,
        rtol: float | Mapping[str, float] | None = None,
        atol: float | Mapping[str, float] | None = None,
    ) -> Tolerances:
        """From verify()'s ``rtol``/``atol``: a number, or per output name (``"*"``: every
        output not named)."""

        def split(value: float | Mapping[str, float] | None) -> tuple[Any, dict[str, float]]:
            if isinstance(value, Mapping):
                named = {k: v for k, v in value.items() if k != "*"}
                return value.get("*"), named
            return value, {}

        r, r_named = split(rtol)
        a, a_named = split(atol)
        per_output = {name: (r_named.get(name), a_named.get(name)) for name in {*r_named, *a_named}}
        return cls(r, a, per_output)

    def to_options(self) -> tuple[float | dict[str, float] | None, ...]:
        """``(rtol, atol)`` in :meth:`from_options`' form, which reads them back."""

        def join(overall: float | None, index: int) -> float | dict[str, float] | None:
            named = {k: v[index] for k, v in self.per_output.items() if v[index] is not None}
            if not named:
                return overall
            return {**({} if overall is None else {"*": overall}), **named}  # type: ignore[dict-item]

        return join(self.rtol, 0), join(self.atol, 1)

    def for_output(self, name: str) -> tuple[float | None, float | None]:
        r, a = self.per_output.get(name, (None, None))
        return (self.rtol if r is None else r, self.atol if a is None else a)

    def compare(self, name: str, expected: Any, actual: Any) -> OutputReport:
        """:func:`compare_values` with this output's tolerances and unspecified axes."""
        rtol, atol = self.for_output(name)
        narrower = self.narrowed.get(_dtype_name(expected) or "")
        if narrower is not None:
            narrow_rtol, narrow_atol = default_tolerance(np.dtype(narrower))
            rtol = narrow_rtol if rtol is None else rtol
            atol = narrow_atol if atol is None else atol
        return compare_values(name, expected, actual, rtol, atol, self.unspecified.get(name))

    def to_dict(self) -> dict[str, Any]:
        return {
            "rtol": self.rtol,
            "atol": self.atol,
            "per_output": {k: {"rtol": r, "atol": a} for k, (r, a) in self.per_output.items()},
        }


def _dtype_name(value: Any) -> str | None:
    """The element type of a tensor or of a sequence's first tensor (None: an empty one)."""
    if isinstance(value, list):
        return _dtype_name(value[0]) if value else None
    return str(np.asarray(value).dtype)


def compare_values(
    name: str,
    expected: Any,
    actual: Any,
    rtol: float | None = None,
    atol: float | None = None,
    unspecified: frozenset[int] | None = None,
) -> OutputReport:
    """Compare one output: sequences by length then element, tensors by shape, dtype, values.
    Two empty tensors may differ in size on the ``unspecified`` axes (see
    :attr:`Tolerances.unspecified`), nowhere else."""
    if isinstance(expected, list) or isinstance(actual, list):
        return _compare_sequences(name, expected, actual, rtol, atol)
    e, a = np.asarray(expected), np.asarray(actual)
    report = OutputReport(
        name,
        True,
        reference_shape=list(e.shape),
        candidate_shape=list(a.shape),
        elements=int(e.size),
    )
    open_shape = _open_shape(e, a, unspecified or frozenset())
    if e.shape != a.shape and not open_shape:
        report.ok, report.message = False, f"shape {list(a.shape)}, expected {list(e.shape)}"
        report.mismatches = max(e.size, a.size)
        return report
    if e.dtype != a.dtype:
        report.ok, report.message = False, f"dtype {a.dtype}, expected {e.dtype}"
        report.mismatches = int(e.size)
        return report
    if open_shape:
        return report  # both empty: no values to compare
    if e.dtype.kind in "OSUb" or e.dtype.kind in "iu":
        _compare_exact(e, a, report)
    else:
        default_rtol, default_atol = default_tolerance(e.dtype)
        rtol = default_rtol if rtol is None else rtol
        atol = default_atol if atol is None else atol
        _compare_floats(e, a, rtol, atol, report)
    if report.mismatches:
        report.ok = False
        report.message = f"{report.mismatches} of {report.elements} elements differ"
    return report


def _compare_sequences(
    name: str, expected: Any, actual: Any, rtol: float | None, atol: float | None
) -> OutputReport:
    """Two sequences by length, then element by element (the first differing one named)."""
    report = OutputReport(name, True, kind="sequence")
    if not (isinstance(expected, list) and isinstance(actual, list)):
        report.ok, report.message = False, "one is a sequence, the other a tensor"
        return report
    report.reference_length, report.candidate_length = len(expected), len(actual)
    if len(expected) != len(actual):
        report.ok = False
        report.message = f"sequence length {len(actual)}, expected {len(expected)}"
        return report
    for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
        element = compare_values(f"{name}[{i}]", e, a, rtol, atol)
        report.max_abs = max(report.max_abs, element.max_abs)
        report.max_rel = max(report.max_rel, element.max_rel)
        report.mismatches += element.mismatches
        report.special += element.special
        report.elements += element.elements
        if not element.ok:
            report.ok = False
            report.message = report.message or f"element {i}: {element.message}"
    return report


def _compare_exact(e: np.ndarray, a: np.ndarray, report: OutputReport) -> None:
    """Ints, bools and strings bit for bit; ints' differences measured for the report."""
    differ = e != a
    report.mismatches = int(np.count_nonzero(differ))
    if e.dtype.kind in "iu" and report.mismatches:
        diff = np.abs(e.astype(np.float64) - a.astype(np.float64))
        report.max_abs = float(diff.max())
        report.max_rel = float((diff / np.maximum(np.abs(e.astype(np.float64)), 1e-300)).max())


def _compare_floats(
    e: np.ndarray, a: np.ndarray, rtol: float, atol: float, report: OutputReport
) -> None:
    """Floats within ``atol + rtol * |expected|``; NaN must meet NaN, an infinity the same
    infinity (those that do not are counted as ``special``)."""
    e64 = e.astype(np.complex128 if e.dtype.kind == "c" else np.float64)
    a64 = a.astype(e64.dtype)
    nan_e, nan_a = np.isnan(e64), np.isnan(a64)
    inf_e, inf_a = np.isinf(e64), np.isinf(a64)
    finite = ~(nan_e | nan_a | inf_e | inf_a)
    diff = np.zeros(e.shape, dtype=np.float64)
    diff[finite] = np.abs(e64[finite] - a64[finite])
    within = diff <= atol + rtol * np.abs(e64)
    # NaN must meet NaN; an infinity must meet the same infinity; finite within tolerance.
    ok = np.where(finite, within, (nan_e & nan_a) | (inf_e & inf_a & (e64 == a64)))
    report.mismatches = int(np.count_nonzero(~ok))
    report.special = int(np.count_nonzero(~ok & ~finite))
    if diff.size:
        report.max_abs = float(diff.max())
        rel = diff / np.maximum(np.abs(e64), np.finfo(np.float64).tiny)
        report.max_rel = float(np.where(finite, rel, 0.0).max())


def _open_shape(e: np.ndarray, a: np.ndarray, unspecified: frozenset[int]) -> bool:
    """Whether two different shapes of empty tensors differ only on ``unspecified`` axes."""
    if e.shape == a.shape or e.size or a.size or e.ndim != a.ndim or not unspecified:
        return False
    return all(
        k in unspecified or d == b for k, (d, b) in enumerate(zip(e.shape, a.shape, strict=True))
    )
