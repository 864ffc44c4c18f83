"""`vtop --version`: what a bug report needs in one paste, not only vtop's own number.

A terminal monitor installed with pip, pipx or uv on someone else's machine meets a Python, a
Textual and a vLLM its authors did not choose. The three lines after vtop's version say which
Python runs it, which Textual draws it (and the range vtop declares), and which vLLM /metrics
dialects it reads. Everything is read from installed metadata, never by importing Textual: the
headless modes must not load it, and `--version` is one of them.
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import Any

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


class VersionAction(argparse.Action):
    """`--version`: print `version_text()` and exit 0 (argparse's own action takes a fixed
    string, which would read the metadata on every start instead of only when asked)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 **kwargs: Any) -> None:  # fmt: skip
        kwargs.setdefault("help", "print vtop's, Python's and Textual's versions and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:  # fmt: skip
        print(version_text())
        parser.exit(0)
