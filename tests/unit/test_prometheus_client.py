"""The Prometheus source's side of the secrets and hostile-label rules that the scraper keeps.

A URL's `user:password@` goes as basic auth and never into the URL httpx logs; target names
come from `job`/`instance` label values, which any scraped target chooses, so they are cleaned
before the screen or a report shows them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging

import pytest

from tests.pageserver import Answer, PageServer, Script
from vtop.sources.prometheus import PrometheusSource

EMPTY_VECTOR = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}})


def test_url_credentials_go_as_basic_auth_and_never_into_a_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = Script(
        routes={"/api/v1/query": Answer(EMPTY_VECTOR.encode(), content_type="application/json")}
    )
    with PageServer(script) as server:
        url = server.url.replace("http://", "http://ops:pr0m-s3cret@")
        source = PrometheusSource(url)
        caplog.set_level(logging.DEBUG)

        async def ask() -> None:
            await source.client.query("up")
            await source.aclose()

        asyncio.run(ask())
    path, headers = script.requests[-1]
    assert path == "/api/v1/query"
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"ops:pr0m-s3cret").decode()
    assert "pr0m-s3cret" not in caplog.text
    assert "pr0m-s3cret" not in source.url
    assert "HTTP Request: POST" in caplog.text  # httpx did log the request, without it


def test_target_names_from_labels_are_inert() -> None:
    source = PrometheusSource("http://127.0.0.1:9")
    hostile = ("vllm", "\x1b]52;c;cm0gLXJmIH4=\x07host:8000\x1b[2J" + "x" * 10_000)
    source._adopt([hostile])
    (name,) = source.endpoints
    assert "\x1b" not in name and "\x07" not in name
    assert name.startswith("]52;c;cm0gLXJmIH4=host:8000[2J")
    assert len(name) <= 200
    asyncio.run(source.aclose())
