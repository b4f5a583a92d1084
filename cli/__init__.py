"""The seqlower command line (installed as ``seqlower.cli``)."""
