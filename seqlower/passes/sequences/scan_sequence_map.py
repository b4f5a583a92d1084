"""Lower ``SplitToSequence`` → ``SequenceMap`` → ``ConcatFromSequence`` into a ``Scan``.

onnxscript-authored models map over the rows of a tensor whose count is known only at run time::

    s = SplitToSequence(x, axis=a, keepdims=kd)          # no split sizes: one piece per index
    m = SequenceMap(s, t) with body (e, t) -> r
    y = ConcatFromSequence(m, axis=c, new_axis=n)

Unrolling needs the count; a ``Scan`` does not, and it needs no sequence::

    stacked = Scan(x, scan_input_axes=[a]) with body (e) ->   # keepdims=1: e = Unsqueeze(e, a)
        ... the original body, t read from the outer scope ...
        -> r                                                   # r stacked along a new axis 0
    y = Transpose(stacked) moving axis 0 to c            # new_axis=1
    y = Reshape(Transpose(stacked)) merging N into c     # new_axis=0

``Scan`` rather than ``Loop``: tract implements ``Scan`` but not ``Loop``.

No ``Scan`` at all when the map's one input is ``x``'s rows (``axis=0``, ``keepdims=0``) and its
body works element by element (``seqlower.passes._stacking``): the body runs once on ``x``.

Stacking needs every iteration's ``r`` to have one shape, so the pass takes a map only when the
shape inferred for ``r`` has a known rank and dimensions that cannot change from one element to
the next (numbers, or names of the input's own dimensions). Otherwise, or when a map output has
another reader than ``ConcatFromSequence``, the map is left with the reason recorded. For an empty
``x`` the original's ``ConcatFromSequence`` fails (onnxruntime: "Must have 1 or more inputs");
the Scan returns an empty tensor there.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import onnx_ir as ir

from seqlower.errors import describe_node
from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import block, is_onnx
from seqlower.passes._shared import (
    body_of,
    concat_problem,
    concat_stacked,
    cut_interface,
    inline_untyped_sequence_map_functions,
    is_sequence,
    outer_reads_as_states,
    prepend,
    scan_outputs,
    unit_split,
)
from seqlower.passes._stacking import elementwise, run_on_stack, stacked_source
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["ScanSequenceMap", "concat_problem", "concat_stacked"]


@dataclasses.dataclass
class _Read:
    """How a sequence input's element is read in the Loop body."""

    source: ir.Value  # the tensor SplitToSequence split
    axis: int
    keepdims: bool


@dataclasses.dataclass
class _Plan:
    node: ir.Node
    body: ir.Graph
    opset: int
    reads: list[_Read | None]  # per input; None: a tensor input
    ranks: list[int]  # per output: the rank of one result
    dtypes: list[ir.DataType | None]
    stacked: ir.Value | None = None  # an elementwise map of x's rows: its body runs on x


