"""Files, weights and resources: seqlower never writes where it was not asked, never leaves a
model and its weights out of step, and never leaves anything behind when a run fails."""

from __future__ import annotations

import os
import signal
import stat
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import seqlower
import seqlower.io
import seqlower.writing
from seqlower.errors import InvalidModelError, OutputError
from tests.helpers import assert_one_line_error, run_cli

WEIGHTS = 1000  # floats: 4 kB, above onnx_ir's 256-byte threshold for external data


def weighted_model(scale: float = 1.0) -> onnx.ModelProto:
    """y = x * w with a 4 kB weight; ``scale`` tells models (and their weights) apart."""
    model = onnx.parser.parse_model(
        f"""
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[{WEIGHTS}] x) => (float[{WEIGHTS}] y) {{
            y = Mul(x, w)
        }}
        """
    )
    w = np.full(WEIGHTS, scale, np.float32)
    model.graph.initializer.append(onnx.numpy_helper.from_array(w, "w"))
    return model


def save_external(model: onnx.ModelProto, path: Path, location: str) -> Path:
    copy = onnx.ModelProto.FromString(model.SerializeToString())
    onnx.save(copy, path, save_as_external_data=True, location=location, size_threshold=0)
    return path


def output_of(path: Path) -> float:
    """Run the model at ``path`` (weights read from its folder) on ones; its weight value."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": np.ones(WEIGHTS, np.float32)})
    assert np.all(y == y[0])
    return float(y[0])


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ------------------------------------------------------------ 1. never write through a link


@pytest.mark.parametrize("where", ["data", "external-data", "report"])
@pytest.mark.parametrize("dangling", [False, True])
def test_links_are_replaced_not_followed(tmp_path: Path, where: str, dangling: bool) -> None:
    source = save_external(weighted_model(), tmp_path / "in.onnx", "in.bin")
    victim = tmp_path / "elsewhere" / "victim.txt"
    victim.parent.mkdir()
    if not dangling:
        victim.write_text("precious")
    out = tmp_path / "out.onnx"
    names = {"data": "out.onnx.data", "external-data": "w.bin", "report": "r.json"}
    link = tmp_path / names[where]
    link.symlink_to(victim)
    args = [source, "-o", out]
    if where == "external-data":
        args += ["--external-data", "w.bin"]
    if where == "report":
        args += ["--report", link]
    result = run_cli(*args)
    assert result.exit_code == 0, result.stderr
    if dangling:
        assert not victim.exists()
    else:
        assert victim.read_text() == "precious"
    if where == "data":  # a link at OUT.data is somebody's file: the weights go elsewhere
        assert link.is_symlink()
    else:
        assert not link.is_symlink() and link.is_file()
    assert output_of(out) == 1.0


# ------------------------------------------- 2. the input's weights are never overwritten


def test_in_place_with_weights_named_like_the_output(tmp_path: Path) -> None:
    model = save_external(weighted_model(3.0), tmp_path / "m.onnx", "m.onnx.data")
    result = run_cli(model, "-o", model)
    assert result.exit_code == 0, result.stderr
    assert output_of(model) == 3.0
    # The old weights were the replaced model's own: removed once nothing reads them.
    names = listing(tmp_path)
    assert len(names) == 2 and "m.onnx" in names, names
    assert run_cli(model, "-o", model).exit_code == 0  # and again: names alternate, still one pair
    assert output_of(model) == 3.0 and len(listing(tmp_path)) == 2


def test_output_beside_an_input_whose_weights_have_the_output_s_data_name(tmp_path: Path) -> None:
    source = save_external(weighted_model(5.0), tmp_path / "a.onnx", "b.onnx.data")
    before = (tmp_path / "b.onnx.data").read_bytes()
    result = run_cli(source, "-o", tmp_path / "b.onnx")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "b.onnx.data").read_bytes() == before
    assert output_of(source) == 5.0 and output_of(tmp_path / "b.onnx") == 5.0
    # Writing b.onnx once more must not remove a.onnx's weights, although b.onnx.data is
    # named as b.onnx's weights would be.
    assert run_cli(source, "-o", tmp_path / "b.onnx").exit_code == 0
    assert output_of(source) == 5.0 and output_of(tmp_path / "b.onnx") == 5.0


# --------------------------------------------------- 3. --external-data names what it may


@pytest.mark.parametrize("name", ["out.onnx", "in.onnx", "in.bin", "..", ".", "", "sub/w.bin"])
def test_bad_external_data_names(tmp_path: Path, name: str) -> None:
    source = save_external(weighted_model(), tmp_path / "in.onnx", "in.bin")
    out = tmp_path / "out.onnx"
    out.write_bytes(b"previous")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    result = run_cli(source, "-o", out, "--external-data", name)
    assert_one_line_error(result)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing new


# --------------------------------------------------------- 4. only regular files replaced


def test_devices_and_fifos_are_refused(tmp_path: Path) -> None:
    source = save_external(weighted_model(), tmp_path / "in.onnx", "in.bin")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target in (fifo, Path("/dev/null")):
        result = run_cli(source, "-o", target, "--no-check")
        assert result.exit_code == 2 and "not a regular file" in result.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)
    assert run_cli(source, "-o", tmp_path, "--no-check").exit_code == 2  # a folder
    assert run_cli(source, "-o", "", "--no-check").exit_code == 2
    assert listing(tmp_path) == ["fifo", "in.bin", "in.onnx"]


# ------------------------------------------------- 5. Constant tensors with external data


def _constant_model(folder: Path, location: str) -> Path:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[4] x) => (float[4] y) {
            c = Constant<value = float[4] {1, 2, 3, 4}>()
            y = Add(x, c)
        }
        """
    )
    tensor = model.graph.node[0].attribute[0].t
    data = onnx.numpy_helper.to_array(tensor).tobytes()
    tensor.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(tensor)))
    onnx.external_data_helper.set_external_data(tensor, location)
    tensor.ClearField("raw_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    (folder / "model").mkdir(exist_ok=True)
    if not location.startswith(".."):
        (folder / "model" / location).write_bytes(data)
    path = folder / "model" / "c.onnx"
    onnx.save(model, path)
    return path


def test_constant_external_data_is_read_from_the_model_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _constant_model(tmp_path, "c.bin")
    monkeypatch.chdir(tmp_path)  # not the model's folder
    out = tmp_path / "out" / "c.onnx"
    out.parent.mkdir()
    result = run_cli(source, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert listing(out.parent) == ["c.onnx"]  # self-contained: no dangling reference
    onnx.checker.check_model(onnx.load(out), full_check=True)


def test_constant_external_data_outside_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secret.bin").write_bytes(np.ones(4, np.float32).tobytes())
    source = _constant_model(tmp_path, "../secret.bin")
    result = run_cli(source, "-o", tmp_path / "out.onnx")
    assert result.exit_code == 2 and "outside" in result.stderr
    assert not (tmp_path / "out.onnx").exists()


# ------------------------------------------------ 6. lengths and offsets checked first


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("length", "8", "holds 4000"),
        ("length", "8000", "holds 4000"),
        ("offset", "100", "past the end"),
    ],
)
def test_external_fields_are_checked(tmp_path: Path, field: str, value: str, message: str) -> None:
    source = save_external(weighted_model(), tmp_path / "in.onnx", "in.bin")
    proto = onnx.load(source, load_external_data=False)
    entries = proto.graph.initializer[0].external_data
    for entry in entries:
        if entry.key == field:
            entry.value = value
            break
    else:
        entries.add(key=field, value=value)
    onnx.save(proto, source)
    for extra in ([], ["--no-check"]):
        result = run_cli(source, "-o", tmp_path / "out.onnx", *extra)
        assert_one_line_error(result, message)
        assert listing(tmp_path) == ["in.bin", "in.onnx"]


