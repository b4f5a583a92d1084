"""Names bound at import whose module loads on first call.

The command line's modules bind the library's entry points at the top, as usual; binding them
through :func:`lazy` keeps onnx and onnx_ir (half a second with sympy) out of ``seqlower
--help`` and ``--version``, which call none of them.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["lazy"]


class _Lazy:
    """Calls ``module.name`` (imported on the first call) with the arguments it is given."""

    def __init__(self, module: str, name: str) -> None:
        self._module = module
        self._name = name
        self._target: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._target is None:
            self._target = getattr(importlib.import_module(self._module), self._name)
        return self._target(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<lazy {self._module}.{self._name}>"


def lazy(module: str, name: str) -> Any:
    """``module.name``, imported when first called."""
    return _Lazy(module, name)
