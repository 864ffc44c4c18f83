"""The terminal driver: Textual's own, with an input thread that sleeps while no key comes.

Textual's input thread wakes ten times a second, key or not, to see whether the app is ending
and to time out a lone Escape (which could be the start of an escape sequence). In a dashboard
left open all day those wake-ups were an eighth of vtop's CPU. Here the thread blocks until a
key arrives or the app stops: stopping sets the driver's exit event, which here also writes to
a pipe the thread watches. It ticks only for a moment after input, which is all a lone Escape
needs (it is sent once the escape delay has passed with no byte after it).

Everything else is Textual's Linux driver, unchanged; vtop uses this driver wherever Textual
would use that one. The input loop is Textual's own with a different wait, and uses what is not
Textual's public API: the key parser (`textual._xterm_parser`), the Linux driver's `exit_event`,
`fileno`, `process_message` and `run_input_thread`, the parser's `feed` and `tick`. pyproject
pins the Textual major CI tests; past that, `mismatch()` checks each part before the app picks
this driver (any difference: Textual's own driver, unchanged), and a loop that still fails at
run time hands over to Textual's own loop instead of leaving the app deaf to keys.

A terminal that goes away (the SSH connection drops, the tmux server is killed) reads as EIO or
end of input on what was a terminal; no SIGHUP need arrive. The app then exits as on `q`
(a recording is closed whole); were it left running, it would paint into a closed terminal at
most of a core until someone killed it. If it has not ended after `HANGUP_GRACE_S` (the app
handles SIGHUP itself, so that signal is no backstop), the process ends there, with
`ExitCode.HANGUP` (129).
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import threading
import time
from codecs import getincrementaldecoder
from typing import Any

from textual import constants
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver

from vtop.exits import ExitCode

try:
    from textual._xterm_parser import XTermParser
except ImportError:  # a private module: another Textual may not have it (mismatch() says so)
    XTermParser = None  # type: ignore[assignment,misc]

TICK_S = 0.1
"""How often the parser is ticked after input (Textual's own rate)."""
TICK_FOR_S = max(1.0, 4 * getattr(constants, "ESCAPE_DELAY", TICK_S))
"""How long after the last input the thread keeps ticking: far longer than the escape delay."""
HANGUP_GRACE_S = 5.0
"""How long an app whose terminal hung up has to exit on its own before the process ends."""


def _sets(cls: type, attribute: str) -> bool:
    """Whether `cls.__init__` assigns (or reads) `self.<attribute>`: its code names it."""
    code = getattr(vars(cls).get("__init__"), "__code__", None)
    return code is not None and attribute in code.co_names


def mismatch() -> str | None:
    """Why the installed Textual is not one this driver can run on; None when it is.

    Checks every part of Textual the input loop uses that is not public API, so that a
    Textual which renamed, moved or reshaped any of them gets its own driver instead."""
    if XTermParser is None:
        return "textual._xterm_parser.XTermParser is missing"
    try:
        parser = XTermParser(False)
    except Exception as exc:
        return f"XTermParser(debug) fails: {type(exc).__name__}: {exc}"
    for method in ("feed", "tick"):
        if not callable(getattr(parser, method, None)):
            return f"XTermParser has no {method}()"
    for method in ("run_input_thread", "process_message", "close"):
        if not callable(getattr(LinuxDriver, method, None)):
            return f"LinuxDriver has no {method}()"
    for attribute in ("exit_event", "fileno"):
        if not _sets(LinuxDriver, attribute):
            return f"LinuxDriver.__init__ does not set {attribute}"
    if not _sets(Driver, "_debug"):
        return "Driver.__init__ does not set _debug"
    return None


class WakingEvent(threading.Event):
    """A threading.Event that also makes `wake_fd` readable when it is set."""

    def __init__(self) -> None:
        super().__init__()
        self.wake_fd, self._write_fd = os.pipe()
        os.set_blocking(self.wake_fd, False)
        os.set_blocking(self._write_fd, False)

    def set(self) -> None:
        super().set()
        with contextlib.suppress(OSError):  # full (so already readable), or closed
            os.write(self._write_fd, b"!")

    def clear(self) -> None:
        super().clear()
        with contextlib.suppress(OSError):  # empty (BlockingIOError), or closed
            while os.read(self.wake_fd, 512):
                pass

    def close(self) -> None:
        for fd in (self.wake_fd, self._write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


class QuietLinuxDriver(LinuxDriver):
    """Textual's Linux driver whose input thread blocks instead of polling."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Textual's loop and ours both end on exit_event; ours needs it to wake a select().
        self._quiet = isinstance(getattr(self, "exit_event", None), threading.Event)
        if self._quiet:
            self.exit_event: WakingEvent = WakingEvent()

    def close(self) -> None:
        super().close()
        if self._quiet:
            self.exit_event.close()

    def run_input_thread(self) -> None:
        """Read keys until the exit event is set; ticks the parser only just after input.

        On any failure of the parts it borrows from Textual (see `mismatch`), Textual's own
        loop takes over: keys keep coming, at the cost of the wake-ups this loop saves."""
        if not self._quiet:
            super().run_input_thread()
            return
        try:
            self._quiet_input_loop()
        except Exception:
            if not self.exit_event.is_set():
                super().run_input_thread()

    def _quiet_input_loop(self) -> None:
        fileno = self.fileno
        wake_fd = self.exit_event.wake_fd
        parser = XTermParser(self._debug)
        selector = selectors.SelectSelector()
        selector.register(fileno, selectors.EVENT_READ)
        selector.register(wake_fd, selectors.EVENT_READ)
        decode = getincrementaldecoder("utf-8")().decode
        tick_until = 0.0
        on_a_terminal = os.isatty(fileno)
        try:
            while not self.exit_event.is_set():
                timeout = TICK_S if time.monotonic() < tick_until else None
                for key, _ in selector.select(timeout):
                    if key.fd != fileno:
                        continue  # the wake pipe: the loop condition ends the thread
                    try:
                        data = os.read(fileno, 1024 * 4)
                    except OSError as err:
                        if err.errno != errno.EIO:
                            raise
                        data = b""  # EIO: the terminal hung up
                    if not data:
                        selector.unregister(fileno)
                        if on_a_terminal:
                            self._hung_up()
                        continue  # else stdin was a pipe or a file: stop watching it
                    for event in parser.feed(decode(data)):
                        self.process_message(event)
                    tick_until = time.monotonic() + TICK_FOR_S
                for event in parser.tick():
                    self.process_message(event)
        finally:
            selector.close()

    def _hung_up(self) -> None:
        """The terminal is gone: exit the app (from the app's loop) with `ExitCode.HANGUP`, as a
        hangup does, and end the process if that has not happened after `HANGUP_GRACE_S`."""
        app = self._app
        self._loop.call_soon_threadsafe(app.exit, None, ExitCode.HANGUP)
        timer = threading.Timer(HANGUP_GRACE_S, os._exit, (int(ExitCode.HANGUP),))
        timer.daemon = True
        timer.start()
