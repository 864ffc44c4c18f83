"""Run one real vLLM CPU server at a time on a machine other sessions share, and know it.

Why: two vLLM servers on two cores measure each other, and other work here (test suites with
their own server) may start one at any moment, unannounced. So the real-server benches
(calibrate.py, converge_real.py) wait until no other API server runs before starting theirs,
and watch while they measure: a measurement during which another server ran is thrown away
and repeated once the other is gone. SIGTERM is turned into KeyboardInterrupt so the `finally`
that stops our server also runs when the bench itself is stopped.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import psutil

from tools.vllm_cpu.server import VllmServer, make_server

T = TypeVar("T")
MARK = "vllm.entrypoints.openai.api_server"
MIN_RSS = 200 * 1024 * 1024
"""A real API server holds ~600 MB; tests elsewhere spawn small stand-ins with the same argv
(to exercise process discovery) that load nothing and must not hold a bench up."""


def other_servers(mine: int | None = None) -> list[str]:
    """vLLM API servers running on this machine, except ours (pid `mine`)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "memory_info"]):
        cmd = proc.info.get("cmdline") or []
        mem = proc.info.get("memory_info")
        if MARK in cmd and proc.pid != mine and mem is not None and mem.rss >= MIN_RSS:
            found.append(f"pid {proc.pid}: {' '.join(cmd)[:140]}")
    return found


def wait_alone(mine: int | None = None, poll_s: float = 20.0) -> None:
    """Block while another vLLM server runs."""
    others = other_servers(mine)
    if others:
        print(f"    (another vLLM server is running; waiting: {others[0]})", flush=True)
    while others:
        time.sleep(poll_s)
        others = other_servers(mine)


class Watch:
    """Notes, every `period_s` in a thread, whether another server ran while we measured."""

    def __init__(self, mine: int, period_s: float = 3.0) -> None:
        self.mine = mine
        self.period_s = period_s
        self.seen: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.seen.extend(s for s in other_servers(self.mine) if s not in self.seen)
            self._stop.wait(self.period_s)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def measured_alone(server: VllmServer, fn: Callable[[], T], tries: int = 4) -> T:
    """`fn()` repeated until no other vLLM server ran during it (at most `tries` times)."""
    for attempt in range(tries):
        wait_alone(server.pid)
        with Watch(server.pid) as watch:
            result = fn()
        if not watch.seen or attempt == tries - 1:
            if watch.seen:
                print(f"    (kept although another server ran: {watch.seen[0]})", flush=True)
            return result
        print(
            f"    (another vLLM server ran meanwhile, measuring again: {watch.seen[0]})", flush=True
        )
    raise AssertionError("unreachable")


def start_alone(**kw: object) -> VllmServer:
    """Wait until no other server runs, then start the `engine` model with `kw`."""
    wait_alone()
    server = make_server("engine", **kw)  # type: ignore[arg-type]
    began = time.monotonic()
    server.start()
    print(f"    (vLLM up in {time.monotonic() - began:.0f} s on {server.url})", flush=True)
    return server


def stop_on_sigterm() -> None:
    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
