"""Small repairs a target runtime needs on ops seqlower did not write (tract, mostly).

- :class:`ExplicitConstantOfShapeValue`: a ``ConstantOfShape`` without ``value`` means float32
  zeros in ONNX; tract reads F64 there (PyTorch's scan exports and tf2onnx's ``zeros_like`` write
  it so), so the value is written out: ``[0.0]`` as float32.
- :class:`FoldStaticIfs`: an ``If`` whose condition is known from declared ranks or sizes (the
  TorchScript exporter's ``Equal(Size(Shape(x)), 1)`` around ``hstack``, ONNX's AffineGrid
  function's ``Equal(Size(size), 4)``) becomes its taken branch. OpenVINO and tract check both
  branches, and the untaken one may be invalid for these inputs (a ``Concat(axis=1)`` of 1-D
  tensors, a ``Split`` of 4 sizes in 5).
- :class:`StripSymbolicDims`: the exporter's symbolic dimension names (``unk__1392``, ``s27``,
  ``la``) in subgraph inputs and outputs and in ``value_info`` are claims tract tries to unify
  with what it infers, and fails (``Impossible to unify Sym(unk__1392) with Val(4)``); they are
  forgotten (the dimension stays unknown, its rank kept). The main graph's inputs and outputs,
  the model's interface, keep their names.
- :class:`VariableThenBranches`: tract 0.23.9 gives an ``If``'s output the *then* branch's fact,
  constant value included, so an ``If`` whose then branch returns a constant is folded to it
  (``Add(If(c, zeros, x), ...)`` reads zeros whatever ``c``; in a ``Scan`` body it then drops
  the scanned input: 'No scan input'). Such an ``If`` becomes ``If(Not(c))`` with its branches
  swapped, when the else branch returns no constant; when both return only constants, of the
  same shapes and types, ``Where(c, then, else)`` per output replaces it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower._graphs import subgraphs_of
from seqlower.passes._base import NodeLoweringPass, Rewrite, Site, rewire
from seqlower.passes._fold import detach
from seqlower.passes._ir import constant_array, is_onnx, model_nodes, strip_symbolic
from seqlower.passes._types import TypeOracle

__all__ = [
    "ExplicitConstantOfShapeValue",
    "FoldStaticIfs",
    "StripSymbolicDims",
    "VariableThenBranches",
]


class ExplicitConstantOfShapeValue(ir.passes.InPlacePass):
    """Give every ``ConstantOfShape`` without ``value`` its default, float32 zero, explicitly."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = 0
        for node in model_nodes(model):
            if is_onnx(node, "ConstantOfShape") and "value" not in node.attributes:
                zero = ir.Tensor(np.zeros((1,), dtype=np.float32), name="value")
                node.attributes["value"] = ir.AttrTensor("value", zero)
                self.rewritten += 1
        return ir.passes.PassResult(model, modified=self.rewritten > 0)