class ScanSequenceMap(NodeLoweringPass[_Plan]):
    """SplitToSequence → SequenceMap → ConcatFromSequence as a Scan (module docstring)."""

    op_type = "SequenceMap"
    takes_all = False

    def __init__(self, *, stacked_only: bool = False) -> None:
        """``stacked_only``: only the maps run once on the split tensor, whatever their count,
        first in the sequence-free pipeline: otherwise a count known when lowering is folded
        into a ``Split`` and the map unrolled, one copy of the body per row. Being the first
        SequenceMap pass there, it inlines onnxscript's untyped functions first, so their maps
        get the call's types (as ``FoldSequenceOps`` would)."""
        super().__init__()
        self.stacked_only = stacked_only

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if not self.stacked_only:
            return super().call(model)
        inlined = inline_untyped_sequence_map_functions(model)
        result = super().call(model)
        return ir.passes.PassResult(result.model, modified=result.modified or inlined > 0)

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        plan = self._plan_map(site, types)
        if self.stacked_only and (plan is None or plan.stacked is None):
            return None
        return plan

    def _plan_map(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        body = body_of(node)
        if len(body.inputs) != len(node.inputs) or len(body.outputs) != len(node.outputs):
            return None
        if any(value is None for value in node.inputs) or not node.outputs:
            return None
        reads: list[_Read | None] = []
        dims: set[str] = set()
        for k, value in enumerate(node.inputs):
            assert value is not None
            if not is_sequence(node, k, types):
                reads.append(None)
                continue
            split = unit_split(value)
            if split is None:
                if is_onnx(value.producer(), "SplitToSequence"):
                    block(
                        node,
                        f"its input '{value.name}' is split with sizes known at run time "
                        "(--target openvino and --target tract lower such a map: a Loop over "
                        "slices, a Scan writing rows)",
                    )
                return None  # otherwise the unroll pass's reason stands
            source, axis, keepdims = split
            reads.append(_Read(source, axis, keepdims))
            shape = types.shape_of(source)
            dims.update(str(d) for d in shape or () if isinstance(d, ir.SymbolicDim) and d.value)
        ranks = _output_ranks(node, body, types, dims)
        if ranks is None:
            return None
        dtypes = [
            element_dtype(old.type) or element_dtype(r.type)
            for old, r in zip(node.outputs, body.outputs, strict=True)
        ]
        stacked = None
        if len(node.inputs) == 1 and elementwise(body):
            stacked = stacked_source(node.inputs[0], body)  # type: ignore[arg-type]
        return _Plan(node, body, site.opset, reads, ranks, dtypes, stacked)

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, body, names, base = ctx.node, plan.body, ctx.names, ctx.base
        if plan.stacked is not None:
            results, computed = run_on_stack(ctx, body, plan.stacked)
            self._concats(ctx, plan, results, computed)
            return
        reads, tail = ctx.into(body), ctx.into(body)
        scanned_inputs, body_inputs, axes, results = _scanned(ctx, plan, reads)
        scanned = scan_outputs(tail, body, results)
        prepend(body, reads.nodes)
        body.extend(tail.nodes)
        outer, states, state_outs = outer_reads_as_states(ctx, body, body_inputs)
        body.inputs.extend([*states, *body_inputs])
        body.outputs.extend([*state_outs, *scanned])
        stacked = [
            ir.Value(
                name=names.fresh(f"{base}_stacked_{j}"),
                type=None if dtype is None else ir.TensorType(dtype),
            )
            for j, dtype in enumerate(plan.dtypes)
        ]
        del node.attributes["body"]
        input_axes: dict[str, Any] = {"scan_input_axes": axes} if any(axes) else {}
        finals = [ir.Value(name=names.fresh(f"{base}_{v.name}_final")) for v in outer]
        ctx.before(pool=None).Scan(
            *outer,
            *scanned_inputs,
            body=body,
            num_scan_inputs=len(scanned_inputs),
            **input_axes,
            _outputs=[*finals, *stacked],
            _name=node.name or names.fresh("SequenceMap_Scan"),
            _doc_string=node.doc_string,
        )
        ctx.insert()
        self._concats(ctx, plan, stacked, {id(value) for value in stacked})

    def _concats(self, ctx: Rewrite, plan: _Plan, stacked: list[ir.Value], named: set[int]) -> None:
        """Each ConcatFromSequence of the map's outputs reads the results ``stacked`` along a
        new axis 0 instead (those in ``named`` may take its name); the map goes."""
        for j, old in enumerate(ctx.node.outputs):
            for use in list(old.uses()):
                concat_stacked(ctx.at(use.node), stacked[j], plan.ranks[j], named)
        ctx.remove()


def _output_ranks(
    node: ir.Node, body: ir.Graph, types: TypeOracle, dims: set[str]
) -> list[int] | None:
    """The rank of each of the map's results, when each is read by ``ConcatFromSequence``s
    alone and keeps one shape from element to element (numbers, or names of the split inputs'
    own dimensions ``dims``); else None, the reason recorded."""
    ranks = []
    for j, (old, result) in enumerate(zip(node.outputs, body.outputs, strict=True)):
        if old.is_graph_output():
            block(node, f"its output '{old.name}' is a graph output")
            return None
        for use in old.uses():
            if not is_onnx(use.node, "ConcatFromSequence") or use.idx != 0:
                block(
                    node,
                    f"its output '{old.name}' is read by {describe_node(use.node)}, not only "
                    "by ConcatFromSequence",
                )
                return None
        shape = result.shape or types.shape_of(result)
        stable = shape is not None and all(
            isinstance(d, int) or (d.value is not None and str(d) in dims) for d in shape
        )
        if not stable:
            block(
                node,
                f"the shape of its body output {j} '{result.name}' may change from one element "
                f"to the next (inferred: {shape}); stacking needs one shape",
            )
            return None
        assert shape is not None
        for use in old.uses():
            problem = concat_problem(use.node, len(shape))
            if problem:
                block(node, f"{describe_node(use.node)} {problem}")
                return None
        ranks.append(len(shape))
    return ranks


def _scanned(
    ctx: Rewrite, plan: _Plan, reads: Emitter
) -> tuple[list[ir.Value], list[ir.Value], list[int], list[ir.Value]]:
    """The body as the Scan body: one input per scanned tensor (the element itself, or for
    keepdims=1 the element before its size-1 axis is put back); tensor inputs are read from the
    outer scope. Returns the scanned tensors, the body's inputs for them, their axes, and the
    body's results, its interface cut."""
    node, body = ctx.node, plan.body
    scanned_inputs: list[ir.Value] = []
    body_inputs: list[ir.Value] = []
    axes: list[int] = []
    replacements: dict[ir.Value, ir.Value] = {}
    for k, (param, read) in enumerate(zip(body.inputs, plan.reads, strict=True)):
        given = node.inputs[k]
        assert given is not None
        if read is None:
            replacements[param] = given
            continue
        scanned_inputs.append(read.source)
        axes.append(read.axis)
        if not read.keepdims:
            body_inputs.append(param)
            continue
        piece = ir.Value(name=ctx.names.fresh(f"{ctx.base}_slice_{k}"), type=param.type)
        element = reads.unsqueeze(piece, [read.axis], hint=f"element_{k}")
        element.type, element.shape = param.type, param.shape
        body_inputs.append(piece)
        replacements[param] = element
    results = cut_interface(body, replacements, list(body.outputs))
    return scanned_inputs, body_inputs, axes, results
