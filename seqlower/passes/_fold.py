"""onnxscript's constant folder, run on the nodes one rewrite made and on nothing else.

Unrolled ``SequenceMap`` bodies branch on their element's rank (``Shape``/``Size`` compared to
constants, nested ``If``); once each copy reads one element of known type and shape, those
conditions are constants. onnxscript's folder knows how to fold them (``Shape`` and ``Size`` of
known shapes, ``If`` on a constant condition inlined), so seqlower does not carry a folder of its
own. But run on a whole model it also rewrites what the user did not ask for (it folds the user's
own constant subexpressions, adds type annotations, renames values), so here it only touches
nodes marked as the rewrite's (:data:`REGION_KEY` in ``node.meta``). ``Constant`` nodes elsewhere
are read for their values; whatever the folder records on them is put back afterwards.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import onnx_ir as ir

from seqlower._graphs import subgraphs_of
from seqlower.passes._base import NameGenerator
from seqlower.passes._ir import SEQUENCE_OPS, all_graphs, model_nodes

__all__ = ["REGION_KEY", "detach", "fold_model", "fold_region", "mark_region"]

logger = logging.getLogger(__name__)

#: ``node.meta`` key of the nodes :func:`fold_region` may rewrite.
REGION_KEY = "seqlower.fold_region"
_ROUNDS = 4  # nested rank Ifs fold one level per round at worst


def mark_region(nodes: list[ir.Node]) -> None:
    """Let :func:`fold_region` rewrite ``nodes`` and every node in their subgraphs."""
    for node in nodes:
        node.meta[REGION_KEY] = True
        for subgraph in subgraphs_of(node):
            mark_region(list(subgraph))


@functools.cache
def _folding() -> Any:
    """onnxscript's folding module and the region-only folder class built on it.

    Imported on first use: onnxscript takes a second to import, which every run of the command
    line would pay otherwise.
    """
    try:
        from onnxscript.optimizer import _constant_folding
    except ImportError:
        return None
    base = getattr(_constant_folding, "FoldConstantsPass", None)
    needed = ("_reset", "visit_node", "visit_graph", "visit_function", "visit_attribute")
    if base is None or not all(hasattr(base, name) for name in needed):
        return None  # an onnxscript this was not written against (tested: 0.7)

    class RegionFolder(_constant_folding.FoldConstantsPass):
        """The folder, visiting only marked nodes and those it made itself (a CastLike it turned
        into an Identity must fold on), and reading Constant nodes anywhere."""

        outside: frozenset[int] = frozenset()  # ids of the user's nodes, set before each run

        def visit_node(self, node: ir.Node, root: ir.Graph | ir.Function) -> None:
            if (
                node.meta.get(REGION_KEY)
                or id(node) not in self.outside
                or (node.op_type == "Constant" and node.domain == "")
            ):
                super().visit_node(node, root)
                return
            for attr in node.attributes.values():
                self.visit_attribute(attr)

        def call(self, model: ir.Model) -> ir.passes.PassResult:  # type: ignore[override]
            # FoldConstantsPass.call without the NameFixPass it ends with (that would name
            # every unnamed node of the user's model): fold_region names what the folder made.
            self._reset()
            self._opset_imports = model.opset_imports
            self.visit_graph(model.graph)
            for function in model.functions.values():
                self.visit_function(function)
            return ir.passes.PassResult(model, modified=self._modified)

    return _constant_folding, RegionFolder


def fold_region(model: ir.Model, names: NameGenerator) -> bool:
    """Fold the marked nodes of ``model`` in place; True when anything changed."""
    before = {id(node): node for node in model_nodes(model)}
    region_names = {id(n): n.name for n in before.values() if n.meta.get(REGION_KEY)}
    initializers_before = {id(v) for v in model.graph.initializers.values()}
    # What the folder records on values it only reads, to put back afterwards.
    saved = [
        (value, value.type, value.shape, value.const_value)
        for node in before.values()
        if not node.meta.get(REGION_KEY)
        for value in node.outputs
    ]
    found = _folding()
    if found is None:
        logger.warning(
            "onnxscript's constant folder is missing or of an unknown version: the unrolled "
            "copies keep their rank tests (still sequence-free and correct, less folded)"
        )
        return False
    constant_folding, region_folder = found
    folder = region_folder(
        shape_inference=True,
        input_size_limit=constant_folding.DEFAULT_CONSTANT_FOLD_INPUT_SIZE_LIMIT,
        output_size_limit=constant_folding.DEFAULT_CONSTANT_FOLD_OUTPUT_SIZE_LIMIT,
    )
    folder.outside = frozenset(i for i, node in before.items() if not node.meta.get(REGION_KEY))
    changed = False
    for _ in range(_ROUNDS):
        if not folder(model).modified:
            break
        changed = True
    for value, type_, shape, const_value in saved:
        value.type, value.shape, value.const_value = type_, shape, const_value
    if not changed:
        return False
    _drop_stale_uses(model)
    # The folder's own nodes and initializers: names unique in the model, no folder metadata.
    for node in model_nodes(model):
        if id(node) in before and not node.meta.get(REGION_KEY):
            continue
        node.meta[REGION_KEY] = True
        if region_names.get(id(node)):
            node.name = region_names[id(node)]  # the folder prefixes inlined branch nodes
        elif id(node) not in before or not node.name:
            node.name = names.fresh(node.name or node.op_type)
        elif id(node) in region_names and node.name != region_names[id(node)]:
            # An unnamed node of an inlined branch, named by the folder's prefix alone: two of
            # them would share the name, which onnxruntime refuses.
            node.name = names.fresh(node.name)
        for value in node.outputs:
            _clean(value, names, fresh=id(node) not in before, key=constant_folding.FOLDED_FROM_KEY)
    for value in list(model.graph.initializers.values()):
        if id(value) not in initializers_before:
            _clean(value, names, fresh=False, key=constant_folding.FOLDED_FROM_KEY)
    return True


def fold_model(model: ir.Model, names: NameGenerator) -> int:
    """Fold the whole model (every scope) in place; how many nodes were folded away.

    For when the user fixed the input shapes (``--overwrite-input-shape``): ``Shape`` of a static
    shape and the arithmetic on it become constants, an ``If`` on them its branch. The user's
    own constant subexpressions fold too (within onnxscript's size limits), as onnxsim does.
    """
    nodes = list(model_nodes(model))
    marked = {id(node) for node in nodes if node.meta.get(REGION_KEY)}
    mark_region(list(model.graph))
    for function in model.functions.values():
        mark_region(list(function))
    for node in nodes:  # onnxscript 0.7's SplitToSequence folding fails on unknown splits
        if node.op_type in SEQUENCE_OPS and id(node) not in marked:
            node.meta.pop(REGION_KEY, None)
    backup = model.clone()
    try:
        if not fold_region(model, names):
            return 0
    except Exception as e:  # the folder's own failure: the model stays as it was, unfolded
        logger.warning("onnxscript's constant folder failed (%s): nothing folded", e)
        for slot in ir.Model.__slots__:
            setattr(model, slot, getattr(backup, slot))
        return 0
    finally:
        for node in model_nodes(model):
            if id(node) not in marked:
                node.meta.pop(REGION_KEY, None)
    _body_constants_as_nodes(model.graph)
    kept = {id(node) for node in model_nodes(model)}
    return sum(id(node) not in kept for node in nodes)


def _body_constants_as_nodes(graph: ir.Graph) -> None:
    """The folder's constants in subgraphs are subgraph initializers; the passes that prove a
    loop's count read ``Constant`` nodes there (and several runtimes ignore body initializers),
    so each becomes one, first in its body."""
    for node in graph:
        for body in subgraphs_of(node):
            if isinstance(body, ir.Graph):
                for name, value in list(body.initializers.items()):
                    tensor = value.const_value
                    if tensor is None or value in body.inputs:
                        continue
                    body.initializers.pop(name)
                    constant = ir.node(
                        "Constant", [], {"value": ir.AttrTensor("value", tensor)}, outputs=[value]
                    )
                    constant.name = f"{name}_constant"
                    body.insert_before(body[0], constant) if len(body) else body.append(constant)
                _body_constants_as_nodes(body)


def detach(graph: ir.Graph | ir.Function) -> None:
    """Make a graph that is going away stop reading values (a removed node's subgraphs still
    count as users of the outer values they read, which keeps those alive)."""
    for node in graph:
        for subgraph in subgraphs_of(node):
            detach(subgraph)
        for index in range(len(node.inputs)):
            node.replace_input_with(index, None)


def _drop_stale_uses(model: ir.Model) -> None:
    """Detach nodes the folder dropped (the branch of an ``If`` not taken) from what they read."""
    nodes = list(model_nodes(model))
    live = {id(node) for node in nodes}
    values = [value for node in nodes for value in node.outputs]
    for graph in all_graphs(model):
        values.extend(list(graph.inputs))
        if isinstance(graph, ir.Graph):
            values.extend(list(graph.initializers.values()))
    for value in values:
        for use in list(value.uses()):
            if id(use.node) not in live:
                use.node.replace_input_with(use.idx, None)


def _clean(value: ir.Value, names: NameGenerator, *, fresh: bool, key: str) -> None:
    value.metadata_props.pop(key, None)
    value.meta.pop(key, None)
    if value.is_graph_output() and value.name:
        return  # the folder gave a graph's output value its name: the interface keeps it
    if (fresh or not value.name) and not value.is_initializer():
        value.name = names.fresh(value.name or "folded")
