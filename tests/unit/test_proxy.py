"""Proxies from the environment, as curl reads them, through a real forward proxy on loopback.

vtop reads `http_proxy`, `https_proxy`, `all_proxy` and `no_proxy` (either case) for URLs that
are not loopback; loopback is never proxied. The proxy here (tests/proxyserver.py) maps the name
`vllm.test` to a loopback port as a proxy's resolver would, so the URL vtop is given is not
loopback while every byte stays on this host (vtop never resolves a proxied name itself). Plain
HTTP goes as an absolute-form request, HTTPS through a CONNECT tunnel with the server's
certificate checked against a private CA (`--ca-cert`). Proxy credentials are sent and never
shown; a proxy that cannot be reached, or that is not an HTTP proxy, is said in one line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.certs import Certs, make_private_ca, serving
from tests.pageserver import Answer, PageServer, Script
from tests.proxyserver import ProxyServer
from tests.unit.test_tls import clean_env, read_fine, script
from vtop.sources.netconfig import NetConfigError, proxy_environment, proxy_for
from vtop.sources.prometheus import PrometheusClient
from vtop.sources.transport import OneOriginTransport
from vtop.sources.vllm import ScrapeOptions, VllmScraper

ROOT = Path(__file__).resolve().parents[2]
NAME = "vllm.test"
"""A name that is not loopback (so it is proxied) and that only the test proxy knows."""


# -- which URLs go through which proxy ---------------------------------------------------------

P = "http://proxy.corp:3128"


@pytest.mark.parametrize(
    ("url", "env", "want"),
    [
        ("http://gpu-box:8000", {"http_proxy": P}, P),
        ("https://gpu-box", {"http_proxy": P}, None),  # http_proxy is for http:// only
        ("https://gpu-box", {"https_proxy": P}, P),
        ("https://gpu-box", {"all_proxy": "proxy.corp:3128"}, P),  # no scheme: http://
        ("http://gpu-box:8000", {"http_proxy": P, "all_proxy": "http://other:1"}, P),
        ("http://127.0.0.1:8000", {"http_proxy": P}, None),  # loopback: never
        ("http://127.8.9.10:8000", {"all_proxy": P}, None),
        ("http://localhost:8000", {"all_proxy": P}, None),
        ("http://api.localhost:8000", {"all_proxy": P}, None),
        ("http://[::1]:8000", {"all_proxy": P}, None),
        ("http://gpu-box:8000", {"all_proxy": P, "no_proxy": "*"}, None),
        ("http://gpu-box:8000", {"all_proxy": P, "no_proxy": "other, gpu-box"}, None),
        ("http://a.gpu.corp:80", {"all_proxy": P, "no_proxy": "gpu.corp"}, None),  # subdomain
        ("http://a.gpu.corp:80", {"all_proxy": P, "no_proxy": ".gpu.corp"}, None),
        ("http://a.gpu.corp:80", {"all_proxy": P, "no_proxy": "*.gpu.corp"}, None),
        ("http://xgpu.corp:80", {"all_proxy": P, "no_proxy": "gpu.corp"}, P),  # not a suffix
        ("http://10.1.2.3:8000", {"all_proxy": P, "no_proxy": "10.0.0.0/8"}, None),
        ("http://11.1.2.3:8000", {"all_proxy": P, "no_proxy": "10.0.0.0/8"}, P),
        ("http://10.1.2.3:8000", {"all_proxy": P, "no_proxy": "10.1.2.3"}, None),
        ("http://gpu-box:8000", {"all_proxy": P, "no_proxy": "gpu-box:8000"}, None),
        ("http://gpu-box:9000", {"all_proxy": P, "no_proxy": "gpu-box:8000"}, P),
        ("http://[fd00::5]:8000", {"all_proxy": P, "no_proxy": "fd00::/8"}, None),
        ("http://gpu-box:8000", {}, None),
    ],
)
def test_which_proxy_a_url_goes_through(url: str, env: dict[str, str], want: str | None) -> None:
    assert proxy_for(url, env) == want


def test_the_environment_is_read_in_both_cases_lowercase_first() -> None:
    env = {
        "HTTP_PROXY": "http://upper:1",
        "http_proxy": "http://lower:1",
        "HTTPS_PROXY": "http://upper:2",
        "NO_PROXY": "a,b",
        "all_proxy": " ",
    }
    assert dict(proxy_environment(env)) == {
        "http_proxy": "http://lower:1",
        "https_proxy": "http://upper:2",
        "no_proxy": "a,b",
    }


def test_a_socks_proxy_is_refused_in_words() -> None:
    with pytest.raises(NetConfigError, match=r"a socks5 proxy; vtop speaks to HTTP\(S\) proxies"):
        proxy_for("http://gpu-box", {"all_proxy": "socks5://127.0.0.1:1080"})


def test_no_proxy_keeps_the_direct_transport_and_a_proxy_gets_httpx_s() -> None:
    def scraper(**env: str) -> VllmScraper:
        return VllmScraper(f"http://{NAME}:8000", ScrapeOptions.from_env(environ=env))

    direct = scraper(HTTP_PROXY=P, NO_PROXY=".test")
    assert direct.proxy is None
    assert isinstance(direct._client._transport, OneOriginTransport)
    proxied = scraper(HTTP_PROXY=P, NO_PROXY="other.test")
    assert proxied.proxy == P and not isinstance(proxied._client._transport, OneOriginTransport)
    assert not isinstance(scraper()._client._transport, type(proxied._client._transport))
    assert "proxy.corp" not in repr(ScrapeOptions.from_env(environ={"HTTP_PROXY": P}))


# -- through a real proxy ------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[PageServer]:
    with PageServer(script()) as srv:
        yield srv


@pytest.fixture(scope="module")
def private_ca(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_private_ca(tmp_path_factory.mktemp("ca"), names=(NAME, "localhost"))


def once(url: str, *extra: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vtop", "--url", url, "--once", "--interval", "0.5", *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
        env=clean_env(**env),
    )


def test_http_goes_through_the_proxy(server: PageServer) -> None:
    with ProxyServer({NAME: server.port}) as proxy:
        read_fine(once(f"http://{NAME}:{server.port}", HTTP_PROXY=proxy.url))
    targets = {(r.method, r.target) for r in proxy.requests}
    assert ("GET", f"http://{NAME}:{server.port}/metrics") in targets
    assert [path for path, _ in server.script.requests].count("/metrics") == 2  # both polls


def test_https_is_tunnelled_and_checked_against_the_private_ca(private_ca: Certs) -> None:
    with (
        PageServer(script(), tls=serving(private_ca)) as srv,
        ProxyServer({NAME: srv.port}) as proxy,
    ):
        url = f"https://{NAME}:{srv.port}"
        read_fine(once(url, "--ca-cert", str(private_ca.ca), HTTPS_PROXY=proxy.url))
        assert {(r.method, r.target) for r in proxy.requests} == {("CONNECT", f"{NAME}:{srv.port}")}
        untrusted = once(url, HTTPS_PROXY=proxy.url)
    (ep,) = json.loads(untrusted.stdout)["endpoints"]
    assert ep["error"].startswith(
        f"cannot connect to {url}/metrics via proxy {proxy.url}: TLS certificate not trusted"
    )


def test_loopback_is_never_proxied(server: PageServer) -> None:
    with ProxyServer({NAME: server.port}) as proxy:
        for host in ("127.0.0.1", "localhost"):
            read_fine(
                once(f"http://{host}:{server.port}", HTTP_PROXY=proxy.url, ALL_PROXY=proxy.url)
            )
    assert proxy.requests == []


def test_proxy_credentials_are_sent_and_never_shown(server: PageServer) -> None:
    with ProxyServer({NAME: server.port}, auth="ops:s3cret-pw") as proxy:
        port = proxy.url.rsplit(":", 1)[1]
        good = once(
            f"http://{NAME}:{server.port}", HTTP_PROXY=f"http://ops:s3cret-pw@127.0.0.1:{port}"
        )
        read_fine(good)
        bad = once(
            f"http://{NAME}:{server.port}", HTTP_PROXY=f"http://ops:wrong-pw@127.0.0.1:{port}"
        )
    (ep,) = json.loads(bad.stdout)["endpoints"]
    assert (
        ep["error"] == "HTTP 407 Proxy Authentication Required from "
        f"http://{NAME}:{server.port}/metrics"
    )
    for result in (good, bad):
        assert "s3cret" not in result.stdout + result.stderr
        assert "wrong-pw" not in result.stdout + result.stderr


def test_a_proxy_that_cannot_be_reached_is_named(server: PageServer) -> None:
    result = once(f"http://{NAME}:{server.port}", HTTP_PROXY="http://u:pw@127.0.0.1:9")
    (ep,) = json.loads(result.stdout)["endpoints"]
    assert ep["error"] == (
        f"cannot connect to http://{NAME}:{server.port}/metrics via proxy "
        "http://127.0.0.1:9: connection refused"
    )
    assert result.returncode == 3


def test_a_socks_proxy_is_a_usage_error_for_a_proxied_url() -> None:
    result = once(f"http://{NAME}:8000", ALL_PROXY="socks5://127.0.0.1:1080")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("vtop: the http_proxy/all_proxy setting is a socks5 proxy")


async def test_prometheus_is_reached_through_the_proxy_too() -> None:
    answer = Answer(
        b'{"status":"success","data":{"resultType":"vector","result":[]}}',
        content_type="application/json",
    )
    with (
        PageServer(Script({"/api/v1/query": answer})) as prom,
        ProxyServer({"prom.test": prom.port}) as proxy,
    ):
        options = ScrapeOptions.from_env(environ={"http_proxy": proxy.url})
        client = PrometheusClient(f"http://prom.test:{prom.port}", options)
        try:
            assert await client.query("up") == []
        finally:
            await client.aclose()
    assert [(r.method, r.target) for r in proxy.requests] == [
        ("POST", f"http://prom.test:{prom.port}/api/v1/query")
    ]
