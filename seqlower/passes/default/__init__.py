"""The default pipeline's passes: ``SequenceMap`` -> ``Loop``, ``ReverseSequence`` ->
``Slice``/``GatherND`` (or the row ``Gather``), for runtimes that have sequence ops."""
