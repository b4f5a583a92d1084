"""The one bound on what a pass writes from a size it read: constants stay small.

A pass that knows a size when lowering (a static time axis, a loop's bound, a row's shape) may
write what depends on it as a constant, which runtimes then need not compute. But a size is
the user's: a static ``T = 2e7`` made a 158-byte model a 320 MB file, and ``T = 1e9`` ran
seqlower out of memory (issue 42). Every constant a pass builds from a size goes through
:func:`fits_constant`; past the bound the pass writes the run-time form it has for an unknown
size (``Range``, ``ConstantOfShape``, a computed index), which costs a few nodes, not memory.
"""

from __future__ import annotations

__all__ = ["MAX_CONSTANT_ELEMENTS", "fits_constant"]

#: The most elements a constant built from sizes may hold (512 KiB of int64).
MAX_CONSTANT_ELEMENTS = 1 << 16


def fits_constant(*sizes: int) -> bool:
    """Whether a constant of shape ``sizes`` stays within :data:`MAX_CONSTANT_ELEMENTS`
    (Python integers: a product of huge sizes does not wrap around as numpy's would)."""
    count = 1
    for size in sizes:
        count *= max(int(size), 0)
    return count <= MAX_CONSTANT_ELEMENTS
