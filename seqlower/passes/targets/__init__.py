"""The passes only deploy targets run (``seqlower.targets``): ``Loop`` -> ``Scan``, the small
repairs one runtime needs, function inlining, and the check that no ``Loop`` is left."""
