"""Scraping one vLLM server: /metrics every poll, /v1/models and /version on connect.

One request is in flight per endpoint at a time (a poll that finds the previous one still
running is skipped, not stacked), and every consumer starts the next poll only once the last
one has answered, so a slow server can never build a backlog: a slow answer delays the next
poll, it is not a failed one. So the request timeout is a property of servers, not of vtop's
cadence: at least `MIN_TIMEOUT_S` whatever the interval (a starved API server answering in
seconds is a finding, its scrape latency, not an outage), longer with a long interval (also
when it changes while vtop runs, `set_interval`). Bodies are streamed and cut at a size cap,
which also bounds what a gzip bomb can expand to. Every failure becomes one line that says what
happened and where, with a hint when the cause is usually the user's (401: a token; 404: a
path).

What the server says of itself (/version, /v1/models) is cleaned as label values are (no
control characters, cut to length): it reaches the header and the reports just the same. So is
every other word of the server's that a message quotes, the reason phrase of an error status
above all (`HTTP/1.1 503 ESC]52;c;…BEL` would write the user's clipboard): a `ScrapeError`
is one clean line (`vtop.untrusted`), whatever went into it.

Secrets stay out of everything vtop prints: the bearer token from `VTOP_API_KEY`, the values
of `--header` and the credentials of a URL (or of a proxy's) go only into request headers, and
URLs are shown without credentials or query values. They go only to the server the URL names:
redirects are followed by `redirects.py`, which keeps every one of them from another host
unless `--trust-redirect` names it.

Whom TLS trusts (`--ca-cert`, SSL_CERT_FILE/SSL_CERT_DIR) and which proxy a URL goes through
(the environment's, never for loopback) are decided in `netconfig.py`: a direct connection uses
vtop's own one-connection transport, a proxied one httpx's.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import httpx

from vtop import untrusted
from vtop.model import EndpointInfo, Scrape
from vtop.signals.extract import PageReader, clean_label
from vtop.signals.parser import ParseError
from vtop.sources import netconfig, redirects
from vtop.sources.transport import OneOriginTransport
from vtop.sources.urls import base_url, port_hint, redact_url, split_credentials, with_path

DEFAULT_MAX_BYTES = 16 * 1024 * 1024
API_KEY_ENV = "VTOP_API_KEY"


class HeaderError(ValueError):
    """A `--header` argument that is not `Name: value`."""


def parse_header(text: str) -> tuple[str, str]:
    """`'Name: value'` -> ('Name', 'value'); the error never repeats the value."""
    name, sep, value = text.partition(":")
    name = name.strip()
    if not sep or not name or any(c in name for c in " \t\r\n"):
        raise HeaderError(f"--header must look like 'Name: value' (got a header named {name!r})")
    return name, value.strip()


MIN_TIMEOUT_S = 5.0
MAX_TIMEOUT_S = 10.0
TIMEOUT_SHARE = 0.8


def timeout_for(interval_s: float) -> float:
    """The request timeout of a poll interval: 0.8 of it, but never under 5 s nor over 10 s.

    The floor is what a short interval must not take away: a server that answers in 0.5 s is
    read at `--interval 0.5` (the next poll waits for it) instead of failing every poll. A long
    interval leaves a slow server more time, up to Prometheus's default scrape timeout.
    """
    if not interval_s > 0:
        raise ValueError(f"the poll interval must be positive, got {interval_s:g}")
    return min(MAX_TIMEOUT_S, max(MIN_TIMEOUT_S, interval_s * TIMEOUT_SHARE))


@dataclass(frozen=True, slots=True)
class ScrapeOptions:
    """How to reach the endpoints; shared by all of them."""

    timeout_s: float = MIN_TIMEOUT_S
    max_bytes: int = DEFAULT_MAX_BYTES
    verify_tls: bool = True
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    api_key: str | None = field(default=None, repr=False)
    ca_cert: str | None = None
    """`--ca-cert`: CA certificates trusted beside the system's (a PEM file or a directory)."""
    proxies: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """The environment's proxy settings (`netconfig.proxy_environment`); empty: all direct."""
    trusted_redirects: tuple[str, ...] = ()
    """`--trust-redirect`: hosts (`host`, `host:port`, `*`) a redirect may take the secrets to."""

    @classmethod
    def from_env(
        cls,
        *,
        interval_s: float = 1.0,
        headers: Sequence[str] = (),
        insecure: bool = False,
        ca_cert: str | None = None,
        trust_redirect: Sequence[str] = (),
        environ: Mapping[str, str] = os.environ,
    ) -> ScrapeOptions:
        """Options for a poll interval (its timeout: `timeout_for`); the token and the proxies
        come from env. A `ca_cert` that cannot be loaded is a `NetConfigError` (one line), a
        `trust_redirect` that is not a host a `ValueError`."""
        if ca_cert and insecure:
            raise netconfig.NetConfigError("--ca-cert and --insecure contradict each other")
        if ca_cert:
            netconfig.tls_context(ca_cert=ca_cert)  # fails now, with the path, not at a poll
        return cls(
            timeout_s=timeout_for(interval_s),
            verify_tls=not insecure,
            headers=tuple(parse_header(h) for h in headers),
            api_key=environ.get(API_KEY_ENV) or None,
            ca_cert=ca_cert or None,
            proxies=netconfig.proxy_environment(environ),
            trusted_redirects=tuple(redirects.parse_trusted(h) for h in trust_redirect),
        )

    def tls(self) -> ssl.SSLContext:
        """The TLS context these options ask for."""
        return netconfig.tls_context(verify=self.verify_tls, ca_cert=self.ca_cert)

    def proxy_for(self, url: str) -> str | None:
        """The proxy `url` is reached through (None: directly); NetConfigError if unusable."""
        return netconfig.proxy_for(url, self.proxies) if self.proxies else None

    def for_interval(self, interval_s: float) -> ScrapeOptions:
        """The same options with the timeout of a new poll interval (`timeout_for`)."""
        return replace(self, timeout_s=timeout_for(interval_s))

    def request_headers(self) -> dict[str, str]:
        out = {"Accept": "text/plain;version=0.0.4;q=0.9,*/*;q=0.1", "Accept-Encoding": "gzip"}
        if self.api_key:
            out["Authorization"] = f"Bearer {self.api_key}"
        out.update(self.headers)
        return out

    def secret_headers(self) -> frozenset[str]:
        """The lowercase names of the request headers that are secrets: `Authorization` and
        every `--header` (what a redirect to another host does not get, `redirects.py`)."""
        return frozenset({"authorization", *(name.lower() for name, _ in self.headers)})


