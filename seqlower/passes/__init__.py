"""seqlower's lowering passes, each an ``onnx_ir.passes.InPlacePass`` usable in any PassManager.

``PASSES`` maps the names the CLI and :func:`seqlower.lower` accept to the pass classes;
``SEQUENCE_OPS`` the ops a sequence-free model may not contain. Which passes run, in which
order, is the pipeline table's (:data:`seqlower.targets.PIPELINES`: ``default``,
``sequence-free`` and every deploy target).

The pass modules (and onnx_ir, with sympy: half a second) are imported on first use of a class,
not with this package: ``seqlower --help`` lists pass names and must not pay for them.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx_ir as ir

    from seqlower.passes._base import NodeLoweringPass
    from seqlower.passes._ir import SEQUENCE_OPS
    from seqlower.passes.branches.alike_branches_as_where import AlikeBranchesAsWhere
    from seqlower.passes.branches.branch_reductions_outside import BranchReductionsOutside
    from seqlower.passes.branches.condition_operands import ConditionOperandsInBranches
    from seqlower.passes.branches.fold_static_ifs import FoldStaticIfs
    from seqlower.passes.branches.if_as_where import IfAsWhere
    from seqlower.passes.branches.scalar_if_conditions import ScalarIfConditions
    from seqlower.passes.branches.variable_then_branches import VariableThenBranches
    from seqlower.passes.checks.require_converter_ops import (
        RequireOnnx2TorchOps,
        RequireTinygradOps,
        RequireTvmOps,
    )
    from seqlower.passes.checks.require_iree_loops import RequireIreeLoops
    from seqlower.passes.checks.require_no_loop import RequireNoLoop
    from seqlower.passes.checks.require_onnx2tf_loops import RequireOnnx2TfLoops
    from seqlower.passes.checks.require_runtime_ops import RequireOpenVinoOps, RequireTractOps
    from seqlower.passes.checks.require_sequence_free import RequireSequenceFree
    from seqlower.passes.checks.require_slice_bounds import RequireShapeSliceBounds
    from seqlower.passes.checks.validate_nodes import ValidateNodes
    from seqlower.passes.functions.expand_function_ops import (
        ExpandFunctionOps,
        ExpandUnconvertedFunctionOps,
    )
    from seqlower.passes.functions.inline_functions import InlineFunctions
    from seqlower.passes.functions.inline_untyped_functions import (
        InlineUntypedSequenceMapFunctions,
    )
    from seqlower.passes.inputs.fix_input_shapes import FixInputShapes
    from seqlower.passes.inputs.fold_static_shapes import FoldStaticShapes
    from seqlower.passes.loops.explicit_loop_counts import ExplicitLoopCounts
    from seqlower.passes.loops.freeze_bounded_loops import FreezeBoundedLoops
    from seqlower.passes.loops.iteration_row_slices import IterationRowSlices
    from seqlower.passes.loops.loop_to_scan import (
        LoopToScan,
        LoopToScanConstant,
        LoopToScanFixedStates,
        LoopToScanReads,
        LoopToScanRows,
    )
    from seqlower.passes.loops.lower_scan8 import LowerScan8, LowerScan8Lengths
    from seqlower.passes.loops.scan_iteration_states import ScanIterationStates
    from seqlower.passes.loops.scan_outputs_as_states import (
        ScanOutputsAsRunTimeStates,
        ScanOutputsAsStates,
    )
    from seqlower.passes.loops.strict_loop_bodies import StrictLoopBodies
    from seqlower.passes.loops.strict_scan_bodies import StrictScanBodies, TypedScanBodies
    from seqlower.passes.loops.unroll_constant_scans import (
        UnrollBoundedScans,
        UnrollConstantScans,
    )
    from seqlower.passes.loops.unroll_recurrent_ops import (
        UnrollPeepholeLstms,
        UnrollRecurrentOps,
    )
    from seqlower.passes.repairs.cast_like_as_cast import CastLikeAsCast
    from seqlower.passes.repairs.constant_values_as_tensors import ConstantValuesAsTensors
    from seqlower.passes.repairs.empty_means_as_zero import EmptyMeansAsZero
    from seqlower.passes.repairs.explicit_attribute_defaults import ExplicitAttributeDefaults
    from seqlower.passes.repairs.explicit_constant_of_shape_value import (
        ExplicitConstantOfShapeValue,
    )
    from seqlower.passes.repairs.outputs_without_identity import OutputsWithoutIdentity
    from seqlower.passes.repairs.pad_empty_reductions import PadEmptyReductions
    from seqlower.passes.repairs.recurrence_lengths_per_entry import RecurrenceLengthsPerEntry
    from seqlower.passes.repairs.reshape_without_allowzero import ReshapeWithoutAllowzero
    from seqlower.passes.repairs.restamp_op_versions import RestampOpVersions
    from seqlower.passes.repairs.run_time_slices import RunTimeSlicesAsGathers
    from seqlower.passes.repairs.scalar_outputs import ScalarOutputs
    from seqlower.passes.repairs.shape_values_as_tensors import ShapeValuesAsTensors
    from seqlower.passes.repairs.slice_reductions_as_masks import (
        SliceMeansAsMasks,
        SliceReductionsAsMasks,
    )
    from seqlower.passes.repairs.split_as_slices import SplitAsSlices
    from seqlower.passes.repairs.strip_symbolic_dims import StripSymbolicDims
    from seqlower.passes.repairs.time_major_recurrences import TimeMajorRecurrences
    from seqlower.passes.reverse_sequence.lower_reverse_sequence import (
        LowerReverseSequence,
        LowerReverseSequenceGaps,
        LowerReverseSequenceRows,
    )
    from seqlower.passes.reverse_sequence.reverse_sequence_casts import ReverseSequenceCasts
    from seqlower.passes.sequences.fold_optionals import FoldOptionals
    from seqlower.passes.sequences.fold_sequence_ops import FoldSequenceOps
    from seqlower.passes.sequences.lower_sequence_map import (
        LowerRaggedSequenceMap,
        LowerSequenceMap,
    )
    from seqlower.passes.sequences.ragged_maps_as_scans import RaggedMapsAsScans, RaggedRowMaps
    from seqlower.passes.sequences.scan_sequence_map import ScanSequenceMap, StackRowMaps
    from seqlower.passes.sequences.slice_split_pieces import SliceSplitPieces
    from seqlower.passes.sequences.stack_loop_sequences import StackLoopSequences
    from seqlower.passes.sequences.stack_sequences import (
        StackSequences,
        StackSequencesGatherChecked,
    )
    from seqlower.passes.sequences.unroll_sequence_map import UnrollSequenceMap

__all__ = [
    "PASSES",
    "SEQUENCE_OPS",
    "AlikeBranchesAsWhere",
    "BranchReductionsOutside",
    "CastLikeAsCast",
    "ConditionOperandsInBranches",
    "ConstantValuesAsTensors",
    "EmptyMeansAsZero",
    "ExpandFunctionOps",
    "ExpandUnconvertedFunctionOps",
    "ExplicitAttributeDefaults",
    "ExplicitConstantOfShapeValue",
    "ExplicitLoopCounts",
    "FixInputShapes",
    "FoldOptionals",
    "FoldSequenceOps",
    "FoldStaticIfs",
    "FoldStaticShapes",
    "FreezeBoundedLoops",
    "IfAsWhere",
    "InlineFunctions",
    "InlineUntypedSequenceMapFunctions",
    "IterationRowSlices",
    "LoopToScan",
    "LoopToScanConstant",
    "LoopToScanFixedStates",
    "LoopToScanReads",
    "LoopToScanRows",
    "LowerRaggedSequenceMap",
    "LowerReverseSequence",
    "LowerReverseSequenceGaps",
    "LowerReverseSequenceRows",
    "LowerScan8",
    "LowerScan8Lengths",
    "LowerSequenceMap",
    "NodeLoweringPass",
    "OutputsWithoutIdentity",
    "PadEmptyReductions",
    "RaggedMapsAsScans",
    "RaggedRowMaps",
    "RecurrenceLengthsPerEntry",
    "RequireIreeLoops",
    "RequireNoLoop",
    "RequireOnnx2TfLoops",
    "RequireOnnx2TorchOps",
    "RequireOpenVinoOps",
    "RequireSequenceFree",
    "RequireShapeSliceBounds",
    "RequireTinygradOps",
    "RequireTractOps",
    "RequireTvmOps",
    "ReshapeWithoutAllowzero",
    "RestampOpVersions",
    "ReverseSequenceCasts",
    "RunTimeSlicesAsGathers",
    "ScalarIfConditions",
    "ScalarOutputs",
    "ScanIterationStates",
    "ScanOutputsAsRunTimeStates",
    "ScanOutputsAsStates",
    "ScanSequenceMap",
    "ShapeValuesAsTensors",
    "SliceMeansAsMasks",
    "SliceReductionsAsMasks",
    "SliceSplitPieces",
    "SplitAsSlices",
    "StackLoopSequences",
    "StackRowMaps",
    "StackSequences",
    "StackSequencesGatherChecked",
    "StrictLoopBodies",
    "StrictScanBodies",
    "StripSymbolicDims",
    "TimeMajorRecurrences",
    "TypedScanBodies",
    "UnrollBoundedScans",
    "UnrollConstantScans",
    "UnrollPeepholeLstms",
    "UnrollRecurrentOps",
    "UnrollSequenceMap",
    "ValidateNodes",
    "VariableThenBranches",
    "create_pass",
]

# Where each exported class lives (imported by module __getattr__ on first use).
_MODULES = {
    "NodeLoweringPass": "_base",
    "FixInputShapes": "inputs.fix_input_shapes",
    "FoldStaticShapes": "inputs.fold_static_shapes",
    "SEQUENCE_OPS": "_ir",
    "FoldOptionals": "sequences.fold_optionals",
    "FoldSequenceOps": "sequences.fold_sequence_ops",
    "LowerReverseSequence": "reverse_sequence.lower_reverse_sequence",
    "LowerReverseSequenceRows": "reverse_sequence.lower_reverse_sequence",
    "LowerSequenceMap": "sequences.lower_sequence_map",
    "LowerRaggedSequenceMap": "sequences.lower_sequence_map",
    "ValidateNodes": "checks.validate_nodes",
    "RequireSequenceFree": "checks.require_sequence_free",
    "ScanSequenceMap": "sequences.scan_sequence_map",
    "StackLoopSequences": "sequences.stack_loop_sequences",
    "StackSequences": "sequences.stack_sequences",
    "StackSequencesGatherChecked": "sequences.stack_sequences",
    "StackRowMaps": "sequences.scan_sequence_map",
    "UnrollSequenceMap": "sequences.unroll_sequence_map",
    "ExpandFunctionOps": "functions.expand_function_ops",
    "ExpandUnconvertedFunctionOps": "functions.expand_function_ops",
    "FreezeBoundedLoops": "loops.freeze_bounded_loops",
    "InlineFunctions": "functions.inline_functions",
    "InlineUntypedSequenceMapFunctions": "functions.inline_untyped_functions",
    "IterationRowSlices": "loops.iteration_row_slices",
    "LoopToScan": "loops.loop_to_scan",
    "LoopToScanRows": "loops.loop_to_scan",
    "LoopToScanReads": "loops.loop_to_scan",
    "LoopToScanConstant": "loops.loop_to_scan",
    "LoopToScanFixedStates": "loops.loop_to_scan",
    "LowerScan8": "loops.lower_scan8",
    "LowerScan8Lengths": "loops.lower_scan8",
    "ExplicitLoopCounts": "loops.explicit_loop_counts",
    "RequireNoLoop": "checks.require_no_loop",
    "RequireIreeLoops": "checks.require_iree_loops",
    "RequireOnnx2TfLoops": "checks.require_onnx2tf_loops",
    "RequireTractOps": "checks.require_runtime_ops",
    "RequireOpenVinoOps": "checks.require_runtime_ops",
    "RequireShapeSliceBounds": "checks.require_slice_bounds",
    "RunTimeSlicesAsGathers": "repairs.run_time_slices",
    "RequireOnnx2TorchOps": "checks.require_converter_ops",
    "RequireTvmOps": "checks.require_converter_ops",
    "RequireTinygradOps": "checks.require_converter_ops",
    "AlikeBranchesAsWhere": "branches.alike_branches_as_where",
    "BranchReductionsOutside": "branches.branch_reductions_outside",
    "CastLikeAsCast": "repairs.cast_like_as_cast",
    "ConditionOperandsInBranches": "branches.condition_operands",
    "ConstantValuesAsTensors": "repairs.constant_values_as_tensors",
    "ReshapeWithoutAllowzero": "repairs.reshape_without_allowzero",
    "ExplicitAttributeDefaults": "repairs.explicit_attribute_defaults",
    "RestampOpVersions": "repairs.restamp_op_versions",
    "LowerReverseSequenceGaps": "reverse_sequence.lower_reverse_sequence",
    "ShapeValuesAsTensors": "repairs.shape_values_as_tensors",
    "ReverseSequenceCasts": "reverse_sequence.reverse_sequence_casts",
    "IfAsWhere": "branches.if_as_where",
    "TimeMajorRecurrences": "repairs.time_major_recurrences",
    "RecurrenceLengthsPerEntry": "repairs.recurrence_lengths_per_entry",
    "PadEmptyReductions": "repairs.pad_empty_reductions",
    "EmptyMeansAsZero": "repairs.empty_means_as_zero",
    "RaggedMapsAsScans": "sequences.ragged_maps_as_scans",
    "RaggedRowMaps": "sequences.ragged_maps_as_scans",
    "ScalarIfConditions": "branches.scalar_if_conditions",
    "ScalarOutputs": "repairs.scalar_outputs",
    "ScanIterationStates": "loops.scan_iteration_states",
    "ScanOutputsAsStates": "loops.scan_outputs_as_states",
    "ScanOutputsAsRunTimeStates": "loops.scan_outputs_as_states",
    "OutputsWithoutIdentity": "repairs.outputs_without_identity",
    "SliceMeansAsMasks": "repairs.slice_reductions_as_masks",
    "SliceReductionsAsMasks": "repairs.slice_reductions_as_masks",
    "SliceSplitPieces": "sequences.slice_split_pieces",
    "SplitAsSlices": "repairs.split_as_slices",
    "StrictLoopBodies": "loops.strict_loop_bodies",
    "StrictScanBodies": "loops.strict_scan_bodies",
    "TypedScanBodies": "loops.strict_scan_bodies",
    "UnrollBoundedScans": "loops.unroll_constant_scans",
    "UnrollConstantScans": "loops.unroll_constant_scans",
    "UnrollPeepholeLstms": "loops.unroll_recurrent_ops",
    "UnrollRecurrentOps": "loops.unroll_recurrent_ops",
    "ExplicitConstantOfShapeValue": "repairs.explicit_constant_of_shape_value",
    "FoldStaticIfs": "branches.fold_static_ifs",
    "StripSymbolicDims": "repairs.strip_symbolic_dims",
    "VariableThenBranches": "branches.variable_then_branches",
}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        module = importlib.import_module(f"seqlower.passes.{_MODULES[name]}")
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'seqlower.passes' has no attribute {name!r}")


class _Registry(MutableMapping[str, "type[ir.passes.InPlacePass]"]):
    """A name -> pass class mapping whose entries may be class names, imported when read."""

    def __init__(self, entries: dict[str, Any]) -> None:
        self._entries = entries

    def __getitem__(self, name: str) -> type[ir.passes.InPlacePass]:
        entry = self._entries[name]
        if isinstance(entry, str):
            entry = self._entries[name] = __getattr__(entry)
        return entry

    def __setitem__(self, name: str, cls: type[ir.passes.InPlacePass]) -> None:
        self._entries[name] = cls

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


#: Every pass by name.
PASSES: MutableMapping[str, type[ir.passes.InPlacePass]] = _Registry(
    {
        "lower-sequence-map": "LowerSequenceMap",
        "lower-ragged-maps": "LowerRaggedSequenceMap",
        "lower-reverse-sequence": "LowerReverseSequence",
        "lower-reverse-sequence-rows": "LowerReverseSequenceRows",
        "lower-reverse-sequence-gaps": "LowerReverseSequenceGaps",
        "reverse-sequence-casts": "ReverseSequenceCasts",
        "if-as-where": "IfAsWhere",
        "time-major-recurrences": "TimeMajorRecurrences",
        "recurrence-lengths-per-entry": "RecurrenceLengthsPerEntry",
        "pad-empty-reductions": "PadEmptyReductions",
        "empty-means-as-zero": "EmptyMeansAsZero",
        "scalar-outputs": "ScalarOutputs",
        "scan-outputs-as-states": "ScanOutputsAsStates",
        "scan-outputs-as-run-time-states": "ScanOutputsAsRunTimeStates",
        "outputs-without-identity": "OutputsWithoutIdentity",
        "fold-optionals": "FoldOptionals",
        "fold-sequence-ops": "FoldSequenceOps",
        "unroll-sequence-map": "UnrollSequenceMap",
        "scan-sequence-map": "ScanSequenceMap",
        "ragged-maps-as-scans": "RaggedMapsAsScans",
        "ragged-row-maps": "RaggedRowMaps",
        "stack-row-maps": "StackRowMaps",
        "stack-loop-sequences": "StackLoopSequences",
        "stack-sequences": "StackSequences",
        "stack-sequences-gather-checked": "StackSequencesGatherChecked",
        "require-sequence-free": "RequireSequenceFree",
        "inline-untyped-functions": "InlineUntypedSequenceMapFunctions",
        "inline-functions": "InlineFunctions",
        "loop-to-scan": "LoopToScan",
        "freeze-bounded-loops": "FreezeBoundedLoops",
        "iteration-row-slices": "IterationRowSlices",
        "lower-scan-8": "LowerScan8",
        "lower-scan-8-lengths": "LowerScan8Lengths",
        "loop-to-scan-rows": "LoopToScanRows",
        "loop-to-scan-reads": "LoopToScanReads",
        "loop-to-scan-constant": "LoopToScanConstant",
        "loop-to-scan-fixed-states": "LoopToScanFixedStates",
        "explicit-loop-counts": "ExplicitLoopCounts",
        "require-no-loop": "RequireNoLoop",
        "require-iree-loops": "RequireIreeLoops",
        "require-onnx2tf-loops": "RequireOnnx2TfLoops",
        "explicit-constant-of-shape-value": "ExplicitConstantOfShapeValue",
        "strip-symbolic-dims": "StripSymbolicDims",
        "fold-static-ifs": "FoldStaticIfs",
        "fold-static-shapes": "FoldStaticShapes",
        "variable-then-branches": "VariableThenBranches",
        "expand-function-ops": "ExpandFunctionOps",
        "expand-unconverted-function-ops": "ExpandUnconvertedFunctionOps",
        "slice-split-pieces": "SliceSplitPieces",
        "slice-reductions-as-masks": "SliceReductionsAsMasks",
        "slice-means-as-masks": "SliceMeansAsMasks",
        "split-as-slices": "SplitAsSlices",
        "shape-values-as-tensors": "ShapeValuesAsTensors",
        "strict-loop-bodies": "StrictLoopBodies",
        "strict-scan-bodies": "StrictScanBodies",
        "typed-scan-bodies": "TypedScanBodies",
        "unroll-bounded-scans": "UnrollBoundedScans",
        "unroll-constant-scans": "UnrollConstantScans",
        "unroll-recurrent-ops": "UnrollRecurrentOps",
        "unroll-peephole-lstms": "UnrollPeepholeLstms",
        "validate-nodes": "ValidateNodes",
        "explicit-attribute-defaults": "ExplicitAttributeDefaults",
        "require-onnx2torch-ops": "RequireOnnx2TorchOps",
        "require-tvm-ops": "RequireTvmOps",
        "require-tinygrad-ops": "RequireTinygradOps",
        "require-tract-ops": "RequireTractOps",
        "require-openvino-ops": "RequireOpenVinoOps",
        "require-shape-slice-bounds": "RequireShapeSliceBounds",
        "run-time-slices-as-gathers": "RunTimeSlicesAsGathers",
        "scalar-if-conditions": "ScalarIfConditions",
        "alike-branches-as-where": "AlikeBranchesAsWhere",
        "condition-operands-in-branches": "ConditionOperandsInBranches",
        "branch-reductions-outside": "BranchReductionsOutside",
        "scan-iteration-states": "ScanIterationStates",
        "constant-values-as-tensors": "ConstantValuesAsTensors",
        "cast-like-as-cast": "CastLikeAsCast",
        "reshape-without-allowzero": "ReshapeWithoutAllowzero",
    }
)


def create_pass(name: str) -> ir.passes.InPlacePass:
    """A new instance of the pass registered as ``name``."""
    try:
        return PASSES[name]()
    except KeyError:
        known = ", ".join(PASSES)
        from seqlower.errors import BadArgumentError

        raise BadArgumentError(f"unknown pass '{name}'; known passes: {known}") from None
