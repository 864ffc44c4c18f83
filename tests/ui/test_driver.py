"""The quiet input driver steps aside for Textual's own on any Textual it was not written for.

`vtop/ui/driver.py` borrows parts of Textual that are not public API. Each test here breaks one
of them the way a future Textual might (a module gone, a constructor changed, a method renamed,
an attribute no longer set) and checks that the app then runs Textual's own Linux driver; and
that a loop failing at run time hands over to Textual's own loop instead of leaving the app
deaf to keys. The installed Textual (the one constraints.txt pins) gets the quiet driver.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from textual.drivers.linux_driver import LinuxDriver

from tests.ui.scripted import build_app
from vtop.ui import driver as quiet


@pytest.fixture(autouse=True)
def _linux_driver_wanted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)


def chosen() -> type:
    app, _ = build_app(history=5, future=0)
    return app.get_driver_class()


def test_the_tested_textual_gets_the_quiet_driver() -> None:
    assert quiet.mismatch() is None
    assert chosen() is quiet.QuietLinuxDriver


class _NoTick:
    def __init__(self, debug: bool) -> None:
        pass

    def feed(self, data: str) -> list[object]:
        return []


def _raises(*args: object) -> None:
    raise ValueError("a parser that wants other arguments")


def _init_without_exit_event(self: Any, app: Any, **kwargs: Any) -> None:
    self.fileno = 0  # sets fileno, not exit_event


BREAKAGES: dict[str, tuple[Callable[[pytest.MonkeyPatch], None], str]] = {
    "parser module gone": (
        lambda mp: mp.setattr(quiet, "XTermParser", None),
        "textual._xterm_parser.XTermParser is missing",
    ),
    "parser constructor changed": (
        lambda mp: mp.setattr(quiet, "XTermParser", _raises),
        "XTermParser(debug) fails: ValueError: a parser that wants other arguments",
    ),
    "parser without tick": (
        lambda mp: mp.setattr(quiet, "XTermParser", _NoTick),
        "XTermParser has no tick()",
    ),
    "driver without run_input_thread": (
        lambda mp: mp.delattr(LinuxDriver, "run_input_thread"),
        "LinuxDriver has no run_input_thread()",
    ),
    "driver without exit_event": (
        lambda mp: mp.setattr(LinuxDriver, "__init__", _init_without_exit_event),
        "LinuxDriver.__init__ does not set exit_event",
    ),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_any_mismatch_falls_back_to_textuals_own_driver(
    breakage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    breaks, reason = BREAKAGES[breakage]
    breaks(monkeypatch)
    assert quiet.mismatch() == reason
    assert chosen() is LinuxDriver


def test_a_driver_module_that_cannot_be_imported_falls_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    import vtop.ui

    monkeypatch.setitem(sys.modules, "vtop.ui.driver", None)  # import raises ImportError
    monkeypatch.delattr(vtop.ui, "driver")
    assert chosen() is LinuxDriver


def make_driver() -> quiet.QuietLinuxDriver:
    """A driver as the app makes one (in a running event loop), never started."""
    app, _ = build_app(history=5, future=0)
    return quiet.QuietLinuxDriver(app, debug=False, mouse=False, size=(80, 24))


async def test_a_loop_that_fails_at_run_time_hands_over_to_textuals_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[str] = []
    monkeypatch.setattr(LinuxDriver, "run_input_thread", lambda self: ran.append("textual"))
    monkeypatch.setattr(quiet, "XTermParser", _raises)  # as a changed parser would, mid-run
    drv = make_driver()
    try:
        assert isinstance(drv.exit_event, quiet.WakingEvent)
        drv.run_input_thread()
        assert ran == ["textual"]
    finally:
        drv.exit_event.close()


async def test_an_exit_event_of_another_kind_keeps_textuals_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[str] = []
    original = LinuxDriver.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.exit_event = object()  # not a threading.Event: the wake pipe cannot stand in

    monkeypatch.setattr(LinuxDriver, "__init__", init)
    monkeypatch.setattr(LinuxDriver, "run_input_thread", lambda self: ran.append("textual"))
    drv = make_driver()
    assert not isinstance(drv.exit_event, threading.Event)
    drv.run_input_thread()
    assert ran == ["textual"]
