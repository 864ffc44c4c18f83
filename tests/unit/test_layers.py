"""The layers of vtop, enforced: every import points down, never up or sideways.

CONTRIBUTING.md draws the map; this test is its contract. Each package (or top-level module)
belongs to one layer, and a module may import only from its own package or from a lower layer.
Two packages on the same layer do not import each other (trace, sim and figures stand on
model and signals, none on another). Every import counts, also those inside functions and under
TYPE_CHECKING, because a deferred import still ties the lower layer to the upper one: the
earlier test saw module-level imports only and missed `ui/player.py` reaching up into the
command line. `test_an_upward_import_is_caught` plants one, so the contract can fail.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "vtop"

LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "vtop",
        "vtop.model",
        "vtop.durations",
        "vtop.fmt",
        "vtop.untrusted",
        "vtop.about",
        "vtop.knobs",
        "vtop.files",
        "vtop.exits",
    ),
    ("vtop.signals",),
    ("vtop.trace", "vtop.sim", "vtop.figures"),
    ("vtop.sources",),
    ("vtop.triage",),
    ("vtop.whatif",),
    ("vtop.monitor",),
    ("vtop.summary",),
    ("vtop.report",),
    ("vtop.training",),
    ("vtop.ui", "vtop.tune"),
    ("vtop.cli",),
    ("vtop.__main__",),
)
"""Lowest first. The first layer's modules are leaves that any layer may use."""


def unit(module: str) -> str:
    """The package or top-level module a module belongs to: `vtop.ui.widgets.x` -> `vtop.ui`."""
    parts = module.split(".")
    return ".".join(parts[:2])


def layer(module: str) -> int:
    name = unit(module)
    for i, names in enumerate(LAYERS):
        if name in names:
            return i
    raise AssertionError(f"{module} is on no layer: add {name} to LAYERS and CONTRIBUTING.md")


def imports(source: str) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import in `source`, however deeply nested; a relative
    import is reported as itself (`.codec`): vtop spells its imports out."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            if base == "vtop":  # `from vtop import durations`: the modules named
                for alias in node.names:
                    yield node.lineno, f"vtop.{alias.name}"
            else:
                yield node.lineno, base


def violations(source: str, module: str, where: str) -> list[str]:
    """What in `source` (module `module`, shown as `where`) breaks the layering, one per line."""
    own = unit(module)
    mine = layer(module)
    out = []
    for line, target in imports(source):
        if target.startswith("."):
            out.append(f"{where}:{line}: relative import {target}: name the module")
            continue
        if not (target == "vtop" or target.startswith("vtop.")):
            continue
        if target in ("vtop.__version__",) or unit(target) == own:
            continue
        theirs = layer(target)
        if theirs > mine or (theirs == mine and mine > 0):
            out.append(f"{where}:{line}: {own} (layer {mine}) imports {target} (layer {theirs})")
    return out


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts).removesuffix(".__init__")


def test_every_import_points_down() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent)
        found += violations(path.read_text(encoding="utf-8"), module_name(path), str(rel))
    assert not found, "imports against the layers:\n" + "\n".join(found)


def test_an_upward_import_is_caught() -> None:
    """A deferred import from the trace format up into the TUI, planted in a copy."""
    path = PACKAGE / "trace" / "reader.py"
    planted = (
        path.read_text(encoding="utf-8") + "\n\ndef _late() -> None:\n    import vtop.ui.app\n"
    )
    found = violations(planted, "vtop.trace.reader", "vtop/trace/reader.py")
    assert len(found) == 1 and "imports vtop.ui.app" in found[0], found
    sideways = "from vtop.sim import twin\n"
    assert violations(sideways, "vtop.trace.reader", "x.py"), "trace and sim are one layer"
    assert not violations("from vtop import durations, model\n", "vtop.ui.app", "x.py")
    assert violations("from . import codec\n", "vtop.trace.reader", "x.py")


HTTP_CLIENTS = ("httpx", "urllib.request", "http.client", "aiohttp", "requests")
"""Modules that make HTTP requests."""


def clients(source: str) -> list[tuple[int, str]]:
    """(line, module) for each import of an HTTP client in `source`."""
    return [
        (line, module)
        for line, module in imports(source)
        if any(module == c or module.startswith(c + ".") for c in HTTP_CLIENTS)
    ]


def test_the_simulator_calls_no_server() -> None:
    """The simulator answers HTTP (`vtop sim`); it never sends a request. Sampling a real
    server beside the twin is a bench's and a test's job (tests/simtools/realcpu.py)."""
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: imports {module}"
        for path in sorted((PACKAGE / "sim").rglob("*.py"))
        for line, module in clients(path.read_text(encoding="utf-8"))
    ]
    assert not found, "HTTP clients in vtop/sim:\n" + "\n".join(found)
    assert clients("import httpx\nfrom urllib.request import urlopen\nimport http.server\n") == [
        (1, "httpx"),
        (2, "urllib.request"),
    ]


def test_the_map_names_every_module() -> None:
    """CONTRIBUTING's layout block names each module of vtop/ (a package by its folder), so
    a newcomer finds every one there; a new module without a line fails here."""
    text = (PACKAGE.parent / "CONTRIBUTING.md").read_text(encoding="utf-8")
    start = text.index("```\nvtop/\n")
    block = text[start : text.index("```\n", start + 4)]
    skipped = {PACKAGE / "__init__.py", PACKAGE / "__main__.py"}  # the package, `python -m`
    missing = [
        str(path.relative_to(PACKAGE.parent))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in skipped and not re.search(rf"\b{re.escape(_named(path))}\b", block)
    ]
    assert not missing, "modules CONTRIBUTING.md's map does not name:\n" + "\n".join(missing)


def _named(path: Path) -> str:
    """How the map names a module: its file's stem, or its package's folder for `__init__`."""
    return path.parent.name if path.stem == "__init__" else path.stem


VIEWS = PACKAGE / "ui" / "views"
DRAWING = ("textual", "rich")
"""What draws on a terminal: the widgets' business, not the views'."""


def view_violations(source: str, where: str) -> list[str]:
    """A view that imports Textual (or Rich, which Textual draws with), or anything of
    `vtop.ui` outside the views: a view model must be built and tested without a terminal."""
    out = []
    for line, target in imports(source):
        drawing = any(target == d or target.startswith(d + ".") for d in DRAWING)
        in_ui = target == "vtop.ui" or target.startswith("vtop.ui.")
        if drawing or (in_ui and not target.startswith("vtop.ui.views")):
            out.append(f"{where}:{line}: imports {target}")
    return out


def test_the_views_are_plain_values() -> None:
    """vtop/ui/views: no Textual, no widget, screen or app; only lower layers and each other."""
    found = [
        v
        for path in sorted(VIEWS.rglob("*.py"))
        for v in view_violations(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE)))
    ]
    assert not found, "views that reach up into the screen:\n" + "\n".join(found)
    planted = "from textual.widget import Widget\nfrom vtop.ui import osc52\nimport rich.text\n"
    assert len(view_violations(planted, "x.py")) == 3
    assert not view_violations("from vtop.ui.views import verdict\nfrom vtop import fmt\n", "x")
