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
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Generic, Literal, TypeVar

import onnx_ir as ir

from seqlower._graphs import iter_graph_likes, subgraphs_of
from seqlower.passes._emit import Emitter, NameGenerator
from seqlower.passes._ir import ONNX_DOMAINS
from seqlower.passes._types import TypeOracle

__all__ = [
    "Census",
    "NameGenerator",
    "NodeLoweringPass",
    "Pool",
    "RepairPass",
    "Rewrite",
    "Scope",
    "Site",
    "find_sites",
    "model_names",
    "rewire",
]

#: A pass's plan of one node (see :class:`NodeLoweringPass`).
P = TypeVar("P")


@dataclasses.dataclass(frozen=True)
class Site:
    """Where a node to lower lives: its node, and the default-domain opset in force there."""

    node: ir.Node
    opset: int


class _Walk:
    """One traversal of every scope: the nodes a pass takes and, if asked, every name in use."""

    def __init__(
        self,
        matches: Callable[[ir.Node], bool],
        names: bool,
        op_types: frozenset[str] | None = None,
        *,
        every_node: bool = False,
    ) -> None:
        """``op_types``: when given, only nodes of these op types are asked ``matches`` (a set
        lookup instead of a call for every other node of the model). ``every_node``: every
        node is kept instead, with its opset and op type, in the order sites are found (a
        :class:`Census`), and none is asked ``matches``."""
        self.matches = matches
        self.op_types = op_types
        self.sites: list[Site] = []
        self.defined: list[str] | None = [] if names else None
        self.read: set[str] = set()
        self.nodes: list[tuple[ir.Node, int, str]] | None = [] if every_node else None

    def model(self, model: ir.Model) -> None:
        for graph_like in iter_graph_likes(model):
            opset = graph_like.opset_imports.get("", model.opset_imports.get("", 1))
            self.graph(graph_like, opset)

    def graph(self, graph: ir.Graph | ir.Function, opset: int) -> None:
        # The hot loop of every pass on large models: attribute lookups are hoisted, and
        # subgraphs are only looked for in nodes that have attributes at all.
        matches, sites, defined, op_types = self.matches, self.sites, self.defined, self.op_types
        keep = None if self.nodes is None else self.nodes.append
        if defined is not None:
            if isinstance(graph, ir.Graph):
                if graph.name:
                    defined.append(graph.name)
                defined.extend(name for name in graph.initializers if name)
            defined.extend(value.name for value in graph.inputs if value.name)
            define, read = defined.append, self.read.add
        # Post-order: a node's subgraphs are visited before the node itself, so nested nodes
        # come first and a rewrite of an outer node always sees its body already lowered.
        for node in graph:
            if defined is not None:
                if node.name:
                    define(node.name)
                for output in node.outputs:
                    if output.name:
                        define(output.name)
                for input_ in node.inputs:
                    if input_ is not None and input_.name:
                        read(input_.name)
            if node.attributes.data:
                for subgraph in subgraphs_of(node):
                    self.graph(subgraph, opset)
            if keep is not None:
                keep((node, opset, node.op_type))
            elif (op_types is None or node.op_type in op_types) and matches(node):
                sites.append(Site(node, opset))
        if defined is not None:
            self.read.update(value.name for value in graph.outputs if value.name)

    def name_counts(self) -> Counter[str]:
        assert self.defined is not None
        taken = Counter(self.defined)
        # A reference to a name defined nowhere (invalid, but seen) is not reused either.
        for name in self.read:
            if name and name not in taken:
                taken[name] = 1
        return taken


def _no_node(_: ir.Node) -> bool:
    return False


class Census:
    """One walk of a model, every node and every name in use, that the lowering passes of a
    row share: the pass that walked hands it to the next one (:meth:`NodeLoweringPass.
    hand_walk_to`), which then finds its sites without walking again. Valid only as long as
    nothing changes the model: the next pass runs right after the walk, and takes it once."""

    def __init__(self, model: ir.Model) -> None:
        self.model = model
        self._walk = _Walk(_no_node, names=True, every_node=True)
        self._walk.model(model)

    def sites(
        self, matches: Callable[[ir.Node], bool], op_types: frozenset[str] | None
    ) -> list[Site]:
        """What a walk with ``matches`` (and ``op_types``) finds, in the same order."""
        nodes = self._walk.nodes
        assert nodes is not None
        return [
            Site(node, opset)
            for node, opset, op_type in nodes
            if (op_types is None or op_type in op_types) and matches(node)
        ]

    def names(self) -> NameGenerator:
        return NameGenerator(self._walk.name_counts())


