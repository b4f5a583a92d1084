"""What ``test_direct_passes.py`` leaves of the passes issue 31 found untested: the one
blocked-node record (a reason is for one check, and the check names it), dimensions not proven
by declared names, ``scalar_dim``, ``UnrollInputs``' count check, an ``If`` with a computed then
branch left as it is."""

from __future__ import annotations

import onnx_ir as ir
import pytest

from seqlower.errors import BadOptionError, SequenceFreeError, TargetError
from seqlower.passes import RequireNoLoop, RequireSequenceFree, VariableThenBranches
from seqlower.passes._dims import DimProver, scalar_dim
from seqlower.passes._ir import NO_LOOP, block
from seqlower.passes.inputs.unroll_inputs import UnrollInputs
from tests.helpers import parse


def _ir(text: str) -> ir.Model:
    return ir.serde.deserialize_model(parse(text))


def _node(model: ir.Model, op_type: str) -> ir.Node:
    (node,) = [n for n in ir.traversal.RecursiveGraphIterator(model.graph) if n.op_type == op_type]
    return node


def _value(model: ir.Model, name: str) -> ir.Value:
    for node in model.graph:
        for value in node.outputs:
            if value.name == name:
                return value
    return next(v for v in model.graph.inputs if v.name == name)


# ----------------------------------------------------------------------------- DimProver


def test_dim_prover_follows_dimensions_back_to_where_they_are_defined() -> None:
    model = _ir(
        """
        agraph (float[B, T, 4] x, float[T] u) => (float[T, B, 4] z, int64[1] t) {
            y = Transpose<perm = [1, 0, 2]>(x)
            z = Relu(y)
            shape = Shape(x)
            one = Constant<value = int64[1] {1}>()
            t = Gather<axis = 0>(shape, one)
        }
        """
    )
    prover = DimProver()
    z, x, u = _value(model, "z"), _value(model, "x"), _value(model, "u")
    assert prover.dim(z, 0) == (x, 1)  # through Relu, then the Transpose's permutation
    assert prover.dim(z, 1) == (x, 0)
    assert prover.dim(z, 2) == 4  # a static dimension is its size
    assert prover.rank(z) == 3
    # Declared symbolic names are never trusted: u's "T" is not proven x's.
    assert prover.dim(u, 0) == (u, 0) != prover.dim(x, 1)
    # Gather(Shape(x), [1]) is dimension 1 of x.
    assert scalar_dim(_value(model, "t"), prover) == (x, 1)


def test_dim_prover_leaves_what_it_cannot_prove_unproven() -> None:
    model = _ir(
        """
        agraph (float[B, T] x, float[B, T] w) => (float[C, D] r) {
            target = Shape(w)
            r = Reshape(x, target)
        }
        """
    )
    prover = DimProver()
    r, w = _value(model, "r"), _value(model, "w")
    assert prover.dim(r, 0) == (w, 0)  # Reshape(_, Shape(w)): w's dimensions
    assert prover.dim(_value(model, "x"), 5) is None  # no such axis


# ------------------------------------------------------------------- RequireSequenceFree


_SEQUENCE_LEFT = """
    agraph (float[2, 3] x) => (float[2, 3] y) {
        s = SplitToSequence<axis = 0>(x)
        y = ConcatFromSequence<axis = 0>(s)
    }
"""


def test_require_sequence_free_names_each_sequence_op_and_the_reason_recorded() -> None:
    model = _ir(_SEQUENCE_LEFT)
    block(_node(model, "SplitToSequence"), "its split count is known only at run time")
    with pytest.raises(SequenceFreeError) as raised:
        RequireSequenceFree()(model)
    message = str(raised.value)
    assert "SplitToSequence" in message and "ConcatFromSequence" in message
    assert "its split count is known only at run time" in message


def test_a_loop_reason_is_not_a_sequence_reason() -> None:
    """The blocked-node record is per check: require-no-loop's reason stays out of
    require-sequence-free's message."""
    model = _ir(_SEQUENCE_LEFT)
    block(_node(model, "SplitToSequence"), "a reason for the Loop check", NO_LOOP)
    with pytest.raises(SequenceFreeError) as raised:
        RequireSequenceFree()(model)
    assert "a reason for the Loop check" not in str(raised.value)


# ---------------------------------------------------------------------------- RequireNoLoop


_LOOP = """
    agraph (int64 n, float[2] x) => (float[2] y) {
        cond = Constant<value = bool {1}>()
        y = Loop(n, cond, x) <
            body = body (int64 i, bool c, float[2] acc) => (bool c_out, float[2] acc_out) {
            c_out = Identity(c)
            acc_out = Neg(acc)
        }
        >
    }
"""


def test_require_no_loop_names_every_loop_and_why_it_stays() -> None:
    model = _ir(_LOOP)
    with pytest.raises(TargetError) as raised:
        RequireNoLoop()(model)
    assert "remains: no Scan form is known for it" in str(raised.value)
    model = _ir(_LOOP)
    block(_node(model, "Loop"), "its trip count is known only inside", NO_LOOP)
    with pytest.raises(TargetError) as raised:
        RequireNoLoop()(model)
    assert "remains: its trip count is known only inside" in str(raised.value)


# ----------------------------------------------------------------------------- UnrollInputs


_SEQUENCE_INPUT = """
    agraph (seq(float[3]) xs, float[3] w) => (float[2, 3] y) {
        y = ConcatFromSequence<axis = 0, new_axis = 1>(xs)
    }
"""


@pytest.mark.parametrize(
    ("counts", "words"),
    [
        ({"xs": 0}, "at least 1"),
        ({"xs": -1}, "at least 1"),
    ],
)
def test_unroll_inputs_refuses_what_it_cannot_unroll(counts: dict[str, int], words: str) -> None:
    model = ir.serde.deserialize_model(parse(_SEQUENCE_INPUT))
    with pytest.raises(BadOptionError, match=words):
        UnrollInputs(counts)(model)


# --------------------------------------------------------------------- VariableThenBranches


def _if(then_output: str, else_output: str) -> str:
    return f"""
        agraph (bool c, float[2] x) => (float[2] y) {{
            y = If(c) <
                then_branch = t () => (float[2] a) {{ {then_output} }},
                else_branch = e () => (float[2] b) {{ {else_output} }}
            >
        }}
    """


def test_variable_then_branches_leaves_a_computed_then_branch() -> None:
    lowered = ir.serde.deserialize_model(
        parse(_if("a = Neg(x)", "b = Constant<value = float[2] {3, 4}>()"))
    )
    assert not VariableThenBranches()(lowered).modified