MAX_ERROR = 500
"""The longest error line kept: a URL, a status and the server's reason, with room to spare."""
MAX_REASON = 100
"""The longest reason phrase quoted (`Service Unavailable` is 19 characters)."""


class ScrapeError(Exception):
    """One line that says what went wrong with which URL; `refused`: the connection was
    refused (nothing listens there now, an answer that costs the server nothing)."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(untrusted.clean(message, MAX_ERROR))
        self.refused = refused


CANNOT_CONNECT = "cannot connect to "
REFUSED = "connection refused"
UNKNOWN_HOST = "unknown host"


def no_answer(error: str | None) -> str | None:
    """Why a scrape's error says nothing can answer there: `connection refused` (nothing
    listens at that port) or `unknown host` (the name does not resolve); None for any other
    error (a timeout, an HTTP error: something is there).

    A `Frame` carries each scrape's error as the line the scraper wrote, not the scraper's
    `refused` flag, so whoever reads frames (a report deciding that nobody is there) tells
    these by that line, which is written here and only here."""
    if error is None or not error.startswith(CANNOT_CONNECT):
        return None
    return next((why for why in (REFUSED, UNKNOWN_HOST) if f": {why}" in error), None)


_HINTS = {
    401: "needs credentials: set VTOP_API_KEY or --header 'Authorization: …'",
    403: "credentials refused: check VTOP_API_KEY or the --header values",
    404: "no /metrics here: is the URL a vLLM server's base (http://host:8000)?",
}


class VllmScraper:
    """Polls one endpoint. Use as an async context manager, or call `aclose()`."""

    def __init__(
        self,
        url: str,
        options: ScrapeOptions | None = None,
        *,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base, self._auth = split_credentials(base_url(url))
        self.url = redact_url(self.base)
        self.metrics_url = with_path(self.base, "/metrics")
        self.options = options or ScrapeOptions()
        self._own_client = client is None
        self.proxy = self.options.proxy_for(self.base)
        self._via = f" via proxy {redact_url(self.proxy)}" if self.proxy else ""
        self._client = client or httpx.AsyncClient(
            transport=self._transport(),
            timeout=self.options.timeout_s,
            follow_redirects=False,  # followed by redirects.send: no secret to another host
            trust_env=False,  # proxies and trust are the options', read once by netconfig
        )
        self._reader = PageReader()
        self._lock = asyncio.Lock()
        self.refused = False
        """Whether the last scrape's connection was refused (see `ScrapeError.refused`)."""

    def _transport(self) -> httpx.AsyncBaseTransport:
        if self.proxy is None:
            return OneOriginTransport(verify=self.options.tls())
        return httpx.AsyncHTTPTransport(verify=self.options.tls(), proxy=httpx.Proxy(self.proxy))

    async def __aenter__(self) -> VllmScraper:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._own_client:
            await self._client.aclose()

    def set_interval(self, interval_s: float) -> None:
        """The poll interval changed: requests from now on have its timeout (`timeout_for`)."""
        self.options = self.options.for_interval(interval_s)

    @property
    def busy(self) -> bool:
        """True while a request to this endpoint is in flight."""
        return self._lock.locked()

    async def _get(self, url: str, timeout: float) -> tuple[bytes, float]:
        start = time.perf_counter()
        where = redact_url(url)
        try:
            async with (
                asyncio.timeout(timeout),
                redirects.send(
                    self._client,
                    "GET",
                    url,
                    headers=self.options.request_headers(),
                    secret=self.options.secret_headers(),
                    auth=self._auth,
                    trusted=self.options.trusted_redirects,
                    timeout=timeout,
                ) as followed,
            ):
                resp = followed.response
                if resp.status_code >= 400:
                    hint = _HINTS.get(resp.status_code, "")
                    if followed.withheld and resp.status_code in (401, 403):
                        hint = withheld_hint(followed.withheld)
                    reason = untrusted.clean(resp.reason_phrase, MAX_REASON) or "error"
                    msg = f"HTTP {resp.status_code} {reason} from {where}"
                    raise ScrapeError(f"{msg}: {hint}" if hint else msg)
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.aiter_bytes():
                    size += len(chunk)
                    if size > self.options.max_bytes:
                        mib = self.options.max_bytes / 1048576
                        raise ScrapeError(f"response from {where} is larger than {mib:g} MiB")
                    chunks.append(chunk)
        except ScrapeError:
            raise
        except (httpx.TimeoutException, TimeoutError):
            raise ScrapeError(f"no answer from {where}{self._via} within {timeout:g} s") from None
        except httpx.ConnectError as exc:
            reason = error_reason(exc)
            refused = reason == REFUSED
            hint = port_hint(self.base) if refused and not self._via else ""
            raise ScrapeError(
                f"{CANNOT_CONNECT}{where}{self._via}: {reason}{hint}", refused=refused
            ) from None
        except httpx.DecodingError:
            raise ScrapeError(f"{where} sent a body that does not decode (bad gzip?)") from None
        except httpx.HTTPError as exc:
            raise ScrapeError(
                f"request to {where}{self._via} failed: {error_reason(exc)}"
            ) from None
        return b"".join(chunks), time.perf_counter() - start

    async def scrape(self) -> Scrape:
        """One poll of /metrics. Never raises: failures come back as `Scrape.error`."""
        if self._lock.locked():
            return Scrape(self.url, time.time(), error="previous poll still in flight; skipped")
        async with self._lock:
            started = time.perf_counter()
            self.refused = False
            try:
                body, latency = await self._get(self.metrics_url, self.options.timeout_s)
            except ScrapeError as exc:
                self.refused = exc.refused
                return Scrape(
                    self.url, time.time(), latency_s=time.perf_counter() - started, error=str(exc)
                )
            now = time.time()
            text = body.decode("utf-8", errors="replace")
            try:
                scrape = self._reader.read(
                    text, endpoint=self.url, t=now, latency_s=latency, size_bytes=len(body)
                )
            except ParseError as exc:
                return Scrape(
                    self.url,
                    now,
                    latency_s=latency,
                    size_bytes=len(body),
                    error=f"{self.url}/metrics is not a metrics page: {exc}",
                )
            if not scrape.has_vllm_series:
                return Scrape(
                    self.url,
                    now,
                    latency_s=latency,
                    size_bytes=len(body),
                    error=f"{self.url}/metrics has no vllm: series "
                    "(is the server started with --disable-log-stats, or not vLLM?)",
                    scalars=scrape.scalars,
                    has_vllm_series=False,
                )
            return scrape

    async def info(self) -> EndpointInfo:
        """/version and /v1/models; what cannot be read stays unknown (None).

        Both are read at once, each within the scrape timeout, so the two together take no
        longer than one scrape.
        """
        timeout = self.options.timeout_s
        version: str | None = None
        models: tuple[str, ...] = ()
        max_len: int | None = None
        got_version, got_models = await asyncio.gather(
            self._get(with_path(self.base, "/version"), timeout),
            self._get(with_path(self.base, "/v1/models"), timeout),
            return_exceptions=True,
        )
        try:
            if isinstance(got_version, BaseException):
                raise got_version
            value = json.loads(got_version[0]).get("version")
            version = clean_label(str(value))[:40] if value is not None else None
        except (ScrapeError, ValueError, AttributeError, RecursionError):
            pass
        try:
            if isinstance(got_models, BaseException):
                raise got_models
            data = json.loads(got_models[0]).get("data", [])
            # Model ids are the `model_name` label by another road: made as inert as labels
            # are, or an escape sequence in a served model name reaches the terminal.
            models = tuple(clean_label(str(m.get("id"))) for m in data if isinstance(m, dict))
            lens = [m.get("max_model_len") for m in data if isinstance(m, dict)]
            max_len = next((int(x) for x in lens if isinstance(x, int)), None)
        except (ScrapeError, ValueError, AttributeError, TypeError, RecursionError):
            pass
        return EndpointInfo(version=version, models=models, max_model_len=max_len)


def withheld_hint(host: str) -> str:
    """Why a redirected request was refused: the secrets stayed with the server named."""
    return (
        f"redirected to {host}, which was not sent the credentials (--header, VTOP_API_KEY, "
        "the URL's): --trust-redirect HOST sends them there"
    )


def error_reason(exc: BaseException) -> str:
    """The innermost cause's message, on one line, without the URL repeated."""
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    if isinstance(exc, ssl.SSLCertVerificationError):
        problem = exc.verify_message or exc.reason or "certificate verify failed"
        problem = untrusted.clean(problem, 200)  # the certificate is the server's
        return (
            f"TLS certificate not trusted ({problem}); --ca-cert FILE trusts a private CA, "
            "--insecure skips the check"
        )
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    text = untrusted.clean(text, 200)  # a protocol error may quote what the server sent
    if "Errno 111" in text or "Connection refused" in text:
        return REFUSED
    if "Name or service not known" in text or "Errno -2" in text or "Errno -3" in text:
        return UNKNOWN_HOST
    return text
