"""Tool speed: a whole `seqlower MODEL -o OUT --no-check` run against loading and saving the
same model with onnx_ir alone, and with protobuf (onnx.load/onnx.save) alone.

Run by hand (not a test):  .venv/bin/python benchmarks/tool_speed.py [--sizes 1000,10000,120000]
    --kind default: 65-node blocks, one ReverseSequence (lengths an input) and one SequenceMap
    --kind dense (or --dense): 15 nodes per block, the filler MatMul/Add (one ReverseSequence and
             one SequenceMap per 15 nodes, data types not traceable past a MatMul: the hard case)
    --kind constant: issue 33's model, 18-node blocks of Constant lengths -> ReverseSequence over
             a static [8, 8] tensor -> SequenceConstruct -> SequenceMap(Relu, Add) ->
             ConcatFromSequence -> Slice -> 10 MatMul/Add
    --kind blocks: the constant kind with no block declaring its input's shape (issue 45): only
             the graph input's [8, 8] is given, every later size is proven by the tool

Every measurement is a fresh process (interpreter start and imports included, as a user sees
it), repeated and interleaved; the script prints medians and seqlower's ratio to onnx_ir, plain
and with the cyclic garbage collector off (seqlower turns it off while a model is in memory),
and seqlower's cost per node: its time less its start-up (the same command on a one-block
model), over the node count. A linear tool keeps that figure flat across sizes. Wall time and
CPU time (user + system, from the OS's accounting of each finished process) are both printed:
on a shared machine the CPU ratio is the steadier one.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import constant_lengths_model, synthetic_model

IR_ROUND_TRIP = "import onnx_ir as ir, sys; ir.save(ir.load(sys.argv[1]), sys.argv[2])"
# The same with Python's cyclic collector off, as seqlower runs: the like-for-like floor.
IR_ROUND_TRIP_NO_GC = "import gc; gc.disable(); " + IR_ROUND_TRIP
PROTOBUF_ROUND_TRIP = "import onnx, sys; onnx.save(onnx.load(sys.argv[1]), sys.argv[2])"


def timed(command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def ratio(by: dict[str, list[float]], ref: str) -> float:
    """seqlower's time over ``ref``'s, within each round, then their median: drift on a noisy
    machine cancels."""
    return statistics.median(a / b for a, b in zip(by["seqlower"], by[ref], strict=True))


def per_node(by: dict[str, list[float]], count: int) -> float:
    """seqlower's time past its start-up, in microseconds per node."""
    pairs = zip(by["seqlower"], by["startup"], strict=True)
    return statistics.median((a - b) / count for a, b in pairs) * 1e6


def make_model(kind: str, size: int) -> tuple[onnx.ModelProto, int]:
    """A model of about ``size`` nodes (bodies included) of ``kind``, and its exact count."""
    if kind in ("constant", "blocks"):
        blocks = max(1, size // 18)
        model = constant_lengths_model(blocks, declared=kind == "constant")
    else:
        filler = 10 if kind == "dense" else 60  # 60: thousands of maps/reversals at 120k
        blocks = max(1, size // (filler + 5))  # + ReverseSequence, 3 sequence ops, 2-node body
        model = synthetic_model(blocks, filler=filler, matmul=kind == "dense")
    return model, len(model.graph.node) + 2 * blocks  # two nodes in each SequenceMap body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,120000", help="approximate node counts")
    parser.add_argument("--repeat", type=int, default=3)
    kinds = ("default", "dense", "constant", "blocks")
    parser.add_argument("--kind", choices=kinds, default="default")
    parser.add_argument("--dense", action="store_true", help="the same as --kind dense")
    args = parser.parse_args()
    kind = "dense" if args.dense else args.kind
    seqlower_cli = str(Path(sys.executable).with_name("seqlower"))
    print(
        f"{'nodes':>8} {'protobuf s':>11} {'onnx_ir s':>10} {'no-gc s':>8} {'seqlower s':>11} "
        f"{'/onnx_ir':>9} {'/no-gc':>7} {'us/node':>8} {'cpu /onnx_ir':>13} {'cpu us/node':>12}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        small, small_out = Path(tmp) / "small.onnx", Path(tmp) / "small_out.onnx"
        onnx.save(make_model(kind, 1)[0], small)
        startup_command = [seqlower_cli, str(small), "-o", str(small_out), "--no-check", "-q"]
        for size in (int(s) for s in args.sizes.split(",")):
            model, count = make_model(kind, size)
            path, out = Path(tmp) / "m.onnx", Path(tmp) / "o.onnx"
            onnx.save(model, path)
            commands = {
                "protobuf": [sys.executable, "-c", PROTOBUF_ROUND_TRIP, str(path), str(out)],
                "onnx_ir": [sys.executable, "-c", IR_ROUND_TRIP, str(path), str(out)],
                "no_gc": [sys.executable, "-c", IR_ROUND_TRIP_NO_GC, str(path), str(out)],
                "seqlower": [seqlower_cli, str(path), "-o", str(out), "--no-check", "-q"],
                "startup": startup_command,
            }
            times: dict[str, list[float]] = {name: [] for name in commands}
            cpu: dict[str, list[float]] = {name: [] for name in commands}
            for _ in range(args.repeat):
                for name, command in commands.items():
                    wall, used = timed(command)
                    times[name].append(wall)
                    cpu[name].append(used)
            median = {name: statistics.median(values) for name, values in times.items()}

            print(
                f"{count:>8} {median['protobuf']:>11.2f} {median['onnx_ir']:>10.2f} "
                f"{median['no_gc']:>8.2f} {median['seqlower']:>11.2f} "
                f"{ratio(times, 'onnx_ir'):>8.2f}x {ratio(times, 'no_gc'):>6.2f}x "
                f"{per_node(times, count):>8.1f} {ratio(cpu, 'onnx_ir'):>12.2f}x "
                f"{per_node(cpu, count):>12.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
