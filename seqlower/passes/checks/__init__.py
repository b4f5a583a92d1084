"""Checks that change nothing: nodes validated, and the ``require-*`` passes that name what a
runtime or mode cannot take."""
