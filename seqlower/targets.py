"""The pipelines, in one table: what lowering a model means by default, with
``--sequence-free``, and *for one runtime* (``--target``).

Each row of :data:`PIPELINES` says which passes run (in order) and which checks end the
pipeline (each raises naming every node that still blocks). ``default`` and ``sequence-free``
are rows like the others; the deploy targets (:data:`TARGETS`, the rows that are a
:class:`Target`) also say what becomes of ``Loop`` and ``ReverseSequence``, the opset a
converter needs at most, whether the exporter's symbolic dimension names are dropped, and the
versions they were measured with. :func:`seqlower.pipeline.build_pipeline` builds every row
the same way; ``seqlower --list-targets`` prints the targets.

The rule every target keeps: **no runtime runs fewer models with its target than with the
default pipeline** (a runtime with a native ``ReverseSequence`` kernel that handles cases the
lowered forms do not, onnx2tf's, keeps it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from seqlower.errors import BadArgumentError, BadOptionError

__all__ = [
    "PIPELINES",
    "TARGETS",
    "Deployment",
    "Pipeline",
    "Repeat",
    "Target",
    "deployment",
    "get_pipeline",
    "get_target",
]


@dataclasses.dataclass(frozen=True)
class Repeat:
    """Passes run again while they change the model, at most ``steps`` times (onnx_ir's
    ``PassManager(passes, steps=steps, early_stop=True)``): what one run rewrites may give the
    next run something to take (an ``If`` whose branch held an ``If``)."""

    passes: tuple[str, ...]
    steps: int = 2

    @property
    def names(self) -> tuple[str, ...]:
        """The passes in the order they may run, ``steps`` times over."""
        return self.passes * self.steps


#: Optionals of known presence folded, then the maps that run once on a split tensor, whatever
#: their count (before a count known when lowering is folded into a ``Split`` and unrolled).
_OPTIONALS_AND_ROW_MAPS = ("fold-optionals", "stack-row-maps")
#: Sequences of known length folded (SplitToSequence, SequenceInsert chains), the maps on them
#: unrolled, the plumbing the unrolled maps leave folded, then maps over run-time splits.
_SEQUENCE_FOLDS = (
    "fold-sequence-ops",
    "unroll-sequence-map",
    "fold-sequence-ops",
    "scan-sequence-map",
)
#: What is left of sequences of run-time length, as stacked tensors.
_STACKED = ("stack-loop-sequences", "stack-sequences")
#: The sequence-free passes, in order, without ``lower-reverse-sequence``.
_SEQUENCE_FREE = (*_OPTIONALS_AND_ROW_MAPS, *_SEQUENCE_FOLDS, *_STACKED)

#: How the targets that run no ``Loop`` (onnx2torch, tinygrad, tvm) unroll loops and recurrent
#: ops: a Loop of a fixed count as a Scan, unrolled when the count is a constant; at fixed input
#: shapes a stacked RNN's second count is constant only once the first layer is unrolled and
#: folded, hence the fold and a second unrolling.
_UNROLLED = (
    "peel-first-iteration",
    "freeze-bounded-loops",
    "loop-to-scan-reads",
    "unroll-constant-scans",
    "unroll-recurrent-ops",
    "lower-reverse-sequence",
    "fold-static-shapes",
    "unroll-constant-scans",
)

#: PyTorch's ``embedding_bag`` writes an ``If`` per bag, which tinygrad 0.14 ('list index out of
#: range') and TVM 0.27 (no ``Cast`` of a shape it computes at run time, no ``Slice`` by run-time
#: bounds) fail on: an ``If`` whose branches cannot fail becomes a ``Where`` (twice: an ``If``
#: whose branch held an ``If`` is taken once that one is), its reductions of such slices masked
#: reductions, its shapes folded.
_IFS_AS_MASKED_WHERES = (
    Repeat(("if-as-where",)),
    "slice-reductions-as-masks",
    "fold-static-shapes",
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Pipeline:
    """One way to lower a model: passes, then dead-node removal, then checks."""

    name: str
    #: The lowering passes, in order (names in ``seqlower.passes.PASSES``, or a group of them
    #: repeated while it changes the model).
    passes: tuple[str | Repeat, ...]
    #: Checks after dead-node removal, each raising on what still blocks the runtime.
    requires: tuple[str, ...] = ()
    #: ONNX function ops the runtime lacks, expanded into their ONNX function bodies after
    #: the passes (``ExpandFunctionOps``); measured one op at a time.
    expand_ops: tuple[str, ...] = ()
    #: (op, attribute, ONNX default) the runtime's converter misreads when the attribute is
    #: left out: written explicitly after the passes (``ExplicitAttributeDefaults``); each
    #: entry verified against the converter.
    attribute_defaults: tuple[tuple[str, str, int | float | str], ...] = ()
    #: A target row whose runtime this row is for, without being it: optionals are folded
    #: first (``fold-optionals``) and the row's ``op_versions`` re-stamped where they can be,
    #: refusing nothing, both named in a run's table only when they changed something (the
    #: default row: onnxruntime's).
    restamps_like: str = ""

    @property
    def sequence_free(self) -> bool:
        return "require-sequence-free" in self.requires

    @property
    def pass_names(self) -> tuple[str, ...]:
        """The lowering passes in the order they may run, a repeated group ``steps`` times."""
        return tuple(
            name
            for spec in self.passes
            for name in (spec.names if isinstance(spec, Repeat) else (spec,))
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Target(Pipeline):
    """One runtime or converter a model is lowered for (``--target NAME``)."""

    #: ``Loop``: "kept" (the runtime runs it), "scan" (fixed trip counts become ``Scan``) or
    #: "unrolled" (as "scan", then the Scans of a constant trip count unrolled) or "counted"
    #: (every Loop given an explicit trip count and condition, those of a constant count
    #: unrolled).
    loops: str
    #: ``ReverseSequence``: "native" (kept; onnxruntime's row: except the types it lacks), or
    #: lowered to one ``Slice`` where lengths are
    #: proven full, else a ``GatherND`` ("gathernd", portable; ``GatherElements`` for one
    #: element per (time, batch) entry) or a row ``Gather`` ("gather",
    #: faster in onnxruntime; tract and onnx2torch cannot run its Flatten/Reshape).
    reverse_sequence: str
    #: The newest default-domain opset the runtime's converters know (None: any); a newer model
    #: is to be re-stamped down to it (``--opset``).
    max_opset: int | None
    #: The oldest default-domain opset whose op forms the runtime converts (None: any); an older
    #: model is converted up to it after lowering (``--opset``).
    min_opset: int | None = None
    #: Whether the exporter's symbolic dimension names are dropped inside the model.
    strip_symbolic_dims: bool
    #: The versions the row was measured with.
    versions: str
    #: "CI" (tests run the lowered models on it) or "by hand" (measured outside CI, or only
    #: documented where it says so).
    measured: str
    #: What still blocks it after lowering, in a few words.
    still_blocks: str
    #: The check's runtimes (names in ``seqlower.verification.runtimes.TARGET_ORACLES``) that run a
    #: model lowered for this target, the first being what ``--target NAME`` runs; empty when
    #: seqlower cannot run the target itself (measured by hand).
    proofs: tuple[str, ...] = ()
    #: When the runtime needs static input shapes ("": never), in words: what stays unless
    #: ``--overwrite-input-shape`` fixes them (its blockers' error then names the flag). Every
    #: tf2onnx Loop counts an input's time axis: fixed, the count is a constant.
    static_shapes: str = ""
    #: (op, newest version the runtime runs) where that lags onnx's newest, measured one op
    #: at a time (``benchmarks/op_versions.py``): a model whose opset resolves such an op to a
    #: newer version is re-stamped to an older opset when ONNX changed only type lists in
    #: between (``RestampOpVersions``, after dead-node removal), else refused naming the node.
    op_versions: tuple[tuple[str, int], ...] = ()


PIPELINES: dict[str, Pipeline] = {
    row.name: row
    for row in (
        # ReverseSequence first: its dimension proofs follow ``SplitToSequence -> SequenceMap
        # -> ConcatFromSequence`` (onnxscript's map over a tensor's slices), which the
        # SequenceMap lowering would turn into a Loop they cannot see through.
        # Optionals folded and opset-28 optional ops re-stamped as onnxruntime's row does: the
        # default pipeline is for onnxruntime, which has no kernel for them (ONNX's
        # test_optional_get_element_optional_tensor and ..._has_element_... at opset 28).
        Pipeline(
            name="default",
            passes=("lower-reverse-sequence", "lower-sequence-map"),
            restamps_like="onnxruntime",
        ),
        Pipeline(
            name="sequence-free",
            passes=(*_SEQUENCE_FREE, "lower-reverse-sequence"),
            requires=("require-sequence-free",),
        ),
        Target(
            name="onnxruntime",
            # Its own ReverseSequence kernel is faster than any lowering (1.25-4.3x for small
            # slices); only the types it lacks are lowered, in the row form (faster there).
            # It refuses batch-major recurrences (layout=1) at load.
            passes=(
                "fold-optionals",
                "lower-reverse-sequence-gaps",
                "lower-sequence-map",
                "time-major-recurrences",
            ),
            requires=(),
            loops="kept",
            reverse_sequence="native",
            max_opset=None,
            strip_symbolic_dims=False,
            versions="onnxruntime 1.32.0",
            measured="CI",
            still_blocks="nothing known (the default pipeline)",
            proofs=("onnxruntime",),
            # onnxruntime 1.32 has no kernel for the opset-28 optional ops.
            op_versions=(("Optional", 15), ("OptionalGetElement", 18), ("OptionalHasElement", 18)),
        ),
        Target(
            name="openvino",
            passes=(
                "inline-functions",
                # it refuses sequence_lens (it runs the opset-8 Scan's other forms)
                "lower-scan-8-lengths",
                *_SEQUENCE_FREE,
                # maps over pieces of run-time sizes: a Loop over Slices growing tensors
                "lower-ragged-maps",
                "slice-split-pieces",
                "stack-loop-sequences",
                "stack-sequences",
                "fold-static-ifs",
                # it loads no Loop whose state grows by a Concat
                "grown-states-as-scan-outputs",
                # it runs no Loop whose state changes rank ("dynamic rank")
                "peel-first-iteration",
                # it returns a Loop of no iteration the rows of the inference before
                "zero-trip-loop-rows",
                "strict-loop-bodies",
                "strict-scan-bodies",
                # it gets LSTM peepholes and batch-major recurrences (layout=1) wrong
                "unroll-peephole-lstms",
                "time-major-recurrences",
                # it ignores sequence_lens: one batch entry at a time, on its own length
                "recurrence-lengths-per-entry",
                # it gives -/+FLT_MAX for the max/min of an empty set (ONNX: -/+inf)
                "empty-extremes-as-infinite",
            ),
            requires=("require-sequence-free", "require-openvino-ops"),
            loops="kept",
            reverse_sequence="native",
            max_opset=None,
            strip_symbolic_dims=False,
            versions="OpenVINO 2026.4.1 (CPU, INFERENCE_PRECISION_HINT=f32)",
            measured="CI",
            still_blocks="sequences whose length is known only at run time and whose elements "
            "are not proven one shape (those are stacked)",
            proofs=("openvino",),
        ),
        Target(
            name="tract",
            passes=(
                "inline-functions",
                # it runs no opset-8 Scan: one opset-9 Scan per batch entry, opset 9
                "lower-scan-8",
                *_OPTIONALS_AND_ROW_MAPS,
                *_SEQUENCE_FOLDS,
                # a map over pieces of run-time sizes: a Scan writing rows into a buffer
                "ragged-maps-as-scans",
                # tract loads no Reshape to a computed shape; its Gather aborts on a bad index.
                "stack-loop-sequences",
                "stack-sequences-gather-checked",
                # a Scan's states keep their shape: grown ones as scan outputs
                "grown-states-as-scan-outputs",
                # a state that changes shape on the first iteration (Paddle's placeholders), before
                # freezing: a loop that may run none keeps its initial states' shapes
                "peel-first-iteration",
                "freeze-bounded-loops",
                "iteration-row-slices",
                "loop-to-scan-fixed-states",
                # tract runs a Scan inside a Scan's body on stale states
                "unroll-nested-constant-scans",
                "lower-reverse-sequence",
                "fold-static-ifs",
                "variable-then-branches",
                "explicit-constant-of-shape-value",
                "strip-symbolic-dims",
                "typed-scan-bodies",
                # it types no Split into sizes computed from a shape (declared facts)
                "split-by-shapes-as-slices",
                "run-time-slices-as-gathers",
                "condition-operands-in-branches",
                "branch-reductions-outside",
                # after the reductions move out of branches (tract types no Size read there)
                "empty-means-as-zero",
                "empty-extremes-as-infinite",
                "scalar-if-conditions",
                "alike-branches-as-where",
                "scan-iteration-states",
                # tract types a shape's arithmetic in int64 only (declared facts)
                "shape-arithmetic-in-int64",
                # after it: its casts to int64 a Scan state is computed from too
                "int64-casts-as-cast-like",
            ),
            requires=(
                "require-sequence-free",
                "require-no-loop",
                "require-shape-slice-bounds",
                "require-tract-ops",
            ),
            loops="scan",
            reverse_sequence="gathernd",
            max_opset=None,
            strip_symbolic_dims=True,
            # Of the function ops tried (CenterCropPad, Gelu, Mish, HardSwish, Shrink,
            # ThresholdedRelu, MeanVarianceNormalization, Group/Layer/RMSNormalization, Swish,
            # Celu, ReduceL2/SumSquare/LogSumExp, Softmax, DynamicQuantizeLinear, Range) tract
            # lacks only CenterCropPad; it fails on several of the others' expanded bodies.
            expand_ops=("CenterCropPad",),
            versions="tract 0.23.9 (python tract, concrete and declared input facts)",
            measured="CI",
            still_blocks=(
                "maps over the pieces of a split by run-time sizes whose body holds an op tract "
                "computes wrongly on values whose length changes between Scan iterations (only "
                "vetted ops are taken: ragged-maps-as-scans) or whose output shapes are not "
                "proven; "
                "Loops whose trip count is known only inside (bounded ones that stop on data run "
                "to their bound, frozen; nothing bounds some but the data); opset-8 Scans of a "
                "batch size not known when lowering; sequences whose "
                "length is known only at run time and whose "
                "elements are not proven one shape; Scans with data-dependent trip counts "
                "computed differently and joined later (tract gives each its own symbol); Loops "
                "that may run zero times whose scan outputs' rows are of sizes no state or outer "
                "value gives (named: tract runs no Scan of zero iterations right, and its If "
                "wants both branches' facts alike); Slices whose axes or steps are "
                "computed from tensor values "
                "(tract 0.23.9's typed StridedSlice: 'Symbol points to an invalid (dead ?) "
                "SymbolScope'): named before the check (require-shape-slice-bounds; run-time "
                "starts/ends become a Gather of a Range, run-time-slices-as-gathers); values "
                "whose size such a slice makes known only at run time where tract needs it "
                "fixed (a Scan state: test_loop11; If conditions and branch reads of such "
                "values are repaired: PyTorch's embedding_bag runs)"
            ),
            proofs=("tract", "tract-symbolic"),
        ),
        Target(
            name="onnx2tf",
            passes=(
                *_OPTIONALS_AND_ROW_MAPS,
                # a row-wise map over pieces of run-time sizes: its body on the whole tensor
                "ragged-row-maps",
                *_SEQUENCE_FOLDS,
                *_STACKED,
                "explicit-loop-counts",
                # again: a second stacked layer's count is the unrolled first one's length
                Repeat(("loop-to-scan-constant", "unroll-constant-scans")),
                "scan-outputs-as-states",
                # at fixed input shapes, the unrolled copies' shapes folded for if-as-where
                "fold-static-shapes",
                # again: an If whose branch held an If rewritten by the first
                Repeat(("if-as-where",)),
                "slice-means-as-masks",  # a mean cannot be padded: masked
                "pad-empty-reductions",
                "reverse-sequence-casts",
                "constant-values-as-tensors",
                "outputs-without-identity",
                "scalar-outputs",
            ),
            requires=("require-onnx2tf-loops",),
            loops="counted",
            reverse_sequence="native",
            max_opset=None,
            strip_symbolic_dims=False,
            versions="onnx2tf 2.6.9 (its flatbuffer_direct .tflite in ai-edge-litert 2.1.2)",
            measured="by hand",
            still_blocks="Loops with scan outputs of an unbounded count or rows of run-time "
            "shape and Scans of a run-time count (ONNX_LOOP, ONNX_SCAN: named before the check, "
            "require-onnx2tf-loops; at dynamic shapes every tf2onnx loop over the time axis: "
            "--overwrite-input-shape makes its count a constant); at dynamic shapes WHILE states "
            "XNNPACK cannot reshape; sequence and optional ops, Ifs whose branches could fail: "
            "custom ops LiteRT cannot run (refused by the proof); its fused "
            "bidirectional LSTM differs from the framework on tf2onnx's unmasked Keras "
            "Bidirectional(LSTM); TFLite's SELECT rejects the lowered ReverseSequence's Where, "
            "so the native kernel is kept",
            proofs=("onnx2tf",),
            static_shapes="for Loops (unrolled when their count is a constant)",
        ),
        Target(
            name="onnx2torch",
            passes=(
                *_SEQUENCE_FREE,
                *_UNROLLED,
                # a run-time count of constant bounds (tf2onnx's dynamic_rnn with lengths)
                "unroll-bounded-scans",
                # onnx2torch has no If: one whose branches cannot fail is both, then a Where
                # again: an If whose branch held an If rewritten by the first
                Repeat(("if-as-where",)),
                # torch's max of an empty slice raises: the untaken branch's reductions padded
                "pad-empty-reductions",
                "fold-static-shapes",  # again: the shapes of those Wheres (embedding_bag's)
                "expand-unconverted-function-ops",
                "split-as-slices",
                "constant-values-as-tensors",
                "cast-like-as-cast",
                "reshape-without-allowzero",
            ),
            requires=("require-sequence-free", "require-onnx2torch-ops"),
            loops="unrolled",
            reverse_sequence="gathernd",
            # 17: it converts no op as changed in 18 (ReduceMean-18's axes input, Split-18, ...);
            # the version converter writes those as of 13.
            max_opset=17,
            strip_symbolic_dims=False,
            versions="onnx2torch 1.5.15 (torch 2.14.1; families, converter table and "
            "repairs: torch 2.13.0 CPU)",
            # onnx2torch 1.5.15 reads a CumSum without 'reverse' as reverse=1 (wrong numbers).
            # its GreaterOrEqual and LessOrEqual converters are the opset-12 ones (16 added
            # bfloat16 only): an opset-16/17 model reading them is re-stamped to 15
            op_versions=(("GreaterOrEqual", 12), ("LessOrEqual", 12)),
            attribute_defaults=(("CumSum", "reverse", 0),),
            measured="by hand",
            still_blocks="every node its registry has no converter for, named before the "
            "check (require-onnx2torch-ops): Loops and Scans whose trip count is not a constant "
            "(at most 256; --overwrite-input-shape makes tf2onnx's constant), If whose branches "
            "could fail or differ in shape (the others are Wheres); LSTM, GRU and "
            "RNN whose time axis is not static or longer than 256 steps (the others are written as "
            "primitive ops, unroll-recurrent-ops); "
            "Reshape with allowzero=1 whose shape is computed or holds a 0 (a constant one without "
            "drops it) and Flatten with axis=0; "
            "newer models are converted to opset 17 (ops changed only in their type lists "
            "re-stamped as they are, function ops it lacks expanded, CastLike as Cast)",
            proofs=("onnx2torch",),
            static_shapes="for Loops, Scans, LSTM, GRU and RNN (unrolled when their length is a "
            "constant)",
        ),
        Target(
            name="tinygrad",
            passes=(
                "inline-functions",
                *_SEQUENCE_FREE,
                *_UNROLLED,
                # no unroll-bounded-scans: its rows are a Slice to the run-time count, and
                # tinygrad 0.14's OnnxRunner reads a Slice's bounds once per runner (a second
                # call with other lengths returns the first call's rows)
                *_IFS_AS_MASKED_WHERES,
            ),
            requires=("require-sequence-free", "require-tinygrad-ops"),
            loops="unrolled",
            reverse_sequence="gathernd",
            max_opset=None,
            strip_symbolic_dims=False,
            versions="tinygrad 0.14.0 (CPU device, clang 14)",
            measured="CI",
            still_blocks="every node OnnxRunner has no implementation for, named before the "
            "check (require-tinygrad-ops): Loops and Scans whose trip count is not a constant "
            "(--overwrite-input-shape makes tf2onnx's constant); LSTM, GRU and RNN whose time axis "
            "is not static or longer than 256 steps (the others are written as primitive ops)",
            proofs=("tinygrad",),
            static_shapes="for Loops, Scans, LSTM, GRU and RNN (unrolled when their length is a "
            "constant)",
        ),
        Target(
            name="tvm",
            passes=(
                *_OPTIONALS_AND_ROW_MAPS,
                # a row-wise map over pieces of run-time sizes: its body on the whole tensor
                "ragged-row-maps",
                *_SEQUENCE_FOLDS,
                *_STACKED,
                *_UNROLLED,
                # a run-time count of constant bounds (tf2onnx's dynamic_rnn with lengths)
                "unroll-bounded-scans",
                *_IFS_AS_MASKED_WHERES,
                # after the folds, which would remove its Casts (a Cast to the type a value has)
                "shape-values-as-tensors",
                "constant-values-as-tensors",
            ),
            requires=("require-sequence-free", "require-tvm-ops"),
            loops="unrolled",
            reverse_sequence="gathernd",
            max_opset=None,
            strip_symbolic_dims=False,
            versions="Apache TVM 0.27 (Relax ONNX frontend)",
            measured="by hand",
            still_blocks="every node its converter map lacks, named before the check "
            "(require-tvm-ops): Loops and Scans whose trip count is not a constant "
            "(--overwrite-input-shape makes tf2onnx's constant); LSTM, GRU and RNN whose time axis "
            "is not static or longer than 256 steps (the others are written as primitive ops); a "
            "Cast of a shape TVM 0.27.0 computes at run time (an If's output whose branches could "
            "fail; embedding_bag's are Wheres, its bags masked reductions); a Split by run-time "
            "sizes ('Dynamic Split not yet supported')",
            proofs=("tvm",),
            static_shapes="for Loops, LSTM, GRU and RNN (unrolled when their length is a constant)",
        ),
        Target(
            name="iree",
            passes=(
                "inline-functions",
                # onnx's version converter (to min_opset) gets the opset-8 Scan wrong
                "lower-scan-8",
                *_SEQUENCE_FREE,
                # states nothing reads dropped (IREE compiles no state whose rank changes)
                "drop-unread-loop-states",
                # IREE runs a Loop only as a for-loop of states with a count (it ignores the
                # body's condition): loops that stop on data run to their bound, frozen, and
                # every Loop gets its count where it is known when it starts
                "freeze-bounded-loops",
                # (reads from outside stay reads: its importer types a state of unknown shape,
                # as a carried read can be, rank 0)
                "explicit-loop-counts-reading-outside",
                # it ignores the initial condition too: a run-time one folded into M
                "start-conditions-in-counts",
                "loop-to-scan-constant",
                "unroll-constant-scans",
                "unroll-recurrent-ops",
                "lower-reverse-sequence",
                "fold-static-shapes",
                # again: a second stacked layer's count is the unrolled first one's length
                "loop-to-scan-constant",
                "unroll-constant-scans",
                # an If whose branches cannot fail as a Where: IREE 3.13.0 compiles no Concat of
                # an If's results typed apart from its branches ('tensor.cast' not legalized);
                # again for an If whose branch held one
                Repeat(("if-as-where",)),
                # a mean of a Slice by run-time bounds masked: IREE's mean of an empty slice is
                # NaN, onnxruntime's 0 (embedding_bag's bags out of order)
                "slice-means-as-masks",
                # scan outputs written into preallocated states: a bounded count's, then any
                # count's the loop runs exactly (IREE converts no Loop with scan outputs)
                "scan-outputs-as-states",
                # a Scan of a run-time length (IREE returns one row per scan output) as a Loop
                # of that count, whose scan outputs then become states
                "scans-as-loops",
                "scan-outputs-as-run-time-states",
                # its importer types a state as its body declares it, an initial value and what
                # the body passes on as ONNX infers them: [2, 3] for [?, 3] does not compile
                "loop-states-typed-as-bodies",
                # its importer converts GreaterOrEqual only as of opset 16
                "iree-or-equal-as-or",
                # a Split's pieces ONNX leaves shapeless it types rank 0, then crashes on them
                "split-pieces-typed",
                # it runs no Reshape to a run-time shape holding a -1 (Keras' TimeDistributed)
                "reshape-wildcards-resolved",
            ),
            requires=("require-sequence-free", "require-iree-loops", "require-iree-ops"),
            loops="counted",
            reverse_sequence="gathernd",
            max_opset=None,
            strip_symbolic_dims=False,
            versions="IREE 3.13.0 (iree-base-compiler's ONNX importer, llvm-cpu, local-task)",
            measured="by hand",
            still_blocks="Scans whose length is known only at run time (IREE 3.13.0 returns one "
            "row per scan output) and Loops that are not for-loops of states with a count "
            "(torch-mlir converts no scan outputs and no Loop without M; IREE ignores a body's "
            "condition): named before the check (require-iree-loops); at dynamic shapes every "
            "tf2onnx loop over the time axis: --overwrite-input-shape makes its count a constant",
            proofs=("iree",),
            # torch-mlir converts many ops only as defined in opset 13 or later (Unsqueeze with
            # its axes attribute, Less before 13, Slice with attributes: 'not converted')
            min_opset=13,
            static_shapes="for Loops with scan outputs and Scans (unrolled when their count is "
            "a constant)",
        ),
        Target(
            name="tensorrt",
            passes=(*_SEQUENCE_FREE,),
            requires=("require-sequence-free",),
            loops="kept",
            reverse_sequence="native",
            max_opset=None,
            strip_symbolic_dims=False,
            versions="not measured (documented: TensorRT's ONNX parser has Loop, Scan and "
            "ReverseSequence, no sequence ops)",
            measured="by hand (documented only)",
            still_blocks="sequences whose length is known only at run time and whose elements "
            "are not proven one shape (those are stacked)",
        ),
    )
}

#: The deploy targets: the rows ``--target`` names.
TARGETS: dict[str, Target] = {
    name: row for name, row in PIPELINES.items() if isinstance(row, Target)
}


def get_pipeline(sequence_free: bool = False) -> Pipeline:
    """The ``sequence-free`` row, or the ``default`` one."""
    return PIPELINES["sequence-free" if sequence_free else "default"]


def get_target(name: str) -> Target:
    """The row named ``name``; BadArgumentError (a ValueError) listing the known ones otherwise."""
    try:
        return TARGETS[name]
    except KeyError:
        known = ", ".join(TARGETS)
        raise BadArgumentError(f"unknown target '{name}'; known targets: {known}") from None


@dataclasses.dataclass(frozen=True)
class Deployment:
    """What ``--target`` names ask for: the row whose pipeline lowers the model (None: the
    default one), the check's runtimes that prove it, and the targets nothing here can run."""

    target: Target | None
    proofs: tuple[str, ...]
    unproven: tuple[str, ...]


