"""Headless verdicts: a report document from frames, rendered as text, Markdown, JSON or HTML.

`collect` turns frames into the document (the one source of truth; `document` its types,
`tracks` each finding's course across evaluations, `build` the records), `window` keeps the
window's figures, `run` drives sources into it, and `text`/`html` render it.
JSON is the document itself, described by docs/report-schema.json, which ships inside the
package (`schema_text`, printed by `vtop --schema`) so that a consumer validates against the
schema of the vtop it runs.

Every string of the document is made a clean line (`vtop.untrusted.tree`) before any format
renders it: the sources clean what they receive, and this is the net under them, so a string
one of them missed carries no control or bidi character into a report either. Each format then
escapes for its own medium (Markdown and HTML: `text._md`, `charts.esc`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vtop import untrusted

if TYPE_CHECKING:
    from vtop.report.document import Document

FORMATS = ("text", "markdown", "json", "html")
SCHEMA_NAME = "report-schema.json"


def schema_path() -> Path:
    """The JSON schema of reports: beside this module in a wheel, docs/ in a checkout."""
    here = Path(__file__).resolve().parent
    packaged = here / SCHEMA_NAME
    return packaged if packaged.is_file() else here.parent.parent / "docs" / SCHEMA_NAME


def schema_text() -> str:
    """The schema of `--format json` reports, as shipped (OSError if it is missing)."""
    return schema_path().read_text(encoding="utf-8")


def _finite(value: Any) -> Any:
    """The document with NaN/inf replaced by None: JSON has no NaN, and unknown is null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def render(doc: Document, fmt: str) -> str:
    """The document in one of `FORMATS`, every string in it inert (`untrusted.tree`)."""
    doc = untrusted.tree(doc)
    if fmt == "json":
        return json.dumps(_finite(doc), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if fmt == "markdown":
        from vtop.report.text import render_markdown

        return render_markdown(doc)
    if fmt == "html":
        from vtop.report.html import render_html

        return render_html(doc)
    if fmt == "text":
        from vtop.report.text import render_text

        return render_text(doc)
    raise ValueError(f"unknown report format {fmt!r} (choose from {', '.join(FORMATS)})")
