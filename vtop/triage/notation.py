"""promtool's expanding notation for test series: `0x60 12+0x180 1+1x10 _x5`.

- `a` is one sample, `_` one missing sample;
- `a+bxn` is n+1 samples a, a+b, …, a+n·b (`a-bxn` counts down), `axn` is a+0xn;
- `_xn` is n missing samples.

Rule tests write minutes of 1 Hz history in a line, exactly as `promtool test rules` users
already do, so the format needs no new learning. A line stands for at most `limit` samples
(`vtop.triage.cost.MAX_TEST_POLLS` by default), counted before any is made, and every sample
is a finite number: `1x99999999999` is an error, not an hour of CPU and a gigabyte of floats.
"""

from __future__ import annotations

import math
import re

from vtop.triage.cost import MAX_TEST_POLLS, quote

_TERM = re.compile(
    r"^(?P<a>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
    r"(?:(?P<sign>[-+])(?P<b>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))?"
    r"(?:x(?P<n>\d+))?$"
)
_BLANK = re.compile(r"^_(?:x(?P<n>\d+))?$")


def _count(token: str, n: str | None, have: int, limit: int) -> int:
    count = 1 if n is None else (int(n) if len(n) <= 9 else limit + 1)
    if have + count > limit:
        raise ValueError(f"{quote(token)}: more than {limit} samples in one series")
    return count


def expand(text: object, limit: int = MAX_TEST_POLLS) -> list[float | None]:
    """The samples `text` stands for; ValueError names the token it cannot read."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        if not math.isfinite(text):
            raise ValueError(f"{quote(text)} is not a finite number")
        return [float(text)]
    if not isinstance(text, str):
        raise ValueError(f"expected samples like '0x60 1+1x10', got {quote(text)}")
    out: list[float | None] = []
    for token in text.split():
        blank = _BLANK.match(token)
        if blank:
            out.extend([None] * _count(token, blank.group("n"), len(out), limit))
            continue
        m = _TERM.match(token)
        if not m:
            raise ValueError(f"cannot read {quote(token)} (expected a, a+bxn, axn, _ or _xn)")
        a = float(m.group("a"))
        if m.group("n") is None:
            if m.group("b") is not None:
                raise ValueError(f"cannot read {quote(token)}: a+b needs xn")
            _count(token, None, len(out), limit)
            out.append(_finite(a, token))
            continue
        b = float(m.group("b") or 0.0) * (-1.0 if m.group("sign") == "-" else 1.0)
        n = _count(token, m.group("n"), len(out) + 1, limit)  # n + 1 samples: a, then n more
        _finite(a + n * b, token)
        out.extend(_finite(a, token) + i * b for i in range(n + 1))
    return out


def _finite(x: float, token: str) -> float:
    if not math.isfinite(x):
        raise ValueError(f"{quote(token)}: samples must be finite numbers")
    return x
