"""The sequence-free pipeline's passes (``--sequence-free``): sequence ops folded, unrolled or
turned into tensor ops, then a check that none is left; and ``--unroll-input``."""
