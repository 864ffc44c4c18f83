"""Clipboard over the terminal (OSC 52), including through tmux.

SSH users have no shared clipboard with the server; OSC 52 asks their own terminal to set
it. tmux swallows the sequence unless `set-clipboard on`; with `allow-passthrough on` it
forwards a DCS-wrapped copy instead. vtop writes the plain form (Textual's
`copy_to_clipboard`) and, inside tmux, the wrapped form too, and always shows the text so it
can be selected by hand when neither gets through.
"""

from __future__ import annotations

import base64


def sequence(text: str) -> str:
    """The OSC 52 sequence that sets the system clipboard to `text`."""
    data = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return f"\x1b]52;c;{data}\a"


def tmux_passthrough(text: str) -> str:
    """The same, wrapped for tmux's passthrough (escape characters doubled)."""
    inner = sequence(text).replace("\x1b", "\x1b\x1b")
    return f"\x1bPtmux;{inner}\x1b\\"
