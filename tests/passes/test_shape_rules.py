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


def test_a_reshape_of_an_empty_tensor_to_a_static_shape_is_proven() -> None:
    """[0, 3] to [3, 0] holds as many elements (none): the rule divided by the target's 0 and
    refused it (and so did the declared-sizes step and the first-iteration proof); if-as-where's
    own rule compared the counts."""
    assert reshape((0, 3), [3, 0], True, STATIC) == (3, 0)
    assert reshape((0, 3), [0, 3], False, STATIC) == (0, 3)
    assert reshape((0, 3), [3, 1], True, STATIC) is None
    assert reshape((4, 0), [-1, 0], True, STATIC) is None  # -1 among zeros: any size
