"""Every number the command line takes has a stated range, checked as argparse reads it.

`--interval nan` never advanced a poll loop, `--interval 1e-9` asked the simulator for 3·10¹¹
polls, `--speed 1e308` (the help said 1–1000) and `--duration 99999999d` ran flat out for ever:
argparse's `type=float` accepts nan, inf and anything finite. Each numeric flag takes one of
the types here instead, which reject what is outside the range in one usage line (`vtop:
error: argument --interval: nan is not a number from 0.01 to 3600 s (see vtop --help)`, exit 2,
or 3 under --report: the parser's own exit code) before anything runs, and `ranged` puts the
range into the flag's --help, so the help and the check cannot disagree. Durations keep the
text the user wrote (the modes parse it with `vtop.durations` as before); only its range is
checked here. A knob flag takes its range from `vtop.knobs`, the one table of knobs.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from vtop import durations, knobs
from vtop.knobs import KnobValue, number

WEEK_S = 7 * 86400.0


@dataclass(frozen=True, slots=True)
class Number:
    """A number within [lo, hi] (`lo_open`: above lo); `integer` for whole numbers."""

    lo: float
    hi: float
    integer: bool = False
    unit: str = ""
    lo_open: bool = False

    @property
    def __name__(self) -> str:  # argparse names the type in "invalid float value: 'soon'"
        return "int" if self.integer else "float"

    def shown(self) -> str:
        """`0.01–3600 s`, `above 0, up to 60000 ms`."""
        unit = f" {self.unit}" if self.unit else ""
        if self.lo_open:
            return f"above {number(self.lo)}, up to {number(self.hi)}{unit}"
        return f"{number(self.lo)}–{number(self.hi)}{unit}"

    def __call__(self, text: str) -> float:
        value: float = int(text) if self.integer else float(text)  # ValueError: argparse says
        low_ok = value > self.lo if self.lo_open else value >= self.lo
        if not (math.isfinite(value) and low_ok and value <= self.hi):
            what = "a whole number" if self.integer else "a number"
            lo = f"above {number(self.lo)}" if self.lo_open else f"from {number(self.lo)}"
            unit = f" {self.unit}" if self.unit else ""
            raise argparse.ArgumentTypeError(
                f"{_short(text)} is not {what} {lo} to {number(self.hi)}{unit}"
            )
        return value


@dataclass(frozen=True, slots=True)
class Duration:
    """A duration as `vtop.durations` reads it (`30s`, `5m`, `1h30m`), within [lo, hi] seconds
    (`lo_open`: above lo); the value is the text as written."""

    lo: float
    hi: float
    lo_open: bool = False

    @property
    def __name__(self) -> str:
        return "duration"

    def shown(self) -> str:
        lo, hi = _duration(self.lo), _duration(self.hi)
        return f"above {lo}, up to {hi}" if self.lo_open else f"{lo} to {hi}"

    def seconds(self, text: str) -> float:
        """`text` in seconds; ValueError with the message the usage line shows."""
        return durations.parse(text)

    def __call__(self, text: str) -> str:
        try:
            seconds = self.seconds(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        low_ok = seconds > self.lo if self.lo_open else seconds >= self.lo
        if not (low_ok and seconds <= self.hi):
            raise argparse.ArgumentTypeError(f"{_short(text)} is not a duration {self.shown()}")
        return text


@dataclass(frozen=True, slots=True)
class PromDuration(Duration):
    """A duration as Prometheus reads it (whole amounts with units: `15s`, `1m30s`, `1w`),
    within [lo, hi] seconds (`lo_open`: above lo); the value is the text as written, for the
    rules it goes into (`vtop rules export --resolution 0s` made `[5m:0s]`)."""

    def seconds(self, text: str) -> float:
        try:
            return durations.promql_seconds(text)
        except ValueError:
            raise ValueError(f"{_short(text)} is not a duration like 15s or 1m") from None


@dataclass(frozen=True, slots=True)
class Knob:
    """A knob's value as `vtop.knobs` allows it (`--max-num-seqs 0` is one usage line)."""

    name: str

    @property
    def __name__(self) -> str:
        return self.name

    def shown(self) -> str:
        allowed = knobs.ranged(self.name)
        return allowed.shown() if allowed is not None else ""

    def __call__(self, text: str) -> KnobValue:
        try:
            return knobs.parse(self.name, text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None


def ranged(help_text: str, kind: Number | Duration | PromDuration | Knob) -> str:
    """`help_text` with the range the flag takes: `poll interval (default 1 s; 0.01–3600 s)`
    (a help that ends in a parenthesis gets the range inside it)."""
    if help_text.endswith(")"):
        return f"{help_text[:-1]}; {kind.shown()})"
    return f"{help_text} ({kind.shown()})"


def _duration(seconds: float) -> str:
    """`0`, `90s`, `1h`, `7d`: a bound as the grammar reads it back."""
    if seconds == 0:
        return "0"
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{seconds / 86400:.0f}d"
    return durations.exact(seconds)


def _short(text: str) -> str:
    return text if len(text) <= 40 else text[:39] + "…"


INTERVAL = Number(0.01, 3600, unit="s")
"""A poll interval: 10 ms (a recording test's pace) to an hour."""
SPEED = Number(1, 1000)
"""Simulated (or replayed) seconds per second, as --help has always said."""
SIM_SPEED = Number(0.01, 1000)
"""`vtop sim --speed`: a served simulation may also run slower than real time."""
SEED = Number(0, 2**32 - 1, integer=True)
PORT = Number(0, 65535, integer=True)
INSTANCES = Number(1, 64, integer=True)
WATCH = Duration(0, WEEK_S, lo_open=True)
"""How long a report watches or a recording records: up to a week (Ctrl-C ends it sooner)."""
BACKFILL = Duration(0, WEEK_S)
WHATIF_WATCH = Duration(0, 86400, lo_open=True)
WINDOW = Duration(0, WEEK_S, lo_open=True)
SIM_SECONDS = Number(0, WEEK_S, unit="s", lo_open=True)
MAX_ITL_MS = Number(0, 60_000, unit="ms", lo_open=True)
MAX_TTFT_S = Number(0, 3600, unit="s", lo_open=True)
PROM_STEP = PromDuration(0, 86400, lo_open=True)
"""`vtop rules export --resolution` and `--interval`: a subquery step or a rule group's
evaluation interval, as Prometheus writes it, up to a day."""
TUNE_WATCH = Duration(5, 86400)
"""`vtop tune --watch`: each trial's window; under 5 s no verdict can form."""
RESTARTS = Number(1, 20, integer=True)
LOAD_CLIENTS = Number(1, 4096, integer=True)
TUNE_WAIT = Duration(1, 86400)
TUNE_SETTLE = Duration(0, 3600)
"""How long `vtop tune` lets a restarted server's load settle before measuring it."""
"""How long `vtop tune` waits for a restarted server to answer, then for its load."""
