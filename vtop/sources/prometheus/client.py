"""The two Prometheus HTTP API calls vtop makes, and the one-line errors they end in.

`query` and `query_range` are POSTed (a query names every catalog series, longer than some
proxies let a GET line be) and answered in JSON. Everything about the transport is the
scraper's: the same `ScrapeOptions` (TLS trust, the environment's proxies, `--header` and
`VTOP_API_KEY`), credentials taken out of the URL into basic auth so no log line carries
them, and the same redacted URL in every message. Answers are streamed and cut at a size cap
(an instant query's answer is small, a backfill's can be large, so each has its own cap and
timeout), and every failure is one `PrometheusError` line that names the Prometheus, with a
hint when the cause is usually the user's (401, 403, 404); query values are never shown.
What Prometheus (or whatever answers in its place) says is quoted only cleaned and cut
(`vtop.untrusted`): `errorType`, `error`, `resultType`, the Content-Type of an answer that is
not JSON; and a `PrometheusError` is one clean line, whatever went into it.

Redirects are the scraper's too (`redirects.py`): the secrets stay with the Prometheus named.

The caps are what a real answer needs, not what memory allows: Python holds a parsed answer in
about five times its bytes. A backfill asks one target for at most `MAX_POINTS` + 1 steps, and
a page of a thousand series over that many steps is about 7 MB of JSON, so `RANGE_MAX_BYTES`
(32 MiB) leaves room for a data-parallel server's several thousand series and keeps a hostile
answer to seconds and a few hundred MB. JSON nested too deep for the parser is an answer that
is not an API response, like any other.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import httpx

from vtop import untrusted
from vtop.sources import redirects
from vtop.sources.urls import base_url, redact_url, split_credentials, with_path
from vtop.sources.vllm import ScrapeOptions, error_reason, withheld_hint

QUERY_MAX_BYTES = 64 * 1024 * 1024
RANGE_MAX_BYTES = 32 * 1024 * 1024
RANGE_TIMEOUT_S = 60.0

_HINTS = {
    401: "Prometheus wants credentials: set VTOP_API_KEY or pass --header 'Authorization: …'",
    403: "the credentials were refused: check VTOP_API_KEY or the --header values",
    404: "no query API there: is this Prometheus's base URL (http://host:9090)?",
}


MAX_ERROR = 600
"""The longest error line kept (the error Prometheus gives is quoted up to 300 characters)."""


class PrometheusError(Exception):
    """One line that says what went wrong with which Prometheus."""

    def __init__(self, message: str) -> None:
        super().__init__(untrusted.clean(message, MAX_ERROR))


class AnswerError(PrometheusError):
    """Prometheus answered, but not with what was asked: too large, not JSON, not the result
    asked for. Asking again would get the same; the source goes on without that answer."""


class PrometheusClient:
    """The two HTTP API calls vtop makes: `query` and `query_range` (POSTed, JSON back)."""

    def __init__(self, url: str, options: ScrapeOptions | None = None) -> None:
        self.base, self._auth = split_credentials(base_url(url))
        self.url = redact_url(self.base)
        self.options = options or ScrapeOptions()
        self.timeout_s = max(5.0, self.options.timeout_s)
        proxy = self.options.proxy_for(self.base)  # the environment's; never for loopback
        self._client = httpx.AsyncClient(
            verify=self.options.tls(),
            proxy=httpx.Proxy(proxy) if proxy else None,
            follow_redirects=False,  # followed by redirects.send: no secret to another host
            trust_env=False,  # trust and proxies are the options' (vtop/sources/netconfig.py)
        )
        headers = self.options.request_headers()
        headers["Accept"] = "application/json"
        self._headers = headers

    async def aclose(self) -> None:
        await self._client.aclose()

    def _api(self, path: str) -> str:
        """The API path under the base URL (a proxy's path prefix and query are kept)."""
        return with_path(self.base, path)

    async def query(self, expr: str, t: float | None = None) -> list[dict[str, Any]]:
        """An instant query; the result vector (`metric`, `value` per element)."""
        form = {"query": expr}
        if t is not None:
            form["time"] = f"{t:.3f}"
        data = await self._call("/api/v1/query", form, self.timeout_s, QUERY_MAX_BYTES)
        return _result(data, "vector", self.url)

    async def query_range(
        self, expr: str, start: float, end: float, step_s: float
    ) -> list[dict[str, Any]]:
        """A range query; the result matrix (`metric`, `values` per series)."""
        form = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
        data = await self._call("/api/v1/query_range", form, RANGE_TIMEOUT_S, RANGE_MAX_BYTES)
        return _result(data, "matrix", self.url)

    async def _call(
        self, path: str, form: Mapping[str, str], timeout: float, max_bytes: int
    ) -> Any:
        where = f"Prometheus at {self.url}"
        try:
            async with (
                asyncio.timeout(timeout),
                redirects.send(
                    self._client,
                    "POST",
                    self._api(path),
                    data=dict(form),
                    headers=self._headers,
                    secret=self.options.secret_headers(),
                    auth=self._auth,
                    trusted=self.options.trusted_redirects,
                    timeout=timeout,
                ) as followed,
            ):
                resp = followed.response
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.aiter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        mib = max_bytes / 1048576
                        raise AnswerError(f"{where}: answer to {path} larger than {mib:g} MiB")
                    chunks.append(chunk)
                status = resp.status_code
                kind = untrusted.clean(resp.headers.get("content-type", ""), 100)
                withheld = followed.withheld
        except PrometheusError:
            raise
        except (httpx.TimeoutException, TimeoutError):
            raise PrometheusError(f"no answer from {where} within {timeout:g} s") from None
        except httpx.ConnectError as exc:
            raise PrometheusError(f"cannot connect to {where}: {error_reason(exc)}") from None
        except httpx.HTTPError as exc:
            raise PrometheusError(f"request to {where} failed: {error_reason(exc)}") from None
        body = b"".join(chunks)
        del chunks
        try:
            data = json.loads(body)
        except RecursionError:
            raise AnswerError(
                f"{where}: {path} answered JSON nested too deep to be an API response"
            ) from None
        except ValueError:
            hint = _HINTS.get(status, "")
            if withheld and status in (401, 403):
                hint = withheld_hint(withheld)
            msg = f"{where}: {path} answered HTTP {status} ({kind or 'no type'}), not JSON"
            raise PrometheusError(f"{msg}: {hint}" if hint else msg) from None
        if not isinstance(data, dict):
            raise AnswerError(f"{where}: {path} answered JSON that is not an API response")
        if data.get("status") != "success":
            kind = untrusted.clean(data.get("errorType") or f"HTTP {status}", 60)
            err = untrusted.clean(data.get("error") or _HINTS.get(status, "error"), 2000)
            err = untrusted.cut(" ".join(err.split()), 300)
            raise PrometheusError(f"{where} refused the query: {kind}: {err}")
        return data.get("data")


def _result(data: Any, kind: str, url: str) -> list[dict[str, Any]]:
    if not isinstance(data, dict) or data.get("resultType") != kind:
        got = data.get("resultType") if isinstance(data, dict) else type(data).__name__
        got = untrusted.clean(got, 60)
        raise AnswerError(f"Prometheus at {url}: expected a {kind} result, got {got}")
    result = data.get("result")
    if not isinstance(result, list):
        raise AnswerError(f"Prometheus at {url}: the {kind} result is not a list")
    return [item for item in result if isinstance(item, dict)]
