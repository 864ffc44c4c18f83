"""Files vtop reads from others and files it writes: one home for the checks both need.

Inputs (a trace, a rules file or folder, a targets file) may be anything a path can name. A
FIFO, a terminal or a socket blocks a reader forever; a directory or a device is no file at
all. `open_regular` opens without blocking (O_NONBLOCK: opening a FIFO does not wait for a
writer) and refuses what `fstat` says is not a regular file, so the check and the read are on
the same file, with `NotRegularFile` saying in words what the path is.

Outputs (a report, exported rules) replace what the user named, and must never leave it half
written: `write_atomic` writes a temporary file beside the target, flushes it to disk and
renames it over the target, so a full disk, a killed process or a failed write leaves the old
file whole (the temporary one is removed). A target that exists and is not a regular file
(a pipe, a FIFO someone reads, a terminal) is written in place, and so is a path through an
open descriptor (`/dev/stdout`, `/dev/fd/3`: whatever the shell sent it to, a `>>` appending,
a pipe fed): a rename would replace the node, or the shell's file, instead of feeding it.
`same_file` is what the command line asks before writing, so an output that names one of the
inputs (the trace being replayed) is refused instead of replacing it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterable


class NotRegularFile(OSError):
    """A path names a FIFO, a directory, a device or a socket; the message says which
    (`strerror` without the path: "it is a FIFO, not a regular file")."""

    def __init__(self, path: str, what: str) -> None:
        super().__init__(f"{path} is {what}, not a regular file")
        self.strerror = f"it is {what}, not a regular file"
        self.what = what


def kind_of(mode: int) -> str:
    """What a file of this `st_mode` is, in words ("a FIFO", "a directory", ...)."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor of `path`, a regular file; never blocks on a FIFO.

    Raises `NotRegularFile` (what the path is) or the `OSError` of the open."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(os.fspath(path), kind_of(mode))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """The bytes of a regular file (at most `limit` + 1, so a caller can tell it is larger)."""
    with open(open_regular(path), "rb") as fh:
        return fh.read() if limit is None else fh.read(limit + 1)


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name one existing file (links and `..` included)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def one_of(output: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]]) -> str | None:
    """The input file that `output` names, if any (the same file by device and inode)."""
    for inp in inputs:
        if same_file(output, inp):
            return os.fspath(inp)
    return None


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Replace `path` with `data` (str: UTF-8) so that it is either old or new, never partial.

    The temporary file is made beside the target (same directory, so the rename is atomic)
    with the mode a new file would get (0666 less the umask) or the existing file's mode.
    Raises `OSError` (the temporary file removed, the target untouched)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    target = os.path.realpath(path)
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    if (st is not None and not stat.S_ISREG(st.st_mode)) or _through_descriptor(path):
        # /dev/stdout, a FIFO, a terminal: fed, not replaced. Appending: reopening a
        # descriptor's file truncates it otherwise, and what a shell's `>>` kept would be lost.
        with open(path, "ab") as fh:
            fh.write(raw)
        return
    folder, name = os.path.split(target)
    tmp = os.path.join(folder, f".{name}.{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, 0o666)
    try:
        if st is not None:
            os.fchmod(fd, stat.S_IMODE(st.st_mode))
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, target)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_DESCRIPTORS = ("/dev/stdin", "/dev/stdout", "/dev/stderr")


def _through_descriptor(path: str | os.PathLike[str]) -> bool:
    """Whether `path`, or a link it leads through, names an open descriptor (`/dev/stdout`,
    `/dev/fd/N`, `/proc/self/fd/N`): the file behind it is whatever the caller's shell opened."""
    p = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on a chain of links
        if p in _DESCRIPTORS or p.startswith(("/dev/fd/", "/proc/")):
            return True
        try:
            link = os.readlink(p)
        except OSError:  # not a link (or not there): the chain ends here
            return False
        p = os.path.normpath(os.path.join(os.path.dirname(p), link))
    return False
