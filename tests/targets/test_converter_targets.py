"""What onnx2torch, TVM or tinygrad cannot convert is exit 2 before any check, and what
onnx2torch misreads is written out (issues 29, 32): their converter tables, its CumSum default,
checked against the converters themselves where they are installed (onnx2torch and TVM by hand,
skipped otherwise, in CI too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.parser
import pytest

import seqlower
from seqlower.errors import TargetError
from seqlower.passes._converter_ops import (
    ONNX2TORCH,
    ONNX2TORCH_VERSION,
    TINYGRAD,
    TINYGRAD_VERSION,
    TVM,
    TVM_VERSION,
)
from tests.helpers import EMPTY_BAG_MAX, run_cli
from tests.runtimes import assert_same, require, run

# onnxscript's shape: a ReverseSequence of the input and the model's own CumSum, whose
# 'reverse' is left out (ONNX: 0; onnx2torch 1.5.15 read it as 1).
REVERSE_CUMSUM = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T, 2, 3] x, int64[2] lens) => (float[T, 2, 3] both) {
        r = ReverseSequence<batch_axis = 1, time_axis = 0>(x, lens)
        axis = Constant<value = int64 {0}>()
        c = CumSum(x, axis)
        both = Add(r, c)
    }
    """
)
FEEDS = {
    "x": np.arange(24, dtype=np.float32).reshape(4, 2, 3) / 7,
    "lens": np.array([3, 4], dtype=np.int64),
}


def _onnx2torch() -> Any:
    """onnx2torch, or a skip (it is no extra of seqlower: never required, not even in CI),
    imported with the oracle's torchvision stand-in."""
    require("onnx2torch")
    from seqlower.verification.runtimes.onnx2torch import import_onnx2torch

    return import_onnx2torch()


def _run_torch(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    onnx2torch = _onnx2torch()
    import torch

    module = onnx2torch.convert(model)
    with torch.no_grad():
        out = module(*(torch.from_numpy(feeds[i.name]) for i in model.graph.input))
    return [o.numpy() for o in (out if isinstance(out, tuple | list) else [out])]


def _cumsums(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [node for node in model.graph.node if node.op_type == "CumSum"]


def test_cumsum_defaults_are_written_for_onnx2torch() -> None:
    lowered = seqlower.lower(REVERSE_CUMSUM, target="onnx2torch", check=False)
    (cumsum,) = _cumsums(lowered)
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in cumsum.attribute}
    assert attributes == {"reverse": 0}
    assert "ReverseSequence" not in {node.op_type for node in lowered.graph.node}
    expected = run("onnxruntime", REVERSE_CUMSUM, FEEDS)
    np.testing.assert_allclose(run("onnxruntime", lowered, FEEDS)[0], expected[0], rtol=1e-6)
    # Other targets' converters read the default right: the model is left as written.
    (kept,) = _cumsums(seqlower.lower(REVERSE_CUMSUM, target="tract", check=False))
    assert not kept.attribute


def test_the_lowered_model_runs_right_in_onnx2torch() -> None:
    lowered = seqlower.lower(REVERSE_CUMSUM, target="onnx2torch", check=False)
    expected = run("onnxruntime", REVERSE_CUMSUM, FEEDS)[0]
    np.testing.assert_allclose(_run_torch(lowered, FEEDS)[0], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("op", "name", "default"), [("CumSum", "reverse", 0)])
def test_each_default_written_is_one_onnx2torch_misreads(op: str, name: str, default: int) -> None:
    """The target row's entries, each checked: left out, onnx2torch computes something else
    than onnxruntime; written out, the same."""
    from seqlower.targets import TARGETS

    assert (op, name, default) in TARGETS["onnx2torch"].attribute_defaults
    model = seqlower.lower(REVERSE_CUMSUM, passes=["lower-reverse-sequence"])
    expected = run("onnxruntime", model, FEEDS)[0]
    assert not np.allclose(_run_torch(model, FEEDS)[0], expected)
    written = seqlower.lower(REVERSE_CUMSUM, target="onnx2torch", check=False)
    np.testing.assert_allclose(_run_torch(written, FEEDS)[0], expected, rtol=1e-5, atol=1e-6)


# Of a time length known only at run time: unroll-recurrent-ops cannot unroll it.
LSTM = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T, 2, 3] x, float[1, 16, 3] w, float[1, 16, 4] r) => (float[T, 1, 2, 4] y) {
        y = LSTM<hidden_size = 4>(x, w, r)
    }
    """
)
SPLIT_18 = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 18]>
    g (float[4, 3] x) => (float[2, 3] a, float[2, 3] b) {
        a, b = Split<axis = 0, num_outputs = 2>(x)
    }
    """
)


