"""What a new user still tripped on (issue 34), each as a user of onnxsim or polygraphy expects."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
import pytest

import seqlower
import seqlower.writing
from tests.helpers import assert_one_line_error, run_cli
from tests.runtimes import require

NEG = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 3] x) => (float[N, 3] y) { y = Neg(x) }
    """
)


def save(model: onnx.ModelProto, folder: Path, name: str = "in.onnx") -> Path:
    path = folder / name
    onnx.save(model, path)
    return path


# ------------------------------------------------------- 6. Python API errors


@pytest.mark.parametrize(
    "call",
    [
        lambda p: seqlower.lower(p, target="nosuch"),
        lambda p: seqlower.lower(p, passes=["bogus"]),
        lambda p: seqlower.build_pipeline(["bogus"]),
        lambda p: seqlower.inspect_model(p, ["nosuch"]),
    ],
    ids=["target", "pass", "pipeline-pass", "inspect"],
)
def test_unknown_names_are_seqlower_errors_and_still_value_errors(
    tmp_path: Path, call: Callable[[Path], object]
) -> None:
    source = save(NEG, tmp_path)
    with pytest.raises(seqlower.SeqlowerError) as caught:
        call(source)
    assert isinstance(caught.value, ValueError)  # what these raised before: callers catch it
    assert "unknown" in str(caught.value) and "known" in str(caught.value)


def test_verify_takes_one_target_as_a_string(tmp_path: Path) -> None:
    require("tract")
    source = save(NEG, tmp_path)
    report = seqlower.verify(source, source, runtimes="tract")
    assert report.ok and [name.split()[0] for name in report.targets] == ["tract"]
    with pytest.raises(seqlower.SeqlowerError, match="nosuch: unknown target"):
        seqlower.verify(source, source, runtimes="nosuch")


def test_model_bytes_are_a_short_type_error(tmp_path: Path) -> None:
    data = NEG.SerializeToString()
    for call in (
        lambda: seqlower.lower(data),
        lambda: seqlower.verify(data, data),
        lambda: seqlower.inspect_model(data),  # type: ignore[arg-type]
    ):
        with pytest.raises(seqlower.SeqlowerError) as caught:
            call()
        assert isinstance(caught.value, TypeError)
        message = str(caught.value)
        assert "not bytes" in message and "load_model_from_string" in message
        assert len(message) < 200 and "\\x" not in message


# ------------------------------------------------------- 4. "nothing to lower" says what is true

#: A Loop that builds no sequence: ``--sequence-free`` and ``--target openvino`` leave it alone.
PLAIN_LOOP = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (int64 n, float[3] x) => (float[3] y) {
        t = Constant<value = bool {1}>()
        y = Loop(n, t, x) <body = b (int64 i, bool c, float[3] a) => (bool co, float[3] ao) {
            co = Identity(c)
            ao = Neg(a)
        }>
    }
    """
)


@pytest.mark.parametrize("flags", [["--sequence-free"], []])
def test_nothing_to_lower_does_not_deny_a_loop_it_leaves(tmp_path: Path, flags: list[str]) -> None:
    source = save(PLAIN_LOOP, tmp_path)
    result = run_cli(source, "-o", tmp_path / "out.onnx", *flags)
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stdout.splitlines() if line.startswith("nothing to lower"))
    # --sequence-free also folds optionals (``fold-optionals``), which names OptionalGetElement.
    folded = "OptionalGetElement or " if flags else ""
    assert f"no {folded}ReverseSequence or SequenceMap in the model" in line
    assert "Loop" not in line.split(", and ")[0]  # never "no Loop ..." when it has one
    if flags:
        assert line.endswith("its 1 Loop needs no change")


# ------------------------------------------------------- 5. a blocker that has a fix names it

#: A map over a sequence graph input: only ``--unroll-input images=K`` makes it sequence-free.
SEQUENCE_INPUT = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (seq(float[3]) images) => (float[N, 3] y) {
        m = SequenceMap<body = f (float[3] a) => (float[3] r) { r = Neg(a) }>(images)
        y = ConcatFromSequence<axis = 0, new_axis = 1>(m)
    }
    """
)