def test_huge_sparse_weights_file_is_not_copied(tmp_path: Path) -> None:
    source = save_external(weighted_model(), tmp_path / "in.onnx", "in.bin")
    with open(tmp_path / "in.bin", "r+b") as f:
        f.truncate(1 << 40)  # 1 TiB, sparse
    proto = onnx.load(source, load_external_data=False)
    for entry in proto.graph.initializer[0].external_data:
        if entry.key == "length":
            entry.value = str(1 << 40)
    onnx.save(proto, source)
    result = run_cli(source, "-o", tmp_path / "out.onnx", "--no-check")
    assert result.exit_code == 2 and "holds 4000" in result.stderr


# ------------------------------------------ 7. the pair changes together or not at all


def test_failure_between_weights_and_model_keeps_the_old_pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out.onnx"
    first = save_external(weighted_model(1.0), tmp_path / "first.onnx", "first.bin")
    second = save_external(weighted_model(2.0), tmp_path / "second.onnx", "second.bin")
    assert run_cli(first, "-o", out, "--no-check").exit_code == 0
    assert output_of(out) == 1.0
    before = listing(tmp_path)
    real_replace = os.replace

    def replace(src: Any, dst: Any) -> None:
        if Path(dst) == out:  # the weights are in place; the model is not yet
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(seqlower.writing.os, "replace", replace)
    result = run_cli(second, "-o", out, "--no-check")
    assert result.exit_code == 2 and "No space left" in result.stderr
    assert output_of(out) == 1.0  # the old model still reads its own weights
    assert listing(tmp_path) == before