def test_ops_onnx2torch_cannot_convert_are_named_before_any_check(tmp_path: Path) -> None:
    with pytest.raises(TargetError) as caught:
        seqlower.lower(LSTM, target="onnx2torch", check=False)
    assert caught.value.blockers == [
        f"LSTM node producing 'y' in graph 'g' remains: onnx2torch {ONNX2TORCH_VERSION} has no "
        "converter for LSTM (LSTM not unrolled: its time axis is not static "
        "(--overwrite-input-shape fixes the input shapes, then it is unrolled))"
    ]
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(LSTM, source)
    # --no-check: the blockers come first either way; without onnx2torch installed (CI) the
    # proof it asks for would be refused first.
    result = run_cli(source, "-o", out, "--target", "onnx2torch", "--no-check")
    assert result.exit_code == 2, result.output
    assert "cannot lower the model for onnx2torch" in result.stderr and "LSTM" in result.stderr
    assert "check" not in result.stdout and not out.exists()
    # The rows of runtimes that run LSTM are not asked.
    seqlower.lower(LSTM, target="openvino", check=False)


def test_a_split_into_equal_pieces_of_opset_18_is_written_as_slices() -> None:
    """onnx2torch converts as of opset 17, where the version converter has no adapter for
    Split-18's num_outputs: along a static axis, the pieces are Slices."""
    lowered = seqlower.lower(SPLIT_18, target="onnx2torch", check=False)
    ops = {n.op_type for n in lowered.graph.node}
    assert "Slice" in ops and "Split" not in ops, ops
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(4, 3)}
    assert_same(run("onnxruntime", SPLIT_18, feeds), run("onnxruntime", lowered, feeds))


def test_a_converted_opset_is_what_is_looked_up() -> None:
    """A model newer than opset 17 is converted to 17 for onnx2torch: versions are those of
    opset 17, not of the model's."""
    newer = onnx.parser.parse_model(
        """
        <ir_version: 10, opset_import: ["" : 21]>
        g (float[4, 3] x) => (float[4, 3] y) {
            y = Relu(x)
        }
        """
    )
    seqlower.lower(newer, target="onnx2torch", check=False)  # Relu-14 as of 18, converted


def test_the_table_knows_the_ops_the_pipeline_writes() -> None:
    """What the onnx2torch pipeline writes for a ReverseSequence is convertible."""
    lowered = seqlower.lower(REVERSE_CUMSUM, target="onnx2torch", check=False)
    ops = {node.op_type for node in lowered.graph.node}
    assert ops <= set(ONNX2TORCH), ops - set(ONNX2TORCH)


# onnxscript's Constant<value_ints> read as axes: onnx2torch 1.5.15's Unsqueeze converter fails
# ("'list' object has no attribute 'tolist'") unless the value is a tensor.
UNSQUEEZE_INTS = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[3] x) => (float[1, 3, 1] y) {
        axes = Constant<value_ints = [0, 2]>()
        u = Unsqueeze(x, axes)
        one = Constant<value_float = 1.0>()
        y = Mul(u, one)
    }
    """
)


def test_constant_lists_are_written_as_tensors_for_onnx2torch() -> None:
    lowered = seqlower.lower(UNSQUEEZE_INTS, target="onnx2torch", check=False)
    constants = [node for node in lowered.graph.node if node.op_type == "Constant"]
    assert [[a.name for a in node.attribute] for node in constants] == [["value"], ["value"]]
    values = [onnx.numpy_helper.to_array(node.attribute[0].t) for node in constants]
    assert values[0].dtype == np.int64 and values[0].tolist() == [0, 2]
    assert values[1].dtype == np.float32 and values[1].shape == () and values[1] == 1.0
    x = {"x": np.array([1, 2, 3], dtype=np.float32)}
    np.testing.assert_array_equal(run("onnxruntime", lowered, x)[0], x["x"].reshape(1, 3, 1))


def test_constant_lists_run_in_onnx2torch() -> None:
    x = {"x": np.array([1, 2, 3], dtype=np.float32)}
    with pytest.raises(AttributeError, match="tolist"):  # what onnx2torch 1.5.15 does
        _run_torch(UNSQUEEZE_INTS, x)
    lowered = seqlower.lower(UNSQUEEZE_INTS, target="onnx2torch", check=False)
    np.testing.assert_array_equal(_run_torch(lowered, x)[0], x["x"].reshape(1, 3, 1))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("y = Flatten<axis = 0>(x)", "cannot convert Flatten with axis=0"),
        (  # a 0 in the shape: allowzero matters (without one it is dropped, below)
            "s = Constant<value = int64[3] {1, 0, 3}>()\n y = Reshape<allowzero = 1>(x, s)",
            "allowzero=1",
        ),
    ],
)
def test_attributes_onnx2torch_refuses_are_named(text: str, words: str) -> None:
    model = onnx.parser.parse_model(
        f"""
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[1, 3] x) => (y) {{
            {text}
        }}
        """
    )
    with pytest.raises(TargetError) as caught:
        seqlower.lower(model, target="onnx2torch", check=False)
    (blocker,) = caught.value.blockers
    assert words in blocker


def test_flatten_axis_0_fails_in_onnx2torch() -> None:
    """What the blocker above stands for (onnx2torch 1.5.15)."""
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[1, 3] x) => (float[1, 3] y) {
            y = Flatten<axis = 0>(x)
        }
        """
    )
    with pytest.raises(IndexError, match="Dimension out of range"):
        _run_torch(model, {"x": np.ones((1, 3), np.float32)})


