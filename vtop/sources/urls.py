"""The shapes of a URL vtop is given: whether it can be an endpoint, its base, how it is shown.

Every source names servers by URL (a vLLM server, a Prometheus, a line of a targets file), and
they must agree on what a URL means: `10.0.0.5:8000` is `http://10.0.0.5:8000`, `…/metrics`
is the same server as `…`, and a URL is shown without its credentials or query values. These
helpers are that one agreement, in a module of their own that imports nothing of vtop, so the
scraper, the Prometheus source and the targets file all use it without importing each other
(and the command line checks `--url` and `--prometheus` with the same words a targets file
uses for its lines).
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit

import httpx


def check_url(url: str) -> str | None:
    """Why `url` cannot be a vLLM endpoint, or None when it can."""
    if any(c.isspace() for c in url):
        return f"URL {url!r} contains whitespace"
    text = url if "://" in url else "http://" + url
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https"):
        return f"URL {url!r} is not http:// or https://"
    try:
        port = parts.port
    except ValueError:
        return f"URL {url!r} has a bad port"
    if not parts.hostname:
        return f"URL {url!r} names no host"
    if port == 0:
        return f"URL {url!r} has port 0"
    return None


def redact_url(url: str) -> str:
    """The URL without user:password and with query values hidden."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if parts.port is not None:
        netloc += f":{parts.port}"
    query = "&".join(f"{q.partition('=')[0]}=…" for q in parts.query.split("&") if q)
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


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
    """Normalise what the user typed to the server's base URL (no trailing /metrics)."""
    if "://" not in url:
        url = "http://" + url
    url = url.rstrip("/")
    if url.endswith("/metrics"):
        url = url[: -len("/metrics")]
    return url
