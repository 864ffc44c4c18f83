"""Redirects never hand a secret to a server the user did not name (issue 26, points 2 and 11).

Two real servers on loopback, on different ports: the one named on the command line answers
with a redirect to the other. Every secret vtop carries, a `--header` value (`X-Api-Key` on a
scrape, `X-Scope-OrgID` on Prometheus), the `VTOP_API_KEY` bearer token and a URL's
`user:password@`, must reach the first and never the second, unless `--trust-redirect` names
it; a redirect within the named server keeps them. A redirect to `file://` reads as what it is.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator

import pytest

from tests.pageserver import Answer, PageServer, Script
from vtop.cli import main as vtop_main
from vtop.sources import redirects
from vtop.sources.prometheus import PrometheusClient
from vtop.sources.vllm import ScrapeOptions, VllmScraper

PAGE = b"""# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 7.0
vllm:num_requests_waiting{engine="0",model_name="qwen"} 3.0
"""
KEY = "key-0123-secret"
TOKEN = "token-4567-secret"
USER, PASSWORD = "ops", "pw-89ab-secret"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
VECTOR = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}})


@pytest.fixture
def other() -> Iterator[PageServer]:
    """The server a redirect points to: it answers every page, and keeps what it was sent."""
    script = Script({"/metrics": Answer(PAGE), "/elsewhere/metrics": Answer(PAGE),
                     "/api/v1/query": Answer(VECTOR.encode(),
                                             content_type="application/json")})  # fmt: skip
    with PageServer(script) as srv:
        yield srv


def named_redirecting_to(location: str, status: int = 302) -> PageServer:
    return PageServer(Script({"/metrics": Answer(status=status, location=location),
                              "/api/v1/query": Answer(status=307, location=location)}))  # fmt: skip


def secrets_in(script: Script) -> list[str]:
    seen = json.dumps(script.requests)
    return [s for s in (KEY, TOKEN, PASSWORD, BASIC[6:]) if s in seen]


def scrape(url: str, trusted_redirects: tuple[str, ...] = ()) -> str | None:
    opts = ScrapeOptions(
        headers=(("X-Api-Key", KEY),), api_key=TOKEN, trusted_redirects=trusted_redirects
    )

    async def go() -> str | None:
        async with VllmScraper(url, opts) as s:
            got = await s.scrape()
        return got.error

    return asyncio.run(go())


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://{USER}:{PASSWORD}@")


def test_a_redirect_to_another_port_gets_no_header_token_or_credentials(
    other: PageServer,
) -> None:
    with named_redirecting_to(other.url + "/metrics") as named:
        error = scrape(with_credentials(named.url))
        sent = named.script.requests[0][1]
    assert error is None  # the page was read, from the other server
    assert [p for p, _ in other.script.requests] == ["/metrics"]
    assert secrets_in(other.script) == []
    assert sent["X-Api-Key"] == KEY and sent["Authorization"] == BASIC  # the named one had them


def test_a_redirect_to_another_host_name_gets_none_either(other: PageServer) -> None:
    # localhost and 127.0.0.1 are one machine but two hosts to a browser, curl and vtop
    with named_redirecting_to(f"http://localhost:{other.port}/metrics") as named:
        assert scrape(named.url) is None
    assert other.script.requests and secrets_in(other.script) == []


def test_a_redirect_within_the_named_server_keeps_them() -> None:
    script = Script({"/metrics": Answer(status=307, location="/elsewhere/metrics"),
                     "/elsewhere/metrics": Answer(PAGE)})  # fmt: skip
    with PageServer(script) as named:
        assert scrape(named.url) is None
    (first, h1), (second, h2) = script.requests
    assert (first, second) == ("/metrics", "/elsewhere/metrics")
    assert h1["X-Api-Key"] == h2["X-Api-Key"] == KEY
    assert h2["Authorization"] == f"Bearer {TOKEN}"


def test_back_to_the_named_server_after_another_the_secrets_return(other: PageServer) -> None:
    """Secrets follow the origin named, not the previous hop: A -> B -> A gives A them."""
    script = Script({"/metrics": Answer(status=302, location=f"{other.url}/bounce")})
    with PageServer(script) as named:
        other.script.routes["/bounce"] = Answer(status=302, location=f"{named.url}/back")
        script.routes["/back"] = Answer(PAGE)
        assert scrape(named.url) is None
    assert secrets_in(other.script) == []
    assert script.requests[-1][0] == "/back" and script.requests[-1][1]["X-Api-Key"] == KEY


def test_trust_redirect_names_the_host_that_may_have_them(other: PageServer) -> None:
    with named_redirecting_to(other.url + "/metrics") as named:
        trusted = (redirects.parse_trusted(f"127.0.0.1:{other.port}"),)
        assert scrape(named.url, trusted_redirects=trusted) is None
        assert other.script.requests[-1][1]["X-Api-Key"] == KEY
        # another port of the same host is another server: not trusted by host:port
        assert scrape(named.url, trusted_redirects=("127.0.0.1:1",)) is None
        assert "X-Api-Key" not in other.script.requests[-1][1]
        assert scrape(named.url, trusted_redirects=("*",)) is None  # curl --location-trusted
        assert other.script.requests[-1][1]["Authorization"] == f"Bearer {TOKEN}"


def test_a_secret_given_for_https_never_goes_over_plain_http() -> None:
    named, hop = ("https", "gw.example", 443), ("http", "gw.example", 80)
    assert not redirects.trusts(("*",), named, hop)
    assert redirects.trusts(("gw.example",), named, ("https", "gw.example", 8443))
    assert redirects.trusts((), named, named)


def test_a_change_of_scheme_alone_is_another_server() -> None:
    """http://h:8000 and https://h:8000 are two origins (as for a browser and curl): the secrets
    given for one do not go to the other untrusted, in either direction."""
    plain, tls = ("http", "gw.example", 8000), ("https", "gw.example", 8000)
    assert not redirects.trusts((), plain, tls) and not redirects.trusts((), tls, plain)
    assert redirects.trusts(("gw.example:8000",), plain, tls)  # upgrading, when trusted


@pytest.mark.parametrize("bad", ["http://x", "", "a b", "host:port:8"])
def test_trust_redirect_takes_hosts_only(bad: str) -> None:
    with pytest.raises(ValueError, match="--trust-redirect"):
        redirects.parse_trusted(bad)


def test_a_refusal_after_a_redirect_says_the_credentials_stayed_behind() -> None:
    script = Script({"/metrics": Answer(status=401, content_type="text/plain")})
    with PageServer(script) as auth, named_redirecting_to(auth.url + "/metrics") as named:
        error = scrape(named.url)
    assert error is not None and f"redirected to 127.0.0.1:{auth.port}" in error
    assert "--trust-redirect HOST" in error


def test_prometheus_queries_keep_x_scope_orgid_from_the_other_host(other: PageServer) -> None:
    options = ScrapeOptions(headers=(("X-Scope-OrgID", KEY),), api_key=TOKEN)
    with named_redirecting_to(other.url + "/api/v1/query") as named:

        async def go() -> None:
            client = PrometheusClient(with_credentials(named.url), options)
            try:
                await client.query("up")
            finally:
                await client.aclose()

        asyncio.run(go())
        assert named.script.requests[0][1]["X-Scope-OrgID"] == KEY
    assert [p for p, _ in other.script.requests] == ["/api/v1/query"]
    assert secrets_in(other.script) == []


def test_the_command_line_keeps_the_header_from_the_other_server(
    other: PageServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with named_redirecting_to(other.url + "/metrics") as named:
        code = vtop_main(["--url", named.url, "--once", "--header", f"X-Api-Key: {KEY}"])
        assert code == 0, capsys.readouterr().err
        assert named.script.requests[0][1]["X-Api-Key"] == KEY
        assert other.script.requests and secrets_in(other.script) == []
        code = vtop_main(["--url", named.url, "--once", "--header", f"X-Api-Key: {KEY}",
                          "--trust-redirect", f"127.0.0.1:{other.port}"])  # fmt: skip
        assert code == 0
    assert other.script.requests[-1][1]["X-Api-Key"] == KEY


def test_trust_redirect_that_is_no_host_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = vtop_main(["--url", "http://127.0.0.1:9", "--once", "--trust-redirect", "a b"])
    assert code == 2
    assert capsys.readouterr().err == (
        "vtop: --trust-redirect 'a b': expected HOST, HOST:PORT or *\n"
    )


@pytest.mark.parametrize(
    ("location", "what"),
    [
        ("file:///etc/passwd", "a file: URL"),
        ("ftp://127.0.0.1/metrics", "a ftp: URL"),
        ("gopher://127.0.0.1:70/", "a gopher: URL"),
    ],
)
def test_a_redirect_to_another_scheme_says_so(location: str, what: str) -> None:
    with named_redirecting_to(location) as named:
        error = scrape(named.url)
    assert error == (f"request to {named.url}/metrics failed: the server redirected to {what}; "
                     "vtop follows http:// and https:// redirects only")  # fmt: skip
    assert "refused" not in error


def test_a_redirect_loop_is_one_line() -> None:
    with PageServer(Script({"/metrics": Answer(status=302, location="/metrics")})) as named:
        error = scrape(named.url)
    assert error == (f"request to {named.url}/metrics failed: more than "
                     f"{redirects.MAX_REDIRECTS} redirects (a redirect loop?)")  # fmt: skip


def test_a_redirect_with_an_endless_body_is_not_read_to_its_end(other: PageServer) -> None:
    big = Answer(b"x", status=302, location=other.url + "/metrics", stream_bytes=200 * 2**20)
    with PageServer(Script({"/metrics": big})) as named:
        assert scrape(named.url) is None
        sent = named.script.sent
    assert sent < 8 * 2**20  # 64 KiB read, then the connection closed (socket buffers aside)


def test_a_redirect_to_a_host_no_resolver_can_encode_is_one_line() -> None:
    with named_redirecting_to("http://a..b:8000/metrics") as named:
        error = scrape(named.url)
    assert error is not None and error.startswith(f"cannot connect to {named.url}/metrics")


@pytest.mark.parametrize(
    "location", ["javascript:alert(1)", "mailto:ops@example.com", "data:text/plain,hi"]
)
def test_a_redirect_httpx_cannot_read_is_one_line_too(location: str) -> None:
    """httpx builds the next request even when it is not to follow it, and raised InvalidURL
    (a traceback) for a Location with a scheme, no host and a path not starting with /."""
    with named_redirecting_to(location) as named:
        error = scrape(named.url)
    assert error == (f"request to {named.url}/metrics failed: the server redirected to a "
                     "Location vtop cannot follow; vtop follows http:// and https:// "
                     "redirects only")  # fmt: skip


def test_a_location_that_is_no_url_is_one_line() -> None:
    with named_redirecting_to("http://[::1/metrics") as named:
        error = scrape(named.url)
    assert error is not None and error.startswith(f"request to {named.url}/metrics failed: ")
    assert "\n" not in error