# PyTorch's dynamo exporter writes every view as a Reshape with allowzero=1 (column_stack).
VIEW_ALLOWZERO = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 18]>
    g (float[2, 3] x) => (float[3, 2] y) {
        s = Constant<value = int64[2] {-1, 2}>()
        y = Reshape<allowzero = 1>(x, s)
    }
    """
)


def test_a_reshape_to_a_shape_without_zeros_drops_allowzero_for_onnx2torch() -> None:
    lowered = seqlower.lower(VIEW_ALLOWZERO, target="onnx2torch", check=False)
    (reshape,) = [node for node in lowered.graph.node if node.op_type == "Reshape"]
    assert not [a for a in reshape.attribute if a.name == "allowzero"]
    x = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    assert_same(run("onnxruntime", VIEW_ALLOWZERO, x), _run_torch(lowered, x))


# PyTorch's embedding_bag (max): an If per bag, an empty bag's zeros or the bag's rows reduced
# (the Slice empty then). onnx2torch 1.5.15 has no If; written as a Where, torch's max of the
# empty slice the untaken branch computes raises, so that reduction is padded with -inf.
EMPTY_BAG = onnx.parser.parse_model(EMPTY_BAG_MAX)


def test_an_if_whose_branches_cannot_fail_runs_on_onnx2torch(tmp_path: Path) -> None:
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(EMPTY_BAG, source)
    result = run_cli(source, "-o", out, "--target", "onnx2torch", "--no-check")
    assert result.exit_code == 0, result.output
    lowered = onnx.load(out)
    ops = {node.op_type for node in lowered.graph.node}
    assert "If" not in ops and {"Where", "Pad"} <= ops, ops
    assert lowered.opset_import[0].version == 17  # its Pad (no axes) re-stamped as it is
    for bounds in ([1, 3], [2, 2], [3, 1]):  # the last two: empty
        feeds = {
            "w": np.arange(8, dtype=np.float32).reshape(4, 2),
            "bounds": np.array(bounds, dtype=np.int64),
        }
        assert_same(run("onnxruntime", EMPTY_BAG, feeds), _run_torch(lowered, feeds))


# A torch2 export's ops newer than onnx2torch's converters: Gelu (a function op of opset 20),
# ConstantOfShape-20 and ReduceMean-18 (axes as an input).
NEWER_OPS = onnx.parser.parse_model(
    """
    <ir_version: 9, opset_import: ["" : 20]>
    g (float[4, 3] x) => (float[4, 3] y, float[4] r, float[2, 2] c) {
        y = Gelu(x)
        ax = Constant<value = int64[1] {1}>()
        r = ReduceMean<keepdims = 0>(x, ax)
        s = Constant<value = int64[2] {2, 2}>()
        c = ConstantOfShape<value = float[1] {1.5}>(s)
    }
    """
)


def test_newer_ops_are_rewritten_and_restamped_for_onnx2torch(tmp_path: Path) -> None:
    """Gelu expanded (its CastLikes as Casts), ConstantOfShape re-stamped as it is (only its
    type lists changed since 9), ReduceMean's axes an attribute: nothing refused."""
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(NEWER_OPS, source)
    result = run_cli(source, "-o", out, "--target", "onnx2torch", "--no-check")
    assert result.exit_code == 0, result.output
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)
    assert [o.version for o in written.opset_import if o.domain in ("", "ai.onnx")] == [17]
    ops = {n.op_type for n in written.graph.node}
    assert not ops & {"Gelu", "CastLike"} and "ConstantOfShape" in ops, ops
    (mean,) = [n for n in written.graph.node if n.op_type == "ReduceMean"]
    assert len(mean.input) == 1 and [a.name for a in mean.attribute] == ["keepdims", "axes"]
    assert all(op in ONNX2TORCH for op in ops), ops - set(ONNX2TORCH)
    feeds = {"x": np.linspace(-3, 3, 12, dtype=np.float32).reshape(4, 3)}
    assert_same(run("onnxruntime", NEWER_OPS, feeds), run("onnxruntime", written, feeds))


