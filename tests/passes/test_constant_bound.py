"""Constants a pass writes stay small whatever the sizes (issue 42): a static time axis of
``T = 2e7`` made a 158-byte model a 320 MB file, and ``T = 1e9`` ran seqlower out of memory in
``lower``, ``inspect`` and the API (exit 70). Past ``MAX_CONSTANT_ELEMENTS`` every pass writes
the run-time form it has for unknown sizes; running out of memory anyway is exit 3."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.parser
import pytest
from onnx import TensorProto
from onnx import helper as h

import seqlower
from seqlower.errors import ExitCode
from seqlower.passes._emit import MAX_CONSTANT_ELEMENTS
from seqlower.passes.reverse_sequence.lower_reverse_sequence import LowerReverseSequence
from tests.helpers import ROOT, all_nodes, ort_run, run_cli

BIG = 20_000_000  # T of issue 42's 320 MB file
HUGE = 1_000_000_000  # T that ran seqlower out of memory
MEMORY = 3 << 30  # the address space the runs at HUGE get: 8 GB of steps cannot fit


def reversal(
    time: int | str,
    batch: int,
    rest: tuple[int, ...] = (),
    *,
    time_axis: int = 0,
    opset: int = 17,
    lens: list[int] | None = None,
) -> onnx.ModelProto:
    """y = ReverseSequence(x, lens) over x [T, B, *rest] (or [B, T, *rest]); the lengths an
    input, or the constant ``lens``."""
    shape = [time, batch, *rest] if time_axis == 0 else [batch, time, *rest]
    inputs = [h.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
    inits = []
    if lens is None:
        inputs.append(h.make_tensor_value_info("lens", TensorProto.INT64, [batch]))
    else:
        inits.append(onnx.numpy_helper.from_array(np.array(lens, np.int64), "lens"))
    node = h.make_node(
        "ReverseSequence", ["x", "lens"], ["y"], time_axis=time_axis, batch_axis=1 - time_axis
    )
    y = h.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    graph = h.make_graph([node], "g", inputs, [y], initializer=inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=8)


def largest_constant(model: onnx.ModelProto) -> int:
    """The element count of the model's largest constant (initializers and Constant nodes)."""
    sizes = [int(np.prod(t.dims)) for t in model.graph.initializer]
    for node in all_nodes(model):
        sizes += [int(np.prod(a.t.dims)) for a in node.attribute if a.type == a.TENSOR]
    return max(sizes, default=0)


@pytest.mark.parametrize(
    ("rest", "time_axis", "opset", "passes"),
    [
        ((), 0, 17, None),  # one element a step: GatherElements
        ((3,), 0, 17, None),  # static slices: the row GatherND
        ((2, 2), 1, 17, None),  # batch-major rows
        ((3,), 0, 17, ["lower-reverse-sequence-rows"]),  # the row Gather
        ((3,), 1, 10, None),  # opset 10's row Gather
    ],
)
def test_a_static_time_axis_writes_no_constant_of_its_length(
    rest: tuple[int, ...], time_axis: int, opset: int, passes: list[str] | None
) -> None:
    model = reversal(BIG, 2, rest, time_axis=time_axis, opset=opset)
    lowered = seqlower.lower(model, passes, check=False)
    assert "ReverseSequence" not in {n.op_type for n in all_nodes(lowered)}
    assert largest_constant(lowered) <= MAX_CONSTANT_ELEMENTS
    assert lowered.ByteSize() < 64 << 10


@pytest.mark.parametrize("lens", [[BIG - 1, 3], [2, 3]])
def test_constant_lengths_on_a_long_static_time_axis_write_no_index_of_its_length(
    lens: list[int],
) -> None:
    for opset in (10, 17):
        lowered = seqlower.lower(reversal(BIG, 2, (3,), lens=lens, opset=opset), check=False)
        assert largest_constant(lowered) <= MAX_CONSTANT_ELEMENTS, opset


def test_input_shapes_fixing_a_long_time_axis_write_a_small_file(tmp_path: Path) -> None:
    """``--overwrite-input-shape`` and ``input_shapes=`` make T static before the lowering."""
    source = tmp_path / "m.onnx"
    onnx.save(reversal("T", 1), source)
    out = tmp_path / "out.onnx"
    code, _, stderr = run_cli(
        "lower", source, "-o", out, "--no-check", "--overwrite-input-shape", f"x={BIG},1"
    )
    assert code == 0, stderr
    assert out.stat().st_size < 64 << 10
    lowered = seqlower.lower(reversal("T", 1), input_shapes={"x": (BIG, 1)}, check=False)
    assert lowered.ByteSize() < 64 << 10


