"""Fold sequence plumbing whose elements are known when lowering into plain tensor ops.

Exporters build sequences only to take them apart again: PyTorch's ``hstack`` becomes
``SequenceConstruct`` → ``SequenceMap`` → ``SequenceAt(seq, i)`` for constant ``i`` → ``Concat``.
Once a sequence's elements are known values of the graph, every op on it is a tensor op:

- ``SequenceInsert``/``SequenceErase`` (constant or no position) on a known sequence, from a
  ``SequenceEmpty`` or a ``SequenceConstruct``: ``SequenceConstruct`` of the new element list;
- ``SequenceAt(known, constant i)`` (negative ``i`` too): the element itself;
- ``SequenceLength(known)``: a constant;
- ``ConcatFromSequence(known)``: ``Concat`` (``new_axis=1``: each element ``Unsqueeze``\\ d first);
- ``SplitToSequence`` with a count known when lowering (constant ``split``, a ``split`` tensor of
  static length whose sizes are computed, or a static size on
  ``axis``; at most :data:`SPLIT_LIMIT` pieces): ``Split`` (+ ``Squeeze`` for ``keepdims=0``) into
  a ``SequenceConstruct``;
- ``SequenceAt``/``SequenceLength`` of a ``SplitToSequence`` without sizes, whatever the count:
  ``Gather`` along the axis, ``Shape`` of the axis.

Nodes are visited in graph order, subgraphs first, so each fold sees its inputs already folded.
Folded nodes are removed; a ``SequenceConstruct`` nothing reads any more is left for dead-node
removal. Positions out of range are left alone (the original fails there at run time too).

A ``ConcatFromSequence`` whose axis is out of range for its elements' known rank is not folded:
it fails whenever it runs, which ONNX allows, but a ``Concat`` with that axis is refused when the
model loads. PyTorch's TorchScript exporter puts one in the untaken branch of a rank ``If``
(``hstack`` of 1-D tensors: ``ConcatFromSequence(axis=1)`` under ``rank == 1 ?``). The ``If`` is
then folded when the known ranks decide its condition (onnxscript's folder on the ``If`` and the
nodes computing its condition, :mod:`._fold`); otherwise the node stays, named as a blocker.
"""

from __future__ import annotations

from seqlower.passes.sequences._sequence_folds import (
    SPLIT_LIMIT,
    SequenceFolds,
    known_elements,
    unit_split,
)

__all__ = ["SPLIT_LIMIT", "FoldSequenceOps", "known_elements", "unit_split"]


class FoldSequenceOps(SequenceFolds):
    """Replace ops on sequences whose elements are known by tensor ops (module docstring)."""
