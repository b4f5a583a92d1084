"""The per-op shape rules written once (``seqlower/_shape_rules.py``, issue 45): what each prover
makes of a shape is the rule over its own dimensions."""

from __future__ import annotations

from seqlower._shape_rules import STATIC, reshape

HUGE = 10_000_000_000  # its square is past int64


def test_a_reshape_of_huge_sizes_is_exact() -> None:
    """The rule multiplied sizes in int64 (numpy's ``prod``), which wraps past 2**63: a
    ``Reshape`` of [1e10, 1e10] to [-1, 2] was refused, [1e10, 1e10] to [-1, 1e10] given a
    wrong size. if-as-where's own rule had it right (Python's integers, issue 42)."""
    assert reshape((HUGE, HUGE), [-1, 2], False, STATIC) == (HUGE * HUGE // 2, 2)
    assert reshape((HUGE, HUGE), [HUGE * HUGE], False, STATIC) == (HUGE * HUGE,)
    assert reshape((HUGE, 3), [HUGE, 2], False, STATIC) is None
