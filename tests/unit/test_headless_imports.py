"""Nothing outside vtop/ui may load Textual: headless modes must stay light and importable."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import vtop

ROOT = Path(__file__).resolve().parents[2]


def headless_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(vtop.__path__, "vtop."):
        if info.name == "vtop.ui" or info.name.startswith("vtop.ui."):
            continue
        if info.name == "vtop.__main__":
            continue
        names.append(info.name)
    return sorted(names)


def test_there_are_modules_to_check() -> None:
    assert "vtop.signals.store" in headless_modules()


def test_headless_modules_never_import_textual() -> None:
    modules = headless_modules()
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert result.stdout.strip() == "", f"textual loaded by headless modules: {result.stdout}"


def test_the_check_would_catch_textual() -> None:
    code = "import sys, textual; print('textual' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)  # fmt: skip
    assert result.stdout.strip() == "True"
