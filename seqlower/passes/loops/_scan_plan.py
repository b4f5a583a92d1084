"""What ``LoopToScan`` works out of a Loop before rewriting it: whether its trip count is fixed
when it starts (the induction analysis reads its condition as bounds on counters), which states
are counters, whether its states keep their shape, and what it does when it may run none."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import onnx
import onnx_ir as ir

from seqlower.passes._base import Site
from seqlower.passes._first_iteration import FirstIteration
from seqlower.passes._induction import Condition, Term, passes_through
from seqlower.passes._ir import NO_LOOP, block, blocked, is_onnx, loop_body
from seqlower.passes._shared import outer_reads
from seqlower.passes._types import TypeOracle
from seqlower.passes.loops._zero_trips import runs, zero_trip_form

T = TypeVar("T")

__all__ = ["ByGraph", "LoopShapes", "ScanPlan", "changed_shape", "plan_loop", "shape_text"]


@dataclasses.dataclass
class ScanPlan:
    node: ir.Node
    body: ir.Graph
    opset: int
    terms: list[Term] | None  # None: the condition is passed through (the trip count is M)
    counters: list[int]  # integer states that step by a constant: read from the iteration number
    steps: dict[int, int]  # their steps
    types: dict[int, tuple[ir.TypeProtocol | None, ir.Shape | None]]  # of the outer reads
    constant_count: int | None = None  # M evaluated at planning (``constant_counts``)
    #: Run as a Scan of at least one iteration, its results masked when it runs none, with
    #: what makes the body safe on that iteration (``_first_iteration``); None: as it is.
    once: FirstIteration | None = None
    #: Run as a Scan of exactly the trip count inside an ``If`` on ``count > 0``, whose other
    #: branch gives the initial states and empty scan outputs of these row shapes (by Loop scan
    #: output): a Loop that may run none whose body is not proven safe on iteration 0.
    guarded: list[tuple[int, ...]] | None = None


class LoopShapes:
    """The shapes ONNX's inference gives a model's values, each kind inferred at most once per
    pass run, when first asked for."""

    def __init__(self, model: ir.Model) -> None:
        self._model = model
        self._shapes: ByGraph[ir.Shape] | None = None
        self._symbols: ByGraph[tuple[int | str | None, ...]] | None = None

    def inferred(self, value: ir.Value) -> ir.Shape | None:
        """The shape ONNX's inference gives ``value`` (``ByGraph``), run at most once per pass
        run; tract needs the rank of every state."""
        if self._shapes is None:
            self._shapes = _infer_shapes(self._model)
        return self._shapes.get(value)

    def symbolic(self, value: ir.Value) -> tuple[int | str | None, ...] | None:
        """The shape ONNX's inference with data propagation gives ``value`` in a copy without
        the exporter's value_info (whose symbolic names need not agree), a dimension's name
        the same for the same size (a batch dimension of an input and of zeros computed from
        its shape); else its sizes as declared or inferred, the rest unknown (None)."""
        if self._symbols is None:
            self._symbols = _infer_symbols(self._model)
        shape = self._symbols.get(value)
        if shape is not None:
            return shape
        declared = value.shape or self.inferred(value)
        return (
            None if declared is None else tuple(d if isinstance(d, int) else None for d in declared)
        )


def plan_loop(
    site: Site,
    types: TypeOracle,
    shapes: LoopShapes,
    *,
    grown_states: bool,
    guards_zero_trips: bool,
) -> ScanPlan | None:
    """The plan of a Loop whose trip count is fixed when it starts, or None (the reason
    recorded on the node for ``require-no-loop``); ``grown_states``, ``guards_zero_trips``: the
    pass's options of those names."""
    node = site.node
    body = _scan_body_of(site, types)
    if body is None:
        return None
    analysis = Condition(node, body, types)
    fixed, terms = _condition_bounds(node, body, analysis)
    if not fixed:
        return None
    carried = len(node.inputs) - 2
    steps = {
        k: step
        for k in range(carried)
        if (step := analysis.step(k)) is not None and analysis.is_integer(k)
    }
    counters = sorted(steps)
    if not _states_keep_shape(node, body, steps, types, shapes, grown_states):
        return None
    reads = outer_reads(body, list(body.inputs))
    reads += [node.inputs[2 + k] for k in counters]  # type: ignore[misc]
    known = {id(v): (types.type_of(v), types.shape_of(v) or shapes.inferred(v)) for v in reads}
    plan = ScanPlan(node, body, site.opset, terms, counters, steps, known)
    if guards_zero_trips and not runs(node, terms, site.opset, shapes.inferred):
        unit = [k for k in counters if steps[k] == 1]  # what the first iteration's proof reads
        form = zero_trip_form(
            node, body, terms, counters, unit, types, shapes.inferred, shapes.symbolic
        )
        if isinstance(form, str):
            _block(node, form)
            return None
        plan.once, plan.guarded = form
    return plan


