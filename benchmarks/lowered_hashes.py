"""Hashes of every lowered file over a corpus, to prove a refactor changes no output.

A refactor (issue 31) must leave every lowered model byte-identical. This script lowers each
model of the corpus with every pipeline (default, ``--sequence-free`` and each ``--target``,
unproven: ``check=False``) and records the SHA-256 of the serialized result, or the error's
class and message when the lowering refuses it. Two records are then compared:

    .venv/bin/python benchmarks/lowered_hashes.py --save /tmp/before.json     # on the old code
    .venv/bin/python benchmarks/lowered_hashes.py --compare /tmp/before.json  # on the new code

(exit 1 and a line per difference when anything changed). The corpus: the models of
``tests/*_cases.py``, ONNX's backend cases with control flow, sequences or optionals
(``benchmarks/onnx_cases.py``), the bundled examples and, when present,
``../shared/realworld-samples``. ``-k`` keeps models whose name holds the text. A lowering's
bytes depend on the model alone, not on what ran before nor on where objects sit in memory
(``tests/passes/test_determinism.py``), so two records made on the same code are equal.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from seqlower import lower  # noqa: E402
from seqlower.targets import TARGETS  # noqa: E402

SAMPLES = ROOT.parent / "shared" / "realworld-samples"


def corpus() -> Iterator[tuple[str, onnx.ModelProto]]:
    """Every model of the corpus, named, in a fixed order."""
    from tests import loop_cases, sequence_free_cases, sequence_map_cases

    for module in (sequence_map_cases, sequence_free_cases, loop_cases):
        cases = getattr(module, "CASES", {})
        for name, make in cases.items():
            made = make() if callable(make) else make
            yield f"{module.__name__.rsplit('.', 1)[-1]}/{name}", made[0]
    import onnx_cases

    for case in onnx_cases.cases():
        yield f"onnx/{case.name}", case.model
    for path in sorted((ROOT / "seqlower" / "examples").glob("*.onnx")):
        yield f"examples/{path.name}", onnx.load(path)
    if SAMPLES.is_dir():
        for path in sorted(SAMPLES.rglob("*.onnx")):
            yield f"samples/{path.relative_to(SAMPLES)}", onnx.load(path)


def pipelines() -> dict[str, dict[str, object]]:
    """Each pipeline's name and the keyword arguments of ``seqlower.lower`` that select it."""
    chosen: dict[str, dict[str, object]] = {"default": {}, "sequence-free": {"sequence_free": True}}
    for target in TARGETS:
        chosen[target] = {"target": target, "check": False}
    return chosen


def record(keep: str | None) -> dict[str, str]:
    """``model :: pipeline`` -> the lowered file's SHA-256, or ``error <Class>: <message>``."""
    out: dict[str, str] = {}
    rows = pipelines()
    for name, model in corpus():
        if keep and keep not in name:
            continue
        for pipeline, kwargs in rows.items():
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    lowered = lower(model, **kwargs)  # type: ignore[arg-type]
            except Exception as error:  # a refusal is a result to compare
                first = str(error).splitlines()[0] if str(error) else ""
                out[f"{name} :: {pipeline}"] = f"error {type(error).__name__}: {first}"
                continue
            digest = hashlib.sha256(lowered.SerializeToString(deterministic=True)).hexdigest()
            out[f"{name} :: {pipeline}"] = digest
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path, help="write the record to this JSON file")
    group.add_argument("--compare", type=Path, help="compare with the record in this JSON file")
    parser.add_argument("-k", help="only models whose name holds this text")
    args = parser.parse_args()
    now = record(args.k)
    if args.save:
        args.save.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"{len(now)} lowerings recorded in {args.save}")
        return 0
    before = json.loads(args.compare.read_text())
    changed = [key for key in sorted(set(before) | set(now)) if before.get(key) != now.get(key)]
    for key in changed:
        print(f"{key}\n  before: {before.get(key)}\n  now:    {now.get(key)}")
    print(f"{len(now)} lowerings, {len(changed)} differ from {args.compare}")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
