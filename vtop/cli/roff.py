"""Text as roff prints it: escaped once, filled or kept whole, never past 80 columns.

The man page (`manpage`) is made from the parsers; the markup it is written in is this
module's, so the rules of roff have one home: every text escaped exactly once (`\\`, `-` as
`\\-`, a leading `.` or `'` guarded by `\\&`), a font change always closed, a paragraph on one
line for roff to fill, and a command to type left unfilled, broken with the shell's ` \\`
where it would run past the page's width, so that it still pastes as one command.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable

COLUMNS = 80
"""The page must read at this width (`MANWIDTH=80 man vtop`): nothing unfilled runs past it."""
INDENT = 7
"""Where man puts a section's text (a `.TP` tag too); `.RS N` adds N."""


def escape(text: str) -> str:
    """`text` as roff prints it: backslashes and hyphens escaped (`\\-` is the ASCII minus a
    flag is typed with), and a leading `.` or `'`, which would make the line a request,
    guarded by `\\&`."""
    out = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + out if out[:1] in (".", "'") else out


def quoted(text: str) -> str:
    """`text` as a quoted macro argument (`.SH "VTOP RULES"`)."""
    return '"' + escape(text).replace('"', "\\(dq") + '"'


def bold(text: str) -> str:
    return f"\\fB{escape(text)}\\fR"


def italic(text: str) -> str:
    return f"\\fI{escape(text)}\\fR"


def prose(text: str) -> str:
    """A paragraph's text on one line (argparse folds its whitespace too; roff fills it)."""
    return escape(" ".join(text.split()))


def shell(command: str, indent: int, style: Callable[[str], str] = escape) -> list[str]:
    """A command to type, unfilled so roff never breaks it: one line where it fits in 80
    columns at `indent`, else broken between words with the shell's ` \\` continuations (so it
    still pastes as one command), the rest indented by two."""
    parts = [command]
    if indent + len(command) > COLUMNS:
        room = COLUMNS - indent - 2  # two for " \\"
        parts = textwrap.wrap(
            command, room, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
        )
    last = len(parts) - 1
    return [".nf", *(style(p) + (" \\e" if i < last else "") for i, p in enumerate(parts)), ".fi"]


def paragraphs(text: str, *, raw: bool) -> list[str]:
    """Help text as the page shows it: one filled paragraph, or, where its line breaks are
    kept (`raw`), filled paragraphs with the indented lines (commands to type) kept whole and
    indented, a `  # comment` on the line after its command."""
    if not raw:
        return [".PP", prose(text)]
    lines: list[str] = [".PP"]
    indented = False
    for line in textwrap.dedent(text).splitlines():
        if not line.strip():
            lines += [".RE"] if indented else []
            lines.append(".PP")
            indented = False
        elif line[0].isspace():
            lines += [] if indented else [".RS 2"]
            command, _, comment = line.partition("  #")
            lines += shell(command.strip(), INDENT + 2)
            lines += [prose("# " + comment), ".br"] if comment.strip() else []
            indented = True
        else:
            if indented:
                lines.append(".RE")
            indented = False
            lines.append(prose(line))
    return [*lines, ".RE"] if indented else lines
