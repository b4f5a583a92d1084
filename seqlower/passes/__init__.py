"""seqlower's lowering passes, each an ``onnx_ir.passes.InPlacePass`` usable in any PassManager.

:data:`PASSES` is the one table of configured passes: each name the CLI and :func:`seqlower.lower`
accept is a pass class and the constructor arguments that make it (``loop-to-scan-reads`` is
``LoopToScan(outer_reads_as_states=False)``), so adding a pass, or a variant of one, touches
that table alone. ``SEQUENCE_OPS`` are the ops a sequence-free model may not contain. Which
passes run, in which order, is the pipeline table's (:data:`seqlower.targets.PIPELINES`:
``default``, ``sequence-free`` and every deploy target); what a pass needs of the row it runs in
(``max_opset``, the row's name for its messages) the pipeline hands it when it makes the pass.

The pass modules (and onnx_ir, with sympy: half a second) are imported on first use of a class,
not with this package: ``seqlower --help`` lists pass names and must not pay for them.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx_ir as ir


@dataclasses.dataclass(frozen=True)
class PassEntry:
    """One configured pass: its class (imported on first use) and the arguments that make it.

    Calling the entry makes a new pass; ``context`` names what it takes of the pipeline row it
    runs in (``target``: the row's name, ``max_opset``, ``min_opset``), given as keywords by the
    pipeline.
    """

    #: The module under ``seqlower.passes`` and the class in it.
    module: str
    class_name: str
    #: Constructor arguments, as (name, value) pairs.
    arguments: tuple[tuple[str, Any], ...] = ()
    #: The row's facts the pass takes, by keyword: ``target``, ``max_opset``, ``min_opset``.
    context: tuple[str, ...] = ()
    #: One line on what this configuration does, when not its class's docstring.
    doc: str | None = None

    @property
    def cls(self) -> type[ir.passes.InPlacePass]:
        value: type[ir.passes.InPlacePass] = __getattr__(self.class_name)
        return value

    def __call__(self, **context: Any) -> ir.passes.InPlacePass:
        given = {k: v for k, v in context.items() if k in self.context and v is not None}
        return self.cls(**dict(self.arguments), **given)

    @property
    def description(self) -> str | None:
        """What this configuration does: its own line, else its class's docstring."""
        return self.doc or self.cls.__doc__


def _entry(
    module: str,
    class_name: str,
    *,
    context: tuple[str, ...] = (),
    doc: str | None = None,
    **kw: Any,
) -> PassEntry:
    return PassEntry(module, class_name, tuple(kw.items()), context, doc)


#: Every pass by name: the class and the arguments that configure it.
PASSES: dict[str, PassEntry | Callable[..., ir.passes.InPlacePass]] = {
    "lower-sequence-map": _entry("sequences.lower_sequence_map", "LowerSequenceMap"),
    "lower-ragged-maps": _entry(
        "sequences.lower_sequence_map",
        "LowerSequenceMap",
        ragged_only=True,
        doc="Only the maps over the pieces of a split by run-time sizes, as Loops.",
    ),
    "lower-reverse-sequence": _entry(
        "reverse_sequence.lower_reverse_sequence", "LowerReverseSequence"
    ),
    "lower-reverse-sequence-rows": _entry(
        "reverse_sequence.lower_reverse_sequence",
        "LowerReverseSequence",
        form="gather",
        doc="ReverseSequence lowered, run-time lengths as a row Gather (faster on onnxruntime).",
    ),
    "lower-reverse-sequence-gaps": _entry(
        "reverse_sequence.lower_reverse_sequence",
        "LowerReverseSequence",
        form="gather",
        gaps_only=True,
        doc="Only the ReverseSequence nodes onnxruntime's kernel cannot run, as row Gathers.",
    ),
    "reverse-sequence-casts": _entry(
        "reverse_sequence.reverse_sequence_casts", "ReverseSequenceCasts"
    ),
    "if-as-where": _entry("branches.if_as_where", "IfAsWhere"),
    "time-major-recurrences": _entry("repairs.time_major_recurrences", "TimeMajorRecurrences"),
    "pad-empty-reductions": _entry("repairs.pad_empty_reductions", "PadEmptyReductions"),
    "empty-means-as-zero": _entry("repairs.empty_means_as_zero", "EmptyMeansAsZero"),
    "empty-extremes-as-infinite": _entry(
        "repairs.empty_means_as_zero",
        "EmptyMeansAsZero",
        extremes=True,
        doc="Every float ReduceMax/ReduceMin over an axis that may be empty, -inf/+inf there.",
    ),
    "scalar-outputs": _entry("repairs.scalar_outputs", "ScalarOutputs"),
    "scan-outputs-as-states": _entry("loops.scan_outputs_as_states", "ScanOutputsAsStates"),
    "scan-outputs-as-run-time-states": _entry(
        "loops.scan_outputs_as_run_time_states", "ScanOutputsAsRunTimeStates"
    ),
    "start-conditions-in-counts": _entry(
        "loops.start_conditions_in_counts", "StartConditionsInCounts"
    ),
    "recurrence-lengths-per-entry": _entry(
        "repairs.recurrence_lengths_per_entry", "RecurrenceLengthsPerEntry"
    ),
    "outputs-without-identity": _entry(
        "repairs.outputs_without_identity", "OutputsWithoutIdentity"
    ),
    "fold-optionals": _entry("sequences.fold_optionals", "FoldOptionals"),
    "fold-sequence-ops": _entry("sequences.fold_sequence_ops", "FoldSequenceOps"),
    "unroll-sequence-map": _entry("sequences.unroll_sequence_map", "UnrollSequenceMap"),
    "scan-sequence-map": _entry("sequences.scan_sequence_map", "ScanSequenceMap"),
    "ragged-maps-as-scans": _entry("sequences.ragged_maps_as_scans", "RaggedMapsAsScans"),
    "ragged-row-maps": _entry(
        "sequences.ragged_maps_as_scans",
        "RaggedMapsAsScans",
        scans=False,
        doc="Only the maps over ragged pieces whose body is row-wise: run once, no Scan.",
    ),
    "stack-row-maps": _entry(
        "sequences.scan_sequence_map",
        "ScanSequenceMap",
        stacked_only=True,
        doc="Only the maps run once on the split tensor, whatever their count.",
    ),
    "stack-loop-sequences": _entry("sequences.stack_loop_sequences", "StackLoopSequences"),
    "stack-sequences": _entry("sequences.stack_sequences", "StackSequences"),
    "stack-sequences-gather-checked": _entry(
        "sequences.stack_sequences",
        "StackSequences",
        reshape_check=False,
        lengths_as_data=True,
        doc="Sequences as stacked tensors, bad positions failing in Gather alone (tract).",
    ),
    "require-sequence-free": _entry("checks.require_sequence_free", "RequireSequenceFree"),
    "inline-untyped-functions": _entry(
        "functions.inline_untyped_functions", "InlineUntypedSequenceMapFunctions"
    ),
    "inline-functions": _entry("functions.inline_functions", "InlineFunctions"),
    "loop-to-scan": _entry("loops.loop_to_scan", "LoopToScan"),
    "freeze-bounded-loops": _entry("loops.freeze_bounded_loops", "FreezeBoundedLoops"),
    "zero-trip-loop-rows": _entry("loops.zero_trip_loop_rows", "ZeroTripLoopRows"),
    "peel-first-iteration": _entry("loops.peel_first_iteration", "PeelFirstIteration"),
    "iteration-row-slices": _entry("loops.iteration_row_slices", "IterationRowSlices"),
    "lower-scan-8": _entry("loops.lower_scan8", "LowerScan8", context=("target",)),
    "lower-scan-8-lengths": _entry(
        "loops.lower_scan8",
        "LowerScan8",
        context=("target",),
        only_with_lengths=True,
        reshape_check=True,
        doc="Opset-8 Scans lowered only in a model where one has sequence_lens.",
    ),
    "loop-to-scan-rows": _entry(
        "loops.loop_to_scan",
        "LoopToScan",
        rows_as_scan_inputs=True,
        doc="Loops as Scans, TensorArray reads as scan inputs (onnxruntime).",
    ),
    "loop-to-scan-reads": _entry(
        "loops.loop_to_scan",
        "LoopToScan",
        outer_reads_as_states=False,
        doc="Loops as Scans, outer reads left as reads where a runtime takes them.",
    ),
    "loop-to-scan-constant": _entry(
        "loops.loop_to_scan",
        "LoopToScan",
        outer_reads_as_states=False,
        constant_counts=True,
        doc="Only Loops of a constant count up to 256 as Scans (to be unrolled).",
    ),
    "loop-to-scan-fixed-states": _entry(
        "loops.loop_to_scan",
        "LoopToScan",
        outer_reads_as_states=False,
        grown_states=False,
        guards_zero_trips=True,
        doc="Loops as Scans but those growing a state; zero-trip Loops guarded (tract).",
    ),
    "explicit-loop-counts": _entry("loops.explicit_loop_counts", "ExplicitLoopCounts"),
    "scans-as-loops": _entry("loops.scans_as_loops", "ScansAsLoops"),
    "drop-unread-loop-states": _entry("loops.drop_unread_loop_states", "DropUnreadLoopStates"),
    "grown-states-as-scan-outputs": _entry(
        "loops.grown_states_as_scan_outputs", "GrownStatesAsScanOutputs"
    ),
    "loop-states-typed-as-bodies": _entry(
        "loops.loop_states_typed_as_bodies", "LoopStatesTypedAsBodies", context=("min_opset",)
    ),
    "explicit-loop-counts-reading-outside": _entry(
        "loops.explicit_loop_counts",
        "ExplicitLoopCounts",
        carry_reads=False,
        doc="Loops given M and cond; what a body reads from outside stays a read (iree).",
    ),
    "require-no-loop": _entry("checks.require_no_loop", "RequireNoLoop"),
    "require-onnx2tf-loops": _entry("checks.require_onnx2tf_loops", "RequireOnnx2TfLoops"),
    "require-iree-loops": _entry("checks.require_iree_loops", "RequireIreeLoops"),
    "explicit-constant-of-shape-value": _entry(
        "repairs.explicit_constant_of_shape_value", "ExplicitConstantOfShapeValue"
    ),
    "split-pieces-typed": _entry("repairs.split_pieces_typed", "SplitPiecesTyped"),
    "strip-symbolic-dims": _entry("repairs.strip_symbolic_dims", "StripSymbolicDims"),
    "fold-static-ifs": _entry("branches.fold_static_ifs", "FoldStaticIfs"),
    "fold-static-shapes": _entry("inputs.fold_static_shapes", "FoldStaticShapes"),
    "variable-then-branches": _entry("branches.variable_then_branches", "VariableThenBranches"),
    "expand-function-ops": _entry("functions.expand_function_ops", "ExpandFunctionOps"),
    "expand-unconverted-function-ops": _entry(
        "functions.expand_function_ops",
        "ExpandFunctionOps",
        context=("max_opset",),
        unconverted_by="onnx2torch",
        doc="Function ops onnx2torch cannot convert, at its opset, expanded into their bodies.",
    ),
    "slice-split-pieces": _entry("sequences.slice_split_pieces", "SliceSplitPieces"),
    "slice-reductions-as-masks": _entry(
        "repairs.slice_reductions_as_masks", "SliceReductionsAsMasks"
    ),
    "slice-means-as-masks": _entry(
        "repairs.slice_reductions_as_masks",
        "SliceReductionsAsMasks",
        reductions=("ReduceMean",),
        doc="Only the means of a Slice by run-time bounds, as masked means.",
    ),
    "split-as-slices": _entry("repairs.split_as_slices", "SplitAsSlices"),
    "split-by-shapes-as-slices": _entry(
        "repairs.split_as_slices",
        "SplitAsSlices",
        run_time_sizes_only=True,
        doc="Only Splits whose sizes are run-time values, as Slices (tract).",
    ),
    "shape-values-as-tensors": _entry("repairs.shape_values_as_tensors", "ShapeValuesAsTensors"),
    "strict-loop-bodies": _entry("loops.strict_loop_bodies", "StrictLoopBodies"),
    "strict-scan-bodies": _entry("loops.strict_scan_bodies", "StrictScanBodies"),
    "typed-scan-bodies": _entry(
        "loops.strict_scan_bodies",
        "StrictScanBodies",
        carry_reads=False,
        doc="Every Scan body input typed; outer reads left (tract runs them).",
    ),
    "unroll-bounded-scans": _entry(
        "loops.unroll_constant_scans",
        "UnrollConstantScans",
        bounded=True,
        doc="Scans over Range(0, N), N proven in [1, K], as K copies of the body.",
    ),
    "unroll-constant-scans": _entry("loops.unroll_constant_scans", "UnrollConstantScans"),
    "unroll-nested-constant-scans": _entry(
        "loops.unroll_constant_scans",
        "UnrollConstantScans",
        nested_only=True,
        doc="Only Scans of a constant count inside another Scan's body (tract runs them wrong).",
    ),
    "unroll-recurrent-ops": _entry("loops.unroll_recurrent_ops", "UnrollRecurrentOps"),
    "unroll-peephole-lstms": _entry(
        "loops.unroll_recurrent_ops",
        "UnrollRecurrentOps",
        peephole_lstms_only=True,
        doc="Only LSTMs with peepholes, unrolled (OpenVINO computes them wrong).",
    ),
    "validate-nodes": _entry("checks.validate_nodes", "ValidateNodes"),
    "explicit-attribute-defaults": _entry(
        "repairs.explicit_attribute_defaults", "ExplicitAttributeDefaults"
    ),
    "require-onnx2torch-ops": _entry(
        "checks.require_converter_ops",
        "RequireConverterOps",
        context=("max_opset",),
        converter="onnx2torch",
        doc="Raise TargetError naming every node onnx2torch cannot convert.",
    ),
    "require-tvm-ops": _entry(
        "checks.require_converter_ops",
        "RequireConverterOps",
        context=("max_opset",),
        converter="tvm",
        doc="Raise TargetError naming every node TVM's Relax frontend cannot convert.",
    ),
    "require-tinygrad-ops": _entry(
        "checks.require_converter_ops",
        "RequireConverterOps",
        context=("max_opset",),
        converter="tinygrad",
        doc="Raise TargetError naming every node tinygrad's OnnxRunner cannot run.",
    ),
    "require-tract-ops": _entry(
        "checks.require_runtime_ops",
        "RequireRuntimeOps",
        runtime="tract",
        doc="Raise TargetError naming every node tract cannot load.",
    ),
    "require-openvino-ops": _entry(
        "checks.require_runtime_ops",
        "RequireRuntimeOps",
        runtime="openvino",
        doc="Raise TargetError naming every node OpenVINO's ONNX front end cannot translate.",
    ),
    "require-iree-ops": _entry(
        "checks.require_runtime_ops",
        "RequireRuntimeOps",
        context=("min_opset",),
        runtime="iree",
        doc="Raise TargetError naming every node IREE's ONNX importer cannot convert.",
    ),
    "require-shape-slice-bounds": _entry("checks.require_slice_bounds", "RequireShapeSliceBounds"),
    "run-time-slices-as-gathers": _entry("repairs.run_time_slices", "RunTimeSlicesAsGathers"),
    "shape-arithmetic-in-int64": _entry("repairs.shape_arithmetic_int64", "ShapeArithmeticInInt64"),
    "scalar-if-conditions": _entry("branches.scalar_if_conditions", "ScalarIfConditions"),
    "alike-branches-as-where": _entry("branches.alike_branches_as_where", "AlikeBranchesAsWhere"),
    "condition-operands-in-branches": _entry(
        "branches.condition_operands", "ConditionOperandsInBranches"
    ),
    "branch-reductions-outside": _entry(
        "branches.branch_reductions_outside", "BranchReductionsOutside"
    ),
    "scan-iteration-states": _entry("loops.scan_iteration_states", "ScanIterationStates"),
    "constant-values-as-tensors": _entry(
        "repairs.constant_values_as_tensors", "ConstantValuesAsTensors"
    ),
    "cast-like-as-cast": _entry("repairs.cast_like_as_cast", "CastLikeAsCast"),
    "int64-casts-as-cast-like": _entry("repairs.int64_casts_as_cast_like", "Int64CastsAsCastLike"),
    "reshape-without-allowzero": _entry(
        "repairs.reshape_without_allowzero", "ReshapeWithoutAllowzero"
    ),
    "reshape-wildcards-resolved": _entry(
        "repairs.reshape_wildcards_resolved",
        "ReshapeWildcardsResolved",
        doc="A computed Reshape shape's -1 (and 0s) computed before it (IREE runs none with one).",
    ),
    "iree-or-equal-as-or": _entry(
        "repairs.or_equal_as_or",
        "OrEqualAsOr",
        context=("min_opset",),
        doc="GreaterOrEqual/LessOrEqual versions IREE lacks as Or(Greater/Less, Equal).",
    ),
}

# Where each exported class lives (imported by module __getattr__ on first use): the table's
# classes, and those the pipeline makes with arguments of the run (not registered).
_MODULES = {
    **{e.class_name: e.module for e in PASSES.values() if isinstance(e, PassEntry)},
    "NodeLoweringPass": "_base",
    "SEQUENCE_OPS": "_ir",
    "FixInputShapes": "inputs.fix_input_shapes",
    "FixOptionalInputs": "inputs.fix_optional_inputs",
    "UnrollInputs": "inputs.unroll_inputs",
    "RestampOpVersions": "repairs.restamp_op_versions",
}

__all__ = ["PASSES", "PassEntry", "create_pass", "pass_doc", *sorted(_MODULES)]


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        module = importlib.import_module(f"seqlower.passes.{_MODULES[name]}")
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'seqlower.passes' has no attribute {name!r}")


def create_pass(name: str, **context: Any) -> ir.passes.InPlacePass:
    """A new pass configured as ``name``, given what it takes of ``context`` (the pipeline
    row's ``target``, ``max_opset``, ``min_opset``); it remembers its name (``registry_name``)."""
    try:
        entry = PASSES[name]
    except KeyError:
        known = ", ".join(PASSES)
        from seqlower.errors import BadArgumentError

        raise BadArgumentError(f"unknown pass '{name}'; known passes: {known}") from None
    made = entry(**context) if isinstance(entry, PassEntry) else entry()
    made.registry_name = name  # type: ignore[attr-defined]
    return made


def pass_doc(name: str) -> str | None:
    """What the pass registered as ``name`` does, in its own words."""
    entry = PASSES[name]
    return entry.description if isinstance(entry, PassEntry) else entry.__doc__
