"""`-o FILE` of a report or a rule export: never one of the run's inputs, always whole.

`vtop --replay t.vtrace --report -o t.vtrace` once replaced the trace with its own report, and a
disk that filled mid-write left a truncated file where a good one had been. Before anything
runs, `conflict` compares the output with every file the run reads (or records): the same
file (by device and inode, links included) is refused in one line naming both. `write` then
goes through `vtop.files.write_atomic`: a temporary file beside the target, renamed over it,
so the old file stays whole until the new one is complete.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from vtop.files import one_of, write_atomic
from vtop.triage.loader import rule_files, shipped_dir, user_dir

Inputs = Mapping[str, Iterable[str | os.PathLike[str]]]
"""What each kind of input is called ("the trace being replayed") -> its paths."""


def rules_read(dirs: Iterable[str | os.PathLike[str]], *, user: bool = True) -> list[Path]:
    """The rule files a run loads: the shipped ones, the user's, those of `--rules`."""
    folders = [shipped_dir(), *([user_dir()] if user else []), *map(Path, dirs)]
    return rule_files(f for f in folders if f.exists())


def conflict(output: str | os.PathLike[str], inputs: Inputs) -> str | None:
    """The one line refusing `output` when it names an input, else None."""
    target = os.path.realpath(output)
    for what, paths in inputs.items():
        listed = [p for p in paths if p]
        hit = one_of(output, listed) or next(
            (os.fspath(p) for p in listed if os.path.realpath(p) == target), None
        )
        if hit is not None:
            return f"-o {os.fspath(output)} names {what} ({hit}); write the output to another file"
    return None


def write(output: str | os.PathLike[str], text: str) -> str | None:
    """Write `text` to `output` atomically; the one line saying why not, or None."""
    try:
        write_atomic(output, text)
    except OSError as exc:
        return f"cannot write {os.fspath(output)}: {exc.strerror or exc}"
    return None
