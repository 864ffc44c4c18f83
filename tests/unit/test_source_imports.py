"""The sources sit below the command line: nothing in vtop/sources imports upward.

A source that reached into the command line (or into a module that imports the sources back)
made an import cycle once: the Prometheus source took `check_url` from the targets file's
module, which imported the scraper. The allowed layers are the ones CONTRIBUTING.md draws
under `sources`; this test reads every module's imports, so a new upward import fails here
with its file and line, not later as a cycle at start-up.
"""

from __future__ import annotations

import ast
from pathlib import Path

import vtop

SOURCES = Path(vtop.__file__).resolve().parent / "sources"
ALLOWED = ("vtop.sources", "vtop.model", "vtop.signals", "vtop.durations", "vtop.trace",
           "vtop.sim")  # fmt: skip


def _allowed(module: str) -> bool:
    return any(module == a or module.startswith(a + ".") for a in ALLOWED)


def upward_imports(root: Path) -> list[str]:
    """`file:line: module` for every import of vtop outside the allowed layers under `root`."""
    bad: list[str] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "vtop":
                    names = [f"vtop.{alias.name}" for alias in node.names]
                else:
                    names = [node.module]
            for name in names:
                if (name == "vtop" or name.startswith("vtop.")) and not _allowed(name):
                    bad.append(f"{path.relative_to(root.parent)}:{node.lineno}: {name}")
    return bad


def test_sources_import_nothing_above_them() -> None:
    assert upward_imports(SOURCES) == []


def test_the_check_would_catch_an_upward_import(tmp_path: Path) -> None:
    pkg = tmp_path / "sources"
    pkg.mkdir()
    (pkg / "ok.py").write_text("from vtop import durations\nfrom vtop.sources import urls\n")
    (pkg / "bad.py").write_text("import json\n\ndef f():\n    from vtop.cli import targets_args\n")
    (pkg / "worse.py").write_text("from vtop import usage, model\n")
    assert upward_imports(pkg) == [
        "sources/bad.py:4: vtop.cli",
        "sources/worse.py:1: vtop.usage",
    ]
