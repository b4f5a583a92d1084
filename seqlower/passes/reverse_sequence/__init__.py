"""Passes on ``ReverseSequence``: its lowerings into ``Slice``/``Gather`` forms, and its casts."""
