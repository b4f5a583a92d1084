"""Passes on sequences and optionals: ``SequenceMap`` lowered, sequences folded, stacked or unrolled
into tensor ops, maps over ragged pieces."""
