"""What the command line says: `vtop: …` lines on stderr, and documents on stdout.

Every message a user can act on is one line on stderr with the `vtop:` prefix; documents (a
report, `trace info`, `--once`'s JSON) go to stdout. Both outlive a reader that went away:
`vtop trace info F | head` closes the pipe, and a terminal that hung up (the window or the SSH
session closed) answers writes with EIO. Nobody is left to read then, so the text is dropped
and the stream sent to /dev/null, and the run ends as cleanly as it would have, not with a
traceback and a failure status.
"""

from __future__ import annotations

import errno
import os
import sys


def say(message: str) -> None:
    """One `vtop: message` line on stderr; dropped when nobody can read it."""
    try:
        print(f"vtop: {message}", file=sys.stderr, flush=True)
    except OSError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stderr.fileno())


def warning(message: str) -> None:
    """A `vtop: warning: …` line: what a trace reader found damaged, and read past."""
    say(f"warning: {message}")


def fail(message: str, code: int) -> int:
    """Say `message` and return `code`, the exit code of the error."""
    say(message)
    return code


def write_stdout(text: str) -> None:
    """Print, and end quietly when the reader went away (a closed pipe, or EIO)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        if not isinstance(exc, BrokenPipeError) and exc.errno != errno.EIO:
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
