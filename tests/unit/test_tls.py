"""TLS against real HTTPS servers on loopback: a self-signed certificate, and a private CA.

Verification is on by default: the scrape fails with one line that names the URL and what is
wrong with the certificate (and says what to do: `--ca-cert`, or `--insecure` to skip the
check); with `--insecure` the same server's page is read. A server whose certificate a private
CA signed (a TLS terminator in front of vLLM) is read once that CA is trusted: by `--ca-cert
FILE` (a PEM file, or a hashed directory), by SSL_CERT_FILE or by SSL_CERT_DIR, as OpenSSL
programs read them. Certificates are made for these tests by the `openssl` command.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.certs import Certs, hashed_dir, make_private_ca, serving
from tests.host_tools import require
from tests.pageserver import Answer, PageServer, Script
from vtop.sources.netconfig import PROXY_VARIABLES

ROOT = Path(__file__).resolve().parents[2]
PAGE = b"""vllm:num_requests_running{engine="0",model_name="qwen"} 7.0
vllm:num_requests_waiting{engine="0",model_name="qwen"} 3.0
"""
TRUST_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR")


def script() -> Script:
    return Script({"/metrics": Answer(PAGE), "/version": Answer(b'{"version": "0.32.0"}')})


@pytest.fixture(scope="module")
def https_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PageServer]:
    openssl = require("openssl", why="makes the test certificates")
    where = tmp_path_factory.mktemp("tls")
    key, cert = where / "key.pem", where / "cert.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with PageServer(script(), tls=context) as srv:
        yield srv


@pytest.fixture(scope="module")
def private_ca(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_private_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def behind_private_ca(private_ca: Certs) -> Iterator[PageServer]:
    with PageServer(script(), tls=serving(private_ca)) as srv:
        yield srv


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without trust or proxy settings (the machine's may have some), plus
    `extra`."""
    drop = {*TRUST_VARIABLES, *PROXY_VARIABLES, *(v.upper() for v in PROXY_VARIABLES)}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, **extra}


def once(url: str, *extra: str, env: dict[str, str] | None = None, mode: str = "--once"
         ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "vtop", "--url", url, mode, "--interval", "0.5", *extra],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
        env=env if env is not None else clean_env(),
    )  # fmt: skip


def endpoint(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one endpoint of `vtop --once`'s JSON (as parsed: no type holds it)."""
    (ep,) = json.loads(result.stdout)["endpoints"]
    assert isinstance(ep, dict)
    return ep


def read_fine(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
    ep = endpoint(result)
    assert ep["status"] == "ok" and ep["error"] is None
    assert ep["signals"]["running"]["last"] == 7.0


def test_a_self_signed_certificate_is_refused_with_one_clear_line(
    https_server: PageServer,
) -> None:
    assert https_server.url.startswith("https://127.0.0.1:")
    before = len(https_server.script.requests)
    result = once(https_server.url)
    assert result.returncode == 3, result.stderr
    ep = endpoint(result)
    assert ep["status"] == "error" and "running" not in ep["signals"]
    assert ep["error"] == (
        f"cannot connect to {https_server.url}/metrics: TLS certificate not trusted "
        "(self-signed certificate); --ca-cert FILE trusts a private CA, "
        "--insecure skips the check"
    )
    assert len(https_server.script.requests) == before, "no request crossed an untrusted link"


def test_insecure_reads_the_page(https_server: PageServer) -> None:
    result = once(https_server.url, "--insecure")
    read_fine(result)
    assert endpoint(result)["server"]["version"] == "0.32.0"


def test_a_private_ca_is_not_trusted_by_default(behind_private_ca: PageServer) -> None:
    result = once(behind_private_ca.url)
    assert result.returncode == 3
    assert "TLS certificate not trusted (unable to get local issuer certificate)" in str(
        endpoint(result)["error"]
    )


def test_ca_cert_trusts_the_private_ca(behind_private_ca: PageServer, private_ca: Certs) -> None:
    read_fine(once(behind_private_ca.url, "--ca-cert", str(private_ca.ca)))


def test_ca_cert_takes_a_hashed_directory(
    behind_private_ca: PageServer, private_ca: Certs, tmp_path: Path
) -> None:
    read_fine(once(behind_private_ca.url, "--ca-cert", str(hashed_dir(private_ca, tmp_path))))


def test_ca_cert_adds_to_the_system_store_without_replacing_it(private_ca: Certs) -> None:
    """A private CA beside the system's: both are trusted (one vtop, servers behind both)."""
    from vtop.sources.netconfig import tls_context

    plain = tls_context()
    more = tls_context(ca_cert=str(private_ca.ca))
    assert more.cert_store_stats()["x509_ca"] == plain.cert_store_stats()["x509_ca"] + 1


def test_ssl_cert_file_is_honoured(behind_private_ca: PageServer, private_ca: Certs) -> None:
    read_fine(once(behind_private_ca.url, env=clean_env(SSL_CERT_FILE=str(private_ca.ca))))


def test_ssl_cert_dir_is_honoured(
    behind_private_ca: PageServer, private_ca: Certs, tmp_path: Path
) -> None:
    certs_dir = hashed_dir(private_ca, tmp_path / "certs")
    empty = tmp_path / "empty.pem"
    empty.write_text("")  # SSL_CERT_FILE pointing at nothing: only the directory can trust it
    env = clean_env(SSL_CERT_DIR=str(certs_dir), SSL_CERT_FILE=str(empty))
    read_fine(once(behind_private_ca.url, env=env))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.pem", "--ca-cert {}: no such file"),
        (lambda d: d / "notes.txt", "--ca-cert {}: not a PEM file of CA certificates "
                                    "(no certificate or crl found)"),
        (lambda d: d / "fifo.pem", "--ca-cert {}: it is a FIFO, not a regular file"),
    ],
    ids=["missing", "not PEM", "FIFO"],
)  # fmt: skip
def test_a_ca_cert_that_cannot_be_used_is_one_usage_line(
    make: Callable[[Path], Path], message: str, tmp_path: Path
) -> None:
    path = make(tmp_path)
    if path.name == "notes.txt":
        path.write_text("not a certificate\n")
    elif path.name == "fifo.pem":
        os.mkfifo(path)  # nobody writes it: reading it would wait forever
    result = once("https://127.0.0.1:9", "--ca-cert", str(path))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"vtop: {message.format(path)}\n"
    report = once("https://127.0.0.1:9", "--ca-cert", str(path), mode="--report")
    assert report.returncode == 3 and report.stderr == result.stderr  # UNKNOWN under --report


def test_ca_cert_and_insecure_contradict(private_ca: Certs) -> None:
    result = once("https://127.0.0.1:9", "--ca-cert", str(private_ca.ca), "--insecure")
    assert result.returncode == 2
    assert result.stderr == "vtop: --ca-cert and --insecure contradict each other\n"
