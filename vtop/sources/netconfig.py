"""How vtop reaches a server: which certificates it trusts, and which proxy it goes through.

vtop runs on machines its authors never see, often behind a TLS terminator with a private CA
or a corporate proxy, and it should reach a server the way curl on the same machine does.

Trust: the system's store as OpenSSL finds it, where `SSL_CERT_FILE` and `SSL_CERT_DIR` replace
it (as for every OpenSSL program), plus `--ca-cert FILE` (a PEM bundle, or a directory hashed
by `openssl rehash`): the CAs of a private deployment, added to the store rather than replacing
it, so one vtop can watch servers behind both kinds. `--insecure` checks nothing. A context
holds the whole store (about 1 MB, 35 ms to load), so one is made per setting and shared by
every endpoint: a fleet of a thousand must not load it a thousand times.

Proxies: read from the environment as curl, requests and httpx read them: `https_proxy` for
https:// URLs, `http_proxy` for http://, `all_proxy` for either (the lowercase name wins over
the uppercase one), and `no_proxy` (a comma-separated list of host names, each also matching
its subdomains, with or without a leading dot or `*.`; IP addresses, CIDR ranges, `host:port`,
or `*` for everything) to go direct. Loopback (localhost, 127.0.0.0/8, ::1) is never proxied:
a proxy elsewhere cannot reach this host's loopback, and a server on it is this host's own.
Only HTTP(S) proxies are spoken (a `socks5://` proxy is refused with one line), and a
proxy URL is checked as `--url` is (`urls.check_url`): a bad port or host is one line with
the proxy's credentials hidden, not a traceback that shows them.

A direct connection keeps vtop's own one-connection transport (`transport.py`, the cheap one);
a proxied one goes through httpx's own transport, which speaks CONNECT to tunnel TLS and the
absolute-form request of plain HTTP. Nothing here ever prints a proxy's credentials.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from vtop import files
from vtop.sources.urls import check_url

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
"""Read in both cases; the lowercase spelling wins where both are set."""


class NetConfigError(ValueError):
    """A --ca-cert or a proxy setting that cannot work; the message is one line."""


# -- trust ---------------------------------------------------------------------------------------


_CONTEXTS: dict[tuple[bool, str | None, str | None, str | None], ssl.SSLContext] = {}


def tls_context(*, verify: bool = True, ca_cert: str | None = None) -> ssl.SSLContext:
    """The client TLS context: the default store (SSL_CERT_FILE/SSL_CERT_DIR honoured by
    OpenSSL) plus `ca_cert`, or no verification at all; one shared per setting."""
    key = (verify, ca_cert, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    context = _CONTEXTS.get(key)
    if context is None:
        context = _CONTEXTS[key] = _new_context(verify=verify, ca_cert=ca_cert)
    return context


def _new_context(*, verify: bool, ca_cert: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if ca_cert:
        path = Path(ca_cert)
        try:
            if path.is_dir():
                context.load_verify_locations(capath=str(path))
            else:
                os.close(files.open_regular(path))  # a FIFO would block OpenSSL's read
                context.load_verify_locations(cafile=str(path))
        except FileNotFoundError:
            raise NetConfigError(f"--ca-cert {ca_cert}: no such file") from None
        except files.NotRegularFile as exc:
            raise NetConfigError(f"--ca-cert {ca_cert}: {exc.strerror}") from None
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise NetConfigError(
                f"--ca-cert {ca_cert}: not a PEM file of CA certificates ({_reason(exc)})"
            ) from None
    return context


def _reason(exc: BaseException) -> str:
    """OpenSSL's words without its codes: '[X509: NO_…] no certificate or crl found (_ssl.c:1)'
    -> 'no certificate or crl found'."""
    if isinstance(exc, OSError) and exc.strerror and not isinstance(exc, ssl.SSLError):
        return exc.strerror
    text = str(exc.args[1] if isinstance(exc, ssl.SSLError) and len(exc.args) > 1 else exc)
    text = text.split("] ", 1)[-1]
    return text.split(" (_ssl.c", 1)[0].strip() or type(exc).__name__


# -- proxies -------------------------------------------------------------------------------------


def proxy_environment(environ: Mapping[str, str] = os.environ) -> tuple[tuple[str, str], ...]:
    """The proxy variables of `environ`, lowercase spelling first, as (name, value) pairs."""
    out: list[tuple[str, str]] = []
    for name in PROXY_VARIABLES:
        for spelled in (name, name.upper()):
            value = environ.get(spelled)
            if value is not None and value.strip():
                out.append((name, value.strip()))
                break
    return tuple(out)


def is_loopback(host: str) -> bool:
    """localhost (and *.localhost), 127.0.0.0/8 and ::1."""
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bypassed(host: str, port: int, no_proxy: str) -> bool:
    """Whether `no_proxy` names this host (curl's reading, with CIDR ranges)."""
    host = host.strip("[]").rstrip(".").lower()
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        entry_port: int | None = None
        if entry.startswith("["):  # [::1]:8000
            inside, _, rest = entry[1:].partition("]")
            entry = inside
            if rest.startswith(":") and rest[1:].isdigit():
                entry_port = int(rest[1:])
        elif entry.count(":") == 1:  # host:port (a bare IPv6 address has several colons)
            name, _, number = entry.partition(":")
            if number.isdigit():
                entry, entry_port = name, int(number)
        if entry_port is not None and entry_port != port:
            continue
        if address is not None:
            try:
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
            continue
        name = entry.removeprefix("*").lstrip(".")
        if name and (host == name or host.endswith("." + name)):
            return True
    return False


def proxy_for(url: str, env: tuple[tuple[str, str], ...] | Mapping[str, str]) -> str | None:
    """The proxy URL to reach `url` through, or None to go direct.

    `env` is `proxy_environment()`'s pairs (or a mapping of the same lowercase names)."""
    values = dict(env)
    parts = urlsplit(url)
    scheme = (parts.scheme or "http").lower()
    host = parts.hostname or ""
    if not host or is_loopback(host):
        return None
    port = parts.port or (443 if scheme == "https" else 80)
    if _bypassed(host, port, values.get("no_proxy", "")):
        return None
    proxy = values.get(f"{scheme}_proxy") or values.get("all_proxy")
    if not proxy:
        return None
    if "://" not in proxy:
        proxy = "http://" + proxy  # `proxy:3128`, as curl reads it
    kind = proxy.split("://", 1)[0].lower()
    if kind not in ("http", "https"):
        raise NetConfigError(
            f"the {scheme}_proxy/all_proxy setting is a {kind} proxy; vtop speaks to HTTP(S) "
            f"proxies only (set no_proxy={host} to reach {host} directly)"
        )
    problem = check_url(proxy)  # a bad port or host: one line, its credentials hidden
    if problem is not None:
        raise NetConfigError(f"the {scheme}_proxy/all_proxy setting: {problem}")
    return proxy
