"""What ``seqlower M -o O --target T`` gives over the test corpus, the samples and ONNX's node
cases with Loop/Scan/If/sequence/ReverseSequence/Slice, and whether T then runs O right.

Per model: the exit code, and for an exit 0 on a converter (onnx2torch, TVM, tinygrad) whether
it converts O and, run on the model's own inputs, matches onnxruntime on the original (the count
that must be 0: exit 0 with a model the converter refuses or gets wrong; the check proves TVM's
and tinygrad's on generated inputs). For tract the exit 0 is proven on tract by the check
itself. Issue 29's figures, and issue 32's (exit 1, a proof failing on what the converter lacks,
becomes exit 2 naming it; nothing that ran is refused):

    /work/venvs/torch/bin/python benchmarks/target_outcomes.py onnx2torch  # torch 2.13.0 CPU
    .venv/bin/python benchmarks/target_outcomes.py tract
    .venv/bin/python benchmarks/target_outcomes.py tinygrad
    PYTHONPATH=. /work/venvs/tvm/bin/python benchmarks/target_outcomes.py tvm

``PYTHONPATH=<an older checkout>`` measures that version of seqlower the same way.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT.parent / "shared" / "realworld-samples"
KEYS = ("loop", "scan", "test_if", "sequence", "reversesequence", "split_to_seq", "slice")


def models() -> Iterator[tuple[str, onnx.ModelProto, dict[str, Any] | None]]:
    sys.path.insert(0, str(ROOT))
    from onnx.backend.test.case.node import collect_testcases

    from seqlower.verification.input_files import load_inputs
    from tests import loop_cases, sequence_free_cases, sequence_map_cases

    for module in (loop_cases, sequence_free_cases, sequence_map_cases):
        for name, case in module.CASES.items():
            model, feeds = case()
            yield f"{module.__name__.rsplit('.', 1)[-1]}:{name}", model, feeds
    paths = sorted((ROOT / "tests" / "data" / "realworld").glob("*.onnx"))
    for path in paths + sorted(SAMPLES.glob("*/*.onnx")):
        model = onnx.load(path)
        npz = path.with_suffix(".npz")
        yield (
            f"file:{path.parent.name}/{path.name}",
            model,
            (load_inputs(npz, model)[0] if npz.exists() else None),
        )
    for case in collect_testcases(None):
        if case.kind == "node" and case.model is not None and any(k in case.name for k in KEYS):
            inputs = case.data_sets[0][0] if case.data_sets else None
            names = [value.name for value in case.model.graph.input]
            yield (
                f"node:{case.name}",
                case.model,
                (None if inputs is None else dict(zip(names, inputs, strict=False))),
            )


def converter_outputs(
    target: str, model: onnx.ModelProto, feeds: dict[str, Any]
) -> list[np.ndarray]:
    if target == "onnx2torch":
        return onnx2torch_outputs(model, feeds)
    from seqlower.verification.runtimes import TARGET_ORACLES

    return [np.asarray(o) for o in TARGET_ORACLES[target].load(model).run(feeds)]


def onnx2torch_outputs(model: onnx.ModelProto, feeds: dict[str, Any]) -> list[np.ndarray]:
    import torch

    from seqlower.verification.runtimes.onnx2torch import import_onnx2torch

    onnx2torch = import_onnx2torch()

    module = onnx2torch.convert(model)
    initializers = {tensor.name for tensor in model.graph.initializer}
    args = [
        torch.from_numpy(np.asarray(feeds[value.name]))
        for value in model.graph.input
        if value.name not in initializers
    ]
    with torch.no_grad():
        out = module(*args)
    return [o.numpy() for o in (out if isinstance(out, tuple | list) else [out])]


def reference(model: onnx.ModelProto, feeds: dict[str, Any]) -> list[Any]:
    import onnxruntime as ort

    try:
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        return list(session.run(None, feeds))
    except Exception:
        from onnx.reference import ReferenceEvaluator

        return list(ReferenceEvaluator(model).run(None, feeds))


def same(got: list[Any], want: list[Any]) -> bool:
    if len(got) != len(want):
        return False
    for a, b in zip(got, want, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return False
        numeric = a.dtype.kind in "fiub" and b.dtype.kind in "fiub"
        if numeric and not np.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True):
            return False
        if not numeric and not np.array_equal(a, b):
            return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", choices=["onnx2torch", "tract", "tvm", "tinygrad"])
    target = parser.parse_args().target
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from seqlower.errors import SeqlowerError
    from seqlower.job import LowerOptions, lower_file

    counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name, model, feeds in models():
            source, out = Path(tmp) / "m.onnx", Path(tmp) / "o.onnx"
            out.unlink(missing_ok=True)
            onnx.save(model, source)
            try:
                code = int(lower_file(source, out, LowerOptions(targets=(target,))).exit_code)
            except SeqlowerError as e:
                code = int(e.exit_code)
            counts[f"exit {code}"] += 1
            verdict = ""
            if code == 0 and target != "tract" and feeds is not None:
                try:
                    got = converter_outputs(target, onnx.load(out), feeds)
                    verdict = "matches" if same(got, reference(model, feeds)) else "WRONG"
                except Exception as e:
                    verdict = f"REFUSED ({str(e).splitlines()[0][:120]})"
                counts["exit 0, " + verdict.split(" ")[0]] += 1
            print(f"{name}: exit {code} {verdict}", flush=True)
    print(dict(sorted(counts.items())))


if __name__ == "__main__":
    main()
