"""Nothing outside vtop/ui may load Textual: headless modes must stay light and importable.

Nor the browser view's server (`vtop --web`: textual-serve, aiohttp, jinja2), which only that
flag may pay for: `vtop.cli.web` imports it when the flag is given, never at import time.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import vtop

ROOT = Path(__file__).resolve().parents[2]
UI_ONLY = ("textual", "textual_serve", "aiohttp", "aiohttp_jinja2", "jinja2")
"""Top-level packages that only vtop/ui may load."""


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
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {UI_ONLY!r})\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert result.stdout.strip() == "", f"UI packages loaded by headless modules: {result.stdout}"


def test_a_report_loads_none_of_them() -> None:
    """A whole `--report` run, the command line's own imports included (the web flag's parser
    is among them), ends with none of the UI packages loaded."""
    code = (
        "import sys\n"
        "from vtop.cli import main\n"
        "code = main(['--demo', '--report', '--duration', '1m'])\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {UI_ONLY!r})\n"
        "print('loaded:', ','.join(bad), file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert result.stdout.startswith("vtop report: WARNING (budget-too-small"), result.stdout
    assert result.stderr.splitlines()[-1] == "loaded: ", result.stderr


def test_the_check_would_catch_textual() -> None:
    code = "import sys, textual; print('textual' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)  # fmt: skip
    assert result.stdout.strip() == "True"
