"""The scraper against a real HTTP server: every failure is one clear line, secrets never leak."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.pageserver import Answer, PageServer, Script
from vtop.model import EndpointInfo, Scrape, SeriesKey
from vtop.sources.urls import redact_url
from vtop.sources.vllm import ScrapeOptions, VllmScraper, parse_header

PAGE = b"""# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 7.0
vllm:num_requests_waiting{engine="0",model_name="qwen"} 3.0
vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.42
vllm:generation_tokens_total{engine="0",model_name="qwen"} 1234.0
"""
SECRET = "sk-very-secret-token"


run = asyncio.run


async def one(url: str, options: ScrapeOptions | None = None) -> Scrape:
    async with VllmScraper(url, options or ScrapeOptions(timeout_s=0.5)) as s:
        return await s.scrape()


def serve(**routes: Answer) -> PageServer:
    return PageServer(Script({"/" + k.replace("_", "/"): v for k, v in routes.items()}))


def test_reads_a_page() -> None:
    with serve(metrics=Answer(PAGE)) as srv:
        sc = run(one(srv.url))
    assert sc.ok, sc.error
    assert sc.scalars[SeriesKey("running", "qwen", "0", "")] == 7.0
    assert sc.size_bytes == len(PAGE)
    assert sc.latency_s is not None and sc.latency_s >= 0


def test_gzip_is_accepted_and_decoded() -> None:
    with serve(metrics=Answer(PAGE, gzip=True)) as srv:
        sc = run(one(srv.url))
        headers = srv.script.requests[-1][1]
    assert sc.ok, sc.error
    assert "gzip" in headers.get("Accept-Encoding", "")
    assert sc.scalars[SeriesKey("waiting", "qwen", "0", "")] == 3.0


def test_gzip_that_is_not_gzip() -> None:
    with serve(metrics=Answer(PAGE, raw_encoding="gzip")) as srv:
        sc = run(one(srv.url))
    assert sc.error is not None and "decode" in sc.error and "\n" not in sc.error


def test_refused_connection_is_one_line() -> None:
    sc = run(one("http://127.0.0.1:1"))
    assert sc.error == "cannot connect to http://127.0.0.1:1/metrics: connection refused"


def test_slow_server_times_out_before_the_next_poll() -> None:
    with serve(metrics=Answer(PAGE, delay_s=1.5)) as srv:
        sc = run(one(srv.url, ScrapeOptions(timeout_s=0.3)))
    assert sc.error is not None and "within 0.3 s" in sc.error
    assert sc.latency_s is not None and sc.latency_s < 1.0


def test_body_that_never_ends_hits_the_timeout_or_the_cap() -> None:
    with serve(metrics=Answer(endless=True)) as srv:
        sc = run(one(srv.url, ScrapeOptions(timeout_s=0.5, max_bytes=2000)))
    assert sc.error is not None
    assert "larger than" in sc.error or "within" in sc.error


def test_size_cap_has_a_clear_error() -> None:
    with serve(metrics=Answer(b"# x\n" * 100_000)) as srv:
        sc = run(one(srv.url, ScrapeOptions(timeout_s=2, max_bytes=64 * 1024)))
    assert sc.error == f"response from {srv.url}/metrics is larger than 0.0625 MiB"


def test_gzip_bomb_is_capped_after_decoding() -> None:
    with serve(metrics=Answer(b"#" * 20_000_000, gzip=True)) as srv:
        sc = run(one(srv.url, ScrapeOptions(timeout_s=3, max_bytes=1024 * 1024)))
    assert sc.error is not None and "larger than 1 MiB" in sc.error


@pytest.mark.parametrize(
    ("status", "hint"),
    [(401, "VTOP_API_KEY"), (403, "refused"), (404, "a vLLM server's base"), (500, "")],
)
def test_http_errors_carry_hints(status: int, hint: str) -> None:
    with serve(metrics=Answer(b"nope", status=status)) as srv:
        sc = run(one(srv.url))
    assert sc.error is not None and sc.error.startswith(f"HTTP {status}")
    assert hint in sc.error
    assert "\n" not in sc.error


def test_html_page_is_not_metrics() -> None:
    with serve(metrics=Answer(b"<!doctype html><html>login</html>", content_type="text/html")
               ) as srv:  # fmt: skip
        sc = run(one(srv.url))
    assert sc.error is not None and "looks like HTML" in sc.error


def test_page_without_vllm_series_says_disable_log_stats() -> None:
    page = b"# HELP python_gc_objects_collected_total x\npython_gc_objects_collected_total 3\n"
    with serve(metrics=Answer(page)) as srv:
        sc = run(one(srv.url))
    assert sc.error is not None and "--disable-log-stats" in sc.error


def test_bearer_token_and_headers_are_sent_but_never_printed() -> None:
    opts = ScrapeOptions.from_env(
        interval_s=1.0,
        headers=[f"X-Proxy-Auth: {SECRET}-h"],
        environ={"VTOP_API_KEY": SECRET},
    )
    assert SECRET not in repr(opts)
    with serve(metrics=Answer(b"denied", status=401)) as srv:
        sc = run(one(srv.url, opts))
        headers = srv.script.requests[-1][1]
    assert headers["Authorization"] == f"Bearer {SECRET}"
    assert headers["X-Proxy-Auth"] == f"{SECRET}-h"
    assert SECRET not in (sc.error or "")
    assert SECRET not in repr(sc)


def test_url_credentials_and_query_values_are_redacted() -> None:
    assert (
        redact_url("http://user:pw@host:8000/x?token=abc&a=1") == "http://host:8000/x?token=…&a=…"
    )


def test_header_syntax_errors_do_not_echo_values() -> None:
    with pytest.raises(ValueError, match="Name: value") as err:
        parse_header("novalue-here")
    assert parse_header("Authorization: Bearer x") == ("Authorization", "Bearer x")
    assert "Bearer" not in str(err.value)


def test_only_one_request_in_flight() -> None:
    async def two_at_once(url: str) -> tuple[str | None, str | None]:
        async with VllmScraper(url, ScrapeOptions(timeout_s=2)) as s:
            a, b = await asyncio.gather(s.scrape(), s.scrape())
        return a.error, b.error

    with serve(metrics=Answer(PAGE, delay_s=0.3)) as srv:
        errors = run(two_at_once(srv.url))
        hits = sum(1 for path, _ in srv.script.requests if path == "/metrics")
    assert hits == 1
    assert sorted(e or "" for e in errors)[1].startswith("previous poll still in flight")


def test_info_reads_version_and_models() -> None:
    models = {"data": [{"id": "qwen", "max_model_len": 4096}]}
    with serve(metrics=Answer(PAGE), version=Answer(b'{"version": "0.32.0"}'),
               v1_models=Answer(json.dumps(models).encode())) as srv:  # fmt: skip

        async def go() -> EndpointInfo:
            async with VllmScraper(srv.url) as s:
                return await s.info()

        info = run(go())
    assert info.version == "0.32.0"
    assert info.models == ("qwen",)
    assert info.max_model_len == 4096


def test_info_survives_a_server_without_those_paths() -> None:
    with serve(metrics=Answer(PAGE)) as srv:

        async def go() -> EndpointInfo:
            async with VllmScraper(srv.url) as s:
                return await s.info()

        info = run(go())
    assert info.version is None and info.models == ()


def test_info_survives_json_nested_past_the_parsers_depth() -> None:
    """Issue 26, point 7: JSON a million brackets deep raised an uncaught RecursionError."""
    nested = b'{"version": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    models = b'{"data": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    with serve(metrics=Answer(PAGE), version=Answer(nested), v1_models=Answer(models)) as srv:

        async def go() -> EndpointInfo:
            async with VllmScraper(srv.url) as s:
                return await s.info()

        info = run(go())
    assert info.version is None and info.models == ()
