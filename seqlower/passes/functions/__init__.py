"""Passes on functions: model-local functions inlined, ONNX function ops a runtime lacks expanded
into their bodies."""
