"""Import every module of the *installed* seqlower and compare them with the source tree's.

Run with the wheel's venv from outside the checkout: a module missing from the wheel (a package
left out of the build) fails here, as it would for every user who installs it.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(source: Path) -> int:
    import seqlower

    installed_at = Path(seqlower.__file__).parent
    if installed_at.resolve() == (source / "seqlower").resolve():
        print(f"seqlower was imported from the checkout ({installed_at}), not the wheel")
        return 1
    expected = {
        ".".join(path.relative_to(source).with_suffix("").parts).removesuffix(".__init__")
        for path in (source / "seqlower").rglob("*.py")
    }
    found = {"seqlower"} | {
        info.name for info in pkgutil.walk_packages(seqlower.__path__, "seqlower.")
    }
    for name in sorted(found - {"seqlower.__main__"}):  # that one runs the command line
        importlib.import_module(name)
    missing = sorted(expected - found)
    if missing:
        print("modules missing from the installed wheel: " + ", ".join(missing))
        return 1
    if not (installed_at / "py.typed").is_file():
        print("py.typed is missing from the installed wheel")
        return 1
    if not (installed_at / "examples" / "preprocess.onnx").is_file():
        print("examples/preprocess.onnx (for `seqlower example`) is missing from the wheel")
        return 1
    print(f"imported {len(found)} modules of seqlower {seqlower.__version__} from {installed_at}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
