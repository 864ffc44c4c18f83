"""The shapes of a URL vtop is given: whether it can be an endpoint, its base, how it is shown.

Every source names servers by URL (a vLLM server, a Prometheus, a line of a targets file), and
they must agree on what a URL means: `10.0.0.5:8000` is `http://10.0.0.5:8000`, `…/metrics`
is the same server as `…`, a path goes before the query (`http://gw/?key=1` is scraped at
`http://gw/metrics?key=1`), and a URL is shown without its credentials or query values. These
helpers are that one agreement, in a module of their own that imports nothing of vtop, so the
scraper, the Prometheus source and the targets file all use it without importing each other
(and the command line checks `--url` and `--prometheus` with the same words a targets file
uses for its lines).

`redact_url` is the one way a URL is shown, and it never raises: the URLs that most need
showing are the ones that do not parse (`http://u:pw@[::1`, a port of 99999), and the error
that says so must not print the password it is about. Whatever cannot be parsed is shown with
everything between `://` and the last `@` replaced by `***`, so a password with a `/` or an
`@` in it is hidden too. `check_url` words every problem with that form.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

import httpx

HIDDEN = "***"
"""What stands for credentials in a URL that cannot be parsed."""


def _split(url: str) -> SplitResult | None:
    """`urlsplit` with every part checked (the port, a bracketed host), or None; also None
    for what httpx, which sends the requests, cannot read (`http://[::1]x`, whose `x` urlsplit
    would drop from the URL shown)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL):
        return None
    return parts


def check_url(url: str) -> str | None:
    """Why `url` cannot be a vLLM endpoint, or None when it can (the URL shown redacted)."""
    shown = redact_url(url)
    if any(c.isspace() for c in url):
        return f"URL {shown!r} contains whitespace"
    text = url if "://" in url else "http://" + url
    scheme = text.partition("://")[0].lower()
    if scheme not in ("http", "https"):
        return f"URL {shown!r} is not http:// or https://"
    try:
        parts = urlsplit(text)
    except ValueError:
        return f"URL {shown!r} has a bad IPv6 address (write it as http://[::1]:8000)"
    try:
        port = parts.port
    except ValueError:
        return f"URL {shown!r} has a bad port"
    host = parts.hostname
    if not host:
        return f"URL {shown!r} names no host"
    if port == 0:
        return f"URL {shown!r} has port 0"
    if not _host_ok(host):
        return f"URL {shown!r} has a bad host name"
    return _httpx_problem(text, shown)


def _httpx_problem(text: str, shown: str) -> str | None:
    """What httpx, which sends the requests, rejects that `urlsplit` lets through
    (`http://[::1]x`, a control character): worded here, never httpx's own words, which may
    quote the credentials."""
    try:
        httpx.URL(text)
    except httpx.InvalidURL as exc:
        reason = str(exc)
        if "port" in reason:
            return f"URL {shown!r} has a bad port"
        if "IPv6" in reason:
            return f"URL {shown!r} has a bad IPv6 address (write it as http://[::1]:8000)"
        if "non-printable" in reason:
            return f"URL {shown!r} contains a control character"
        return f"URL {shown!r} is not a URL vtop can read"
    return None


VLLM_PORT = 8000
"""The port `vllm serve` listens on when not told otherwise."""


def port_hint(url: str) -> str:
    """For a URL that names no port (`localhost`, read as port 80): a note that says so and
    gives vLLM's default instead, to add to "connection refused"; "" when a port was given.

    Port 80 is what a URL without one means, and a server behind a proxy may well be there,
    so vtop keeps that meaning; but a newcomer who types `--url localhost` means vLLM's 8000,
    and a refusal is where the two part."""
    parts = _split(url if "://" in url else "http://" + url)
    if parts is None or parts.port is not None or not parts.hostname:
        return ""
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    https = parts.scheme.lower() == "https"
    default, example = (443, f"https://{host}") if https else (80, host)
    return (
        f" (no port given, so port {default}; vLLM listens on {VLLM_PORT} by default: "
        f"--url {example}:{VLLM_PORT})"
    )


def _host_ok(host: str) -> bool:
    """An IP address, or a name whose labels DNS can carry (none empty, none over 63)."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    try:
        host.rstrip(".").encode("idna")
    except UnicodeError:
        return False
    return True


def redact_url(url: str) -> str:
    """The URL without user:password and with query values hidden; never raises."""
    parts = _split(url) if "://" in url else None
    if parts is None or not parts.netloc:  # unparsable, or no scheme (`user:pw@host`)
        return _redact_text(url)
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, _hide_query(parts.query), ""))


def _hide_query(query: str) -> str:
    return "&".join(f"{q.partition('=')[0]}=…" for q in query.split("&") if q)


def _redact_text(url: str) -> str:
    """A URL that does not parse: credentials (up to the last `@`) and query values hidden."""
    text, _, _fragment = url.partition("#")
    text, mark, query = text.partition("?")
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    if "@" in rest:
        rest = HIDDEN + "@" + rest.rpartition("@")[2]
    shown = scheme + sep + rest
    return shown + (mark + _hide_query(query) if mark else "")


def split_credentials(url: str) -> tuple[str, httpx.BasicAuth | None]:
    """`url` without `user:password@`, and those as HTTP basic auth.

    httpx would take them from the URL as well, but the URL it logs ("HTTP Request: GET
    http://user:password@host/metrics") would then carry the password into any log.
    """
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    auth = httpx.BasicAuth(unquote(parts.username or ""), unquote(parts.password or ""))
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2])), auth


def base_url(url: str) -> str:
    """Normalise what the user typed to the server's base URL (no trailing /metrics): the
    path loses a trailing `/` and `/metrics`, the query stays where it is."""
    if "://" not in url:
        url = "http://" + url
    parts = _split(url)
    if parts is None:  # not a URL (check_url says why); trimmed as text, for its name only
        url = url.rstrip("/")
        return url[: -len("/metrics")] if url.endswith("/metrics") else url
    path = parts.path.rstrip("/")
    path = path[: -len("/metrics")] if path.endswith("/metrics") else path
    path = path.rstrip("/") or ("/" if parts.query else "")  # `http://gw/?key=1` stays
    return urlunsplit(parts._replace(path=path))


def with_path(base: str, path: str) -> str:
    """`base` (a `base_url`) with `path` appended to its path, before its query:
    `http://gw/?key=1` + `/metrics` -> `http://gw/metrics?key=1`."""
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path, fragment=""))


def origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a URL, the port filled in from the scheme: what a redirect
    must not change for a secret to follow it."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or (443 if scheme == "https" else 80)
    return scheme, (parts.hostname or "").lower(), port


def host_of(url: str) -> str:
    """The host a URL names (bare `host:port` read as http), "" when it does not parse."""
    parts = _split(url if "://" in url else "http://" + url)
    return (parts.hostname or "") if parts is not None else ""
