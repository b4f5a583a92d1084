"""Peak memory: `seqlower MODEL -o OUT --no-check` on a model with 1 GiB of external weights,
against onnx_ir loading and saving the same model.

Run by hand (not a test):  .venv/bin/python benchmarks/memory.py [--gib 1]

Each command runs in its own process; the peak resident set size is read with getrusage.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import synthetic_model

PEAK = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
    "capture_output=True); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)
IR_ROUND_TRIP = (
    "import onnx_ir as ir, sys; ir.save(ir.load(sys.argv[1]), sys.argv[2], external_data='w.bin')"
)


def peak_mib(command: list[str]) -> float:
    out = subprocess.run(
        [sys.executable, "-c", PEAK, *command], check=True, capture_output=True, text=True
    ).stdout
    return int(out.strip()) / 1024  # ru_maxrss is in KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0, help="external weights, in GiB")
    args = parser.parse_args()
    seqlower_cli = str(Path(sys.executable).with_name("seqlower"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        model = synthetic_model(50, filler=4, weights_bytes=int(args.gib * (1 << 30)))
        onnx.save(
            model, path, save_as_external_data=True, location="model.data", size_threshold=1024
        )
        seq = peak_mib(
            [seqlower_cli, str(path), "-o", str(Path(tmp) / "out.onnx"), "--no-check", "-q"]
        )
        base = peak_mib(
            [sys.executable, "-c", IR_ROUND_TRIP, str(path), str(Path(tmp) / "ir.onnx")]
        )
        print(f"external weights: {args.gib:g} GiB")
        print(f"seqlower --no-check peak RSS: {seq:.0f} MiB")
        print(f"onnx_ir load+save peak RSS:   {base:.0f} MiB")


if __name__ == "__main__":
    main()
