"""What a check is asked to do (:class:`CheckOptions`), the options checked against the model
(:func:`check_names`), and the bounds of a check: its time and memory budgets, the memory
refused before any input is drawn (:func:`check_input_budget`)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from seqlower.errors import BadOptionError, CheckLimitError
from seqlower.verification.compare import Tolerances
from seqlower.verification.inputs import estimate_input_bytes, estimate_output_bytes
from seqlower.verification.runtimes import ORACLES, Oracle

__all__ = [
    "DEFAULT_TIMEOUT",
    "CheckOptions",
    "InputsLike",
    "check_input_budget",
    "check_names",
    "default_memory_budget",
]

InputsLike = str | os.PathLike[str] | Sequence[Mapping[str, Any]]


DEFAULT_TIMEOUT = 600.0  # seconds for all the runs of one check


@dataclasses.dataclass(frozen=True)
class CheckOptions:
    """How :func:`verify` checks.

    ``inputs``: a ``.npz`` file or ONNX test-data directory, or a list of feed dicts; by default
    ``n`` runs of generated inputs (seeded by ``seed``), plus, unless ``seq_len`` is given, one
    with empty sequences when the model has sequence inputs. ``dims`` sizes symbolic dimensions
    by name, ``input_shapes`` fixes shapes per input, ``seq_len`` sets sequence lengths.
    ``memory_budget`` (bytes of generated inputs and of both models' declared outputs on them;
    default a quarter of physical memory) and ``timeout`` (seconds in all; default 600) bound
    the check. ``on_run(k, total)`` is called before run k (from 1), for progress displays.
    ``oracles``: tried in order for the reference; the candidate runs in the one that took it.
    ``runtimes``: names in :data:`~.runtimes.TARGET_ORACLES` the candidate is also run on.
    ``expected``: a file (as ``inputs``) or a list of dicts of the framework's outputs for the
    given inputs, run by run; without ``inputs``, the inputs come from the same file.
    """

    inputs: InputsLike | None = None
    n: int = 3
    seed: int = 0
    tolerances: Tolerances = dataclasses.field(default_factory=Tolerances)
    dims: Mapping[str, int] = dataclasses.field(default_factory=dict)
    input_shapes: Mapping[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    seq_len: int | None = None
    memory_budget: int | None = None
    timeout: float | None = None
    #: Seconds one run may take on a target that runs in a child process (tract; default
    #: :data:`~.runtimes.DEFAULT_TARGET_TIMEOUT`): past it the run fails, the runtime's fault
    #: when the original times out there too.
    target_timeout: float | None = None
    on_run: Callable[[int, int], None] | None = None
    oracles: tuple[Oracle, ...] = ORACLES
    runtimes: tuple[str, ...] = ()
    expected: InputsLike | None = None
    #: Let ``input_shapes`` change dimensions the model declares (see :func:`check_names`).
    force_input_shape: bool = False
    #: Keep each compared run's feeds and reference outputs in the report (``kept_runs``).
    keep_runs: bool = False
    #: Differences from ``expected`` that the original shares (the export's fault) fail the
    #: check too (``--strict-expected``), instead of being warnings.
    strict_expected: bool = False
    #: Inputs fed this one value in every run (``--constant-input``: the lowering fixed it):
    #: generated runs take it, given inputs must hold it.
    constant_inputs: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        # ``runtimes="tract"`` means one runtime: iterating the string would ask for "t", "r"...
        runtimes = (self.runtimes,) if isinstance(self.runtimes, str) else tuple(self.runtimes)
        object.__setattr__(self, "runtimes", runtimes)

    @classmethod
    def from_kwargs(
        cls,
        *,
        rtol: float | Mapping[str, float] | None = None,
        atol: float | Mapping[str, float] | None = None,
        dims: Mapping[str, int] | None = None,
        input_shapes: Mapping[str, tuple[int, ...]] | None = None,
        **rest: Any,
    ) -> CheckOptions:
        """From :func:`verify`'s keyword form (``rtol``/``atol`` a number or per output)."""
        return cls(
            tolerances=Tolerances.from_options(rtol, atol),
            dims=dict(dims or {}),
            input_shapes=dict(input_shapes or {}),
            **rest,
        )


