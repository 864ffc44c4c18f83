"""TLS against a real HTTPS server on loopback with a throwaway self-signed certificate.

Verification is on by default: the scrape fails with one line that names the URL and what is
wrong with the certificate (and says that `--insecure` skips the check); with `--insecure` the
same server's page is read. The certificate is made for this test by the `openssl` command.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pageserver import Answer, PageServer, Script

ROOT = Path(__file__).resolve().parents[2]
PAGE = b"""vllm:num_requests_running{engine="0",model_name="qwen"} 7.0
vllm:num_requests_waiting{engine="0",model_name="qwen"} 3.0
"""


@pytest.fixture(scope="module")
def https_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PageServer]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    where = tmp_path_factory.mktemp("tls")
    key, cert = where / "key.pem", where / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    script = Script({"/metrics": Answer(PAGE), "/version": Answer(b'{"version": "0.32.0"}')})
    with PageServer(script, tls=context) as srv:
        yield srv


def once(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vtop", "--url", url, "--once", "--interval", "0.5", *extra],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip


def test_a_self_signed_certificate_is_refused_with_one_clear_line(
    https_server: PageServer,
) -> None:
    assert https_server.url.startswith("https://127.0.0.1:")
    before = len(https_server.script.requests)
    result = once(https_server.url)
    assert result.returncode == 3, result.stderr
    (ep,) = json.loads(result.stdout)["endpoints"]
    assert ep["status"] == "error" and "running" not in ep["signals"]
    assert ep["error"] == (
        f"cannot connect to {https_server.url}/metrics: TLS certificate not trusted "
        "(self-signed certificate); --insecure skips the check"
    )
    assert len(https_server.script.requests) == before, "no request crossed an untrusted link"


def test_insecure_reads_the_page(https_server: PageServer) -> None:
    result = once(https_server.url, "--insecure")
    assert result.returncode == 0, result.stderr
    (ep,) = json.loads(result.stdout)["endpoints"]
    assert ep["status"] == "ok" and ep["error"] is None
    assert ep["signals"]["running"]["last"] == 7.0
    assert ep["server"]["version"] == "0.32.0"
