"""Shared test helpers: paths to fixtures, and what each test costs in CPU.

pytest's `--durations` names the slowest tests by wall time; on two cores that mixes the tests
that compute with those that wait (on sockets, subprocesses, real-time windows), and only the
first kind makes the suite's CPU-bound first pass slower. So every test's CPU seconds (its
worker process and the subprocesses it waited for, setup to teardown) ride on its teardown
report, which pytest-xdist carries to the controller, and a run with `--durations` also lists
the costliest by CPU.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Generator
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
CPU_KEY = "cpu_s"
_began = pytest.StashKey[float]()
_spent: dict[str, float] = {}


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


def _cpu_s() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_began] = _cpu_s()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None]:
    yield
    if _began in item.stash:
        item.user_properties.append((CPU_KEY, _cpu_s() - item.stash[_began]))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "teardown":
        for key, value in report.user_properties:
            if key == CPU_KEY and isinstance(value, float):
                _spent[report.nodeid] = value


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    shown = terminalreporter.config.getoption("durations", None)
    if not shown or not _spent:
        return
    terminalreporter.write_sep(
        "=", f"costliest {shown} by CPU ({sum(_spent.values()):.0f} s in all)"
    )
    for nodeid, seconds in sorted(_spent.items(), key=lambda kv: -kv[1])[:shown]:
        terminalreporter.write_line(f"{seconds:7.2f}s cpu  {nodeid}")