def test_a_sequence_input_blocker_names_unroll_input(tmp_path: Path) -> None:
    source = save(SEQUENCE_INPUT, tmp_path)
    found = seqlower.inspect_model(source, ["openvino", "sequence-free"])
    for view in found.pipelines:
        assert any("--unroll-input images=K" in b for b in view.blockers), view.blockers
    require("openvino")  # --target names a missing runtime before the blockers
    result = run_cli(source, "-o", tmp_path / "out.onnx", "--target", "openvino")
    assert result.exit_code == 2 and "--unroll-input images=K" in result.stderr
    assert not (tmp_path / "out.onnx").exists()


# ------------------------------------------------------- 7. paths refused before any work


def _no_lowering(monkeypatch: pytest.MonkeyPatch) -> None:
    import seqlower.job

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the model was read: the path should have been refused first")

    monkeypatch.setattr(seqlower.job, "load_model", refuse)


def test_dash_output_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = save(NEG, tmp_path)
    _no_lowering(monkeypatch)
    with monkeypatch.context() as m:
        m.chdir(tmp_path)
        assert_one_line_error(run_cli(source, "-o", "-"), "-o -", "standard output", "./-")
        assert_one_line_error(run_cli(source, "-o", "out.onnx", "--report", "-"), "--report -")
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("folder", ["/proc", "/sys"])
def test_pseudo_file_systems_are_refused_up_front(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: str
) -> None:
    if not Path(folder).is_dir():
        pytest.skip(f"no {folder} here")
    source = save(NEG, tmp_path)
    _no_lowering(monkeypatch)
    out = f"{folder}/seqlower-out.onnx"
    assert_one_line_error(run_cli(source, "-o", out), f"-o {out}", folder)
    assert_one_line_error(run_cli(source, "-o", tmp_path / "o.onnx", "--report", out), "--report")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx"]


# ------------------------------------------------------- 1. an interrupt after the renames


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("external", [False, True])
def test_interrupt_right_after_the_renames_says_what_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: int, external: bool
) -> None:
    """The signal comes once both renames are done but before the run has reported them (while
    the staging folder is removed): OUT and its weights are the new pair, and the line says so."""
    import seqlower.io
    from tests.cli.test_files import output_of, save_external, weighted_model

    out = tmp_path / "out.onnx"
    flags = ["--no-check", *(["--external-data", "w.data"] if external else [])]
    first = save_external(weighted_model(1.0), tmp_path / "first.onnx", "first.bin")
    assert run_cli(first, "-o", out, *flags).exit_code == 0
    second = save_external(weighted_model(2.0), tmp_path / "second.onnx", "second.bin")
    real_rmtree = seqlower.writing.shutil.rmtree

    def rmtree_then_signal(*args: Any, **kwargs: Any) -> None:
        real_rmtree(*args, **kwargs)
        os.kill(os.getpid(), signum)

    monkeypatch.setattr(seqlower.writing.shutil, "rmtree", rmtree_then_signal)
    result = run_cli(second, "-o", out, *flags)
    assert result.exit_code == 128 + signum, result.stderr
    assert output_of(out) == 2.0  # the new pair is in place
    line = assert_one_line_error(result, "written in full", code=128 + signum, prefix="seqlower: ")
    data = "w.data" if external else next(p.name for p in tmp_path.glob("out.onnx.*data"))
    assert f"{out} and {tmp_path / data} were written in full" in line
    assert "nothing was written" not in line


# ------------------------------------------------------- 8. Ctrl-C while the package loads


