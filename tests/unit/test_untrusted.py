"""The one sanitiser (`vtop.untrusted`): what it removes, what it keeps, how it bounds length.

Judged against Unicode's own categories (`unicodedata`), not against the module's tables: a
control (Cc), a format character (Cf: bidi overrides, isolates, marks, zero-width characters),
a separator (Zl, Zp) or a lone surrogate (Cs) must never come out; every other character must
come out unchanged, in its place. Hypothesis feeds it arbitrary text, ASCII and not.
"""

from __future__ import annotations

import json
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from vtop import untrusted

HOSTILE = (
    "\x1b]52;c;SGVsbG8=\x07"  # OSC 52: writes the clipboard
    "\x1b[2J"  # CSI 2J: clears the screen
    "\x9b31m"  # the 8-bit CSI
    "\x07"  # BEL
    "\u202eevil\u202c"  # right-to-left override ... pop
    "[bold red]x[/]"  # Textual markup: text here
)
UNSAFE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def unsafe(text: str, allowed: str = "") -> list[str]:
    """The characters of `text` a terminal could obey or that reorder or hide text."""
    return [c for c in text if unicodedata.category(c) in UNSAFE and c not in allowed]


def test_the_hostile_string_loses_its_controls_and_keeps_its_text() -> None:
    assert untrusted.clean(HOSTILE) == "]52;c;SGVsbG8=[2J31mevil[bold red]x[/]"


def test_every_bidi_control_and_zero_width_character_goes() -> None:
    bidi = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
    hiding = "\u200b\u200c\u200d\u2060\ufeff\u00ad\U000e0041\u3164\u115f"
    assert untrusted.clean(f"a{bidi}b{hiding}c") == "abc"


def test_c0_c1_del_and_separators_go_and_whitespace_becomes_space() -> None:
    c0 = "".join(chr(c) for c in range(0x20) if chr(c) not in "\t\n\v\f\r")
    c1 = "".join(chr(c) for c in range(0x80, 0xA0))
    assert untrusted.clean(f"a{c0}b\x7fc{c1}d\u2028e\u2029f") == "abcdef"
    assert untrusted.clean("one\ntwo\tthree\r\nfour\vfive\fsix") == "one two three  four five six"


def test_a_lone_surrogate_goes_so_printing_cannot_fail() -> None:
    text = json.loads('"model\\ud800name"')  # JSON allows it; UTF-8 cannot encode it
    cleaned = untrusted.clean(text)
    assert cleaned == "modelname"
    cleaned.encode("utf-8")


def test_printable_text_of_every_script_is_kept() -> None:
    for text in ("Qwen/Qwen2.5-7B-Instruct", "通义千问 7B", "модель", "نموذج", "RTX 4090 °C ▇█"):
        assert untrusted.clean(text) == text


def test_length_is_bounded_with_an_ellipsis() -> None:
    assert untrusted.clean("x" * 10_000, 200) == "x" * 199 + "…"
    assert untrusted.clean("x" * 200, 200) == "x" * 200
    assert untrusted.clean("x" * 5000) == "x" * (untrusted.LIMIT - 1) + "…"
    assert untrusted.clean("x" * 5000, None) == "x" * 5000
    # cut after cleaning: the controls do not count
    assert untrusted.clean("\x1b" * 500 + "abc", 3) == "abc"


def test_a_non_string_is_shown_as_its_text() -> None:
    assert untrusted.clean(503) == "503"
    assert untrusted.clean(None) == "None"


def test_block_keeps_lines_and_tabs_and_drops_the_rest() -> None:
    text = "line one\tcol\r\nline \x1b[2Jtwo\u202e\n\x9bthree ▇\n"
    assert untrusted.block(text) == "line one\tcol\nline [2Jtwo\nthree ▇\n"
    assert untrusted.block("plain ascii\n") == "plain ascii\n"


def test_tree_cleans_every_string_key_and_value_and_keeps_the_rest() -> None:
    doc = {"a\u202e": ["x\x1b[2J", ("y\x07", 1.5)], "n": None, "b": True, "i": 3}
    assert untrusted.tree(doc) == {"a": ["x[2J", ["y", 1.5]], "n": None, "b": True, "i": 3}


@given(st.text())
def test_clean_never_lets_an_unsafe_character_through(text: str) -> None:
    out = untrusted.clean(text, None)
    assert not unsafe(out)
    safe = [c if c not in "\t\n\v\f\r" else " " for c in text if not unsafe(c, "\t\n\v\f\r")]
    assert out == "".join(c for c in safe if c not in "\u115f\u1160\u3164\uffa0")


@given(st.text(alphabet=st.characters(codec="utf-8")) | st.text(st.characters(max_codepoint=0x7F)))
def test_block_never_lets_an_unsafe_character_through(text: str) -> None:
    out = untrusted.block(text)
    assert not unsafe(out, "\t\n")
    kept = "".join(c for c in text if not unsafe(c, "\t\n") and c not in "\u115f\u1160\u3164\uffa0")
    assert out == kept


@given(st.text(), st.integers(min_value=1, max_value=300))
def test_clean_is_never_longer_than_its_limit(text: str, limit: int) -> None:
    assert len(untrusted.clean(text, limit)) <= limit
