"""Write out the attribute defaults a converter misreads.

ONNX gives every optional attribute a default, and a node without the attribute means that
default. Some converters assume another one: onnx2torch 1.5.15 reads a ``CumSum`` without
``reverse`` as ``reverse=1`` (``cumsum.py``: ``attributes.get('reverse', 1)``) and so computes
wrong numbers with no error. For the (op, attribute, default) entries of a target row's
``attribute_defaults``, this pass sets the attribute to ONNX's default on every node that
leaves it out, in every scope: the same model, read the same by every runtime. Each entry is
checked against the converter in ``tests/targets/test_converter_targets.py``.
"""

from __future__ import annotations

from collections.abc import Iterable

import onnx_ir as ir

from seqlower._graphs import all_graphs
from seqlower.passes._base import RepairPass
from seqlower.passes._ir import is_onnx

__all__ = ["ExplicitAttributeDefaults"]

AttributeDefault = tuple[str, str, int | float | str]


class ExplicitAttributeDefaults(RepairPass):
    """Give every node of the ``defaults``' ops the attributes it leaves out, at their ONNX
    defaults."""

    def __init__(self, defaults: Iterable[AttributeDefault] = ()) -> None:
        super().__init__()
        self.defaults: dict[str, list[tuple[str, int | float | str]]] = {}
        for op, name, value in defaults:
            self.defaults.setdefault(op, []).append((name, value))
        self.op_type = ", ".join(sorted(self.defaults)) or None

    def repair(self, model: ir.Model) -> None:
        for graph in all_graphs(model):
            for node in graph:
                wanted = self.defaults.get(node.op_type)
                if not wanted or not is_onnx(node):
                    continue
                missing = [(n, v) for n, v in wanted if n not in node.attributes]
                for name, value in missing:
                    node.attributes[name] = _attribute(name, value)
                self.rewritten += bool(missing)


def _attribute(name: str, value: int | float | str) -> ir.Attr:
    if isinstance(value, bool | int):
        return ir.AttrInt64(name, int(value))
    if isinstance(value, float):
        return ir.AttrFloat32(name, value)
    return ir.AttrString(name, value)