def _scan_body_of(site: Site, types: TypeOracle) -> ir.Graph | None:
    """The Loop's body when a Scan can run it: opset 11 at least, the Loop's inputs and the
    body's interface agreeing, tensor states only."""
    node = site.node
    if site.opset < 11 or "body" not in node.attributes:
        # Scan's opset-9 form exists, but Range (the scan input) needs opset 11.
        _block(node, f"Loop at opset {site.opset}: Range, the scan input, needs opset 11")
        return None
    body = loop_body(node)
    if body is None:
        return None
    for value in body.inputs[2:]:
        type_ = value.type or types.type_of(value)
        if type_ is not None and not isinstance(type_, ir.TensorType):
            # Scan's states are tensors (a sequence a Loop builds is StackLoopSequences').
            _block(node, f"it carries '{value.name}', a {type_}, and a Scan carries tensors")
            return None
    return body


def _condition_bounds(
    node: ir.Node, body: ir.Graph, analysis: Condition
) -> tuple[bool, list[Term] | None]:
    """Whether the trip count is fixed when the Loop starts, and the bounds its condition sets
    on counters (None: the body passes the condition through, and the count is M)."""
    m = node.inputs[0] if node.inputs else None
    cond_out = body.outputs[0]
    if passes_through(cond_out, body.inputs[1]):
        if m is None:
            _block(
                node,
                "its trip count is not fixed when it starts: no M and a condition "
                "the body passes through",
            )
            return False, None
        return True, None
    terms = analysis.terms(cond_out)
    if terms is None:
        _block(
            node,
            "its trip count is not fixed when it starts: the condition "
            f"'{cond_out.name}' depends on what the body computes ({analysis.why})",
        )
        return False, None
    if not terms and m is None:
        _block(node, "its trip count is not fixed: no M and a condition always true")
        return False, None
    return True, terms


def _states_keep_shape(
    node: ir.Node,
    body: ir.Graph,
    steps: dict[int, int],
    types: TypeOracle,
    shapes: LoopShapes,
    grown_states: bool,
) -> bool:
    """Whether every state keeps its shape, as a Scan's must (onnxruntime preallocates them,
    tract fixes their facts): none grown by a ``Concat`` (unless ``grown_states``), none
    returned of another shape than it starts with (``peel-first-iteration`` runs the first
    iteration of such a loop before it, where it runs at least once)."""
    carried = len(node.inputs) - 2
    grown = None if grown_states else _grown_state(body, carried)
    if grown is not None:
        _block(
            node,
            f"its state '{grown}' grows by a Concat each iteration, and a Scan's states keep "
            "their shape (onnxruntime preallocates them, tract fixes their facts)",
        )
        return False
    for k in range(carried):
        changed = changed_shape(node.inputs[2 + k], body.outputs[1 + k], types, shapes)
        if k not in steps and changed is not None and body.inputs[2 + k].uses():
            _block(
                node,
                f"its state '{body.inputs[2 + k].name}' starts of shape "
                f"{shape_text(changed[0])} and the body returns it of shape "
                f"{shape_text(changed[1])}, and a Scan's states keep their shape",
            )
            return False
    return True


def changed_shape(
    start: ir.Value | None, result: ir.Value, types: TypeOracle, shapes: LoopShapes
) -> tuple[ir.Shape, ir.Shape] | None:
    """The shapes of a state's initial value and of the body's value for it, when both are
    known and differ in rank or in a size both give."""
    if start is None:
        return None
    first = start.shape or types.shape_of(start) or shapes.inferred(start)
    then = result.shape or shapes.inferred(result)
    if first is None or then is None:
        return None
    a = [d if isinstance(d, int) else None for d in first]
    b = [d if isinstance(d, int) else None for d in then]
    if len(a) == len(b) and all(
        x is None or y is None or x == y for x, y in zip(a, b, strict=True)
    ):
        return None
    return first, then


def shape_text(shape: ir.Shape) -> str:
    """A shape as a message shows it: ``[3]``, ``[]``, ``[?, 4]``."""
    return "[" + ", ".join(str(d) if isinstance(d, int) else "?" for d in shape) + "]"


