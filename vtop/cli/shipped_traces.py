"""The example traces that come with vtop, and the one resolver from what a user typed to a file.

A newcomer's first replay (`vtop --replay memory-ceiling --train`) must work wherever vtop is
installed, not only in a checkout: the wheel carries the repository's `traces/*.vtrace` as
`vtop/_traces` (pyproject's wheel sources, as the rules are `vtop/_rules`), and a checkout or an
editable install reads `traces/` itself. Every command that takes a trace (`--replay`, `trace
info`) passes what the user typed through `resolve`: a path that exists always wins, so a
trace of one's own named like a shipped one is never shadowed; only then is it a shipped
trace's name (`memory-ceiling`, or its file name `memory-ceiling.vtrace`). A miss is one
`TraceError` line, which the command line turns into exit 3 like any trace it cannot open.
"""

from __future__ import annotations

import difflib
import os
from importlib import resources
from pathlib import Path

from vtop import untrusted
from vtop.trace.reader import TraceError

SUFFIX = ".vtrace"


def shipped_dir() -> Path:
    """The shipped traces: `vtop/_traces` in a wheel, `traces/` beside `vtop/` in a checkout."""
    package = Path(str(resources.files("vtop")))  # a plain folder: vtop is never zipped
    packaged = package / "_traces"
    return packaged if packaged.is_dir() else package.parent / "traces"


def shipped(folder: Path | None = None) -> dict[str, Path]:
    """Each shipped trace by name (its file name less `.vtrace`), in name order."""
    try:
        files = sorted((folder or shipped_dir()).glob(f"*{SUFFIX}"))
    except OSError:
        return {}
    return {p.name.removesuffix(SUFFIX): p for p in files if p.is_file()}


def resolve(typed: str, *, folder: Path | None = None) -> str:
    """The file `typed` names: itself when something is at that path, else the shipped trace of
    that name; `TraceError` (one line, naming the traces there are) when neither."""
    if os.path.lexists(typed):
        return typed  # what the reader makes of it (a folder, a FIFO) is the reader's to say
    found = shipped(folder)
    shown = untrusted.clean(typed, 200)
    name = os.path.basename(typed).removesuffix(SUFFIX)
    if os.sep not in typed and (os.altsep is None or os.altsep not in typed):
        if name in found:
            return str(found[name])
        raise _unknown(shown, name, found)
    hint = f"; vtop ships a trace by that name: `{name}`" if name in found else ""
    raise TraceError(f"cannot open {shown}: No such file or directory{hint}")


def _unknown(shown: str, name: str, found: dict[str, Path]) -> TraceError:
    """The error for a name that is neither a file nor a shipped trace: the name meant when
    one is close, else every name there is."""
    close = difflib.get_close_matches(name, list(found), n=1, cutoff=0.7)
    if close:
        which = f"did you mean {close[0]}? (`vtop trace list` shows them all)"
    elif found:
        which = f"shipped: {', '.join(found)} (`vtop trace list` describes them)"
    else:
        which = "and this vtop ships none"
    return TraceError(f"no trace {shown}: no such file, nor a shipped trace; {which}")