class FoldStaticIfs(ir.passes.InPlacePass):
    """Replace each ``If`` whose condition is fixed by declared ranks or constants by the nodes
    of its taken branch (innermost first)."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = 0
        for node in reversed(list(model_nodes(model))):
            if not is_onnx(node, "If") or node.graph is None:
                continue
            taken = _static_condition(node.inputs[0], model.graph)
            if taken is None:
                continue
            branch_name = "then_branch" if taken else "else_branch"
            if branch_name not in node.attributes:
                continue
            branch = node.attributes[branch_name].as_graph()
            if branch is None or len(branch.outputs) != len(node.outputs):
                continue
            _inline_branch(node, branch)
            self.rewritten += 1
        return ir.passes.PassResult(model, modified=self.rewritten > 0)


def _static_condition(cond: ir.Value | None, main: ir.Graph) -> bool | None:
    """The condition's value when constant, or ``Equal`` of a constant and a rank
    (``Size(Shape(x))``, x a main-graph input of declared rank) or a size (``Size(x)``, x a
    main-graph input of declared static shape)."""
    array = constant_array(cond)
    if array is not None:
        return bool(array.reshape(-1)[0]) if array.size == 1 else None
    producer = None if cond is None else cond.producer()
    if not is_onnx(producer, "Equal") or producer is None or len(producer.inputs) != 2:
        return None
    values = [_rank_or_constant(v, main) for v in producer.inputs]
    if any(v is None for v in values):
        return None
    return values[0] == values[1]


def _rank_or_constant(value: ir.Value | None, main: ir.Graph) -> int | None:
    array = constant_array(value)
    if array is not None:
        return int(array.reshape(-1)[0]) if array.size == 1 and array.dtype.kind in "iu" else None
    producer = None if value is None else value.producer()
    if not is_onnx(producer, "Size") or producer is None:
        return None
    counted = producer.inputs[0]
    if (
        counted is not None
        and counted.is_graph_input()
        and counted.graph is main
        and counted.shape is not None
        and counted.shape.is_static()  # ONNX's AffineGrid: Equal(Size(size), 4)
    ):
        return int(np.prod(counted.shape.numpy(), dtype=np.int64))
    shape_node = counted.producer() if counted is not None else None
    if not is_onnx(shape_node, "Shape") or shape_node is None or shape_node.attributes:
        return None
    source = shape_node.inputs[0]
    # Only a main-graph input's rank is a contract the runtime enforces (exporters' value_info
    # can be wrong, as tf2onnx's Loop outputs; a body input's declared rank too: ONNX's
    # inference does not check a Loop state's, tests/passes/test_declared_sizes.py).
    if source is None or source.shape is None or not source.is_graph_input():
        return None
    if source.graph is not main:
        return None
    return len(source.shape)


def _inline_branch(node: ir.Node, branch: ir.Graph) -> None:
    graph = node.graph
    assert graph is not None
    results = list(branch.outputs)
    branch.outputs.clear()
    moved = list(branch)
    for inner in moved:
        branch.remove(inner)
    if moved:
        graph.insert_before(node, moved)
    for old, new in zip(list(node.outputs), results, strict=True):
        if new.type is None:
            new.type = old.type
        if new.shape is None:
            new.shape = old.shape
        name = old.name
        is_output = old.is_graph_output()
        rewire(old, new)
        if is_output and new.producer() is not None:
            old.name = None
            new.name = name
    for untaken in subgraphs_of(node):  # its outer reads would keep what they read alive
        detach(untaken)
    graph.remove(node, safe=True)


class StripSymbolicDims(ir.passes.InPlacePass):
    """Forget symbolic dimension names everywhere but on the main graph's inputs and outputs."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = 0
        interface = {id(v) for v in (*model.graph.inputs, *model.graph.outputs)}
        graphs: list[ir.Graph | ir.Function] = [model.graph, *model.functions.values()]
        while graphs:
            graph = graphs.pop()
            values = [*graph.inputs, *graph.outputs]
            for node in graph:
                values += node.outputs
                graphs += subgraphs_of(node)
            for value in values:
                if id(value) not in interface and strip_symbolic(value):
                    self.rewritten += 1
        return ir.passes.PassResult(model, modified=self.rewritten > 0)


class VariableThenBranches(NodeLoweringPass["_IfPlan"]):
    """Swap the branches of each ``If`` whose then branch returns a constant, negating the
    condition, or make it a ``Where`` when both return constants (tract folds the If to the
    then constant)."""

    op_type = "If"
    takes_all = False
    repairs = True

    def plan(self, site: Site, types: TypeOracle) -> _IfPlan | None:
        node = site.node
        then_attr = node.attributes.get("then_branch")
        else_attr = node.attributes.get("else_branch")
        if then_attr is None or else_attr is None or then_attr.is_ref() or else_attr.is_ref():
            return None
        then_branch, else_branch = then_attr.as_graph(), else_attr.as_graph()
        if then_branch is None or else_branch is None or node.inputs[0] is None:
            return None
        then_values = [constant_array(v) for v in then_branch.outputs]
        else_values = [constant_array(v) for v in else_branch.outputs]
        if all(v is None for v in then_values):
            return None
        if all(v is None for v in else_values):
            return _IfPlan(site, None)
        alike = [
            (a, b)
            for a, b in zip(then_values, else_values, strict=True)
            if a is not None and b is not None and a.shape == b.shape and a.dtype == b.dtype
        ]
        if len(alike) == len(then_values):
            return _IfPlan(site, alike)
        return None  # constants on both sides, unlike: swapped, tract would fold the other

    def rewrite(self, plan: _IfPlan, ctx: Rewrite) -> None:
        node = ctx.node
        cond = node.inputs[0]
        assert cond is not None
        op = ctx.before()
        if plan.constants is not None:
            chosen = []
            for old, (a, b) in zip(node.outputs, plan.constants, strict=True):
                where = op.Where(
                    cond, op.constant(a, hint="then"), op.constant(b, hint="else"), _hint="chosen"
                )
                where.type, where.shape = old.type, old.shape
                chosen.append(where)
            ctx.replace(chosen, rename=True)
            return
        negated = op.Not(cond, _hint="not_cond")
        ctx.insert()
        node.replace_input_with(0, negated)
        then_branch = node.attributes["then_branch"].as_graph()
        else_branch = node.attributes["else_branch"].as_graph()
        node.attributes["then_branch"] = ir.AttrGraph("then_branch", else_branch)
        node.attributes["else_branch"] = ir.AttrGraph("else_branch", then_branch)


@dataclasses.dataclass
class _IfPlan:
    site: Site
    #: Each output's (then, else) constants when both branches return only constants (a
    #: ``Where`` per output), else None (the branches swapped).
    constants: list[tuple[np.ndarray, np.ndarray]] | None
