"""A trace from a stranger costs time linear in its size, and its header and index are checked.

Issue 26 found a 66 KB file that took 15 s to open (every poll redefined every series, and each
redefinition renumbered all the others), a 1 MB one at the series limit 40 minutes, and
headers and indexes whose NaN or 1e308 ended `vtop trace info` in a traceback. These tests
craft those files (`tests/tracecraft.py`) and hold the reader to a CPU budget per megabyte, far
below what the quadratic path cost and generous enough for a slow, shared 2-core machine.
CPU time of the child is measured, not wall time: other work on the machine does not count.
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import tracecraft as tc
from tests.tracegen import busy_frames
from vtop.model import Frame, GpuStatus, Scrape, SeriesKey
from vtop.trace import TraceError, TraceReader, wire
from vtop.trace.decoder import Decoder
from vtop.trace.recorder import Recorder

ROOT = Path(__file__).resolve().parents[2]
SECONDS_PER_MB = 8.0
"""The budget: about three seconds of decoding per megabyte on a slow core, and room for a
machine three times slower. Before the fix a megabyte at the series limit took 40 minutes."""
STARTUP_S = 4.0
"""The interpreter, imports and argument parsing of one `vtop` process."""
ALLOWANCE_S = SECONDS_PER_MB * wire.COST_ALLOWANCE / (wire.COST_PER_BYTE * 1e6)
"""The reader's allowance, at the same rate: each pass over the polls may spend
`wire.COST_ALLOWANCE` beyond its budget per byte (about 1.3 s here), which a small file's
budget per megabyte cannot hold."""


def cli(*args: str, timeout: float = 120.0) -> tuple[subprocess.CompletedProcess[str], float]:
    """`vtop ARGS` in a child; its result and the CPU seconds it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(
        [sys.executable, "-m", "vtop", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        check=False,
        env={**os.environ, "VTOP_DEBUG": ""},
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result, cpu


def assert_one_line_at_most(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert stderr.count("\n") <= 1, stderr


class Warnings(list[str]):
    def __call__(self, message: str) -> None:
        self.append(message)


# -- time ---------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_megabyte_at_the_series_limit_redefined_opens_within_the_budget(tmp_path: Path) -> None:
    """The issue's worst file: every series (the limit) defined, then all redefined; no
    footer, so `trace info` decodes every poll."""
    path = tmp_path / "storm.vtrace"
    path.write_bytes(tc.redefinition_trace(wire.MAX_SERIES, 2))
    mb = path.stat().st_size / 1e6
    assert 0.5 < mb < 2.0
    result, cpu = cli("trace", "info", str(path))
    assert result.returncode == 0, result.stderr
    assert "(2 polls" in result.stdout
    assert_one_line_at_most(result.stderr)
    assert cpu < STARTUP_S + SECONDS_PER_MB * mb, f"{cpu:.1f} s of CPU for {mb:.2f} MB"
    # A report decodes a trace without a footer up to three times (its end, its polls, the
    # last one again) and runs the rules on frames of 131 072 series: four budgets.
    result, cpu = cli("--replay", str(path), "--report", "--format", "json")
    assert result.returncode in (0, 1, 2, 3) and json.loads(result.stdout)["window"]
    assert_one_line_at_most(result.stderr)
    assert cpu < STARTUP_S + 4 * SECONDS_PER_MB * mb, f"report: {cpu:.1f} s for {mb:.2f} MB"


FAMILIES: dict[str, Callable[[], bytes]] = {
    "redefine-small-set": lambda: tc.redefinition_trace(200, 4000),
    "redefine-many": lambda: tc.redefinition_trace(6000, 60),
    "move-every-series": lambda: tc.move_trace(300, 6000),
    "toggle-every-series": lambda: tc.toggle_trace(8000, 2000),
    "every-slot-changes": lambda: tc.churn_trace(100_000, 600),
    "large-metadata": lambda: tc.meta_trace(300, 1500),
    "tiny-polls": lambda: tc.tiny_trace(80_000),
}


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("family", FAMILIES)
def test_no_crafted_trace_costs_more_than_the_budget_per_megabyte(
    tmp_path: Path, family: str
) -> None:
    """Each way a body can cost more than its bytes (deflate repeats a body for almost
    nothing): opened, checked, totalled and read, with and without a footer. The budget is
    the reader's, per pass over the polls: without a footer the totals are one pass and the
    reading another; with one, the totals are the footer's and the reading the only pass."""
    data = FAMILIES[family]()
    for footer in (False, True):
        path = tmp_path / f"{family}-{footer}.vtrace"
        path.write_bytes(data if not footer else _with_footer(data, tmp_path))
        mb = path.stat().st_size / 1e6
        budget = (1 if footer else 2) * (SECONDS_PER_MB * mb + ALLOWANCE_S)
        start = time.process_time()
        warnings = Warnings()
        with TraceReader(path, warn=warnings) as reader:
            reader.check()
            reader.stats()
            polls = sum(1 for _ in reader.polls())
        cpu = time.process_time() - start
        assert cpu < budget, f"{family}: {cpu:.1f} s for {mb:.2f} MB (budget {budget:.1f} s)"
        assert polls > 0 and len(warnings) <= 1


def _with_footer(data: bytes, where: Path) -> bytes:
    """The same polls with the index a clean close writes (polls counted by scanning)."""
    path = where / "without-footer.vtrace"
    path.write_bytes(data)
    with TraceReader(path) as reader:
        keyframes = [(round(k.t * 1e6), k.offset, k.poll) for k in reader.keyframes]
        end = reader.data_end
        polls = sum(1 for _ in reader.times())
    f = tc.TraceFile()
    f.data = bytearray(data[:end])
    f.keyframes, f.polls = keyframes, polls
    t_first = keyframes[0][0] / 1e6
    summary = {"polls": polls, "samples": 0, "t_first": t_first, "t_last": t_first + polls}
    return f.finish(summary=summary)


def test_a_body_that_costs_far_more_than_its_bytes_is_read_up_to_there_with_one_warning(
    tmp_path: Path,
) -> None:
    path = tmp_path / "moves.vtrace"
    path.write_bytes(tc.move_trace(300, 20_000))
    warnings = Warnings()
    with TraceReader(path, warn=warnings) as reader:
        polls = sum(1 for _ in reader.polls())
    assert 10 < polls < 20_000
    (line,) = warnings
    assert line.startswith("moves.vtrace: the polls from byte ")
    assert "cost far more to decode than their size" in line


def _flapping(path: Path, polls: int, endpoints: int, flapping: int) -> None:
    """A fleet where `flapping` endpoints fail every other poll: the costliest honest shape
    (every series of an endpoint toggled off and on again, poll after poll)."""
    streams = [busy_frames(polls, seed=i + 1) for i in range(endpoints)]
    with Recorder(path, sources=["test"], interval_s=1.0) as rec:
        for p in range(polls):
            scrapes = []
            frame = None
            for i, stream in enumerate(streams):
                frame = next(stream)
                s = frame.scrapes[0]
                s = Scrape(**{**{n: getattr(s, n) for n in Scrape.__dataclass_fields__},
                              "endpoint": f"http://10.0.0.{i}:8000"})  # fmt: skip
                if i < flapping and p % 2:
                    s = Scrape(endpoint=s.endpoint, t=s.t, latency_s=None, size_bytes=None,
                               error="timed out after 10 s", scalars={}, histograms={})  # fmt: skip
                scrapes.append(s)
            assert frame is not None
            rec.feed(Frame(frame.t, tuple(scrapes), frame.gpu, frame.host))


def _cost_per_byte(path: Path) -> float:
    with TraceReader(path, warn=pytest.fail) as reader:
        dec = Decoder()
        for _ in reader._walk(reader.keyframes[0], dec):
            pass
        return dec.cost / reader.size


def test_what_vtop_records_costs_a_fraction_of_the_budget(tmp_path: Path) -> None:
    """Shipped traces, real-server fixtures, and fleets with flapping endpoints decode well
    inside the budget: it stops crafted files, never a recording."""
    shipped = [*ROOT.glob("traces/*.vtrace"), *ROOT.glob("tests/golden/*.vtrace"),
               *ROOT.glob("tests/fixtures/real-regimes/*.vtrace")]  # fmt: skip
    flap = tmp_path / "flap.vtrace"
    _flapping(flap, 400, 1, 1)
    fleet = tmp_path / "fleet.vtrace"
    _flapping(fleet, 120, 12, 3)
    costs = {p.name: _cost_per_byte(p) for p in [*shipped, flap, fleet]}
    assert len(costs) > 20
    worst = max(costs, key=costs.__getitem__)
    assert costs[worst] < wire.COST_PER_BYTE / 3, f"{worst}: {costs[worst]:.0f} units a byte"


def test_a_fleet_of_idle_servers_adds_its_few_changes_exactly(tmp_path: Path) -> None:
    """Sparse lanes (a counter or two changing among thousands of slots) take the slot-by-slot
    path; wide deltas (int16 to int64 lanes) and negative ones included."""
    keys = [SeriesKey("vllm:num_requests_running", "m", str(e), "") for e in range(400)]
    frames = []
    values = dict.fromkeys(keys, 0.0)
    for p in range(150):
        k = keys[(p * 37) % len(keys)]
        values[k] += (-1) ** p * (1, 300, 70_000, 5_000_000_000)[p % 4]
        scrape = Scrape(endpoint="http://e", t=1.75e9 + p, latency_s=0.01, size_bytes=100,
                        error=None, scalars=dict(values), histograms={})  # fmt: skip
        frames.append(Frame(1.75e9 + p, (scrape,), GpuStatus(()), None))
    path = tmp_path / "idle.vtrace"
    with Recorder(path, sources=["test"], interval_s=1.0) as rec:
        for f in frames:
            rec.feed(f)
    with TraceReader(path, warn=pytest.fail) as reader:
        got = [f.scrapes[0].scalars for f in reader.frames()]
        light = [f.scrapes[0].scalars for f in reader.frames(only=frozenset({keys[0].signal}))]
    assert got == [f.scrapes[0].scalars for f in frames]
    assert light == got


@pytest.mark.parametrize(
    "body",
    [
        tc.Body().meta().meta().end(),
        tc.Body().meta().define(0, tc.scalar_path(0)).define(0, tc.scalar_path(0)).end(),
        tc.Body().meta().define(0, tc.scalar_path(0)).move(0, 1).end(),
        tc.Body().meta().define(0, tc.scalar_path(0)).toggle([0]).toggle([0]).end(),
        tc.Body()
        .meta()
        .define(0, tc.scalar_path(0))
        .define(1, tc.scalar_path(1))
        .toggle([], raw_deltas=[1, 0])
        .end(),
        tc.Body().meta().define(0, tc.scalar_path(0)).toggle([0, 5]).end(),
    ],
    ids=[
        "meta-twice",
        "defined-twice",
        "defined-and-moved",
        "toggled-twice",
        "not-ascending",
        "unknown-series",
    ],
)
def test_what_the_encoder_writes_once_a_poll_is_refused_when_repeated(
    tmp_path: Path, body: bytes
) -> None:
    f = tc.TraceFile()
    f.poll(tc.Body().meta().define(0, tc.scalar_path(0)).toggle([0]).end(lanes=[b"\0"]))
    f.poll(body, keyframe=True)
    path = tmp_path / "x.vtrace"
    path.write_bytes(f.finish(footer=False))
    warnings = Warnings()
    with TraceReader(path, warn=warnings) as reader:
        assert sum(1 for _ in reader.polls()) == 1
    assert len(warnings) == 1 and "bad poll data" in warnings[0]


def test_a_keyframe_whose_poll_time_is_not_its_own_is_damage(tmp_path: Path) -> None:
    f = tc.TraceFile()
    f.poll(tc.Body().meta().end(), keyframe=True)
    f.poll(tc.Body().meta().end(), keyframe=True, t_us=5)
    path = tmp_path / "x.vtrace"
    path.write_bytes(f.finish(footer=False))
    warnings = Warnings()
    with TraceReader(path, warn=warnings) as reader:
        assert sum(1 for _ in reader.polls()) == 1
    assert "not its own" in warnings[0]


@pytest.mark.timeout(300)
def test_a_report_over_polls_that_all_share_one_time_evaluates_a_bounded_number_of_times(
    tmp_path: Path,
) -> None:
    """A span of zero made the rule step zero: every poll was a full evaluation."""
    from vtop.report.run import replay_collector

    f = tc.TraceFile()
    f.poll(tc.Body().meta().define(0, tc.scalar_path(0)).toggle([0]).end(lanes=[b"\0"]))
    for _ in range(3000):
        f.poll(tc.Body().end(lanes=[b"\0"]), dt_us=0)
    path = tmp_path / "same.vtrace"
    path.write_bytes(f.finish(footer=False))
    collector = replay_collector(str(path), max_evaluations=50)
    assert collector.evaluations <= 2 * 50 + 1


# -- headers and indexes ------------------------------------------------------------------------


def _header_trace(header: bytes) -> bytes:
    f = tc.TraceFile(header)
    f.poll(tc.Body().meta().end(), keyframe=True)
    return f.finish()


@pytest.mark.parametrize(
    ("header", "says"),
    [
        (b"[1, 2]", "has a header that is not a JSON object"),
        (b'"text"', "has a header that is not a JSON object"),
        (b"12", "has a header that is not a JSON object"),
        (b"{nope", "has an unreadable header (not JSON)"),
        (b"[" * 100_000, "has an unreadable header (not JSON)"),
        (b'{"start_t": NaN}', "header field start_t is NaN, not a time"),
        (b'{"start_t": 1e20}', "header field start_t is 1e+20, not a time"),
        (b'{"start_t": -5}', "header field start_t is -5, not a time"),
        (b'{"start_t": "now"}', "header field start_t is 'now', not a time"),
        (b'{"interval_s": NaN}', "header field interval_s is NaN, not an interval"),
        (b'{"interval_s": 0}', "header field interval_s is 0, not an interval"),
        (b'{"interval_s": 1e308}', "header field interval_s is 1e+308, not an interval"),
        (b'{"interval_s": ' + b"9" * 400 + b"}", "header field interval_s is 999"),
        (b'{"interval_s": true}', "header field interval_s is True, not an interval"),
        (b'{"format": 7}', "header field format is 7, not a format this vtop reads"),
        (b'{"sources": "x"}', "header field sources is 'x', not a list of strings"),
        (b'{"endpoints": [1]}', "header field endpoints is [1], not a list of objects"),
        (b'{"vtop": 1}', "header field vtop is 1, not a string"),
    ],
)
def test_a_header_that_cannot_be_is_one_line_naming_the_file_and_the_field(
    tmp_path: Path, header: bytes, says: str
) -> None:
    path = tmp_path / "h.vtrace"
    path.write_bytes(_header_trace(header))
    with pytest.raises(TraceError) as exc:
        TraceReader(path)
    message = str(exc.value)
    assert str(path) in message and says in message and "\n" not in message
    assert len(message) < 300


@pytest.mark.parametrize("header", [b"[1, 2]", b'{"start_t": NaN}', b'{"interval_s": 1e308}'])
def test_the_command_line_says_a_bad_header_in_one_line_and_exits_unknown(
    tmp_path: Path, header: bytes
) -> None:
    path = tmp_path / "h.vtrace"
    path.write_bytes(_header_trace(header))
    with pytest.raises(TraceError) as exc:
        TraceReader(path)
    for args in (("trace", "info", str(path)), ("--replay", str(path), "--report")):
        result, _ = cli(*args)
        assert result.returncode == 3 and result.stdout == ""
        assert result.stderr == f"vtop: {exc.value}\n"


Entries = list[tuple[int, int, int]]


def _index_trace(summary: dict[str, object], edit: Callable[[Entries], Entries] | None = None
                 ) -> bytes:  # fmt: skip
    f = tc.TraceFile()
    for p in range(3):
        f.poll(tc.Body().meta().end(), keyframe=p == 0)
    if edit is not None:
        f.keyframes = edit(f.keyframes)
    return f.finish(summary=summary)


GOOD: dict[str, object] = {
    "polls": 3,
    "samples": 0,
    "t_first": 1750000001.0,
    "t_last": 1750000003.0,
}


@pytest.mark.parametrize(
    ("summary", "says"),
    [
        ({**GOOD, "t_last": math.nan}, "says t_last is NaN, not a time"),
        ({**GOOD, "t_last": 1e308}, "says t_last is 1e+308, not a time"),
        ({**GOOD, "t_last": math.inf}, "says t_last is Infinity, not a time"),
        ({**GOOD, "t_first": 1e20}, "says t_first is 1e+20, not a time"),
        ({**GOOD, "t_first": math.nan}, "says t_first is NaN, not a time"),
        ({**GOOD, "t_first": 1750000009.0}, "says the last poll comes before the first"),
        ({**GOOD, "t_last": None}, "has a span that does not match its polls"),
        ({**GOOD, "polls": -1}, "says polls is -1, not a count"),
        ({**GOOD, "polls": 1e308}, "says polls is 1e+308, not a count"),
        ({**GOOD, "polls": "3"}, "says polls is '3', not a count"),
        ({**GOOD, "samples": None}, "says samples is None, not a count"),
        ({**GOOD, "polls": 0}, "lists 1 keyframes for 0 polls"),
    ],
)
def test_an_index_that_cannot_be_is_said_once_and_rebuilt_from_the_records(
    tmp_path: Path, summary: dict[str, object], says: str
) -> None:
    path = tmp_path / "i.vtrace"
    path.write_bytes(_index_trace(summary))
    warnings = Warnings()
    with TraceReader(path, warn=warnings) as reader:
        assert not reader.indexed
        stats = reader.stats()
        assert stats.polls == 3 and stats.t_last == pytest.approx(1750000003.0)
        assert reader.end == pytest.approx(1750000003.0)
    assert warnings == [f"i.vtrace: its index {says}; rebuilding it from the records"]
    if "t_last is NaN" in says or "t_first is 1e+20" in says:  # the cases, end to end
        result, _ = cli("trace", "info", str(path))
        assert result.returncode == 0, result.stderr
        assert result.stderr == f"vtop: warning: {warnings[0]}\n"
        assert "(3 polls" in result.stdout


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda e: [(e[0][0], 10**9, 0)], "puts a keyframe at byte 1000000000, outside the polls"),
        (lambda e: [(e[0][0], e[0][1], 5)], "numbers a keyframe 5, out of order"),
        (lambda e: [(2**62, e[0][1], 0)], "has a keyframe time out of range"),
        (lambda e: [e[0], e[0]], "puts a keyframe at byte"),
        (lambda e: [(-(10**17), e[0][1], 0)], "has a keyframe time out of range"),
        (lambda e: [], "lists no keyframe for 3 polls"),
        (lambda e: [(e[0][0] + 10**6, e[0][1], 0)], "has a first keyframe that is not the first"),
        (lambda e: [(e[0][0], e[0][1] + 1, 0)], "has a first keyframe that is not the first"),
    ],
    ids=["outside", "past-the-polls", "time", "twice", "before-1970", "none", "late", "not-first"],
)
def test_index_entries_outside_the_file_or_out_of_order_are_rebuilt(
    tmp_path: Path, edit: Callable[[Entries], Entries], says: str
) -> None:
    path = tmp_path / "k.vtrace"
    path.write_bytes(_index_trace(GOOD, edit))
    warnings = Warnings()
    with TraceReader(path, warn=warnings) as reader:
        assert not reader.indexed and reader.stats().polls == 3
        assert reader.start == 1750000001.0  # what --from and the report's window start from
    (line,) = warnings
    assert line.startswith(f"k.vtrace: its index {says}") and line.endswith("from the records")