def _strace() -> str:
    import shutil
    import subprocess

    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed")
    probe = subprocess.run([strace, "-qq", "-o", "/dev/null", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"strace cannot trace here: {probe.stderr.decode().strip()}")
    return strace


@pytest.mark.parametrize("module", ["importlib.metadata", "typing"])
def test_ctrl_c_while_the_package_imports_is_one_line(tmp_path: Path, module: str) -> None:
    """SIGINT the moment a module the package used to import before the launcher's handlers is
    opened (strace delivers it at that system call): one line, never a traceback. The package
    itself now loads without them; if the command loads them later, the handlers are set."""
    import importlib
    import subprocess
    import sys

    strace = _strace()
    source = save(NEG, tmp_path)
    path = importlib.import_module(module).__file__
    assert path is not None
    done = subprocess.run(
        [
            strace, "-f", "-qq", "-o", "/dev/null", "-P", path,
            "-e", "trace=openat,newfstatat,stat",
            "-e", "inject=openat,newfstatat,stat:signal=SIGINT:when=1",
            sys.executable, "-m", "seqlower", str(source), "-o", str(tmp_path / "out.onnx"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr
    if done.returncode != 0:  # interrupted (else the module is not loaded at all any more)
        assert done.returncode == 130, done.stderr
        assert done.stderr.strip().splitlines() == ["seqlower: interrupted; nothing was written"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx"]


# ------------------------------------------------------- 2. the budget before any allocation

#: 20000 x 20000 float32 in and out: 4.8 GB of inputs (with the 64-bit draws), 3.2 GB of the
#: two models' outputs.
DECLARED_HUGE = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[20000, 20000] x, int64[20000] lens) => (float[20000, 20000] y) {
        y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
    }
    """
)


@pytest.mark.parametrize("command", ["lower", "verify"])
def test_budget_counts_outputs_before_anything_is_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    import seqlower.verification.inputs

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("an input was drawn: the budget should have refused the check")

    monkeypatch.setattr(seqlower.verification.inputs, "random_tensor", refuse)
    source = save(DECLARED_HUGE, tmp_path)
    args = (
        [source, "-o", tmp_path / "out.onnx"] if command == "lower" else ["verify"] + [source] * 2
    )
    line = assert_one_line_error(
        run_cli(*args, "--check-memory", "6G"), "over its memory budget", code=3
    )
    assert "4.8 GB of inputs, 3.2 GB of outputs" in line and "--check-memory" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx"]


# ------------------------------------------------------- 9. small external weights stay external

#: A map adding small weights: something to lower, and 11 initializers of 12 bytes.
SMALL_WEIGHTS = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (seq(float[3]) xs) => (seq(float[3]) ys) {
        ys = SequenceMap<body = f (float[3] a) => (float[3] r) {
            r = Sum(a, w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10)
        }>(xs)
    }
    """
)


def _small_weights_model() -> onnx.ModelProto:
    import numpy as np

    model = onnx.ModelProto.FromString(SMALL_WEIGHTS.SerializeToString())
    for k in range(11):
        value = np.full(3, k + 0.5, np.float32)
        model.graph.initializer.append(onnx.numpy_helper.from_array(value, f"w{k}"))
    return model


@pytest.mark.parametrize("check", [True, False])
def test_small_external_weights_stay_external(tmp_path: Path, check: bool) -> None:
    from tests.cli.test_files import save_external

    source = save_external(_small_weights_model(), tmp_path / "in.onnx", "in.data")
    out = tmp_path / "out.onnx"
    result = run_cli(source, "-o", out, *([] if check else ["--no-check"]))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out.onnx.data").is_file(), sorted(p.name for p in tmp_path.iterdir())
    written = onnx.load(out, load_external_data=False)
    external = [
        t.name for t in written.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL
    ]
    assert sorted(external) == sorted(f"w{k}" for k in range(11))
    assert "weights in out.onnx.data" in result.stdout


# --------------------------------------- 3, 13. where the check's data goes, and keeping it

ABS = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 3] x) => (float[N, 3] y) { y = Abs(x) }
    """
)


def _tensor(path: Path) -> Any:
    return onnx.numpy_helper.to_array(onnx.TensorProto.FromString(path.read_bytes()))


def test_verify_failing_inputs_go_where_asked_or_nowhere(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    a, b = save(NEG, models, "a.onnx"), save(ABS, models, "b.onnx")
    chosen = tmp_path / "failing"
    result = run_cli("verify", a, b, "--save-failing-inputs", chosen)
    assert result.exit_code == 1
    assert (chosen / "test_data_set_0" / "input_0.pb").is_file()
    assert f"failing inputs saved in {chosen}" in result.stderr
    assert sorted(p.name for p in models.iterdir()) == ["a.onnx", "b.onnx"]  # nothing beside B
    result = run_cli("verify", a, b, "--no-save-failing-inputs")
    assert result.exit_code == 1 and "failing inputs saved" not in result.stderr
    assert sorted(p.name for p in models.iterdir()) == ["a.onnx", "b.onnx"]
    assert_one_line_error(
        run_cli("verify", a, b, "--save-failing-inputs", chosen, "--no-save-failing-inputs"),
        "not both",
    )


REVERSE = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T, 2] x, int64[2] lens) => (float[T, 2] y) {
        y = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
    }
    """
)


