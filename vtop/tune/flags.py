"""A knob change written into the flags a server starts with: a `vllm serve` argv or a file.

One edit for both: every spelling of the knob's flag already there (`--max-num-seqs 16`,
`--max-num-seqs=16`, `--max_num_seqs 16`, and for a boolean `--enable-x` / `--no-enable-x`)
is removed and the new value written as `vtop.knobs.flag_argv` spells it, so the flag is
never given twice with two values (vLLM would take the last; a reader would take the first).
A flags file (what `vllm serve MODEL $(cat FILE)` reads) keeps its comments and every line
that does not hold a changed flag; the new flags go on lines of their own at its end.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from vtop import knobs
from vtop.knobs import KnobValue


def _spelled(token: str) -> str:
    """The flag part of `token` as vLLM reads it: `--max_num_seqs=16` -> `--max-num-seqs`."""
    head = token.split("=", 1)[0]
    return "--" + head[2:].replace("_", "-") if head.startswith("--") else head


def _without(argv: Sequence[str], name: str) -> list[str]:
    """`argv` with every spelling of knob `name`'s flag (and its value) removed."""
    flag = knobs.flag_name(name)
    negated = "--no-" + flag[2:]
    takes_value = knobs.KNOBS[name].kind is not bool if name in knobs.KNOBS else True
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        spelled = _spelled(token)
        if spelled in (flag, negated):
            bare = "=" not in token and spelled == flag
            i += 2 if bare and takes_value else 1
            continue
        out.append(token)
        i += 1
    return out


def with_changes(argv: Sequence[str], changes: Mapping[str, KnobValue]) -> list[str]:
    """`argv` with each knob of `changes` set to its value (its old flags removed, the new
    ones at the end)."""
    out = list(argv)
    for name, value in changes.items():
        out = _without(out, name) + knobs.flag_argv(name, value)
    return out


def edit_file_text(text: str, changes: Mapping[str, KnobValue]) -> str:
    """A flags file's text with `changes` applied: a line holding a changed flag loses it
    (and goes when nothing else is left on it), the new flags are appended a line each."""
    names = list(changes)
    kept: list[str] = []
    for line in text.splitlines():
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:  # an unclosed quote: not ours to rewrite
            kept.append(line)
            continue
        rest = tokens
        for name in names:
            rest = _without(rest, name)
        if rest == tokens:
            kept.append(line)
        elif rest:
            kept.append(shlex.join(rest))
    added = [shlex.join(knobs.flag_argv(name, value)) for name, value in changes.items()]
    return "\n".join([*kept, *added]) + "\n"


def file_flags(text: str) -> list[str]:
    """The flags a file holds, as the shell would split them (comments dropped)."""
    return shlex.split(text, comments=True)