def _grown_state(body: ir.Graph, carried: int) -> str | None:
    """The name of a state the body returns as a ``Concat`` of itself (through ``Identity``s),
    or None."""
    for k in range(carried):
        value = body.outputs[1 + k]
        while is_onnx(value.producer(), "Identity"):
            value = value.producer().inputs[0]  # type: ignore[union-attr,assignment]
        producer = value.producer()
        if is_onnx(producer, "Concat") and body.inputs[2 + k] in producer.inputs:
            return body.inputs[2 + k].name or f"state {k}"
    return None


def _infer_shapes(model: ir.Model) -> ByGraph[ir.Shape]:
    try:
        proto = onnx.shape_inference.infer_shapes(
            ir.serde.serialize_model(model), check_type=False, strict_mode=False
        )
    except Exception:  # best effort: a state without a shape is declared without one
        return ByGraph()
    return ByGraph.read(
        model,
        proto,
        lambda shape: ir.Shape([d.dim_value if d.HasField("dim_value") else None for d in shape]),
    )


def _infer_symbols(model: ir.Model) -> ByGraph[tuple[int | str | None, ...]]:
    """Every value's shape by name as ONNX infers it with data propagation, the model's own
    value_info dropped first (``LoopShapes.symbolic``)."""
    proto = ir.serde.serialize_model(model)
    graphs = [proto.graph]
    while graphs:
        graph = graphs.pop()
        del graph.value_info[:]
        for node in graph.node:
            graphs += [a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH]
            graphs += [g for a in node.attribute for g in a.graphs]
    try:
        proto = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
    except Exception:  # best effort: no names, the declared sizes only
        return ByGraph()
    return ByGraph.read(
        model,
        proto,
        lambda shape: tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in shape
        ),
    )


class ByGraph(Generic[T]):
    """Values' shapes by their graph and name: sibling bodies may reuse a name (tf2onnx names
    every RNN layer's Loop state ``while_placeholder_2:0``), so a name alone picked one layer's
    shape for all. A value of a graph not seen (written after inference) is found by its name
    where that name is one graph's only."""

    def __init__(self) -> None:
        self.shapes: dict[tuple[int, str], T] = {}
        self.names: dict[str, T | None] = {}  # None: the name is in several graphs
        self._graphs: list[ir.Graph] = []  # ids stay valid while held

    @classmethod
    def read(
        cls,
        model: ir.Model,
        proto: onnx.ModelProto,
        read: Callable[[Sequence[onnx.TensorShapeProto.Dimension]], T],
    ) -> ByGraph[T]:
        """Each graph's shapes from the inferred ``proto`` of ``model``, walked side by side."""
        found: ByGraph[T] = cls()
        pairs: list[tuple[ir.Graph, onnx.GraphProto]] = [(model.graph, proto.graph)]
        while pairs:
            graph, graph_proto = pairs.pop()
            found._graphs.append(graph)
            for info in [*graph_proto.value_info, *graph_proto.input, *graph_proto.output]:
                tensor = info.type.tensor_type
                if info.type.HasField("tensor_type") and tensor.HasField("shape"):
                    key = (id(graph), info.name)
                    if key not in found.shapes:
                        found.shapes[key] = read(tensor.shape.dim)
                        found.names[info.name] = (
                            None if info.name in found.names else found.shapes[key]
                        )
            for node, node_proto in zip(graph, graph_proto.node, strict=True):
                for attr in node_proto.attribute:
                    owned = node.attributes.get(attr.name)
                    if owned is None:
                        continue
                    if attr.type == onnx.AttributeProto.GRAPH:
                        pairs.append((owned.as_graph(), attr.g))
                    elif attr.type == onnx.AttributeProto.GRAPHS:
                        pairs += zip(owned.as_graphs(), attr.graphs, strict=True)
        return found

    def get(self, value: ir.Value) -> T | None:
        name = value.name or ""
        graph = value.graph
        if graph is not None and (id(graph), name) in self.shapes:
            return self.shapes[(id(graph), name)]
        return self.names.get(name)


def _block(node: ir.Node, reason: str) -> None:
    """Why the Loop stays a Loop, for ``require-no-loop`` to name (unless a pass before, which
    knows more, said: ``freeze-bounded-loops``)."""
    if blocked(node, NO_LOOP) is None:
        block(node, reason, NO_LOOP)
