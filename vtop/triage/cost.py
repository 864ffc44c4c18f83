"""What a rule file may cost: every bound on its size, expressions and text, in one place.

Rule files come from strangers (a colleague's directory, a gist) and run unattended, so "it
loads" must also mean "it cannot hang or exhaust a report". Python makes a few innocent-looking
expressions expensive: `round(1, -999999999)` computes 10**999999999, `'%0999999999d' % 1` and
`'a' * 10**9` build a gigabyte of text, `{x:999999999}` pads a summary to a gigabyte, 500
chained additions overflow the evaluator's stack, and a YAML alias bomb expands a 1 KB file
into millions of nodes. The cost model bounds each input that can grow, so the work of one
rule is bounded by constants:

- a file: its bytes, its YAML nodes once aliases are expanded, its nesting, its rules;
- an expression: its characters, its syntax-tree nodes and depth (and so the nodes one
  evaluation visits), the size of its numbers (integers past 2**63 become floats), the digits
  `round` may take; text is compared, never computed (no `+`, `*` or `%` on text);
- a template: its characters and placeholders, each placeholder's format width and precision,
  and the length any one value renders at;
- a condition tree: its leaves and combinators;
- an error line: every value it quotes is cut short, so the line stays one short line.

Load time checks what the text says (`vtop rules check` rejects it with file, line and rule
id); evaluation checks what only the data can say (a `round` whose digits come from a knob) and
raises `CostError`, which the engine turns into one line for that rule while the others run.
"""

from __future__ import annotations

import re
import reprlib

MAX_FILE_BYTES = 256 << 10
"""A rule file or rule test file: 256 KiB (the largest shipped one is under 9 KB). PyYAML reads
a few hundred KB a second, so this is about a second of parsing at worst."""
MAX_CATALOG_BYTES = 2 << 20
"""All the rule files one catalog reads (shipped, the user's, --rules): 2 MiB, so a directory
of a thousand files costs seconds, not minutes; files past it are skipped, one line each."""
MAX_YAML_NODES = 20_000
"""YAML nodes in one document, counted as composed and again once every alias is expanded
(the largest shipped file has 549)."""
MAX_YAML_DEPTH = 64
"""Nested YAML collections (a shipped rule: about 10)."""
MAX_YAML_FLOW_DEPTH = 16
"""Nested `[…]` / `{…}` (a shipped rule: 2). PyYAML's scanner does work for every open one at
each token, so a megabyte of `[[[[…]]]]` 60 deep took 38 s to parse; 16 deep and at most
`MAX_YAML_NODES` nodes (counted as they are composed), a file costs a second at worst."""
MAX_RULES_PER_FILE = 200
MAX_CONDITIONS = 100
"""Comparisons, knob tests and combinators in one condition tree (a shipped rule: under 20)."""

MAX_EXPR_CHARS = 1000
MAX_EXPR_NODES = 200
"""Syntax-tree nodes of one expression, and so the nodes one evaluation may visit (the
largest shipped expression has 40)."""
MAX_EXPR_DEPTH = 24
"""Nesting of one expression's syntax tree (the deepest shipped one: 8)."""
MAX_INT = 2**63
"""Integers beyond this become floats (which overflow to unknown, never to a huge number)."""
MAX_ROUND_DIGITS = 20
"""`round(x, n)`: |n| at most this (`round(1, -10**9)` would compute 10**(10**9))."""
MAX_TEXT_CHARS = 200
"""A text constant in an expression, and a text value as a template renders it."""

MAX_TEMPLATE_CHARS = 2000
MAX_PLACEHOLDERS = 50
MAX_FORMAT_WIDTH = 40
MAX_FORMAT_PRECISION = 20
MAX_TITLE_CHARS = 200
MAX_PROSE_CHARS = 8000
"""A rule's description or source."""

MAX_QUOTE_CHARS = 60
"""A value quoted in an error line (`got [[[…` rather than 351 MB of an alias bomb)."""
MAX_ERROR_CHARS = 400
"""One error line, whatever it quotes."""

MAX_TEST_POLLS = 3600
"""Polls one rule test group may run, and samples one series may hold (an hour at 1 s; the
longest shipped group needs 20 minutes). A poll costs about a millisecond of the engine."""
MAX_TEST_FILE_POLLS = 20_000
"""Polls all groups of one rule test file may run together (the shipped files: at most 3,400)."""
MIN_TEST_INTERVAL_S = 0.01
MAX_TEST_INTERVAL_S = 3600.0

_SPEC = re.compile(
    r"(?:(?P<fill>.)?[<>=^])?[-+ ]?z?#?0?(?P<width>\d+)?[,_]?(?:\.(?P<precision>\d+))?"
    r"[eEfFgGn%]?",
    re.DOTALL,
)


class CostError(Exception):
    """A rule asked for more than the cost model allows; the message says what, in one line.

    Not a ValueError on purpose: the evaluator turns ValueErrors into "unknown", and a cost
    bound must be said, not hidden as a missing value."""


_QUOTE = reprlib.Repr()
_QUOTE.maxstring = MAX_QUOTE_CHARS
_QUOTE.maxother = MAX_QUOTE_CHARS
_QUOTE.maxlevel = 2
_QUOTE.maxlist = _QUOTE.maxtuple = _QUOTE.maxdict = _QUOTE.maxset = 4
_QUOTE.maxlong = 24


def quote(value: object) -> str:
    """`repr(value)` cut short, in time and in length: nested and shared structures (an alias
    bomb) are not walked past two levels and four items."""
    text = _QUOTE.repr(value)
    return text if len(text) <= MAX_QUOTE_CHARS else text[: MAX_QUOTE_CHARS - 1] + "…"


def one_line(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """`text` as one line of at most `limit` characters (line breaks folded to spaces)."""
    flat = " ".join(text[: limit * 4].split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def format_spec_problem(spec: str) -> str | None:
    """Why a template's `{name:spec}` may not be used (its width or precision too large, or
    not a number format), or None."""
    m = _SPEC.fullmatch(spec)
    if m is None:
        return f"format {quote(spec)} is not a number format (e.g. .2f, .0%, >8.1f)"
    width, precision = m.group("width"), m.group("precision")
    if width is not None and (len(width) > 4 or int(width) > MAX_FORMAT_WIDTH):
        return f"format {quote(spec)}: width at most {MAX_FORMAT_WIDTH}"
    if precision is not None and (len(precision) > 4 or int(precision) > MAX_FORMAT_PRECISION):
        return f"format {quote(spec)}: precision at most {MAX_FORMAT_PRECISION}"
    return None


def too_long(what: str, text: str, limit: int) -> str | None:
    """ "what: N characters, at most LIMIT" when `text` is longer than `limit`, else None."""
    if len(text) <= limit:
        return None
    return f"{what}: {len(text)} characters, at most {limit}"
