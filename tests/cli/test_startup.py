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


def test_version_alone_skips_the_parser_and_prints_what_click_prints() -> None:
    """``seqlower --version`` alone is answered before click and the commands load (half of
    its start-up); its text is the same as the parser's ``--version`` (with other flags)."""
    from tests.helpers import run_cli

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    probe = PROBE.replace("{heavy!r}", repr(("click", "seqlower.cli.commands")))
    done = subprocess.run(
        [sys.executable, "-c", probe, "--version"], capture_output=True, text=True, env=env
    )
    printed, loaded = done.stdout.rsplit("\nLOADED:", 1)
    assert loaded.strip() == "" and done.returncode == 0, loaded
    code, out, _ = run_cli("--version")
    assert code == 0 and out == printed


def test_pass_registry_gives_configured_passes() -> None:
    from seqlower.passes import PASSES, LowerReverseSequence, PassEntry, create_pass

    entry = PASSES["lower-reverse-sequence-rows"]
    assert isinstance(entry, PassEntry) and entry.cls is LowerReverseSequence
    made = create_pass("lower-reverse-sequence-rows")
    assert isinstance(made, LowerReverseSequence) and made.form == "gather"
    assert all(isinstance(entry, PassEntry) for entry in PASSES.values())


def test_library_lowering_without_a_target_loads_no_check_module() -> None:
    """``seqlower.lower(model)`` with no target proves nothing, so none of the check's modules
    (nor a runtime) loads: a library caller pays for the passes alone."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    probe = (
        "import sys, onnx, seqlower\n"
        f"seqlower.lower(onnx.load({str(ROOT / 'examples' / 'preprocess.onnx')!r}))\n"
        "print('LOADED:' + ','.join(sorted(m for m in sys.modules if m.startswith("
        "('seqlower.verification', 'onnxruntime', 'openvino', 'tract')))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    loaded = done.stdout.rsplit("LOADED:", 1)[1].strip()
    assert loaded == "", f"seqlower.lower imported {loaded}"
