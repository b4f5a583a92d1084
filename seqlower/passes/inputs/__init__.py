"""Passes that apply what the caller says of the graph inputs (``--overwrite-input-shape``,
``--optional-input``, ``--unroll-input``) and fold what follows from it."""
