"""What the command line says: `vtop: …` lines on stderr, and documents on stdout.

Every message a user can act on is one line on stderr with the `vtop:` prefix; documents (a
report, `trace info`, `--once`'s JSON) go to stdout. Both outlive a reader that went away:
`vtop trace info F | head` closes the pipe, and a terminal that hung up (the window or the SSH
session closed) answers writes with EIO. Nobody is left to read then, so the text is dropped
and the stream sent to /dev/null (`to_devnull`), and the run ends as cleanly as it would have,
not with a traceback and a failure status. A document written in pieces (`print` in `rules
list`, `sim --list`, training) meets the closed pipe as a `BrokenPipeError` wherever it is;
`vtop.cli.dispatch.main` catches that once for every command (`reader_gone`: exit 141).

Both are also the last net for text from outside (`vtop.untrusted`): a message is one clean
line, and a document keeps its newlines and tabs and loses every other control and bidi
character, so an error that quotes a server's reason phrase, or a report of a stranger's
trace, cannot drive the user's terminal.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from typing import NoReturn, TextIO

from vtop import untrusted
from vtop.cli.exits import EXIT_PIPE
from vtop.exits import ExitCode


def say(message: str) -> None:
    """One `vtop: message` line on stderr; dropped when nobody can read it."""
    try:
        print(f"vtop: {untrusted.clean(message, None)}", file=sys.stderr, flush=True)
    except OSError:
        to_devnull(sys.stderr)


def warning(message: str) -> None:
    """A `vtop: warning: …` line: what a trace reader found damaged, and read past."""
    say(f"warning: {message}")


def fail(message: str, code: int) -> int:
    """Say `message` and return `code`, the exit code of the error."""
    say(message)
    return code


def internal_error(exc: BaseException) -> None:
    """The one line for an error vtop did not expect (a bug, or an input no check foresaw):
    no traceback, which a monitoring caller would take for a verdict, and the way to see it."""
    text = f"{type(exc).__name__}: {exc}"
    text = "".join(c if c.isprintable() else " " for c in text)
    if len(text) > 300:
        text = text[:299] + "…"
    say(f"internal error, no verdict: {text} (VTOP_DEBUG=1 shows the traceback)")


def write_stdout(text: str) -> None:
    """Print, and end quietly when the reader went away (a closed pipe, or EIO)."""
    text = untrusted.block(text)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        if not isinstance(exc, BrokenPipeError) and exc.errno != errno.EIO:
            raise
        to_devnull(sys.stdout)


def to_devnull(stream: TextIO) -> None:
    """Point `stream`'s file descriptor at /dev/null: nobody reads it any more, and what is
    still buffered, or written later (the interpreter flushes at exit), must go somewhere
    without raising again (Python's advice for SIGPIPE, in the `signal` module's docs)."""
    with contextlib.suppress(OSError, ValueError):  # a stream already closed, or no fd
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)


def reader_gone() -> ExitCode:
    """The reader of stdout went away under a command (`vtop rules list | head -1`): stdout
    to /dev/null, nothing said, and the exit status a shell gives a tool that SIGPIPE ended
    (`git log | head`), as `hard_exit` ends the process."""
    to_devnull(sys.stdout)
    return EXIT_PIPE


def hard_exit(code: int) -> NoReturn:
    """End the process with `code` once stdout and stderr are flushed, without the
    interpreter's teardown.

    Everything a run owes is done when the command returns: the document is written, a
    recording closed, the terminal restored. Teardown would only free objects the OS frees
    anyway, and it touches every one of them: on a starved or paging host that took a
    script's `--report --duration 30` past 100 s after its document was written (seen in CI,
    the process in finalization with no Python frame). mypy ends the same way
    (`mypy.util.hard_exit`), for the same reason.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader gone, a stream closed
            stream.flush()
    os._exit(code)
