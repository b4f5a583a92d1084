"""Tool speed: a whole `seqlower MODEL -o OUT --no-check` run against loading and saving the
same model with onnx_ir alone, and with protobuf (onnx.load/onnx.save) alone.

Run by hand (not a test):  .venv/bin/python benchmarks/tool_speed.py [--sizes 1000,10000,120000]
    --dense: 15 nodes per block, the filler MatMul/Add (one ReverseSequence and one SequenceMap
             per 15 nodes, data types not traceable past a MatMul: the hard case)

Every measurement is a fresh process (interpreter start and imports included, as a user sees
it), repeated and interleaved; the script prints medians and seqlower's ratio to onnx_ir, plain
and with the cyclic garbage collector off (seqlower turns it off while a model is in memory),
and seqlower's cost per node: its time less its start-up (the same command on a one-block
model), over the node count. A linear tool keeps that figure flat across sizes.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import synthetic_model

IR_ROUND_TRIP = "import onnx_ir as ir, sys; ir.save(ir.load(sys.argv[1]), sys.argv[2])"
# The same with Python's cyclic collector off, as seqlower runs: the like-for-like floor.
IR_ROUND_TRIP_NO_GC = "import gc; gc.disable(); " + IR_ROUND_TRIP
PROTOBUF_ROUND_TRIP = "import onnx, sys; onnx.save(onnx.load(sys.argv[1]), sys.argv[2])"


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,120000", help="approximate node counts")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dense", action="store_true", help="15-node MatMul/Add blocks")
    args = parser.parse_args()
    filler = 10 if args.dense else 60  # 60: thousands of SequenceMap/ReverseSequence at 120k
    per_block = filler + 5  # + ReverseSequence, 3 sequence ops and the 2-node map body
    seqlower_cli = str(Path(sys.executable).with_name("seqlower"))
    print(
        f"{'nodes':>8} {'SM+RS':>7} {'protobuf s':>11} {'onnx_ir s':>10} {'no-gc s':>8} "
        f"{'seqlower s':>11} {'/onnx_ir':>9} {'/no-gc':>7} {'us/node':>8}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        small, small_out = Path(tmp) / "small.onnx", Path(tmp) / "small_out.onnx"
        onnx.save(synthetic_model(1, filler=filler, matmul=args.dense), small)
        startup_command = [seqlower_cli, str(small), "-o", str(small_out), "--no-check", "-q"]
        for size in (int(s) for s in args.sizes.split(",")):
            blocks = max(1, size // per_block)
            model = synthetic_model(blocks, filler=filler, matmul=args.dense)
            path, out = Path(tmp) / "m.onnx", Path(tmp) / "o.onnx"
            onnx.save(model, path)
            count = len(model.graph.node) + 2 * blocks  # two nodes in each SequenceMap body
            commands = {
                "protobuf": [sys.executable, "-c", PROTOBUF_ROUND_TRIP, str(path), str(out)],
                "onnx_ir": [sys.executable, "-c", IR_ROUND_TRIP, str(path), str(out)],
                "no_gc": [sys.executable, "-c", IR_ROUND_TRIP_NO_GC, str(path), str(out)],
                "seqlower": [seqlower_cli, str(path), "-o", str(out), "--no-check", "-q"],
                "startup": startup_command,
            }
            times: dict[str, list[float]] = {name: [] for name in commands}
            for _ in range(args.repeat):
                for name, command in commands.items():
                    times[name].append(timed(command))
            median = {name: statistics.median(values) for name, values in times.items()}
            # Ratios within each round, then their median: drift on a noisy machine cancels.
            ratio = {
                ref: statistics.median(
                    a / b for a, b in zip(times["seqlower"], times[ref], strict=True)
                )
                for ref in ("onnx_ir", "no_gc")
            }
            per_node = statistics.median(
                (a - b) / count for a, b in zip(times["seqlower"], times["startup"], strict=True)
            )
            print(
                f"{count:>8} {2 * blocks:>7} {median['protobuf']:>11.2f} "
                f"{median['onnx_ir']:>10.2f} {median['no_gc']:>8.2f} {median['seqlower']:>11.2f} "
                f"{ratio['onnx_ir']:>8.2f}x {ratio['no_gc']:>6.2f}x {per_node * 1e6:>8.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
