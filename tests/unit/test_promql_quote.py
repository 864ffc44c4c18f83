"""vtop has one PromQL quoter, `vtop.sources.promql.quote`: the queries it sends and the rules it
exports both use it, and what it writes reads back, under Go's rules (which Prometheus's parser
applies to its strings), as exactly the text it was given."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from vtop.sources.promql import quote

ROOT = Path(__file__).resolve().parents[2]
SIMPLE = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
}
"""Go's one-character escapes inside double quotes (`\\'` is not one of them there)."""
WIDE = {"x": 2, "u": 4, "U": 8}


class Unquotable(ValueError):
    """Text Go's `strconv.Unquote` (and so Prometheus) would refuse."""


def go_unquote(literal: str) -> str:
    """The value of a Go double-quoted string literal: a small `strconv.Unquote`."""
    if len(literal) < 2 or literal[0] != '"' or literal[-1] != '"':
        raise Unquotable(f"not double-quoted: {literal!r}")
    body, out, i = literal[1:-1], [], 0
    while i < len(body):
        c = body[i]
        if c in '"\n':
            raise Unquotable(f"bare {c!r} at {i}")
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i, char = escape(body, i + 1)
        out.append(char)
    return "".join(out)


def escape(body: str, i: int) -> tuple[int, str]:
    """The character the escape after the backslash at `i - 1` stands for, and where the text
    goes on."""
    if i >= len(body):
        raise Unquotable("a lone backslash at the end")
    c = body[i]
    if c in SIMPLE:
        return i + 1, SIMPLE[c]
    if c in WIDE:
        digits = body[i + 1 : i + 1 + WIDE[c]]
        if len(digits) != WIDE[c] or any(d not in "0123456789abcdefABCDEF" for d in digits):
            raise Unquotable(f"bad \\{c} escape")
        return i + 1 + WIDE[c], chr(int(digits, 16))
    digits = body[i : i + 3]
    if len(digits) == 3 and all(d in "01234567" for d in digits) and int(digits, 8) < 256:
        return i + 3, chr(int(digits, 8))
    raise Unquotable(f"unknown escape \\{c}")


def test_the_unquoter_refuses_what_go_refuses() -> None:
    """The check below is only as good as this reader: it must refuse the two faults a naive
    quoter (the export's old one left raw newlines in) would make."""
    for bad in ('"a\nb"', '"a"b"', '"a\\"', '"\\q"'):
        try:
            go_unquote(bad)
        except Unquotable:
            continue
        raise AssertionError(f"{bad!r} was read")
    assert go_unquote('"a\\nb\\x41\\101\\u00e9\\\\"') == "a\nbAAé\\"


@given(st.text())
def test_any_text_round_trips_through_a_go_unquote(text: str) -> None:
    literal = quote(text)
    assert "\n" not in literal
    assert go_unquote(literal) == text


def test_the_export_and_the_queries_share_the_quoter() -> None:
    """No other module defines a PromQL quoter: the export's `quoted` (which let newlines
    through) is gone, and its translators import this one."""
    defined = []
    for path in sorted((ROOT / "vtop").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name in ("quote", "quoted"):
                defined.append(str(path.relative_to(ROOT)))
    # vtop/triage/cost.py's `quote` is a `repr` for error messages, not PromQL.
    assert sorted(defined) == ["vtop/sources/promql.py", "vtop/triage/cost.py"]
    for name in ("alerts", "formulas", "measures"):
        text = (ROOT / "vtop" / "triage" / "promql" / f"{name}.py").read_text(encoding="utf-8")
        assert "from vtop.sources.promql import quote" in text, name
