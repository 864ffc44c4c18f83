"""Fuzzing what a server behind `--prometheus` answers, over real HTTP on loopback.

The Prometheus source reads three answers (the targets, the latest scrape, a backfill), each
JSON a stranger's server may have written. Each example starts from a healthy Prometheus
(tests/hostileprom.py: one target whose page is a real vLLM server's, a short history) and
breaks some of its answers: a value anywhere in the JSON replaced by arbitrary JSON, a key
dropped, an item repeated, or the whole answer replaced by arbitrary JSON or bytes. Asserted
for every example: the source's history and polls return (never raise) within a bound, every
failure is one line, the monitor and its rules take every frame, and through the real
`python -m vtop --prometheus … --report` the exit code is 0, 1, 2 or 3 with no traceback,
within a minute and 512 MiB (tests/boundedrun.py).

Bounded like tests/fuzz/test_fuzz_pages.py: 120 in-process examples (VTOP_FUZZ_EXAMPLES for
more) and three whole-program runs, no shrinking, the seed of a failure named.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import resource
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.boundedrun import Ran, run_vtop
from tests.hostileprom import Fleet, HostilePrometheus, Route, answering, healthy_answers
from vtop.model import Frame
from vtop.monitor import Monitor
from vtop.sources.prometheus import PrometheusSource

EXAMPLES = int(os.environ.get("VTOP_FUZZ_EXAMPLES", "120"))
PROGRAM_RUNS = 3
PHASES = (Phase.explicit, Phase.generate)
POLL_BOUND_S = 15.0
ROUTES = ("instances", "latest", "backfill")
PROGRAM_BOUND_S = 60.0
PROGRAM_MEMORY_MIB = 512
"""A whole-program run's wall time and peak RSS at most (a report here takes about 2 s and
80 MiB; the 180 MB backfill answer of issue 26 took 2.5 GB)."""
PROCESS_MEMORY_MIB = 1536
"""The test process's own peak at most: the in-process examples hold no answer past its cap."""


def within_memory() -> None:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert peak < PROCESS_MEMORY_MIB, f"the test process peaked at {peak:.0f} MiB"


SCALARS = (st.none() | st.booleans() | st.integers() | st.floats()
           | st.sampled_from(["NaN", "+Inf", "1e999", "", "up", "vllm:x", "job", "instance",
                              "[::1", "\n", "\x1b[2J", "success", "matrix", "vector"])
           | st.text(max_size=12))  # fmt: skip
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


def paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value (the value itself included)."""
    out = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(paths(v, (*at, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(paths(v, (*at, i)))
    return out


_FLEET: Fleet = healthy_answers()
HEALTHY = {name: getattr(_FLEET, name)({}) for name in ROUTES}
"""The healthy answers, made once: an example edits a copy."""
PLACES = {name: [p for p in paths(answer) if p] for name, answer in HEALTHY.items()}


@st.composite
def broken(draw: st.DrawFn, name: str) -> Any:
    """The healthy answer `name` with a few edits at places drawn from all of its places (an
    edit under one already dropped or replaced is skipped)."""
    answer = copy.deepcopy(HEALTHY[name])
    places = PLACES[name]
    for _ in range(draw(st.integers(1, 4))):
        path = places[draw(st.integers(0, len(places) - 1))]
        parent = answer
        try:
            for step in path[:-1]:
                parent = parent[step]
            key = path[-1]
            parent[key]  # still there?
        except (KeyError, IndexError, TypeError):
            continue
        if not isinstance(parent, dict | list):
            continue  # an earlier edit put a string here: indexing reads it, nothing edits it
        edit = draw(st.sampled_from(["replace", "replace", "drop", "repeat"]))
        if edit == "replace":
            parent[key] = draw(JSON)
        elif edit == "drop":
            del parent[key]
        elif isinstance(parent, list):
            parent[key : key + 1] = [parent[key]] * draw(st.integers(2, 50))
        else:
            parent[key] = [parent[key]] * 2
    return answer


@st.composite
def prometheus(draw: st.DrawFn) -> dict[str, Route]:
    """Routes for the three answers: healthy, broken, arbitrary JSON, or bytes."""
    routes: dict[str, Route] = {}
    for name in ROUTES:
        kind = draw(st.sampled_from(["healthy", "broken", "broken", "broken", "json", "bytes"]))
        if kind == "healthy":
            routes[name] = getattr(_FLEET, name)
        elif kind == "broken":
            routes[name] = answering(draw(broken(name)))
        elif kind == "json":
            routes[name] = answering(draw(JSON))
        else:
            routes[name] = answering(draw(st.binary(max_size=64) | st.just(b"{" * 50_000)))
    return routes


def one_line(frame: Frame) -> None:
    for scrape in frame.scrapes:
        if scrape.error is not None:
            assert "\n" not in scrape.error and scrape.error.strip(), repr(scrape.error)
    for event in frame.events:
        assert "\n" not in event.message, repr(event.message)


_SHARED: list[tuple[HostilePrometheus, Monitor]] = []


def _shared() -> tuple[HostilePrometheus, Monitor]:
    """One server (its routes replaced per example) and one monitor (it loads the rules)."""
    if not _SHARED:
        _SHARED.append((HostilePrometheus().__enter__(), Monitor()))
    return _SHARED[0]


def teardown_module() -> None:
    for prom, _ in _SHARED:
        prom.__exit__()


@settings(max_examples=EXAMPLES, deadline=None, database=None, phases=PHASES,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(routes=prometheus())
def test_a_broken_answer_is_one_line_or_read(routes: dict[str, Route]) -> None:
    prom, monitor = _shared()
    prom.routes.update(routes)

    async def go() -> None:
        source = PrometheusSource(prom.url, backfill_s=120, interval_s=0.01)
        try:
            for frame in await asyncio.wait_for(source.history(), POLL_BOUND_S):
                one_line(frame)
                monitor.feed(frame)
            for _ in range(2):
                await asyncio.sleep(0.01)
                frame = await asyncio.wait_for(source.poll(), POLL_BOUND_S)
                one_line(frame)
                monitor.feed(frame)
            for name in source.endpoints:
                source.status(name)
        finally:
            await source.aclose()

    asyncio.run(go())
    within_memory()


def vtop(*args: str) -> Ran:
    ran = run_vtop(*args, timeout_s=PROGRAM_BOUND_S)
    assert not ran.killed, f"vtop {' '.join(args)} ran past {PROGRAM_BOUND_S:.0f} s"
    assert ran.peak_rss_mib < PROGRAM_MEMORY_MIB, f"vtop peaked at {ran.peak_rss_mib:.0f} MiB"
    return ran


@settings(max_examples=PROGRAM_RUNS, deadline=None, database=None, phases=PHASES,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(routes=prometheus(), form=st.sampled_from(["text", "json", "markdown", "html"]))
def test_the_program_ends_with_a_verdict_code_and_no_traceback(
    routes: dict[str, Route], form: str
) -> None:
    with HostilePrometheus(**routes) as prom:
        result = vtop("--prometheus", prom.url, "--report", "--duration", "1",
                      "--backfill", "2m", "--format", form)  # fmt: skip
    assert result.returncode in (0, 1, 2, 3), result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    if form == "json" and result.stdout:
        json.loads(result.stdout)
