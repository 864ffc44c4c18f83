"""Following redirects without handing a secret to a server the user did not name.

A server vtop polls may answer 3xx, and a poller must follow it (vLLM versions that mount
prometheus_client's app answer /metrics with 307 to /metrics/; a gateway moves). But whoever
controls that answer chooses where the next request goes, and the secrets vtop carries, the
`--header` values (`X-Api-Key`, `X-Scope-OrgID`), the bearer token of `VTOP_API_KEY` and a
URL's `user:password@`, were given for one server. httpx strips only `Authorization`, and
only from the previous hop's origin; so vtop follows redirects itself, as curl does: the
secrets go to the origin the user named (scheme, host and port all the same) and to no other,
unless the user trusts that host (`--trust-redirect HOST[:PORT]`, or `*` for every host:
curl's `--location-trusted`), and never over plain http when the URL given was https.

Each hop is built afresh from the caller's headers (nothing the server sent is carried on), a
redirect's own body is read only up to `DRAIN_BYTES` (a hostile 302 cannot make vtop hold
gigabytes; past that its connection is closed), a Location that is not http(s) is one line
that says so (`file://` is not "connection refused"), and a chain longer than
`MAX_REDIRECTS` ends as a loop. Methods change as browsers and httpx change them (a 301, 302
or 303 to a POST becomes a GET without the body; 307 and 308 repeat the request).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx

from vtop.sources.urls import origin

MAX_REDIRECTS = 20
DRAIN_BYTES = 64 * 1024
"""A redirect's body read at most this far (so its connection can be reused), then dropped."""

_HOST = re.compile(r"(\*|\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+)(:[0-9]{1,5})?\Z")
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]{0,19}\Z")


class RedirectError(httpx.HTTPError):
    """A redirect vtop will not follow; the message is one line, without the URL."""


def parse_trusted(text: str) -> str:
    """A `--trust-redirect` value (`host`, `host:port`, `[::1]:8000` or `*`), lowercased;
    ValueError (one line) for anything else."""
    value = text.strip().lower()
    if not _HOST.match(value):
        raise ValueError(f"--trust-redirect {text!r}: expected HOST, HOST:PORT or *")
    return value


def trusts(trusted: Sequence[str], named: tuple[str, str, int], hop: tuple[str, str, int]) -> bool:
    """Whether the secrets given for `named` (an origin) may go to `hop`."""
    if hop == named:
        return True
    if named[0] == "https" and hop[0] != "https":
        return False  # a secret given for TLS never goes in clear text
    _, host, port = hop
    shown = f"[{host}]" if ":" in host else host
    return any(entry in ("*", shown, f"{shown}:{port}") for entry in trusted)


@dataclass(frozen=True, slots=True)
class Followed:
    """The final answer of a request and what the redirects did to it."""

    response: httpx.Response
    withheld: str | None = None
    """The host:port the secrets were kept from (None: every hop had them, or none needed)."""


def _method(status: int, method: str) -> str:
    if status in (301, 302, 303) and method == "POST":
        return "GET"
    return method


def _next_url(current: httpx.URL, location: str) -> httpx.URL:
    url: httpx.URL | None = None
    try:
        url = httpx.URL(location)
        scheme = url.scheme.lower()
        if scheme in ("http", "https") and not url.host:
            url = url.copy_with(host=current.host)  # `http:///metrics`, as httpx reads it
        if url.is_relative_url:
            url = current.join(url)
            scheme = url.scheme.lower()
    except httpx.InvalidURL:
        url = None
    if url is None:  # raised here, not in the handler: error_reason reads the innermost cause
        raise RedirectError("the server redirected to a Location that is not a URL")
    if scheme not in ("http", "https"):
        what = f"a {scheme}: URL" if _SCHEME.match(scheme) else "a URL that is not http"
        raise RedirectError(
            f"the server redirected to {what}; vtop follows http:// and https:// redirects only"
        )
    return url


async def _drain(response: httpx.Response) -> None:
    """Read a redirect's small body to its end (its connection is then reused), or close."""
    size = 0
    try:
        async for chunk in response.aiter_raw():
            size += len(chunk)
            if size > DRAIN_BYTES:
                break
    finally:
        await response.aclose()


@asynccontextmanager
async def send(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    headers: Mapping[str, str],
    secret: frozenset[str],
    auth: httpx.Auth | None,
    trusted: Sequence[str] = (),
    data: Mapping[str, str] | None = None,
    timeout: float,
) -> AsyncIterator[Followed]:
    """The answer to `method url` after its redirects, streamed (`Followed.response`).

    `secret`: the lowercase names of the headers that are secrets; with `auth` they go only to
    hops `trusts` allows. The client must not follow redirects itself."""
    named = origin(url)
    current = httpx.URL(url)
    withheld: str | None = None
    for _ in range(MAX_REDIRECTS + 1):
        hop = (
            current.scheme,
            current.host.lower(),
            current.port or (443 if current.scheme == "https" else 80),
        )
        if trusts(trusted, named, hop):
            hop_headers, hop_auth, withheld = dict(headers), auth, None
        else:
            hop_headers = {k: v for k, v in headers.items() if k.lower() not in secret}
            hop_auth = None
            given = bool(auth) or any(k.lower() in secret for k in headers)
            name = f"[{hop[1]}]" if ":" in hop[1] else hop[1]
            where = f"{name}:{hop[2]}" if _HOST.match(name) else "another host"  # inert words
            withheld = where if given else None
        request = client.build_request(
            method,
            current,
            headers=hop_headers,
            data=data if method == "POST" else None,
            timeout=timeout,
        )
        response: httpx.Response | None
        try:
            response = await client.send(
                request, auth=hop_auth, stream=True, follow_redirects=False
            )
        except httpx.InvalidURL:  # httpx reads a Location even when not following it
            response = None
        if response is None:  # `javascript:alert(1)`: a scheme, no host, a path without /
            raise RedirectError(
                "the server redirected to a Location vtop cannot follow; vtop follows http:// "
                "and https:// redirects only"
            )
        if not response.has_redirect_location:
            try:
                yield Followed(response, withheld)
            finally:
                await response.aclose()
            return
        try:
            location = response.headers["Location"]
            method = _method(response.status_code, method)
            current = _next_url(current, location)
        finally:
            await _drain(response)
    raise RedirectError(f"more than {MAX_REDIRECTS} redirects (a redirect loop?)")
