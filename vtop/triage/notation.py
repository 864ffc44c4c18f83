"""promtool's expanding notation for test series: `0x60 12+0x180 1+1x10 _x5`.

- `a` is one sample, `_` one missing sample;
- `a+bxn` is n+1 samples a, a+b, …, a+n·b (`a-bxn` counts down), `axn` is a+0xn;
- `_xn` is n missing samples.

Rule tests write minutes of 1 Hz history in a line, exactly as `promtool test rules` users
already do, so the format needs no new learning.
"""

from __future__ import annotations

import re

_TERM = re.compile(
    r"^(?P<a>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
    r"(?:(?P<sign>[-+])(?P<b>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))?"
    r"(?:x(?P<n>\d+))?$"
)
_BLANK = re.compile(r"^_(?:x(?P<n>\d+))?$")


def expand(text: str | float | int) -> list[float | None]:
    """The samples `text` stands for; ValueError names the token it cannot read."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return [float(text)]
    out: list[float | None] = []
    for token in str(text).split():
        blank = _BLANK.match(token)
        if blank:
            out.extend([None] * (int(blank.group("n")) if blank.group("n") else 1))
            continue
        m = _TERM.match(token)
        if not m:
            raise ValueError(f"cannot read {token!r} (expected a, a+bxn, axn, _ or _xn)")
        a = float(m.group("a"))
        if m.group("n") is None:
            if m.group("b") is not None:
                raise ValueError(f"cannot read {token!r}: a+b needs xn")
            out.append(a)
            continue
        b = float(m.group("b") or 0.0) * (-1.0 if m.group("sign") == "-" else 1.0)
        n = int(m.group("n"))
        out.extend(a + i * b for i in range(n + 1))
    return out