def test_poll_scrape_and_event_times_beyond_any_date_are_damage(tmp_path: Path) -> None:
    f = tc.TraceFile()
    f.poll(tc.Body().meta().end(), keyframe=True)
    f.poll(tc.Body().end())
    f.poll(tc.Body().end(), dt_us=wire.MAX_T_US)  # past the year 9999
    path = tmp_path / "t.vtrace"
    path.write_bytes(f.finish(footer=False))
    warnings = Warnings()
    with TraceReader(path, warn=warnings) as reader:
        times = list(reader.times())
    assert times == [1750000001.0, 1750000002.0]
    assert "poll time out of range" in warnings[0]
    f = tc.TraceFile()
    f.poll(tc.Body().meta().end(), keyframe=True)
    f.poll(tc.Body().end(offsets=[-(2**62)]))  # a scrape before 1970
    path.write_bytes(f.finish(footer=False))
    warnings = Warnings()
    with TraceReader(path, warn=warnings) as reader:
        assert list(reader.times()) == [1750000001.0]
    assert "scrape time out of range" in warnings[0]
    for extra in ({"events": [[1e300, "restart", "http://e", "x"]]},
                  {"events": [[math.nan, "restart", "http://e", "x"]]}):  # fmt: skip
        f = tc.TraceFile()
        f.poll(tc.Body().meta().extra(json.loads(json.dumps(extra))).end(), keyframe=True)
        path.write_bytes(f.finish(footer=False))
        warnings = Warnings()
        with TraceReader(path, warn=warnings) as reader:
            assert list(reader.times()) == []
        assert "bad event time" in warnings[0]


# -- files that are not files -------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_a_fifo_is_refused_in_one_line_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "incident.vtrace"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="is a FIFO, not a regular file"):
        TraceReader(fifo)
    for args in (("trace", "info", str(fifo)), ("--replay", str(fifo), "--report")):
        result, _ = cli(*args, timeout=60)
        assert result.returncode == 3
        assert result.stderr == (
            f"vtop: {fifo} is a FIFO, not a regular file; a trace is a file written by "
            "vtop --record\n"
        )
    with pytest.raises(TraceError, match="is a directory, not a regular file"):
        TraceReader(tmp_path)