def test_concurrent_writers_leave_a_matching_pair(tmp_path: Path) -> None:
    out = tmp_path / "out.onnx"
    models = []
    for scale in (1.0, 2.0):
        path = save_external(weighted_model(scale), tmp_path / f"in{scale:.0f}.onnx", f"{scale}.b")
        models.append(seqlower.io.load_model(path))
    errors: list[BaseException] = []

    def write(model: ir.Model) -> None:
        try:
            seqlower.writing.save_model(model, out)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    for _ in range(5):
        threads = [threading.Thread(target=write, args=(m,)) for m in models]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert output_of(out) in (1.0, 2.0)
        weights = [n for n in listing(tmp_path) if n.startswith("out.onnx.")]
        assert len(weights) == 1, listing(tmp_path)  # no stale weights, no staging folders


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_terminating_signals_exit_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: int, code: int
) -> None:
    out = tmp_path / "out.onnx"
    source = save_external(weighted_model(1.0), tmp_path / "in.onnx", "in.bin")
    assert run_cli(source, "-o", out, "--no-check").exit_code == 0
    second = save_external(weighted_model(2.0), tmp_path / "second.onnx", "second.bin")
    before = listing(tmp_path)
    real_save = seqlower.writing.ir.save

    def save_then_signal(*args: Any, **kwargs: Any) -> None:
        real_save(*args, **kwargs)  # the staged files exist when the signal comes
        os.kill(os.getpid(), signum)

    monkeypatch.setattr(seqlower.writing.ir, "save", save_then_signal)
    result = run_cli(second, "-o", out, "--no-check")
    assert result.exit_code == code, result.stderr
    assert "nothing was written" in result.stderr and "Traceback" not in result.stderr
    assert listing(tmp_path) == before and output_of(out) == 1.0


@pytest.mark.parametrize("receiver", ["process", "other thread"])
def test_signals_are_held_during_the_commit(tmp_path: Path, receiver: str) -> None:
    """A signal that arrives while the pair is being moved into place waits for the commit,
    also when the kernel hands it to another thread (onnxruntime's pools, under load), which
    is simulated here by sending it to one that does not block it."""
    out = tmp_path / "out.onnx"
    model = seqlower.io.load_model(
        save_external(weighted_model(4.0), tmp_path / "in.onnx", "in.bin")
    )
    real_replace = os.replace
    calls: list[str] = []
    release = threading.Event()
    other = threading.Thread(target=release.wait, daemon=True)
    other.start()

    def replace(src: Any, dst: Any) -> None:
        if Path(dst) == out:
            if receiver == "process":
                os.kill(os.getpid(), signal.SIGINT)
            else:
                assert other.ident is not None
                signal.pthread_kill(other.ident, signal.SIGINT)
            time.sleep(0.05)  # time for a handler to run, if the signal were not held
            calls.append("model moved")
        real_replace(src, dst)

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(seqlower.writing.os, "replace", replace)
            with pytest.raises(KeyboardInterrupt):
                seqlower.writing.save_model(model, out)
    finally:
        release.set()
    assert calls == ["model moved"] and output_of(out) == 4.0