def check_names(model: onnx.ModelProto, options: CheckOptions) -> None:
    """Raise BadOptionError when a check option names what the model does not have, or
    (unless ``force_input_shape``) an input shape contradicts a dimension the model declares."""
    initializers = {t.name for t in model.graph.initializer}
    inputs = {i.name: i.type for i in model.graph.input if i.name not in initializers}
    outputs = [o.name for o in model.graph.output]
    symbols: set[str] = set()
    for type_proto in inputs.values():
        symbols.update(d.dim_param for d in _dims(type_proto) if d.HasField("dim_param"))
    for name in options.dims:
        if name not in symbols:
            known = ", ".join(sorted(symbols)) or "none"
            raise BadOptionError(
                f"--dim {name}: the model's inputs have no dimension of that name "
                f"(symbolic dimensions: {known})"
            )
    for name, shape in options.input_shapes.items():
        if name not in inputs:
            raise BadOptionError(
                f"--input-shape {name}: the model has no input of that name "
                f"(inputs: {', '.join(inputs)})"
            )
        declared = _dims(inputs[name])
        if not declared:
            continue
        if len(declared) != len(shape):
            raise BadOptionError(
                f"--input-shape {name}: {len(shape)} dimensions given, the input has "
                f"{len(declared)}"
            )
        for axis, (dim, size) in enumerate(zip(declared, shape, strict=True)):
            if (
                dim.HasField("dim_value")
                and dim.dim_value != size
                and not options.force_input_shape
            ):
                raise BadOptionError(
                    f"--input-shape {name}: axis {axis} is declared {dim.dim_value}, not "
                    f"{size} (--force-input-shape to override)"
                )
    for index, flag in enumerate(("--rtol", "--atol")):
        for name, pair in options.tolerances.per_output.items():
            if pair[index] is not None and name not in outputs:
                raise BadOptionError(
                    f"{flag} {name}: the model has no output of that name "
                    f"(outputs: {', '.join(outputs)})"
                )


def _dims(type_proto: onnx.TypeProto) -> list[Any]:
    """The declared dimensions of a tensor type or of a sequence's elements ([] if none)."""
    while type_proto.HasField("sequence_type"):
        type_proto = type_proto.sequence_type.elem_type
    if type_proto.HasField("tensor_type") and type_proto.tensor_type.HasField("shape"):
        return list(type_proto.tensor_type.shape.dim)
    return []


def default_memory_budget() -> int:
    """A quarter of physical memory: room for both models' outputs and intermediates too."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
    except (ValueError, OSError, AttributeError):
        return 2**31


def check_input_budget(
    model: onnx.ModelProto,
    budget: int,
    options: CheckOptions,
    candidate: onnx.ModelProto | None = None,
) -> None:
    """Refuse, before anything is allocated, a check whose inputs and outputs would exceed the
    budget: the generated inputs, and what the reference and the candidate return on them (both
    are held while they are compared), from the declared shapes."""
    sizes: dict[str, Any] = {
        "dims": options.dims,
        "input_shapes": options.input_shapes,
        "seq_len": options.seq_len,
    }
    inputs = estimate_input_bytes(model, **sizes)
    outputs = estimate_output_bytes(model, **sizes)
    if candidate is not None:
        outputs += estimate_output_bytes(candidate, **sizes)
    in_total = sum(size for _, _, size in inputs)
    out_total = sum(size for _, _, size in outputs)
    if in_total + out_total <= budget:
        return
    kind, (name, written, size) = max(
        [("input", e) for e in inputs] + [("output", e) for e in outputs],
        key=lambda pair: pair[1][2],
    )
    held = f"{_bytes(in_total)} of inputs"
    if out_total:
        held = f"{_bytes(in_total + out_total)} ({held}, {_bytes(out_total)} of outputs)"
    raise CheckLimitError(
        f"the check would {'hold' if out_total else 'generate'} {held}, over its memory budget "
        f"of {_bytes(budget)} ({kind} '{name}', {written}: {_bytes(size)}); give smaller sizes "
        "with --dim/--input-shape, or a larger --check-memory"
    )


def _bytes(count: int) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} bytes"