def deployment(names: Sequence[str]) -> Deployment:
    """Resolve ``--target`` names: rows of :data:`TARGETS` or the check's runtime names
    (``tract-symbolic`` proves a ``tract`` lowering with tract's declared facts only; ``tract``
    proves it both ways, as a user may load it either way: issue 44's lowered bidirectional
    RNN ran with concrete facts and failed to load with its own declared ones).

    One model cannot be lowered two ways: names whose rows run different passes are a
    BadOptionError, except ``onnxruntime``, which may prove any target's output too.
    """
    rows: dict[str, Target] = {}
    proofs: list[str] = []
    unproven: list[str] = []
    for name in dict.fromkeys(names):
        row = TARGETS.get(name) or next((t for t in TARGETS.values() if name in t.proofs), None)
        if row is None:
            known = sorted({*TARGETS, *(p for t in TARGETS.values() for p in t.proofs)})
            raise BadOptionError(f"--target {name}: unknown target (known: {', '.join(known)})")
        rows[row.name] = row
        if name == row.name and row.proofs:
            proofs.extend(row.proofs)  # every way a user may load it (tract: both facts)
        elif name in row.proofs:
            proofs.append(name)
        else:
            unproven.append(name)
    lowering = [row for row in rows.values() if row.name != "onnxruntime"] or list(rows.values())
    if len({row.passes for row in lowering}) > 1:
        both = " and ".join(f"--target {row.name}" for row in lowering)
        raise BadOptionError(
            f"{both} need different lowerings; lower once per target (onnxruntime may join any)"
        )
    return Deployment(
        lowering[0] if lowering else None, tuple(dict.fromkeys(proofs)), tuple(unproven)
    )
