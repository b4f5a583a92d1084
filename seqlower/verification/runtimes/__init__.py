"""The runtimes that run a model for the check: one adapter module each, on :class:`~.base.Oracle`.

:data:`ORACLES` is the order they are tried in for each model, reference and candidate alike:

1. :class:`~.onnxruntime.OnnxRuntime`: onnxruntime's CPU provider, graph optimizations off.
2. :class:`~.onnxruntime.RestampedOnnxRuntime`: the same on a copy re-stamped to an older IR
   version, for models only their IR version keeps from onnxruntime (onnx writes newer ones
   than it reads).
3. :class:`~.reference.Reference`: ``onnx.reference`` with corrected implementations of the ops
   it gets wrong (:mod:`seqlower.verification._reference_ops`); it runs what onnxruntime cannot
   (a ``SequenceMap`` over a function op such as ``CenterCropPad``, onnxruntime issue #22100;
   nested maps), independently of seqlower.

The first that loads the *reference* runs both models (:func:`load_pair`): a candidate that
oracle refuses is a failed check, never a reason to run it somewhere more lenient. No oracle
knows anything of seqlower's lowering, so the lowered model is never its own oracle.

:data:`TARGET_ORACLES` holds the runtimes a lowered model can also be proven on (``--target``):
OpenVINO, tract (concrete or symbolic input facts), IREE and the converters (tinygrad,
onnx2torch, onnx2tf, TVM); they run the candidate, and the original only to blame a failure
there. Adapters load and run; comparing is :mod:`seqlower.verification.compare`'s.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys

import onnx

from seqlower.errors import first_line
from seqlower.verification.runtimes.base import (
    DEFAULT_TARGET_TIMEOUT,
    KnownHang,
    NotLoaded,
    Oracle,
    Runner,
    RuntimeRefusal,
    TargetUnavailableError,
)
from seqlower.verification.runtimes.bounded import bounded
from seqlower.verification.runtimes.iree import Iree
from seqlower.verification.runtimes.onnx2tf import Onnx2Tf
from seqlower.verification.runtimes.onnx2torch import Onnx2Torch
from seqlower.verification.runtimes.onnxruntime import OnnxRuntime, RestampedOnnxRuntime, ort_run
from seqlower.verification.runtimes.openvino import OpenVino
from seqlower.verification.runtimes.reference import Reference
from seqlower.verification.runtimes.tinygrad import Tinygrad
from seqlower.verification.runtimes.tract import Tract
from seqlower.verification.runtimes.tvm import Tvm

__all__ = [
    "DEFAULT_TARGET_TIMEOUT",
    "ORACLES",
    "TARGET_ORACLES",
    "CandidateRefused",
    "Iree",
    "KnownHang",
    "NotLoaded",
    "Onnx2Tf",
    "Onnx2Torch",
    "OnnxRuntime",
    "OpenVino",
    "Oracle",
    "Reference",
    "RestampedOnnxRuntime",
    "Runner",
    "RuntimeRefusal",
    "TargetUnavailableError",
    "Tinygrad",
    "Tract",
    "Tvm",
    "bounded",
    "cannot_run",
    "load_pair",
    "load_runner",
    "load_target",
    "ort_run",
]

ORACLES: tuple[Oracle, ...] = (OnnxRuntime(), RestampedOnnxRuntime(), Reference())


def load_runner(
    model: onnx.ModelProto, oracles: tuple[Oracle, ...] = ORACLES
) -> tuple[Runner | None, list[str]]:
    """The first oracle that loads ``model``, and why the ones before it could not."""
    notes: list[str] = []
    for oracle in oracles:
        try:
            return oracle.load(model), notes
        except Exception as e:
            notes.append(f"{oracle.name}: {first_line(e)}")
    return None, notes


class CandidateRefused(Exception):
    """The oracle that loaded the reference refused the candidate: the check fails."""

    def __init__(self, label: str, error: BaseException) -> None:
        self.label = label
        self.error = error
        super().__init__(f"the lowered model does not load in {label}: {first_line(error)}")


def load_pair(
    reference: onnx.ModelProto,
    candidate: onnx.ModelProto,
    oracles: tuple[Oracle, ...] = ORACLES,
) -> tuple[Runner, Runner] | list[str]:
    """Both models loaded by the first oracle that loads the reference; the notes of the oracles
    that could not when none could. Raises :class:`CandidateRefused` when the oracle that took
    the reference refuses the candidate: trying a more lenient one would prove nothing."""
    notes: list[str] = []
    for oracle in oracles:
        try:
            reference_runner = oracle.load(reference)
        except Exception as e:
            notes.append(f"{oracle.name}: {first_line(e)}")
            continue
        try:
            return reference_runner, oracle.load(candidate)
        except Exception as e:
            restamped = _restamped_candidate(oracle, reference, candidate)
            if isinstance(restamped, Runner):
                return reference_runner, restamped
            raise CandidateRefused(oracle.label(), restamped or e) from None
    return notes


def _restamped_candidate(
    oracle: Oracle, reference: onnx.ModelProto, candidate: onnx.ModelProto
) -> Runner | Exception | None:
    """The candidate at the reference's IR version, if that is all the oracle refused: a newer
    stamp asked for (``--ir-version``) is the user's to choose, and warned about, not a
    difference between the models. Else why that copy was refused (None: no copy tried)."""
    if candidate.ir_version <= reference.ir_version:
        return None
    copy = onnx.ModelProto()
    copy.CopyFrom(candidate)
    copy.ir_version = reference.ir_version
    try:
        runner = oracle.load(copy)
    except Exception as e:
        return e
    runner.name += f" (re-stamped to IR version {reference.ir_version})"
    return runner


#: ``--target`` names and the oracle that runs a candidate there (issue 19's target table
#: refers to these names).
TARGET_ORACLES: dict[str, Oracle] = {
    "onnxruntime": OnnxRuntime(),  # for models whose original only onnx.reference runs
    "openvino": OpenVino(),
    "tract": Tract(),
    "tract-symbolic": Tract(concrete=False),
    "tinygrad": Tinygrad(),
    "onnx2torch": Onnx2Torch(),
    "onnx2tf": Onnx2Tf(),
    "tvm": Tvm(),
    "iree": Iree(),
}


def load_target(
    name: str, *, api: bool = False, lowering: bool = True, imports: bool = True
) -> Oracle:
    """The oracle of target ``name``; TargetUnavailableError when unknown or not installed,
    naming the extra that installs it and, when ``lowering``, the way to lower without the
    proof (``--no-check``; ``check=False`` from Python, ``api``). Without ``imports`` its
    packages are only found, not imported: the check imports them when it runs, so a model
    refused before the check does not wait for torch (6 s)."""
    where, unproven = _wording(name, api)
    oracle = TARGET_ORACLES.get(name)
    if oracle is None:
        raise TargetUnavailableError(
            f"{where}: unknown target (known: {', '.join(TARGET_ORACLES)})"
        )
    if oracle.python is not None and sys.version_info < oracle.python:
        raise TargetUnavailableError(
            f"{where}: {oracle.name} needs Python >= {'.'.join(map(str, oracle.python))} (this "
            f"is {sys.version_info.major}.{sys.version_info.minor}), so the lowered model cannot "
            "be proven here" + (f" ({unproven} lowers it unproven)" if lowering else "")
        )
    package = oracle.package or name
    needs = [(package, oracle.module or package)]
    if oracle.runs_on is not None:
        needs.append((oracle.runs_on, oracle.runs_on_module or oracle.runs_on))
    for package, module in needs:
        try:
            importlib.metadata.version(package)
            if not imports:
                if importlib.util.find_spec(module.split(".")[0]) is None:
                    raise ImportError(module)
            elif package == needs[0][0]:
                oracle.importer()
            else:
                __import__(module)
        except (ImportError, importlib.metadata.PackageNotFoundError):
            raise TargetUnavailableError(
                f"{where}: {package} is not installed, so the lowered model cannot be "
                f"proven there (pip install 'seqlower[{oracle.extra or name}]'"
                + (f"; {unproven} lowers it unproven)" if lowering else ")")
            ) from None
    reason = oracle.missing()
    if reason is not None:
        raise TargetUnavailableError(
            f"{where}: {reason}, so the lowered model cannot be proven there"
            + (f" ({unproven} lowers it unproven)" if lowering else "")
        )
    return oracle


def cannot_run(name: str, *, api: bool = False) -> TargetUnavailableError:
    """The error for a target seqlower has no runtime for (TensorRT): proven nowhere here."""
    where, unproven = _wording(name, api)
    return TargetUnavailableError(
        f"{where}: seqlower cannot run {name}, so it cannot prove the lowered model "
        f"there ({unproven} lowers it unproven; seqlower --list-targets)"
    )


def _wording(name: str, api: bool) -> tuple[str, str]:
    """How the user named the target, and how they lower without the proof."""
    return (f"target={name!r}", "check=False") if api else (f"--target {name}", "--no-check")
