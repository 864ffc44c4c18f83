"""`vtop --version`: what a bug report needs in one paste, not only vtop's own number.

A terminal monitor installed with pip, pipx or uv on someone else's machine meets a Python, a
Textual and a vLLM its authors did not choose. The three lines after vtop's version say which
Python runs it, which Textual draws it (and the range vtop declares), and which vLLM /metrics
dialects it reads. Everything is read from installed metadata, never by importing Textual: the
headless modes must not load it, and `--version` is one of them. The flag itself is the command
line's (`vtop.cli.actions`); this module only knows what to say.
"""

from __future__ import annotations

import platform
import sys
from importlib import metadata

from vtop import __version__

VLLM_DIALECTS = "V0 and V1 /metrics, checked against vLLM 0.6, 0.10 and 0.32"
"""What the catalog reads (vtop/signals/catalog.py): the simulator's three dialects
(vtop/sim/dialects.py) and pages captured from real servers (tests/fixtures/metrics)."""


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def declared_range(name: str) -> str | None:
    """The version range vtop's metadata declares for `name` (">=8.2,<9"), if installed."""
    try:
        requires = metadata.requires("vtop") or []
    except metadata.PackageNotFoundError:
        return None
    for req in requires:
        head = req.split(";", 1)[0].strip()
        if "extra ==" in req:
            continue
        rest = head[len(name) :]
        if head.lower().startswith(name) and (not rest or rest[0] in "<>=!~ ("):
            specs = [s.strip() for s in rest.strip(" ()").split(",") if s.strip()]
            specs.sort(key=lambda s: (not s.startswith(">"), s))  # lower bound first
            return ",".join(specs) or None
    return None


def version_text() -> str:
    """Four lines: vtop, Python, Textual, the vLLM dialects it reads."""
    textual = _installed("textual") or "not installed"
    wanted = declared_range("textual")
    textual_line = f"Textual {textual}" + (f" (vtop supports {wanted})" if wanted else "")
    impl = platform.python_implementation()
    python = f"Python {platform.python_version()} ({impl}, {sys.executable})"
    return "\n".join(
        [f"vtop {__version__}", python, textual_line, f"vLLM metrics: {VLLM_DIALECTS}"]
    )