@pytest.mark.parametrize("lens", [None, [MAX_CONSTANT_ELEMENTS + 3, 5]])
@pytest.mark.parametrize("time_axis", [0, 1])
@pytest.mark.parametrize("rest", [(), (2,)])
def test_past_the_bound_the_run_time_index_matches_the_kernel(
    lens: list[int] | None, time_axis: int, rest: tuple[int, ...]
) -> None:
    """Just past the bound the index is computed at run time: the same numbers as
    onnxruntime's own kernel (and no constant of T's size)."""
    time = MAX_CONSTANT_ELEMENTS + 7
    model = reversal(time, 2, rest, time_axis=time_axis, lens=lens)
    lowered = seqlower.lower(model, check=False)
    assert largest_constant(lowered) <= MAX_CONSTANT_ELEMENTS
    shape = [time, 2, *rest] if time_axis == 0 else [2, time, *rest]
    feeds: dict[str, Any] = {"x": np.random.default_rng(0).random(shape, dtype=np.float32)}
    if lens is None:
        feeds["lens"] = np.array([time - 1, 4], np.int64)
    np.testing.assert_array_equal(ort_run(lowered, feeds)[0], ort_run(model, feeds)[0])


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def _seqlower(*args: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in a process whose address space is bounded: the constants of issue 42
    would need 8 GB and more, so a regression fails fast instead of swapping."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=_limited,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def huge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("huge") / "huge.onnx"
    onnx.save(reversal(HUGE, 2, (3,)), path)
    return path


def test_a_huge_static_time_axis_lowers_without_running_out_of_memory(
    huge: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.onnx"
    done = _seqlower("-m", "seqlower", "lower", str(huge), "-o", str(out), "--no-check", "-q")
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size < 64 << 10


def test_a_huge_static_time_axis_is_inspected_without_running_out_of_memory(huge: Path) -> None:
    done = _seqlower("-m", "seqlower", "inspect", str(huge))
    assert done.returncode == 0, done.stderr


def test_the_api_fixes_a_huge_time_axis_without_running_out_of_memory(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(reversal("T", 2, (3,)), source)
    code = (
        "import sys, seqlower\n"
        f"m = seqlower.lower(sys.argv[1], input_shapes={{'x': ({HUGE}, 2, 3)}}, check=False)\n"
        "print(m.ByteSize())\n"
    )
    done = _seqlower("-c", code, str(source))
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 64 << 10


def test_running_out_of_memory_in_a_pass_is_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's promise: out of memory anywhere is "cannot verify", not an internal error
    (the pass machinery wrapped the MemoryError in a PassError: exit 70)."""

    def exhausted(*_: object) -> None:
        raise MemoryError

    monkeypatch.setattr(LowerReverseSequence, "plan", exhausted)
    source = tmp_path / "m.onnx"
    onnx.save(reversal(8, 2), source)
    result = run_cli("lower", source, "-o", tmp_path / "out.onnx", "--no-check")
    assert result.exit_code == ExitCode.CANNOT_VERIFY, result.stderr
    assert "out of memory" in result.stderr
    assert not (tmp_path / "out.onnx").exists()
    with pytest.raises(MemoryError):
        seqlower.lower(reversal(8, 2), check=False)


def test_a_reshape_of_huge_sizes_is_worked_out_without_its_elements() -> None:
    """if-as-where works out a ``Reshape``'s shape by arithmetic, the shape rules' (it made a
    numpy array of every element: 1e18 here)."""
    from seqlower._shape_rules import STATIC, reshape

    assert reshape((HUGE, HUGE), [-1, 2], False, STATIC) == (HUGE * HUGE // 2, 2)
    assert reshape((HUGE, 3), [HUGE, 2], False, STATIC) is None
    assert reshape((4, 0), [-1, 0], True, STATIC) is None  # numpy's ValueError: -1 among zeros
    assert reshape((6,), [-1, -1], False, STATIC) is None


def test_a_split_of_a_huge_static_axis_is_refused_without_listing_its_pieces(
    tmp_path: Path,
) -> None:
    """``--sequence-free`` counts a unit split's pieces (it listed 1e9 of them first)."""
    source = tmp_path / "split.onnx"
    text = f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[{HUGE}] x, int64 i) => (float[{HUGE + 1}] y) {{
        s = SplitToSequence(x)
        t = SequenceInsert(s, x, i)
        y = ConcatFromSequence<axis = 0>(t)
    }}
    """
    onnx.save(onnx.parser.parse_model(text), source)
    out = tmp_path / "out.onnx"
    done = _seqlower(
        "-m", "seqlower", "lower", str(source), "-o", str(out), "--sequence-free", "--no-check"
    )
    assert done.returncode == ExitCode.BAD_INPUT, done.stderr
    assert f"{HUGE} pieces are more than" in done.stderr