def find_sites(
    model: ir.Model,
    matches: Callable[[ir.Node], bool],
    op_types: frozenset[str] | None = None,
) -> list[Site]:
    """The nodes ``matches`` takes, in every scope, nested nodes before the node holding them
    (``op_types``: the op types it can take, when known: the others are not asked)."""
    walk = _Walk(matches, names=False, op_types=op_types)
    walk.model(model)
    return walk.sites


def model_names(model: ir.Model) -> NameGenerator:
    """A name generator that knows every name in use anywhere in ``model``."""
    walk = _Walk(lambda _: False, names=True)
    walk.model(model)
    return NameGenerator(walk.name_counts())


def rewire(old: ir.Value, new: ir.Value, *, graph_outputs: bool = True) -> None:
    """Every reader of ``old`` (with ``graph_outputs``, a graph returning it too) reads ``new``:
    a body input replaced by what a rewrite computes, a node's output by its replacement."""
    old.replace_all_uses_with(new, replace_graph_outputs=graph_outputs)


#: Which small constants an emitter shares: ``"graph"``, with every emitter of the run into the
#: same graph; ``"own"``, only among its own; None, none (each constant where it is used).
Pool = Literal["graph", "own"] | None


class Scope:
    """What every emitter of one pass run shares: the names in use and a constant pool per
    graph. :class:`NodeLoweringPass` makes one per run; passes that walk the model themselves
    (``FoldSequenceOps``) make theirs with :meth:`of`."""

    def __init__(
        self,
        names: NameGenerator,
        pools: dict[int, dict[tuple[Any, ...], ir.Value]] | None = None,
    ) -> None:
        self.names = names
        self._pools = {} if pools is None else pools

    @classmethod
    def of(cls, model: ir.Model) -> Scope:
        return cls(model_names(model))

    def emitter(
        self, graph: ir.Graph | ir.Function, prefix: str, opset: int, pool: Pool = "graph"
    ) -> Emitter:
        """An emitter for nodes going into ``graph``, named from ``prefix``."""
        constants: dict[tuple[Any, ...], ir.Value] | None = None
        if pool == "graph":
            constants = self._pools.setdefault(id(graph), {})
        elif pool == "own":
            constants = {}
        return Emitter(self.names, prefix, opset, constants)

    def at(self, site: Site) -> Rewrite:
        """The context for rewriting the node of ``site``."""
        return Rewrite(self, site)


