"""The sim HTTP server on real loopback sockets."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from vtop.sim.server import serve
from vtop.sim.twin import Twin


def get(url: str, timeout: float = 10.0) -> tuple[int, bytes, float]:
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read(), time.perf_counter() - t0
    except urllib.error.HTTPError as err:
        return err.code, err.read(), time.perf_counter() - t0


def gen_tokens(page: bytes) -> float:
    for fam in text_string_to_metric_families(page.decode()):
        for s in fam.samples:
            if s.name == "vllm:generation_tokens_total":
                return s.value
    raise AssertionError("no vllm:generation_tokens_total")


def test_serves_metrics_models_version_health() -> None:
    twin = Twin("healthy")
    with serve(twin, speed=50.0) as srv:
        assert srv.url.startswith("http://127.0.0.1:")
        status, body, _ = get(srv.url + "/metrics")
        assert status == 200
        first = gen_tokens(body)
        time.sleep(0.4)
        _, body2, _ = get(srv.url + "/metrics")
        assert gen_tokens(body2) > first  # the twin keeps pace with wall time x 50
        assert twin.now > 15
        status, body, _ = get(srv.url + "/v1/models")
        models = json.loads(body)
        assert status == 200 and models["data"][0]["id"] == "Qwen/Qwen2.5-7B-Instruct-AWQ"
        assert models["data"][0]["max_model_len"] == 32768
        status, body, _ = get(srv.url + "/version")
        assert status == 200 and json.loads(body) == {"version": "0.32.0"}
        status, body, _ = get(srv.url + "/health")
        assert (status, body) == (200, b"")
        status, _, _ = get(srv.url + "/nope")
        assert status == 404
        _, page, _ = get(srv.url + "/metrics")
        assert b'http_requests_total{handler="/v1/models",method="GET",status="2xx"} 1.0' in page
        assert b'handler="/metrics"' not in page  # the instrumentator skips /metrics
    with pytest.raises(OSError):
        get(srv.url + "/health", timeout=1.0)


def test_emulated_version_is_what_the_server_speaks() -> None:
    twin = Twin("healthy", emulate_version="0.6")
    with serve(twin, speed=10.0) as srv:
        _, body, _ = get(srv.url + "/version")
        assert json.loads(body)["version"].startswith("0.6")
        _, page, _ = get(srv.url + "/metrics")
        assert b"vllm:gpu_cache_usage_perc{" in page
        assert b'engine="0"' not in page


def test_frontend_bound_server_answers_metrics_late() -> None:
    busy = Twin("frontend-bound")
    busy.warm_up()
    calm = Twin("healthy")
    calm.warm_up()
    with serve(busy, speed=2.0) as slow, serve(calm, speed=2.0) as fast:
        slow_lat = sorted(get(slow.url + "/metrics")[2] for _ in range(4))
        fast_lat = sorted(get(fast.url + "/metrics")[2] for _ in range(4))
    assert max(slow_lat) > 0.25  # a pass of the API server's event loop, at 2x speed
    assert max(fast_lat) < 0.25
