"""What every lowering pass shares: finding its nodes in every scope, and naming what it creates.

A lowering pass replaces each node of one op type with other standard ops. The nodes can sit in the
main graph, in If/Loop/Scan/SequenceMap bodies at any depth, or in model-local functions, and the
names a pass creates must not collide with any name anywhere in the model. Subclasses say which
nodes they take (:meth:`NodeLoweringPass.matches`), check and plan each node before anything is
changed (:meth:`NodeLoweringPass.plan`), then rewrite (:meth:`NodeLoweringPass.rewrite`). Planning
every node first means a malformed node fails the pass with the model untouched.
"""

from __future__ import annotations

import abc
import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import onnx_ir as ir

from seqlower.passes._types import TypeOracle

__all__ = ["NameGenerator", "NodeLoweringPass", "Site", "iter_graph_likes", "subgraphs_of"]

ONNX_DOMAINS = frozenset({"", "ai.onnx"})


def subgraphs_of(node: ir.Node) -> Iterator[ir.Graph]:
    """The graphs held by a node's attributes (If branches, Loop/Scan/SequenceMap bodies)."""
    if not node.attributes:  # most nodes: skip the mapping's (slow) iteration protocol
        return
    for attr in node.attributes.values():
        if attr.is_ref():
            continue
        if attr.type == ir.AttributeType.GRAPH:
            yield attr.as_graph()
        elif attr.type == ir.AttributeType.GRAPHS:
            yield from attr.as_graphs()


def iter_graph_likes(model: ir.Model) -> Iterator[ir.Graph | ir.Function]:
    """The main graph, then every model-local function: the scopes that own an opset import."""
    yield model.graph
    yield from model.functions.values()


@dataclasses.dataclass(frozen=True)
class Site:
    """Where a node to lower lives: its node, and the default-domain opset in force there."""

    node: ir.Node
    opset: int


def _collect_sites(
    graph: ir.Graph | ir.Function,
    opset: int,
    matches: Callable[[ir.Node], bool],
    sites: list[Site],
) -> None:
    # Post-order: a node's subgraphs are visited before the node itself, so nested nodes come
    # first and a rewrite of an outer node always sees its body already lowered.
    for node in graph:
        for subgraph in subgraphs_of(node):
            _collect_sites(subgraph, opset, matches, sites)
        if matches(node):
            sites.append(Site(node, opset))


class NameGenerator:
    """Hands out names unused anywhere in a model: every scope, values, nodes and graphs."""

    def __init__(self, taken: Counter[str]) -> None:
        self._taken = taken
        self._next_suffix: dict[str, int] = {}

    @classmethod
    def for_model(cls, model: ir.Model) -> NameGenerator:
        taken: Counter[str] = Counter()

        def add_graph(graph: ir.Graph | ir.Function) -> None:
            if isinstance(graph, ir.Graph) and graph.name:
                taken[graph.name] += 1
            taken.update(value.name for value in graph.inputs if value.name)
            if isinstance(graph, ir.Graph):
                taken.update(name for name in graph.initializers if name)
            for node in graph:
                if node.name:
                    taken[node.name] += 1
                taken.update(value.name for value in node.outputs if value.name)
                # A reference to a name defined nowhere (invalid, but seen) is not reused either.
                for value in node.inputs:
                    if value is not None and value.name and value.name not in taken:
                        taken[value.name] += 1
                for subgraph in subgraphs_of(node):
                    add_graph(subgraph)
            for value in graph.outputs:
                if value.name and value.name not in taken:
                    taken[value.name] += 1

        for graph_like in iter_graph_likes(model):
            add_graph(graph_like)
        return cls(taken)

    def fresh(self, base: str) -> str:
        """``base`` itself when free, else ``base_N`` for the smallest free N."""
        base = base or "seqlower"
        if base not in self._taken:
            self._taken[base] += 1
            return base
        suffix = self._next_suffix.get(base, 1)
        while f"{base}_{suffix}" in self._taken:
            suffix += 1
        self._next_suffix[base] = suffix + 1
        name = f"{base}_{suffix}"
        self._taken[name] += 1
        return name

    def take_over(self, name: str | None, fallback: str) -> str:
        """A name for a value that replaces the (only) definition of ``name``.

        The old name is reused when nothing else in the model defines it, so a lowered body keeps
        the names its author gave; otherwise a fresh name is made from it.
        """
        if name and self._taken.get(name) == 1:
            return name
        return self.fresh(name or fallback)


class NodeLoweringPass(ir.passes.InPlacePass):
    """Base of passes that replace every node of one op type, in every scope of a model.

    After a run, :attr:`rewritten` holds how many nodes the run replaced.
    """

    #: The op type this pass removes from models.
    op_type: ClassVar[str]

    def __init__(self) -> None:
        super().__init__()
        self.rewritten = 0
        self._constant_pools: dict[int, dict[tuple[Any, ...], ir.Value]] = {}

    def constant_pool(self, graph: ir.Graph | ir.Function) -> dict[tuple[Any, ...], ir.Value]:
        """Small constants this run already put in ``graph``, for rewrites there to reuse."""
        return self._constant_pools.setdefault(id(graph), {})

    def matches(self, node: ir.Node) -> bool:
        return node.op_type == self.op_type and node.domain in ONNX_DOMAINS

    @abc.abstractmethod
    def plan(self, site: Site, types: TypeOracle) -> Any:
        """Check one node and work out its rewrite, without changing anything.

        Raises :class:`seqlower.errors.InvalidNodeError` when the node cannot be lowered.
        """

    @abc.abstractmethod
    def rewrite(self, plan: Any, names: NameGenerator) -> None:
        """Replace the planned node in its graph."""

    def find_sites(self, model: ir.Model) -> list[Site]:
        sites: list[Site] = []
        for graph_like in iter_graph_likes(model):
            opset = graph_like.opset_imports.get("", model.opset_imports.get("", 1))
            _collect_sites(graph_like, opset, self.matches, sites)
        return sites

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = 0
        self._constant_pools = {}
        sites = self.find_sites(model)
        if not sites:
            return ir.passes.PassResult(model, modified=False)
        types = TypeOracle(model)
        plans = [self.plan(site, types) for site in sites]
        names = NameGenerator.for_model(model)
        for plan in plans:
            self.rewrite(plan, names)
        self.rewritten = len(plans)
        return ir.passes.PassResult(model, modified=True)

    def ensures(self, model: ir.Model) -> None:
        left = self.find_sites(model)
        if left:
            raise ir.passes.PostconditionError(
                f"{type(self).__name__} left {len(left)} {self.op_type} node(s) in the model"
            )
