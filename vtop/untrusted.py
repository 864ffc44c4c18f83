"""Text from outside made inert before anything shows it, by one rule for every such string.

vtop prints what others wrote: a server's reason phrases, headers, label values, model names
and version; Prometheus's error types and messages; a trace's metadata; a rule file's titles,
summaries and evidence labels; the command lines of local processes. A terminal obeys what it
is sent, so one of those strings carrying `ESC ] 52 ; c ; … BEL` writes the user's clipboard,
and `ESC [ 2 J` clears the screen; a right-to-left override (U+202E) makes `gpj.exe` read
`exe.jpg` in a terminal, a report or a browser. Such text goes through this module where it
comes in (parsed or received), so everything downstream holds clean strings, and again where
the command line writes (`vtop.cli.output`) and where a report is rendered (`vtop.report`),
so a string a source forgot is still caught on its way out.

What goes, by Unicode category, the same in every string:

- control characters (Cc): C0 (NUL to US: ESC, BEL, BS, CR ...), DEL, and C1 (0x80-0x9f: the
  8-bit CSI 0x9b, OSC 0x9d, ST 0x9c, NEL 0x85). In a line (`clean`) a tab, newline, carriage
  return, vertical tab or form feed becomes a space (one line stays one line, words stay
  apart); every other control is removed.
- format characters (Cf), which reorder or hide text: the bidi embeddings, overrides and
  isolates (U+202A-U+202E, U+2066-U+2069), the marks (U+200E, U+200F, U+061C), zero-width
  spaces and joiners, the soft hyphen, the byte-order mark, tag characters; and the Hangul
  fillers, letters that draw nothing.
- line and paragraph separators (Zl, Zp: U+2028, U+2029), line breaks to some readers.
- lone surrogates (Cs): JSON lets `"\\ud800"` through, and a UTF-8 terminal or file cannot
  take one (a crash, not an escape).

What stays is every printable character of every script, so a model name in Chinese or a GPU
called "RTX 4090 Ti" reads as it was written. A removed control leaves the bytes of its
sequence visible (`]52;c;SGVsbG8=`, `[2J`): what the server tried is shown, never obeyed.

Length is bounded: `clean` cuts at `limit` characters with an ellipsis, so a 10,000-character
label cannot push the layout apart or a report past reading.

Markup is not this module's business: Textual markup, Markdown and HTML each mean something
else, so each renderer escapes for its own medium (the screens draw `Content`, never markup;
`vtop.report.text` escapes Markdown; `vtop.report.html` escapes HTML). What all of them need
first, text without controls, is here, once.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any, Final

LIMIT: Final = 1000
"""The longest line `clean` keeps by default; a longer one is cut and ends in "…"."""

_DROPPED_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_INVISIBLE_LETTERS: Final = frozenset("\u115f\u1160\u3164\uffa0")
"""Hangul fillers: letters (Lo) that draw nothing, as good as a zero-width space."""
_SPACES: Final = frozenset("\t\n\v\f\r")
"""What becomes a space in a line: the ASCII whitespace controls, so words stay apart."""

_SUSPECT_IN_LINE: Final = re.compile(r"[^\x20-\x7e]")
_SUSPECT_IN_BLOCK: Final = re.compile(r"[^\t\n\x20-\x7e]")
_ASCII_CONTROL_IN_BLOCK: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def dropped(char: str) -> bool:
    """Whether `char` (one character) is one this module removes."""
    return unicodedata.category(char) in _DROPPED_CATEGORIES or char in _INVISIBLE_LETTERS


def _in_line(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SPACES:
        return " "
    return "" if dropped(char) else char


def _in_block(match: re.Match[str]) -> str:
    char = match.group()
    return "" if dropped(char) else char


def cut(text: str, limit: int | None) -> str:
    """`text` at most `limit` characters long, its end marked "…" when something was cut."""
    if limit is None or len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + "…"


def clean(text: object, limit: int | None = LIMIT) -> str:
    """One line of outside text, safe to show: no control, format or separator character,
    whitespace controls turned into spaces, at most `limit` characters (None: any length)."""
    if not isinstance(text, str):
        text = str(text)
    if not text.isprintable():  # fast path: most strings have nothing to remove
        text = _SUSPECT_IN_LINE.sub(_in_line, text)
    return cut(text, limit)


def block(text: str) -> str:
    """Lines of text safe to show: as `clean`, but newlines and tabs kept (a carriage return
    goes: it moves back over a line to hide it) and no length bound. For whole documents on
    their way out: a report, `trace info`, JSON."""
    if text.isascii():
        if _ASCII_CONTROL_IN_BLOCK.search(text) is None:
            return text
        return _ASCII_CONTROL_IN_BLOCK.sub("", text)
    return _SUSPECT_IN_BLOCK.sub(_in_block, text)


def tree(value: Any, limit: int | None = None) -> Any:
    """A JSON-like value (dicts, lists, tuples, scalars) with every string in it, keys too,
    made a clean line (`clean`); everything else as it was. For documents on their way out
    (a report, `--once`): JSON escapes control characters but keeps a bidi override."""
    if isinstance(value, str):
        return clean(value, limit)
    if isinstance(value, Mapping):
        return {
            (clean(k, limit) if isinstance(k, str) else k): tree(v, limit) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [tree(v, limit) for v in value]
    return value