class Rewrite:
    """What :meth:`NodeLoweringPass.rewrite` is handed for one node: the emitters for its site
    and the surgery that puts their nodes in the node's place.

    :meth:`before` and :meth:`after` record nodes for the node's graph (small constants pooled
    with every rewrite in that graph); :meth:`replace` inserts them where the node is (the
    ``before`` ones first), moves each output's readers (graph outputs included) to its
    replacement and removes the node. :meth:`into` records nodes for another graph (a body),
    for the rewrite to place (``_shared.prepend``, ``body.extend``); :meth:`at` is the context
    of another node the rewrite replaces too (a ``ConcatFromSequence`` of the result).
    """

    def __init__(self, scope: Scope, site: Site) -> None:
        self.scope = scope
        self.site = site
        self.node = site.node
        self.opset = site.opset
        self.names = scope.names
        #: What the names the rewrite makes start with: the node's name, else its op type.
        self.base = site.node.name or site.node.op_type
        self._before: list[Emitter] = []
        self._after: list[Emitter] = []

    @property
    def graph(self) -> ir.Graph:
        """The graph the node is in."""
        graph = self.node.graph
        assert graph is not None, "the node is in a graph"
        return graph

    def at(self, node: ir.Node) -> Rewrite:
        """The context for replacing ``node`` as well (same names, pools and opset)."""
        return self.scope.at(Site(node, self.opset))

    def into(
        self, graph: ir.Graph | ir.Function, *, pool: Pool = "graph", prefix: str | None = None
    ) -> Emitter:
        """An emitter for nodes the rewrite places in ``graph`` itself (a body)."""
        return self.scope.emitter(graph, prefix or self.base, self.opset, pool)

    def before(self, *, pool: Pool = "graph", prefix: str | None = None) -> Emitter:
        """An emitter whose nodes :meth:`replace` (or :meth:`insert`) puts where the node is."""
        emit = self.into(self.graph, pool=pool, prefix=prefix)
        self._before.append(emit)
        return emit

    def after(self, *, pool: Pool = "graph", prefix: str | None = None) -> Emitter:
        """As :meth:`before`, its nodes after every ``before`` emitter's (they read the node
        that replaces this one)."""
        emit = self.into(self.graph, pool=pool, prefix=prefix)
        self._after.append(emit)
        return emit

    def insert(self, nodes: Sequence[ir.Node] = ()) -> list[ir.Node]:
        """Put ``nodes``, then the ``before`` and ``after`` emitters' nodes, where the node is
        (the node stays); returns what was inserted."""
        inserted = [*nodes, *(n for emit in (*self._before, *self._after) for n in emit.nodes)]
        self._before, self._after = [], []
        if inserted:
            self.graph.insert_before(self.node, inserted)
        return inserted

    def redirect(
        self,
        outputs: Sequence[ir.Value | None],
        *,
        rename: bool | Sequence[bool] | None = None,
        nodes: Sequence[ir.Node] = (),
    ) -> None:
        """:meth:`insert`, then each output's readers (graph outputs included) read
        ``outputs[k]`` instead (None: left as it is), and the replacement takes the output's
        name when ``rename`` says so (for all, or per output); by default when the rewrite made
        it (an inserted node computes it), not when it comes from elsewhere (a graph output
        then needs an ``Identity``, as a value keeps one name)."""
        inserted = self.insert(nodes)
        if rename is None:
            made = {id(value) for node in inserted for value in node.outputs}
            renames = [new is not None and id(new) in made for new in outputs]
        else:
            renames = [rename] * len(outputs) if isinstance(rename, bool) else list(rename)
        for old, new, moves in zip(self.node.outputs, outputs, renames, strict=True):
            if new is None:
                continue
            name = old.name
            rewire(old, new)
            if moves and name:
                old.name = None
                new.name = name

    def remove(self) -> None:
        """Take the node out of its graph (nothing may read its outputs any more)."""
        self.graph.remove(self.node, safe=True)

    def replace(
        self,
        outputs: Sequence[ir.Value | None],
        *,
        rename: bool | Sequence[bool] | None = None,
        nodes: Sequence[ir.Node] = (),
    ) -> None:
        """Replace the node: the emitted nodes in, its outputs' readers moved to ``outputs``
        (:meth:`redirect`), the node out."""
        self.redirect(outputs, rename=rename, nodes=nodes)
        self.remove()


class RepairPass(ir.passes.InPlacePass):
    """A pass that repairs nodes for a runtime, keeping their op, with no site to plan: it
    implements :meth:`repair` and counts what it changed in ``rewritten`` (reports read it)."""

    repairs: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self.rewritten = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = 0
        self.repair(model)
        return ir.passes.PassResult(model, modified=self.rewritten > 0)

    def repair(self, model: ir.Model) -> None:
        """Repair ``model`` in place, adding to ``rewritten`` per node changed."""
        raise NotImplementedError


