"""Passes on ``If``: branches as ``Where``s, conditions and what the branches read in the forms a
runtime types."""
