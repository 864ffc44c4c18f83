"""Answers no Prometheus gives, from a server behind `--prometheus` (issue 26, point 7).

A loopback server speaks the query API (tests/hostileprom.py) with one thing broken in an
otherwise healthy answer, the latest sample a real vLLM page: an `instance` label that is not a
host, JSON nested far past the parser's depth, a newline inside a sample value, labels no page
could hold, values and timestamps that are not numbers, a backfill of 180 MB. Each must leave
the run going: the rest of the answer read, or one line that says what was wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.hostileprom import (
    Fleet,
    HostilePrometheus,
    answering,
    endless_matrix,
    healthy_answers,
    page_series,
    success,
)
from vtop.cli import main as vtop_main
from vtop.monitor import Monitor
from vtop.sources.live import is_local
from vtop.sources.prometheus import PrometheusSource
from vtop.sources.prometheus.client import RANGE_MAX_BYTES
from vtop.sources.prometheus.series import Classifier, classify
from vtop.ui.headline import short_url

NOT_HOSTS = ["[::1", "[zz]:80", "a b c", "::::", "\x1b[2J\x1b]52;c;SGk=\x07", "x" * 5000,
             "http://u:pw@h/", "%zz", "[::1]:99999"]  # fmt: skip


def read(prom: HostilePrometheus, *, backfill_s: float = 0.0, polls: int = 1) -> Monitor:
    """What a monitor holds after the source's history and `polls` more polls."""
    monitor = Monitor()

    async def go() -> None:
        source = PrometheusSource(prom.url, backfill_s=backfill_s, interval_s=0.01)
        try:
            for frame in await source.history():
                monitor.feed(frame)
            for _ in range(polls):
                await asyncio.sleep(0.02)
                monitor.feed(await source.poll())
        finally:
            await source.aclose()

    asyncio.run(go())
    return monitor