def test_newer_ops_run_on_onnx2torch(tmp_path: Path) -> None:
    require("onnx2torch")
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(NEWER_OPS, source)
    result = run_cli(source, "-o", out, "--target", "onnx2torch")
    assert result.exit_code == 0, result.output
    assert "runs and matches on onnx2torch" in result.output


# tf2onnx's shape: a loop over the time axis of the input, whose count is known only when it runs.
TIME_LOOP = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[T, 3] x) => (float[3] total) {
        zero = Constant<value = float[3] {0, 0, 0}>()
        shape = Shape(x)
        zero_i = Constant<value = int64 {0}>()
        t = Gather<axis = 0>(shape, zero_i)
        total = Loop(t, , zero) <
            body = step (int64 i, bool c, float[3] acc_in) => (bool c_out, float[3] acc_out) {
            c_out = Identity(c)
            row = Gather<axis = 0>(x, i)
            acc_out = Add(acc_in, row)
        }
        >
    }
    """
)
# An LSTM in a branch of an If (both converters convert If, and the nodes of its branches).
LSTM_IN_IF = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 17]>
    g (bool flag, float[T, 2, 3] x, float[1, 16, 3] w, float[1, 16, 4] r)
        => (float[T, 1, 2, 4] y) {
        y = If(flag) <
            then_branch = yes () => (float[T, 1, 2, 4] a) {
                a = LSTM<hidden_size = 4>(x, w, r)
            },
            else_branch = no () => (float[T, 1, 2, 4] b) {
                t = Shape<start = 0, end = 1>(x)
                rest = Constant<value = int64[3] {1, 2, 4}>()
                dims = Concat<axis = 0>(t, rest)
                b = ConstantOfShape<value = float {0}>(dims)
            }
        >
    }
    """
)


@pytest.mark.parametrize(
    ("target", "converter"),
    [("tvm", f"TVM {TVM_VERSION}"), ("tinygrad", f"tinygrad {TINYGRAD_VERSION}")],
)
def test_loops_tvm_and_tinygrad_cannot_run_are_named_before_any_check(
    target: str, converter: str, tmp_path: Path
) -> None:
    """A Loop of a run-time count: exit 2 naming it, the converter and the flag that makes the
    count a constant (then it is unrolled), not a failed proof (exit 1)."""
    with pytest.raises(TargetError) as caught:
        seqlower.lower(TIME_LOOP, target=target, check=False)
    (blocker,) = caught.value.blockers
    assert blocker.startswith("Scan node ") and "remains: " in blocker, blocker
    assert f"{converter} has no converter for Scan" in blocker, blocker
    assert "--overwrite-input-shape" in blocker, blocker
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(TIME_LOOP, source)
    result = run_cli(source, "-o", out, "--target", target, "--no-check")
    assert result.exit_code == 2, result.output
    assert f"cannot lower the model for {converter}" in result.stderr, result.stderr
    assert "--overwrite-input-shape x=?,3" in result.stderr and not out.exists()
    # At a fixed length the loop is unrolled: nothing is left to name.
    lowered = seqlower.lower(TIME_LOOP, target=target, check=False, input_shapes={"x": [4, 3]})
    assert {n.op_type for n in lowered.graph.node}.isdisjoint({"Loop", "Scan"})


@pytest.mark.parametrize("target", ["tvm", "tinygrad"])
def test_nodes_in_the_branches_of_an_if_are_looked_up(target: str) -> None:
    with pytest.raises(TargetError) as caught:
        seqlower.lower(LSTM_IN_IF, target=target, check=False)
    (blocker,) = caught.value.blockers
    assert blocker.startswith("LSTM node producing 'a' in graph 'yes'"), blocker
    assert "has no converter for LSTM (LSTM not unrolled: its time axis" in blocker, blocker