# ------------------------------------------------ 9. validated before any work is done


@pytest.mark.parametrize(
    "args",
    [
        ["-o", "{tmp}/folder"],
        ["-o", "{tmp}/missing/out.onnx"],
        ["-o", "{tmp}/out.onnx", "--report", "{tmp}/missing/r.json"],
        ["-o", "{tmp}/out.onnx", "--report", "{tmp}/folder"],
        ["-o", "{tmp}/out.onnx", "--report", "{tmp}/in.onnx"],
    ],
)
def test_paths_are_checked_before_the_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    source = save_external(weighted_model(), tmp_path / "in.onnx", "in.bin")
    (tmp_path / "folder").mkdir()
    before = listing(tmp_path)

    def no_loading(*_: Any, **__: Any) -> None:
        raise AssertionError("the model was read before the paths were checked")

    monkeypatch.setattr("seqlower.job.load_model", no_loading)
    result = run_cli(source, *(a.format(tmp=tmp_path) for a in args))
    assert_one_line_error(result)
    assert listing(tmp_path) == before


# ------------------------------------------------------------------- 12. Python API


def test_lower_ir_model_is_all_or_nothing() -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (seq(float[N]) s, float[T, 2] x, int64[2] n) => (seq(float[N]) o, float[T, 2] r) {
            o = SequenceMap<body = f (float[N] e) => (float[N] y) { y = Neg(e) }>(s)
            r = ReverseSequence<time_axis = 2, batch_axis = 1>(x, n)
        }
        """
    )
    ir_model = ir.serde.deserialize_model(model)
    before = [n.op_type for n in ir_model.graph]
    with pytest.raises(seqlower.InvalidNodeError, match="ReverseSequence"):
        seqlower.lower(ir_model)
    assert [n.op_type for n in ir_model.graph] == before
    onnx.checker.check_model(ir.serde.serialize_model(ir_model), full_check=True)


def test_failed_write_through_the_api_leaves_nothing(tmp_path: Path) -> None:
    model = seqlower.io.load_model(save_external(weighted_model(), tmp_path / "in.onnx", "in.b"))
    with pytest.raises(OutputError):
        seqlower.writing.save_model(model, Path("/dev/null"))
    with pytest.raises(InvalidModelError):
        broken = save_external(weighted_model(), tmp_path / "bad.onnx", "in.b")
        proto = onnx.load(broken, load_external_data=False)
        proto.graph.initializer[0].external_data[0].value = "/etc/passwd"
        onnx.save(proto, broken)
        seqlower.io.load_model(broken)
    assert listing(tmp_path) == ["bad.onnx", "in.b", "in.onnx"]


# ------------------------------------------------- 11. bad input is exit 2, not a bug


def _named(name_bytes: bytes, where: str) -> bytes:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        GRAPHZZZ (float[3] x) => (float[3] y) { y = Neg(x) }
        """
    )
    model.graph.node[0].name = "NODEZZZZ"
    return model.SerializeToString().replace(where.encode(), name_bytes)


@pytest.mark.parametrize("where", ["GRAPHZZZ", "NODEZZZZ"])
def test_names_that_are_not_utf8(tmp_path: Path, where: str) -> None:
    source = tmp_path / "in.onnx"
    source.write_bytes(_named(b"\xff\xfe\xfd\xfcZZZZ", where))
    result = run_cli(source, "-o", tmp_path / "out.onnx")
    assert_one_line_error(result, "not valid UTF-8")
    with pytest.raises(InvalidModelError, match="UTF-8"):
        seqlower.lower(onnx.load(source))