@pytest.mark.parametrize("command", ["lower", "verify"])
def test_save_inputs_and_outputs_keep_every_run(tmp_path: Path, command: str) -> None:
    import numpy as np
    import onnxruntime as ort

    source = save(REVERSE, tmp_path)
    kept = tmp_path / "kept"
    args = (
        [source, "-o", tmp_path / "out.onnx"] if command == "lower" else ["verify", source, source]
    )
    result = run_cli(*args, "--check-n", "2", "--save-inputs", kept, "--save-outputs", kept)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in kept.iterdir()) == ["test_data_set_0", "test_data_set_1"]
    session = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    for folder in kept.iterdir():
        feeds = {"x": _tensor(folder / "input_0.pb"), "lens": _tensor(folder / "input_1.pb")}
        assert feeds["x"].size
        (y,) = session.run(None, feeds)
        assert np.array_equal(_tensor(folder / "output_0.pb"), y)
    # Read back as the check's own inputs and expected outputs.
    again = run_cli(
        "verify", source, source, "--inputs", kept / "test_data_set_1",
        "--expected", kept / "test_data_set_1",
    )  # fmt: skip
    assert again.exit_code == 0, again.output


def test_save_inputs_alone_and_a_file_in_the_way(tmp_path: Path) -> None:
    source = save(NEG, tmp_path)
    inputs, outputs = tmp_path / "in", tmp_path / "out"
    result = run_cli("verify", source, source, "--save-inputs", inputs, "--save-outputs", outputs)
    assert result.exit_code == 0
    assert (inputs / "test_data_set_0" / "input_0.pb").is_file()
    assert not (inputs / "test_data_set_0" / "output_0.pb").exists()
    assert (outputs / "test_data_set_0" / "output_0.pb").is_file()
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert_one_line_error(
        run_cli(source, "-o", tmp_path / "o.onnx", "--save-inputs", blocker),
        "--save-inputs",
        "not a folder",
    )
    assert not (tmp_path / "o.onnx").exists()


# ------------------------------------------------------- 12. batch mode


def test_batch_of_files_and_a_folder_in_parallel(tmp_path: Path) -> None:
    """Each model is its own run (a subprocess): one line each, a table, the worst exit code;
    a bad model fails alone and leaves nothing, the others are written."""
    inputs = tmp_path / "zoo"
    (inputs / "sub").mkdir(parents=True)
    save(REVERSE, inputs, "rev.onnx")
    save(SEQUENCE_INPUT, inputs / "sub", "map.onnx")
    (inputs / "bad.onnx").write_bytes(b"not a model")
    single = save(NEG, tmp_path, "neg.onnx")
    out = tmp_path / "out"
    result = run_cli(inputs, single, f"-o{out}/", "-j2", "--check-n", "1")
    assert result.exit_code == 2, result.output  # the worst run's code: bad.onnx's
    lines = result.stdout.splitlines()
    for name in ("rev.onnx", "sub/map.onnx"):
        assert any(line.startswith("ok: ") and name in line for line in lines), lines
    # Nothing to lower in neg.onnx: copied as read, not counted as lowered (issue 43, item 8).
    assert any(line.startswith("unchanged: ") and "neg.onnx" in line for line in lines), lines
    assert any(line.startswith("error: ") and "bad.onnx" in line for line in lines), lines
    assert lines[-1] == "2 of 4 models lowered; 1 unchanged (nothing to lower); 1 failed"
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == ["neg.onnx", "rev.onnx", "sub/map.onnx"]


