"""Passes on ``Loop``, ``Scan`` and the recurrent ops: loops as scans, scans unrolled, bodies in the
forms a runtime's importer takes."""