class NodeLoweringPass(ir.passes.InPlacePass, Generic[P]):
    """Base of passes that replace every node of one op type, in every scope of a model.

    ``P`` is the pass's plan: what :meth:`plan` works out for one node and :meth:`rewrite`
    builds from. After a run, :attr:`rewritten` holds how many nodes the run replaced.
    """

    #: The op type this pass removes from models.
    op_type: str
    #: Every op type it takes, for a pass over a family of ops (``RNN``/``GRU``/``LSTM``);
    #: None: ``op_type`` alone.
    op_types: ClassVar[frozenset[str] | None] = None
    #: Whether every matching node is rewritten; passes that take only some (``plan`` returns
    #: None for the others) set this False, and their postcondition is not checked.
    takes_all: bool = True
    #: Whether the pass repairs nodes for a runtime, keeping their op (``strict-loop-bodies``),
    #: rather than lowering them away; reports say "repairs", not "lowers".
    repairs: ClassVar[bool] = False
    #: Whether :meth:`call` may find its sites in a walk the previous pass of the row handed
    #: over (:meth:`hand_walk_to`); None: when the subclass does not override ``call`` (one
    #: that changes the model before ``super().call`` must not, or drops it: ``drop_walk``).
    takes_handed_walk: ClassVar[bool | None] = None

    def __init__(self) -> None:
        super().__init__()
        self.rewritten = 0
        self._constant_pools: dict[int, dict[tuple[Any, ...], ir.Value]] = {}
        self._hands_to: NodeLoweringPass[Any] | None = None
        self._handed: Census | None = None  # from the previous pass, for the next call
        self._unchanged: Census | None = None  # this call's walk, the model unchanged since

    def hand_walk_to(self, following: NodeLoweringPass[Any]) -> None:
        """After each run, give ``following`` (the pass the row runs right after this one,
        nothing in between) the walk of the model as this run leaves it: one walk fewer."""
        self._hands_to = following

    def take_walk(self, census: Census | None) -> None:
        """The walk the pass run right before this one leaves (None: none), for the next
        :meth:`call` on that model."""
        self._handed = census

    def drop_walk(self) -> None:
        """Forget a walk handed over (for a ``call`` that changed the model before using it)."""
        self._handed = None

    def _takes_handed_walk(self) -> bool:
        if self.takes_handed_walk is None:
            return type(self).call is NodeLoweringPass.call
        return self.takes_handed_walk

    def constant_pool(self, graph: ir.Graph | ir.Function) -> dict[tuple[Any, ...], ir.Value]:
        """Small constants this run already put in ``graph``, for rewrites there to reuse."""
        return self._constant_pools.setdefault(id(graph), {})

    def matches(self, node: ir.Node) -> bool:
        if self.op_types is None:
            return node.op_type == self.op_type and node.domain in ONNX_DOMAINS
        return node.op_type in self.op_types and node.domain in ONNX_DOMAINS

    @abc.abstractmethod
    def plan(self, site: Site, types: TypeOracle) -> P | None:
        """Check one node and work out its rewrite, without changing anything.

        Raises :class:`seqlower.errors.InvalidNodeError` when the node cannot be lowered; passes
        with ``takes_all = False`` return None for a node they leave as it is.
        """

    @abc.abstractmethod
    def rewrite(self, plan: P, ctx: Rewrite) -> None:
        """Replace the planned node (``ctx.node``) in its graph: build with ``ctx.before()``,
        then ``ctx.replace(outputs)``."""

    def _op_types(self) -> frozenset[str] | None:
        """What :meth:`matches` can take, when it is the default (a subclass's may differ)."""
        if type(self).matches is not NodeLoweringPass.matches:
            return None
        return self.op_types or frozenset([self.op_type])

    def find_sites(self, model: ir.Model) -> list[Site]:
        return find_sites(model, self.matches, self._op_types())

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.rewritten = 0
        self._constant_pools = {}
        handed, self._handed, self._unchanged = self._handed, None, None
        if handed is None or handed.model is not model or not self._takes_handed_walk():
            handed = Census(model)
        sites = handed.sites(self.matches, self._op_types())
        self._unchanged = handed
        if not sites:
            return ir.passes.PassResult(model, modified=False)
        types = TypeOracle(model)
        planned = [(site, self.plan(site, types)) for site in sites]
        plans = [(site, plan) for site, plan in planned if plan is not None]
        if not plans:
            return ir.passes.PassResult(model, modified=False)
        self._unchanged = None
        scope = Scope(handed.names(), self._constant_pools)
        for site, plan in plans:
            self.rewrite(plan, scope.at(site))
        self.rewritten = len(plans)
        self.finish(model, scope.names)
        return ir.passes.PassResult(model, modified=True)

    def finish(self, model: ir.Model, names: NameGenerator) -> None:
        """Work after every rewrite of a run (nothing by default)."""

    def ensures(self, model: ir.Model) -> None:
        census, self._unchanged = self._unchanged, None
        if census is not None and census.model is not model:
            census = None
        following = self._hands_to
        if census is None and following is not None:
            census = Census(model)
        if self.takes_all:
            if census is None:
                left = self.find_sites(model)
            else:
                left = census.sites(self.matches, self._op_types())
            if left:
                raise ir.passes.PostconditionError(
                    f"{type(self).__name__} left {len(left)} {self.op_type} node(s) in the model"
                )
        if following is not None:
            following.take_walk(census)