def test_parallel_runs_share_the_memory_budget() -> None:
    from seqlower.cli.batch import shared_memory
    from seqlower.verification.check import default_memory_budget

    assert shared_memory(["-q"], 1) == ["-q"]
    assert shared_memory(["-q"], 4) == ["-q", "--check-memory", str(default_memory_budget() // 4)]
    assert shared_memory(["--check-memory=1G"], 4) == ["--check-memory=1G"]


def test_batch_refuses_what_several_runs_would_share(tmp_path: Path) -> None:
    a, b = save(NEG, tmp_path, "a.onnx"), save(REVERSE, tmp_path, "b.onnx")
    (tmp_path / "other").mkdir()
    c = save(NEG, tmp_path / "other", "a.onnx")
    out = tmp_path / "out"
    assert_one_line_error(run_cli(a, c, "-o", f"{out}/"), "would both be written to")
    assert_one_line_error(run_cli(a, b, "-o", a), "written to a directory", f"-o {a}/")
    assert_one_line_error(run_cli(a, b), f"-o {b}")  # two paths and no -o: the old hint
    assert not out.exists()


# ------------------------------------------------------- 11. tf2onnx's ragged map_fn


def _ragged_map_fn() -> onnx.ModelProto:
    """tf2onnx's ragged ``map_fn``: a Loop appends row i's first i+1 values to a sequence
    seeded by SequenceEmpty, ConcatFromSequence joins them, and the graph output declares no
    shape (ONNX's shape inference cannot give it one: the carried sequence has none)."""
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 13]>
        g (float[N, 4] x, int64 n) => (float y) {
            t = Constant<value = bool {1}>()
            e = SequenceEmpty<dtype = 1>()
            s = Loop(n, t, e) <body = b (int64 i, bool c, seq(float) acc)
                                          => (bool co, seq(float) acc2) {
                co = Identity(c)
                one = Constant<value = int64 {1}>()
                k = Add(i, one)
                row = Gather<axis = 0>(x, i)
                st = Constant<value = int64[1] {0}>()
                kk = Unsqueeze(k, st)
                piece = Slice(row, st, kk, st)
                acc2 = SequenceInsert(acc, piece)
            }>
            y = ConcatFromSequence<axis = 0>(s)
        }
        """
    )
    model.graph.output[0].type.tensor_type.ClearField("shape")
    return model


@pytest.mark.parametrize("flags", [[], ["--sequence-free"]])
def test_ragged_map_fn_gets_its_rank_from_the_loop_body(tmp_path: Path, flags: list[str]) -> None:
    import numpy as np
    import onnxruntime as ort

    source = save(_ragged_map_fn(), tmp_path)
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(3, 4), "n": np.array(3, np.int64)}
    (expected,) = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(
        None, feeds
    )
    out = tmp_path / "out.onnx"
    result = run_cli(source, "-o", out, "--inputs", _npz(tmp_path, feeds), *flags)
    assert result.exit_code == 0, result.output
    assert "graph output 'y' declared no shape (ONNX requires one): given rank 1" in result.stdout
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)
    assert len(written.graph.output[0].type.tensor_type.shape.dim) == 1
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert np.array_equal(session.run(None, feeds)[0], expected)


def _npz(folder: Path, feeds: dict[str, Any]) -> Path:
    import numpy as np

    path = folder / "feeds.npz"
    np.savez(path, **feeds)
    return path
