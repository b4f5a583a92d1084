"""Start-up: ``seqlower --help`` and ``--version`` must not load the heavy libraries.

onnx and onnx_ir (which brings sympy) take most of a second to import; the commands that only
print need neither. Checked by what is imported, in a fresh interpreter, not by timing.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT

HEAVY = ("onnx", "onnx_ir", "sympy", "numpy", "onnxruntime")
PROBE = """
import runpy, sys
sys.argv = ["seqlower", *sys.argv[1:]]
try:
    runpy.run_module("seqlower", run_name="__main__")
except SystemExit as e:
    code = e.code
print("\\nLOADED:" + ",".join(m for m in {heavy!r} if m in sys.modules))
"""


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["help", "lower"]])
def test_printing_commands_import_no_heavy_library(args: list[str]) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    loaded = done.stdout.rsplit("LOADED:", 1)[1].strip()
    assert loaded == "", f"seqlower {' '.join(args)} imported {loaded}"


def test_pass_registry_still_gives_classes() -> None:
    from seqlower.passes import PASSES, LowerReverseSequence, create_pass

    assert PASSES["lower-reverse-sequence"] is LowerReverseSequence
    assert isinstance(create_pass("lower-reverse-sequence"), LowerReverseSequence)
    assert all(isinstance(cls, type) for cls in PASSES.values())