def report(prom: HostilePrometheus, *extra: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = vtop_main(["--prometheus", prom.url, "--report", "--duration", "1",
                          "--format", "json", *extra])  # fmt: skip
    return code, json.loads(out.getvalue())


def a_verdict_or_too_short(code: int, doc: dict[str, Any]) -> bool:
    """The report judged, or had too little time to (a 1 s watch without history may be
    UNKNOWN for that alone): anything but a failure of the source."""
    return code in (0, 1, 2) or (code == 3 and "too short" in doc.get("reason", ""))


def edited(edit: Callable[[dict[str, Any]], None], fleet: Fleet | None = None) -> Any:
    """The healthy latest answer with `edit` applied to each of its result items."""
    base = fleet or healthy_answers()

    def latest(form: Any) -> Any:
        answer = base.latest(form)
        for item in answer["data"]["result"]:
            edit(item)
        return answer

    return latest


@pytest.mark.parametrize("instance", NOT_HOSTS)
def test_an_instance_label_that_is_no_host_is_read_like_any_other(instance: str) -> None:
    with HostilePrometheus(healthy_answers(instance=instance)) as prom:
        monitor = read(prom)
    (view,) = monitor.endpoints.values()
    assert view.store.last("running") == 6.0
    assert not view.local
    assert "\x1b" not in next(iter(monitor.endpoints))


@pytest.mark.parametrize("instance", NOT_HOSTS)
def test_names_that_are_no_url_are_shown_and_never_local(instance: str) -> None:
    assert short_url(instance).replace("/", "") in instance.replace("/", "")
    assert is_local(instance) is False


def test_a_report_over_an_instance_that_is_no_host_reads_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with HostilePrometheus(healthy_answers(instance="[::1")) as prom:
        code, doc = report(prom)
    assert code in (0, 1, 2), capsys.readouterr().err
    assert doc["endpoints"][0]["url"] == "[::1" and doc["endpoints"][0]["status"] == "ok"


@pytest.mark.parametrize("where", ["instances", "latest", "backfill"])
def test_json_nested_past_the_parsers_depth_is_one_line(
    where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    nested = b"[" * 200_000 + b"]" * 200_000
    with HostilePrometheus(**{where: answering(nested)}) as prom:
        code, doc = report(prom, "--backfill", "5m")
    err = capsys.readouterr().err
    assert "Traceback" not in err and "RecursionError" not in err
    said = json.dumps(doc)
    assert "answered JSON nested too deep to be an API response" in said
    if where == "backfill":  # only the history is lost: the live reading goes on
        assert doc["endpoints"][0]["status"] == "ok", doc["endpoints"]
        assert a_verdict_or_too_short(code, doc), (code, doc.get("reason"))
    else:
        assert code == 3 and err.count("\n") == 1


def test_a_newline_in_a_sample_value_adds_no_line_to_the_page() -> None:
    injected = '6\nvllm:num_requests_waiting{engine="0",model_name="vtop/engine"} 1000029'

    def edit(item: dict[str, Any]) -> None:
        name = item["metric"]["__name__"]
        if name == "vllm:num_requests_waiting":
            item["value"][1] = "30"
        elif name == "vllm:num_requests_running":
            item["value"][1] = injected

    with HostilePrometheus(latest=edited(edit)) as prom:
        monitor = read(prom)
    (view,) = monitor.endpoints.values()
    assert view.store.last("waiting") == 30.0
    assert view.store.last("running") is None  # not a number: not read
    assert view.store.last("kv_usage") == pytest.approx(0.30434782608695654)


@pytest.mark.parametrize(
    "value", [None, True, [], {}, "", "six", "1e999999", 10**400, "0x10", " 6 \n#", ["6"]]
)
def test_a_sample_value_that_is_not_a_number_is_skipped(value: Any) -> None:
    def edit(item: dict[str, Any]) -> None:
        if item["metric"]["__name__"] == "vllm:num_requests_running":
            item["value"][1] = value

    with HostilePrometheus(latest=edited(edit)) as prom:
        monitor = read(prom)
    (view,) = monitor.endpoints.values()
    assert view.store.last("waiting") == 0.0  # the rest of the answer is read
    assert view.store.last("running") in (None, float("inf"))


@pytest.mark.parametrize(
    "labels",
    [
        {"model_name": 7},
        {"model_name": None},
        {"model_name": {"a": "b"}},
        {'le="1"} 5\nvllm:num_requests_waiting{engine': "0"},
        {"bad name": "x"},
        {"__name__": "vllm:num requests_running"},
        {"__name__": 'vllm:num_requests_running{x="1"} 99\nvllm:num_requests_waiting'},
        {"job": 5},
    ],
)
def test_a_series_whose_labels_no_page_could_hold_is_skipped(labels: dict[str, Any]) -> None:
    def edit(item: dict[str, Any]) -> None:
        if item["metric"]["__name__"] == "vllm:num_requests_waiting":
            item["metric"].update(labels)

    with HostilePrometheus(latest=edited(edit)) as prom:
        monitor = read(prom)
    (view,) = monitor.endpoints.values()
    assert view.store.last("running") == 6.0
    assert view.store.last("waiting") in (None, 0.0)  # no injected 5 or 99


def test_backfill_points_whose_time_is_no_number_are_skipped() -> None:
    fleet = healthy_answers()
    good = fleet.t - 60

    def backfill(form: Any) -> Any:
        result = []
        for metric, value in page_series(fleet.targets[("vllm", "127.0.0.1:8000")], "vllm",
                                         "127.0.0.1:8000"):  # fmt: skip
            points = [[good, value], [[1], value], [{"t": 1}, value], ["soon", value],
                      [None, value], [1e999, value], [good]]  # fmt: skip
            result.append({"metric": metric, "values": points})
        stamp = {"__name__": "vtop_scrape_timestamp", "job": "vllm", "instance": "127.0.0.1:8000"}
        result.append({"metric": stamp, "values": [[good, str(good)], [[1], "x"]]})
        return success("matrix", result)

    with HostilePrometheus(fleet, backfill=backfill) as prom:
        monitor = read(prom, backfill_s=600)
    (view,) = monitor.endpoints.values()
    assert good in list(view.store.times())  # the one good step was read
    assert view.store.last("running") == 6.0


def test_a_backfill_of_180_mb_is_cut_at_the_cap_and_the_live_reading_goes_on() -> None:
    with HostilePrometheus(backfill=lambda form: endless_matrix(180)) as prom:
        code, doc = report(prom, "--backfill", "1h")
        sent = prom.sent
    assert a_verdict_or_too_short(code, doc), (code, doc.get("reason"))
    assert doc["endpoints"][0]["status"] == "ok"
    notes = [e["message"] for e in doc["events"] if e["kind"] == "note"]
    assert any("answer to /api/v1/query_range larger than 32 MiB" in n for n in notes), notes
    assert sent < RANGE_MAX_BYTES + 16 * 2**20  # read to the cap, then hung up on


def test_series_are_remembered_within_a_bound_however_many_a_prometheus_invents() -> None:
    classifier = Classifier()
    classifier.MAX_SERIES = 1000
    page = healthy_answers().targets[("vllm", "127.0.0.1:8000")]
    real = [metric for metric, _ in page_series(page, "vllm", "127.0.0.1:8000")]
    for metric in real:  # the same answer as classify, and the same object the next poll
        assert classifier(metric) == classify(metric)
        assert classifier(dict(metric)) is classifier(metric)
    for i in range(5000):
        invented = {"__name__": "vllm:num_requests_running", "job": "vllm",
                    "instance": "127.0.0.1:8000", "model_name": f"m{i}"}  # fmt: skip
        assert classifier(invented) == classify(invented)
        assert len(classifier) <= 1000
    # labels as a hostile server's JSON may hold them: not strings
    hostile = ('{"__name__": "up", "job": ["vllm"]}', '{"__name__": "up", "job": {"a": 1}}')
    for bad in map(json.loads, hostile):
        assert classifier(bad) is None and classify(bad) is None