def test_negative_declared_dimension(tmp_path: Path) -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[3] x) => (float[3] y) { y = Neg(x) }
        """
    )
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -3
    source = tmp_path / "in.onnx"
    onnx.save(model, source)
    result = run_cli(source, "-o", tmp_path / "out.onnx")
    assert result.exit_code == 2 and "negative dimension" in result.stderr, result.stderr
    assert not (tmp_path / "out.onnx").exists()


def test_model_that_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "model.onnx"
    os.mkfifo(fifo)  # reading it would block forever
    result = run_cli(fifo, "-o", tmp_path / "out.onnx")
    assert result.exit_code == 2 and "not a regular file" in result.stderr


def test_data_behind_a_linked_folder_with_a_bare_model_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "w.bin").write_bytes(np.ones(WEIGHTS, np.float32).tobytes())
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "d").symlink_to(outside)
    save_external(weighted_model(), folder / "m.onnx", "w.bin")
    proto = onnx.load(folder / "m.onnx", load_external_data=False)
    proto.graph.initializer[0].external_data[0].value = "d/w.bin"
    onnx.save(proto, folder / "m.onnx")
    monkeypatch.chdir(folder)
    result = run_cli("m.onnx", "-o", "out.onnx")
    assert_one_line_error(result, "outside")


# ------------------------------------------------------------ 13. deeply nested models


def _nested_ifs(depth: int) -> onnx.ModelProto:
    """``depth`` Ifs, each in the then-branch of the one above (built bottom-up)."""
    from onnx import TensorProto as T
    from onnx import helper as h

    def graph(nodes: list[onnx.NodeProto], name: str, out: str) -> onnx.GraphProto:
        return h.make_graph(nodes, name, [], [h.make_tensor_value_info(out, T.FLOAT, [1])])

    inner = graph([h.make_node("Identity", ["x"], ["y0"])], "g0", "y0")
    for level in range(1, depth):
        other = graph([h.make_node("Identity", ["x"], [f"e{level}"])], f"e{level}", f"e{level}")
        node = h.make_node("If", ["c"], [f"y{level}"], then_branch=inner, else_branch=other)
        inner = graph([node], f"g{level}", f"y{level}")
    other = graph([h.make_node("Identity", ["x"], ["e"])], "e", "e")
    main = h.make_graph(
        [h.make_node("If", ["c"], ["y"], then_branch=inner, else_branch=other)],
        "main",
        [h.make_tensor_value_info("c", T.BOOL, []), h.make_tensor_value_info("x", T.FLOAT, [1])],
        [h.make_tensor_value_info("y", T.FLOAT, [1])],
    )
    return h.make_model(main, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def test_models_nested_deeper_than_protobuf_reads(tmp_path: Path) -> None:
    source = tmp_path / "deep.onnx"
    source.write_bytes(_nested_ifs(32).SerializeToString())
    result = run_cli(source, "-o", tmp_path / "out.onnx")
    assert_one_line_error(result, "nested deeper than protobuf")
    source.write_bytes(_nested_ifs(25).SerializeToString())  # within the limit: lowered
    assert run_cli(source, "-o", tmp_path / "out.onnx").exit_code == 0


def test_models_nested_deeper_than_python_recursion_through_the_api() -> None:
    graph = ir.Graph([], [ir.Value(name="y0")], nodes=[], name="g0")
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([1]))
    c = ir.Value(name="c", type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([]))
    for level in range(1, 1500):
        node = ir.Node("", "If", [c], [ir.Attr("then_branch", ir.AttributeType.GRAPH, graph)])
        graph = ir.Graph([], node.outputs, nodes=[node], name=f"g{level}")
    model = ir.Model(ir.Graph([c, x], graph.outputs[:0], nodes=[], name="main"), ir_version=8)
    model.graph.append(
        ir.Node("", "If", [c], [ir.Attr("then_branch", ir.AttributeType.GRAPH, graph)])
    )
    with pytest.raises(seqlower.SeqlowerError, match="nested too deeply"):
        seqlower.lower(model)


# ------------------------------------------------------ 8. signals during start-up


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.parametrize(("after", "skip"), [("seqlower._signals", 1), ("sympy.core", 0)])
def test_signal_during_start_up_is_one_line(
    tmp_path: Path, signum: int, code: int, after: str, skip: int
) -> None:
    import subprocess
    import sys

    source = save_external(weighted_model(), tmp_path / "in.onnx", "in.bin")
    out = tmp_path / "out.onnx"
    # -X importtime reports each import as it completes: the signal goes in once the launcher's
    # handlers are set (after seqlower._signals), and again inside onnx_ir's imports (sympy):
    # an interrupt there once left CPython to end the process by SIGINT after sys.exit(130).
    # Before the handlers, the window is Python's own start-up, which no program can guard.
    process = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "seqlower", str(source), "-o", str(out)],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:
        if line.startswith("import time:") and line.split("|")[-1].strip() == after:
            break
    else:
        pytest.skip(f"{after} is no longer imported at start-up")
    for _ in range(skip):  # the handlers are set just after seqlower._signals is imported
        next(process.stderr)
    process.send_signal(signum)
    stderr = "".join(process.stderr)
    process.wait(timeout=60)
    stderr = "".join(x + "\n" for x in stderr.splitlines() if not x.startswith("import time:"))
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1, stderr
    assert listing(tmp_path) == ["in.bin", "in.onnx"]


@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    """A 64 kB tmpfs (needs root and mount(2); skipped where the machine does not allow it)."""
    import subprocess

    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_real_disk_full_keeps_the_old_pair(tmp_path: Path, small_disk: Path) -> None:
    out = small_disk / "out.onnx"
    small = save_external(weighted_model(1.0), tmp_path / "small.onnx", "small.bin")
    assert run_cli(small, "-o", out, "--no-check").exit_code == 0  # 4 kB of weights: fits
    before = {p.name: p.read_bytes() for p in small_disk.iterdir()}
    big = weighted_model(2.0)
    big.graph.initializer[0].CopyFrom(
        onnx.numpy_helper.from_array(np.full(WEIGHTS * 20, 2.0, np.float32), "w")
    )
    big.graph.input[0].type.tensor_type.shape.dim[0].dim_value = WEIGHTS * 20
    big.graph.output[0].type.tensor_type.shape.dim[0].dim_value = WEIGHTS * 20
    source = save_external(big, tmp_path / "big.onnx", "big.bin")  # 80 kB: does not fit
    result = run_cli(source, "-o", out, "--no-check")
    assert result.exit_code == 2 and "No space left" in result.stderr, result.stderr
    assert {p.name: p.read_bytes() for p in small_disk.iterdir()} == before
    assert output_of(out) == 1.0


def test_failing_inputs_never_go_through_a_planted_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seqlower import passes as seqlower_passes
    from tests.sequence_map_cases import CASES
    from tests.verification.test_verify import Buggy

    monkeypatch.setitem(seqlower_passes.PASSES, "buggy", Buggy)
    model, _ = CASES["multi_io"]()
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out.onnx.failing-inputs").symlink_to(elsewhere)
    result = run_cli(source, "-o", out, "--passes", "buggy")
    assert result.exit_code == 1 and "not saved" in result.stderr
    assert list(elsewhere.iterdir()) == []
    (tmp_path / "out.onnx.failing-inputs").unlink()
    for _ in range(2):  # saved, then replaced whole by the next failing run
        assert run_cli(source, "-o", out, "--passes", "buggy").exit_code == 1
        saved = tmp_path / "out.onnx.failing-inputs" / "test_data_set_0"
        assert (saved / "input_0.pb").exists()
    assert sorted(listing(tmp_path)) == ["elsewhere", "m.onnx", "out.onnx.failing-inputs"]


def test_signal_while_click_parses_keeps_its_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """click turns a KeyboardInterrupt raised while it parses into Abort; SIGTERM's Interrupted
    must still end the run with 143, not Ctrl-C's 130."""
    import click

    from seqlower._signals import Interrupted
    from seqlower.cli.commands import cli

    def interrupted(*_: Any, **__: Any) -> Any:
        raise Interrupted(signal.SIGTERM)

    monkeypatch.setattr(click.Group, "parse_args", interrupted)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(args=["model.onnx", "-o", "out.onnx"], prog_name="seqlower")
    assert exit_info.value.code == 143
