"""Write ``seqlower/passes/_converter_ops.py``: the ops and op versions each converter
target converts, read from the converter's own registry (run once per converter version, by
hand, in each converter's venv; seqlower never imports the converters at run time). A run
rewrites the tables of the converters given (default: those installed here) and keeps the
others as they are in the file.

onnx2torch: ``onnx2torch.node_converters.registry._CONVERTER_REGISTRY`` maps (domain, op_type,
since_version) to a converter; it resolves a node's version as ONNX's schema ``since_version``
at the model's opset, which ``RequireConverterOps`` does too.

TVM (Relax ONNX frontend): ``_get_convert_map()`` maps an op type (any domain) to a converter
class whose ``_impl_vN`` methods are its versions; TVM takes the newest at most the model's
default-domain opset, else the oldest, so every op of the map converts at every opset. ``If``
is converted outside the map (``directly_handled_ops``, read from the importer's source).

tinygrad (``tinygrad.nn.onnx.onnx_ops``): an op type maps to one implementation (any domain,
any version: written as version 1) or to one per (domain, version), of which it takes the
newest at most the opset of the node's domain.

    /work/venvs/torch/bin/python benchmarks/converter_ops.py onnx2torch  # torch 2.13.0 CPU, 1.5.15
    PYTHONPATH=. /work/venvs/tvm/bin/python benchmarks/converter_ops.py tvm  # 0.27.0.post1
    .venv/bin/python benchmarks/converter_ops.py tinygrad  # 0.14.0
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import re
import sys
import textwrap
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "seqlower" / "passes" / "_converter_ops.py"

Table = dict[str, tuple[int, ...]]


def _key(domain: str, op: str) -> str:
    return op if domain in ("", "ai.onnx") else f"{domain}::{op}"


def _sorted(versions: dict[str, set[int]]) -> Table:
    return {op: tuple(sorted(v)) for op, v in sorted(versions.items())}


def onnx2torch_ops() -> Table:
    sys.path.insert(0, str(ROOT))
    from seqlower.verification.runtimes.onnx2torch import import_onnx2torch

    import_onnx2torch()  # registers every converter (torchvision stood in where it breaks)
    from onnx2torch.node_converters.registry import _CONVERTER_REGISTRY

    versions: dict[str, set[int]] = defaultdict(set)
    for description in _CONVERTER_REGISTRY:
        key = _key(description.domain, description.operation_type)
        versions[key].add(int(description.version))
    return _sorted(versions)


def tvm_ops() -> Table:
    from tvm.relax.frontend.onnx import onnx_frontend

    versions: dict[str, set[int]] = defaultdict(set)
    for op, converter in onnx_frontend._get_convert_map().items():
        for name in dir(converter):
            if name.startswith("_impl_v"):
                versions[op].add(int(name[len("_impl_v") :]))
    source = inspect.getsource(onnx_frontend.ONNXGraphImporter._check_for_unsupported_ops)
    direct = re.search(r"directly_handled_ops = \{([^}]*)\}", source)
    if direct is None:
        raise SystemExit("TVM's importer no longer lists directly_handled_ops: read it again")
    for op in re.findall(r"\"(\w+)\"", direct.group(1)):
        versions[op].add(1)  # converted by the importer itself, at any opset
    return _sorted(versions)


def tinygrad_ops() -> Table:
    from tinygrad.nn.onnx import onnx_ops

    versions: dict[str, set[int]] = defaultdict(set)
    for op, impl in onnx_ops.items():
        if isinstance(impl, dict):
            for opset in impl:
                versions[_key(opset.domain.value, op)].add(int(opset.version))
        else:
            versions[op].add(1)  # one implementation, whatever the domain and version
    return _sorted(versions)


#: converter -> (the table's name, its package, how its table is read, what it runs on).
CONVERTERS: dict[str, tuple[str, str, Callable[[], Table], str | None]] = {
    "onnx2torch": ("ONNX2TORCH", "onnx2torch", onnx2torch_ops, "torch"),
    "tvm": ("TVM", "apache-tvm", tvm_ops, None),
    "tinygrad": ("TINYGRAD", "tinygrad", tinygrad_ops, None),
}

_WHAT = {
    "onnx2torch": "op (``domain::Op`` outside the default domain) -> the since_versions it has a "
    "converter for",
    "tvm": "op (any domain) -> its converter's ``_impl_vN`` versions (the newest at most the "
    "model's opset is taken, else the oldest)",
    "tinygrad": "op -> the opset versions of its implementations (``domain::Op``: that "
    "domain's only; 1: one for every domain and version)",
}


def _installed(converter: str) -> bool:
    module = {"apache-tvm": "tvm"}.get(CONVERTERS[converter][1], CONVERTERS[converter][1])
    return importlib.util.find_spec(module) is not None


def _current() -> dict[str, tuple[str, Table, str]]:
    """The tables in the file now: converter -> (version, table, the versions comment)."""
    tables: dict[str, tuple[str, Table, str]] = {}
    if not OUT.exists():
        return tables
    namespace: dict[str, object] = {}
    text = OUT.read_text()
    exec(compile(text, str(OUT), "exec"), namespace)
    for converter, (name, *_) in CONVERTERS.items():
        if name in namespace:
            comment = re.search(rf"^#: ({re.escape(converter)} [^:]*):", text, re.MULTILINE)
            tables[converter] = (
                str(namespace[f"{name}_VERSION"]),
                namespace[name],  # type: ignore[arg-type]
                comment.group(1) if comment else converter,
            )
    return tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "converters", nargs="*", help=f"of {', '.join(CONVERTERS)}; default: installed"
    )
    names = parser.parse_args().converters or [c for c in CONVERTERS if _installed(c)]
    if unknown := set(names) - set(CONVERTERS):
        parser.error(f"no such converter: {', '.join(sorted(unknown))}")
    tables = _current()
    for converter in names:
        _, package, read, runs_on = CONVERTERS[converter]
        version = importlib.metadata.version(package)
        label = f"{converter} {version}"
        if runs_on:
            label += f" ({runs_on} {importlib.metadata.version(runs_on)})"
        tables[converter] = (version, read(), label)
        print(f"{OUT}: {len(tables[converter][1])} ops of {label}")
    lines = [
        '"""The ops (and their versions) each converter target converts.',
        "",
        "Generated by ``benchmarks/converter_ops.py`` from the converters' own registries; do not",
        'edit by hand. Read by ``RequireConverterOps``."""',
        "",
        "from __future__ import annotations",
    ]
    for converter, (name, *_) in CONVERTERS.items():
        if converter not in tables:
            continue
        version, table, label = tables[converter]
        lines += [
            "",
            *textwrap.wrap(
                f"{label}: {_WHAT[converter]}.",
                width=100,
                initial_indent="#: ",
                subsequent_indent="#: ",
            ),
            f'{name}_VERSION = "{version}"',
            f"{name}: dict[str, tuple[int, ...]] = {{",
        ]
        lines += [f"    {json.dumps(op)}: {versions!r}," for op, versions in table.items()]
        lines.append("}")
    OUT.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