def test_tvm_finds_an_op_whatever_its_domain() -> None:
    """TVM's frontend looks ops up by type alone (com.microsoft's Gelu is its Gelu); onnx2torch
    by domain too."""
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
        g (float[3] x) => (float[3] y) {
            y = com.microsoft.Gelu(x)
        }
        """
    )
    seqlower.lower(model, target="tvm", check=False)
    with pytest.raises(TargetError, match=r"no converter for com\.microsoft::Gelu"):
        seqlower.lower(model, target="onnx2torch", check=False)


@pytest.mark.parametrize("converter", ["onnx2torch", "tvm", "tinygrad"])
def test_the_converter_table_is_the_converters_own(converter: str) -> None:
    """``benchmarks/converter_ops.py`` wrote the table from the installed converter (rerun it on
    a new version)."""
    import importlib.metadata

    from benchmarks import converter_ops

    require(converter)
    _, package, read, _ = converter_ops.CONVERTERS[converter]
    version, table = {
        "onnx2torch": (ONNX2TORCH_VERSION, ONNX2TORCH),
        "tvm": (TVM_VERSION, TVM),
        "tinygrad": (TINYGRAD_VERSION, TINYGRAD),
    }[converter]
    if importlib.metadata.version(package) != version:
        pytest.skip(f"the table is of {converter} {version}")
    assert read() == table


LOCAL_FUNCTION = onnx.parser.parse_model(
    """
    <ir_version: 8, opset_import: ["" : 18, "this" : 1]>
    g (float[2] x) => (float[2] y) {
        y = this.f(x)
    }
    <domain: "this", opset_import: ["" : 18]>
    f (a) => (b) {
        b = Relu(a)
    }
    """
)


def test_an_inlined_function_leaves_no_import_of_its_domain() -> None:
    """tinygrad 0.14 refuses to load a model importing a domain it does not know, used or not:
    once the function is inlined, its domain's import goes too, and the model runs there."""
    lowered = seqlower.lower(LOCAL_FUNCTION, target="tinygrad", check=False)
    assert [o.domain for o in lowered.opset_import] == [""]
    require("tinygrad")
    x = np.array([-1.0, 2.0], dtype=np.float32)
    assert_same(run("tinygrad", lowered, {"x": x}), [np.maximum(x, 0)])


def test_a_domain_tinygrad_does_not_load_is_named_before_any_check() -> None:
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 18, "com.example" : 1]>
        g (float[2] x) => (float[2] y) {
            y = com.example.Relu(x)
        }
        """
    )
    with pytest.raises(TargetError) as caught:
        seqlower.lower(model, target="tinygrad", check=False)
    assert caught.value.blockers == [
        f"the model imports domain 'com.example', which tinygrad {TINYGRAD_VERSION} does not load",
        "Relu node producing 'y' in graph 'g' remains: "
        f"tinygrad {TINYGRAD_VERSION} loads no node of domain 'com.example'",
    ], caught.value.blockers


def test_the_domains_tinygrad_loads_are_its_own() -> None:
    import importlib.metadata

    from seqlower.passes.checks.require_converter_ops import CONVERTERS

    require("tinygrad")
    from tinygrad.nn.onnx import Domain

    if importlib.metadata.version("tinygrad") != TINYGRAD_VERSION:
        pytest.skip(f"the list is of tinygrad {TINYGRAD_VERSION}")
    assert CONVERTERS["tinygrad"].domains == {d.value for d in Domain}


def test_the_api_converts_to_the_targets_opset_as_the_command_line_does(tmp_path: Path) -> None:
    """onnx2torch converts ops as of opset 17: seqlower.lower and the command line write the
    same opset (the API returned opset 18 before)."""
    model = onnx.parser.parse_model(
        """
        <ir_version: 8, opset_import: ["" : 18]>
        g (float[2, 3] x) => (float[2, 1] y) {
            axes = Constant<value = int64[1] {1}>()
            y = ReduceMean(x, axes)
        }
        """
    )
    lowered = seqlower.lower(model, target="onnx2torch", check=False)
    report = seqlower.lower_with_report(model, target="onnx2torch", check=False)
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    assert run_cli(source, "-o", out, "--target", "onnx2torch", "--no-check").exit_code == 0
    for written in (lowered, report.model, onnx.load(out)):
        assert [(o.domain, o.version) for o in written.opset_import] == [("", 17)]
        (node,) = [n for n in written.graph.node if n.op_type == "ReduceMean"]
        assert [a.name for a in node.attribute] == ["axes"], node
